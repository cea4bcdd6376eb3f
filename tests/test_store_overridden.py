"""A bad [store] value in the file is exit 7 though the environment overrides it (issue 45 item 5).

``url = 123`` (a wrong type) was ignored where ``CUDA_GATE_STORE`` named the store; the
config loader now refuses it (tests/test_config_bounds.py). A value of the right type
but no use, ``url = "ftp://bucket"``, a bucket name S3 refuses, a threshold below S3's
part size, was still dropped for the variable's: each of the file's values is now
checked on its own, whatever overrides it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ConfigError, ExitCode
from gate.store.settings import load_settings

OVERRIDDEN = [
    (
        'url = "ftp://bucket/p"',
        "CUDA_GATE_STORE",
        "key 'url': unknown store scheme 'ftp' in 'ftp://bucket/p'",
    ),
    ('url = "s3://x/p"', "CUDA_GATE_STORE", "key 'url': bucket name 'x' is not 3-63 characters"),
    (
        'url = "s3://a bucket/p"',
        "CUDA_GATE_STORE",
        "key 'url': bucket name 'a bucket' holds characters other than letters",
    ),
    (
        'url = "file://host/x"',
        "CUDA_GATE_STORE",
        "key 'url': 'file://host/x': a file:// URL names a folder on this machine",
    ),
    (
        'endpoint = "ftp://host"',
        "CUDA_GATE_S3_ENDPOINT",
        "key 'endpoint': 'ftp://host' is not an endpoint URL",
    ),
    (
        "multipart-threshold = 1",
        "CUDA_GATE_MULTIPART_THRESHOLD",
        "key 'multipart-threshold': 1 is not a whole number from 5242880",
    ),
    (
        'object-lock-mode = "FOREVER"',
        "CUDA_GATE_OBJECT_LOCK_MODE",
        "key 'object-lock-mode': 'FOREVER' is not COMPLIANCE or GOVERNANCE",
    ),
    ('path-style = "maybe"', "CUDA_GATE_S3_PATH_STYLE", "key 'path-style': 'maybe' is not true"),
]
# What each variable is set to: a value that works, so only the file is wrong.
GOOD = {
    "CUDA_GATE_STORE": "s3://good-bucket/p",
    "CUDA_GATE_S3_ENDPOINT": "http://127.0.0.1:8333",
    "CUDA_GATE_MULTIPART_THRESHOLD": str(8 << 20),
    "CUDA_GATE_OBJECT_LOCK_MODE": "GOVERNANCE",
    "CUDA_GATE_S3_PATH_STYLE": "true",
}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("line", "variable", "expected"), OVERRIDDEN, ids=[c[0] for c in OVERRIDDEN]
)
def test_a_bad_file_value_fails_though_a_variable_overrides_it(
    tmp_path: Path, line: str, variable: str, expected: str
) -> None:
    (tmp_path / "cuda-gate.toml").write_text(f"[store]\n{line}\n", encoding="utf-8")
    env = {"CUDA_GATE_STORE": "s3://good-bucket/p", variable: GOOD[variable]}
    if variable == "CUDA_GATE_OBJECT_LOCK_MODE":
        env["CUDA_GATE_OBJECT_LOCK_DAYS"] = "1"
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env=env)
    assert info.value.exit_code is ExitCode.CONFIG
    assert info.value.one_line().startswith(f"{tmp_path / 'cuda-gate.toml'} [store]: {expected}"), (
        info.value.one_line()
    )


@pytest.mark.unit
def test_a_good_file_value_is_still_overridden(tmp_path: Path) -> None:
    (tmp_path / "cuda-gate.toml").write_text(
        '[store]\nurl = "s3://file-bucket/p"\nmultipart-threshold = 6291456\n', encoding="utf-8"
    )
    settings = load_settings(
        tmp_path, env={"CUDA_GATE_STORE": str(tmp_path / "store"), "XDG_DATA_HOME": "/x"}
    )
    assert settings.kind == "local"
    assert settings.local_dir == tmp_path / "store"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("123", "store.url: expected a string, got 123"),
        (
            '"s3://x/runs"',
            "[store]: key 'url': bucket name 'x' is not 3-63 characters",
        ),
        ('"gs://bucket/runs"', "[store]: key 'url': unknown store scheme 'gs'"),
    ],
)
def test_run_exits_7_on_a_bad_url_though_cuda_gate_store_names_the_store(
    tmp_path: Path, url: str, expected: str
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "cuda-gate.toml").write_text(f"[store]\nurl = {url}\n", encoding="utf-8")
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "CUDA_GATE_STORE": str(tmp_path / "store"),
    }
    result = proc.run([sys.executable, "-m", "gate", "run"], cwd=project, base_env=env, timeout=300)
    assert result.returncode == ExitCode.CONFIG, result.output()[-2000:]  # was 4
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"cuda-gate: error: {project / 'cuda-gate.toml'}"), line
    assert expected in line, line
    # Refused before the run: nothing written, nothing stored.
    assert sorted(p.name for p in project.iterdir()) == ["cuda-gate.toml"]
    assert not (tmp_path / "store").exists()

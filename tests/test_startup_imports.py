"""What `cuda-gate run` imports before its first stage, and what the store names lazily.

On the H200 importing the run's modules took 0.6 s of the gate's warm overhead; the
modules only a run that stores, compares with a baseline or reaches execute needs are
imported when used (or by the pipeline's preload thread), not at start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# What the run command and the pipeline import at start (gate.commands.run's handler).
START = (
    "import gate.cli, gate.commands.run, gate.pipeline; "
    "from gate.attest.signing import load_signer_from_env_or_file; "
    "from gate.store.settings import load_settings; "
    "import sys, json; print(json.dumps(sorted(sys.modules)))"
)
LATER = (
    "jsonschema",  # the predicate's schema: the manifest, at the end
    "gate.store.spool",  # a run that stores
    "gate.store.readback",
    "gate.baseline.resolve",  # --baseline
    "gate.attest.manifest",  # preloaded beside the first stages
    "gate.stages.execute",
    "gate.stages.report",
    "gate.stages.inimage",  # --image
    "boto3",
)


@pytest.mark.integration
def test_the_run_starts_without_what_only_later_stages_need() -> None:
    done = subprocess.run(
        [sys.executable, "-c", START], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stdout))
    assert "gate.pipeline" in loaded
    assert [m for m in LATER if m in loaded] == []


# `inspect` of one file: its bounds come from gate.config.options, and nothing of the
# project's configuration (records, and through them the baseline rules) is imported.
INSPECT = (
    "import sys, json, contextlib, io, gate.cli\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    gate.cli.main(['inspect', '--names', '--no-cache', sys.executable])\n"
    "print(json.dumps(sorted(sys.modules)))"
)


@pytest.mark.integration
def test_inspect_of_a_file_does_not_import_the_project_configuration(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", INSPECT],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "gate.config.options" in loaded, done.stderr
    assert [m for m in ("gate.config.records", "gate.rules.baseline") if m in loaded] == []


@pytest.mark.unit
@pytest.mark.parametrize("package", ["gate.store", "gate.config"])
def test_every_name_a_package_exports_resolves_from_its_module(package: str) -> None:
    import importlib

    lazy = importlib.import_module(package)
    for name in lazy.__all__:
        module = importlib.import_module(f"{package}.{lazy._WHERE[name]}")
        assert getattr(lazy, name) is getattr(module, name), name
    assert set(lazy._WHERE) == set(lazy.__all__)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing'"):
        _ = lazy.nothing

"""What `cuda-gate run` imports before its first stage, and what the store names lazily.

On the H200 importing the run's modules took 0.6 s of the gate's warm overhead; the
modules only a run that stores, compares with a baseline or reaches execute needs are
imported when used (or by the pipeline's preload thread), not at start.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import gate.store

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


@pytest.mark.unit
def test_every_name_the_store_exports_resolves_from_its_module() -> None:
    import importlib

    for name in gate.store.__all__:
        module = importlib.import_module(f"gate.store.{gate.store._WHERE[name]}")
        assert getattr(gate.store, name) is getattr(module, name), name
    assert set(gate.store._WHERE) == set(gate.store.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = gate.store.nothing

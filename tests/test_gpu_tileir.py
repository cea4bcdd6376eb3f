"""The gpu tier of issue 44: real cuTile fatbins loaded by the driver, against the prediction.

Each input (tests/tileir_inputs.py: cuda-tile's Tile IR bytecode, tileiras' sm_90a cubin,
nvFatbin's fatbins) is handed to ``cuModuleLoadData`` in a fresh process three ways:
plain, with the native path's variables and with the forced-JIT path's (gate.stages.runs:
the gate's own, JIT cache emptied as a run has it). What the driver answered is compared
with what the gate predicts for this device and driver: plain, whether every kernel has a
usable route (:meth:`DevicePrediction.runnable`); native and forced JIT, the prediction the
execute stage checks runs against (gate.stages.predict). Where the prediction is
"unknown", nothing is claimed and the line says so. The lines are printed (``-rA``) to be
pasted into notes. A Tile-IR-only fatbin must not load on a driver whose Tile IR support
the rules deny; raw bytecode is no image the driver takes (200, CUDA_ERROR_INVALID_IMAGE).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.reader.read import read_buffer
from gate.rules.causes import ExecPath
from gate.rules.targets import Capability, Version
from gate.stages.predict import Source, expect_jit, expect_native
from gate.stages.runs import PATH_ENV
from tests.tileir_inputs import inputs

pytestmark = pytest.mark.gpu

LOADER = r"""
import ctypes, sys
lib = ctypes.CDLL("libcuda.so.1")
assert lib.cuInit(0) == 0
dev, ctx, module = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
assert lib.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert lib.cuCtxSetCurrent(ctx) == 0
data = open(sys.argv[1], "rb").read()
print(lib.cuModuleLoadData(ctypes.byref(module), data))
"""
SUCCESS, INVALID_IMAGE, NO_BINARY_FOR_GPU = 0, 200, 209


@pytest.fixture(scope="module")
def device() -> tuple[Capability, Version]:
    """Device 0's capability and the driver's CUDA version, from nvidia-smi."""
    query = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
    smi = subprocess.run(query, capture_output=True, text=True, check=True)
    cap = Capability.parse(smi.stdout.split()[0])
    full = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=True).stdout
    return cap, Version.parse(full.split("CUDA Version:", 1)[1].split()[0])


def load(path: Path, how: str, tmp_path: Path) -> int:
    """What ``cuModuleLoadData`` answers for ``path`` in a fresh process, ``how`` being
    "plain" or an execution path's name (its variables set and unset as a run's are)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
    if how != "plain":
        env_set, env_unset = PATH_ENV[ExecPath(how)]
        env.update(env_set)
        for name in env_unset:
            env.pop(name, None)
        cache = tmp_path / f"cache-{how}-{path.name}"
        cache.mkdir()
        env["CUDA_CACHE_PATH"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.split()[-1])


def predicted(path: Path, how: str, device: tuple[Capability, Version]) -> bool | None:
    """Whether the gate says ``path`` loads on this device ``how`` (None: unknown)."""
    cap, driver = device
    data = path.read_bytes()
    listing = read_buffer(data, 0, len(data), path.name, names=True).listing
    if how == "plain":
        return listing.predict(cap, driver).runnable
    sources = [Source(path.name, listing, own=True)]
    if how == ExecPath.NATIVE.value:
        return expect_native(sources, cap).can_run
    return expect_jit(sources, cap, driver).can_run


@pytest.mark.parametrize("name", ["tile_only.fatbin", "cubin_tile.fatbin"])
def test_the_driver_loads_a_tile_ir_fatbin_as_the_gate_predicts(
    name: str, device: tuple[Capability, Version], tmp_path: Path
) -> None:
    made = inputs()
    cap, driver = device
    said = []
    for how in ("plain", ExecPath.NATIVE.value, ExecPath.JIT.value):
        answer = load(made / name, how, tmp_path)
        expect = predicted(made / name, how, device)
        said.append({"how": how, "cuModuleLoadData": answer, "predicted": expect})
        words = "unknown" if expect is None else "loads" if expect else "fails"
        print(f"\n{name} on {cap} (driver {driver}) {how}: cuModuleLoadData {answer}; "
              f"predicted {words}")  # fmt: skip
        assert answer in (SUCCESS, NO_BINARY_FOR_GPU), said
        if expect is not None:
            assert (answer == SUCCESS) == expect, json.dumps(said)
    if name == "cubin_tile.fatbin" and cap == Capability(9, 0):
        # The sm_90a cubin: loads plain and natively; forced JIT ignores it, and Tile IR is
        # not the PTX JIT's to compile (the 580 driver's answer, issue 44).
        assert [s["cuModuleLoadData"] for s in said] == [SUCCESS, SUCCESS, NO_BINARY_FOR_GPU]


def test_raw_tile_ir_bytecode_is_no_image_the_driver_loads(
    device: tuple[Capability, Version], tmp_path: Path
) -> None:
    answer = load(inputs() / "vadd.tileir", "plain", tmp_path)
    print(f"\nvadd.tileir (raw bytecode) on {device[0]} plain: cuModuleLoadData {answer}")
    assert answer == INVALID_IMAGE

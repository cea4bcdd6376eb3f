"""The project's own PTX under forced JIT: loaded module by module, unless the launch
recorder saw every kernel of a module run from the driver's JIT output already."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.evidence import EvidenceDir
from gate.reader.hostelf import HostFormat
from gate.reader.listing import Kind, Listing
from gate.reader.ptx import ptx_modules
from gate.rules.causes import ExecPath
from gate.rules.compat import ptx_jits_for
from gate.rules.targets import Capability, Version
from gate.rules.verdict import CheckState
from gate.scan.walk import read_paths
from gate.stages import jitproof, predict
from gate.stages.inspected import Inspected

GOLDEN = Path(__file__).resolve().parent / "golden" / "libkernels.so"
SPARK = Capability(12, 0)
HOST = HostFormat("ELF 64-bit", 64, 62, "x86-64", "shared object", None, (), (), ())


def project() -> Inspected:
    (report,) = read_paths([GOLDEN])
    return Inspected("libkernels.so", GOLDEN, "f" * 64, 1, HOST, (), report.listing, (), False, "")


def blocked(own: Inspected) -> predict.Prediction:
    """An entry point whose whole-program JIT a vendor library without PTX blocks."""
    sass_only = Listing(tuple(e for e in own.listing.entries if e.kind is Kind.SASS))
    sources = (
        predict.Source(own.name, own.listing, own=True),
        predict.Source("libtorch_cuda.so", sass_only, own=False),
    )
    return predict.Prediction(
        "app",
        SPARK,
        sources,
        predict.expect_native(sources, SPARK),
        predict.expect_jit(sources, SPARK, Version(13, 0)),
        (),
    )


def kernels_of_jit_ptx() -> frozenset[str]:
    (module,) = [m for m in ptx_modules(GOLDEN) if ptx_jits_for(m.target, SPARK)]
    return frozenset(module.kernels)


@pytest.mark.unit
def test_a_module_whose_kernels_all_ran_jit_compiled_needs_no_load(tmp_path: Path) -> None:
    own = project()
    prediction = blocked(own)
    assert prediction.jit_blocked_by_library
    launched = kernels_of_jit_ptx() | {"_Z5otherv"}  # and a kernel of some other code
    pending = jitproof.start([prediction], [own], SPARK, jit_launched=launched)
    proofs = pending.finish(EvidenceDir.create(tmp_path / "ev"))
    assert proofs.commands == ()  # no process: the runs proved it
    (check,) = proofs.checks
    assert check.state is CheckState.PASSED
    assert check.path is ExecPath.JIT
    assert check.message == (
        "all 3 kernels launched from the driver's JIT output in the forced-JIT runs "
        "(launch recorder)"
    )
    assert proofs.proved_names() == {"libkernels.so"}
    assert proofs.by_launches == {"libkernels.so"}


@pytest.mark.integration
def test_a_module_with_a_kernel_not_seen_jit_compiled_is_loaded(tmp_path: Path) -> None:
    own = project()
    launched = sorted(kernels_of_jit_ptx())[1:]  # one kernel never ran from JIT output
    pending = jitproof.start([blocked(own)], [own], SPARK, jit_launched=launched)
    proofs = pending.finish(EvidenceDir.create(tmp_path / "ev"))
    (command,) = proofs.commands  # the module was loaded (here, with no GPU, in vain)
    assert "gate.stages.jitcheck" in command.command_line()
    assert proofs.by_launches == frozenset()
    (check,) = proofs.checks
    assert "launch recorder" not in check.message

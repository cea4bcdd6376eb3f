"""A failed check that knows more than the run does carries its own remedy: the driver a PTX
image needs, LTO IR to device-link, the distribution that ships a library."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import Cause
from gate.rules.require import Requirement
from gate.rules.routes import min_driver
from gate.rules.targets import Target, Version
from gate.stages.artifactchecks import driver_checks, listing_checks
from gate.stages.libraries import distribution_of

pytestmark = pytest.mark.unit

SM90 = Requirement.of_target(Target.parse("sm_90"))


def test_ptx_newer_than_the_driver_names_the_driver_it_needs() -> None:
    isa = Version(9, 2)
    need = min_driver(isa)
    assert need is not None
    listing = Listing((DeviceEntry(Kind.PTX, Target.parse("compute_90"), ("k",), ptx_isa=isa),))
    [check] = driver_checks("libk.so", listing, [SM90], Version(13, 0))
    assert check.cause is Cause.PTX_NEEDS_DRIVER
    assert check.remedy == (
        f"the PTX needs a driver for CUDA {need} or newer (this one supports CUDA 13.0): "
        "update the driver, or build the PTX with the toolkit of the oldest driver you ship to"
    )
    [fine] = driver_checks("libk.so", listing, [SM90], need)
    assert fine.remedy is None


def test_lto_ir_alone_is_device_linked_not_rebuilt() -> None:
    lto = Listing((DeviceEntry(Kind.LTOIR, Target.parse("sm_90"), ("k",)),))
    checks = {c.name: c for c in listing_checks("libk.a", lto, SM90, ())}
    sass = checks["libk.a: SASS for sm_90"]
    assert sass.failed
    assert sass.remedy == (
        "it holds LTO IR only: device-link it (nvcc -dlink -dlto) for sm_90 so it carries SASS"
    )
    plain = Listing((DeviceEntry(Kind.SASS, Target.parse("sm_80"), ("k",)),))
    assert listing_checks("libk.a", plain, SM90, ())[0].remedy is None  # the run's own line


def test_the_distribution_that_ships_a_library_is_named(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    library = site / "nvidia" / "cublas" / "lib" / "libcublasLt.so.13"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF")
    info = site / "nvidia_cublas-13.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: nvidia-cublas\nVersion: 13.0.0\n", encoding="utf-8")
    (info / "RECORD").write_text(
        "nvidia/cublas/lib/libcublasLt.so.13,sha256=x,4\n", encoding="utf-8"
    )
    assert distribution_of(library) == "nvidia-cublas 13.0.0"
    stray = site / "nvidia" / "cublas" / "lib" / "libother.so"
    stray.write_bytes(b"\x7fELF")
    assert distribution_of(stray) is None
    assert distribution_of(tmp_path / "build" / "libk.so") is None

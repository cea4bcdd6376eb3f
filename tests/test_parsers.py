"""Parsing tool output at the edge: nvidia-smi, nvcc, cuobjdump (texts as the real tools print)."""

from __future__ import annotations

import pytest

from gate.errors import ToolError
from gate.reader.listing import Kind
from gate.rules.targets import Target, Version
from gate.system import git
from gate.system import machine as environment
from gate.tools import cuobjdump

pytestmark = pytest.mark.unit

SMI_FULL = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
"""
NVCC_VERSION = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
LIST_ELF = "ELF file    1: check.1.sm_90.cubin\nELF file    2: check.2.sm_90.cubin\n"
SYMBOLS = """
Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit

symbols:

Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit

symbols:
OBJECT        WEAK    DEFAULT    -                                 U  .nv.reservedSmem.offset0
FUNC          LOCAL   DEFAULT    -                                    $_Z2k1Pi$_Z6helperi
FUNC          GLOBAL  DEFAULT    ENTRY                                _Z11write_valuePi
"""
PTX_DUMP = """
Fatbin ptx code:
================
arch = sm_90
code version = [9,0]
host = linux
compile_size = 64bit
compressed
ptxasOptions = 

.version 9.0
.target sm_90
.address_size 64

.visible .entry _Z11write_valuePi(
.param .u64 _Z11write_valuePi_param_0
)
{
ret;
}
"""  # noqa: W291  (cuobjdump prints the trailing space)


def test_nvidia_smi_record_uses_the_drivers_cuda_version() -> None:
    info = environment.parse_nvidia_smi(SMI_FULL, "NVIDIA H200, 580.159.04\n")
    assert info.name == "NVIDIA H200"
    assert info.driver_version == "580.159.04"
    assert info.cuda_version == Version(13, 0)


def test_nvidia_smi_garbage_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="no driver record"):
        environment.parse_nvidia_smi("Failed to initialize NVML: Driver/library mismatch", "")


def test_nvcc_version_and_target_list() -> None:
    info = environment.parse_nvcc_version(NVCC_VERSION, "/usr/local/bin/nvcc")
    assert (info.version, info.release) == (Version(13, 0), "V13.0.88")
    targets = environment.parse_gpu_code_list("sm_75\nsm_80\nsm_121\nwarning: x\n")
    assert targets == (Target.parse("sm_75"), Target.parse("sm_80"), Target.parse("sm_121"))


def test_nvcc_without_release_line_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="no release line"):
        environment.parse_nvcc_version("garbage", "nvcc")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/acme/kernels.git", "acme/kernels"),
        ("git@github.com:acme/kernels.git", "acme/kernels"),
        ("https://ghe.example.com/acme/kernels", "acme/kernels"),
        ("not a url", None),
    ],
)
def test_remote_owner_repo(url: str, expected: str | None) -> None:
    assert git.parse_remote(url) == expected


def test_cuobjdump_list_counts_both_cubins() -> None:
    names = cuobjdump.parse_list(LIST_ELF, "ELF")
    assert names == ("check.1.sm_90.cubin", "check.2.sm_90.cubin")


def test_cuobjdump_listing_takes_entry_symbols_and_ptx_entries() -> None:
    listing = cuobjdump.listing(SYMBOLS, PTX_DUMP)
    sass = listing.of_kind(Kind.SASS)
    assert [e.kernels for e in sass] == [(), ("_Z11write_valuePi",)]  # stub, then the TU
    (ptx,) = listing.of_kind(Kind.PTX)
    assert ptx.target == Target.parse("compute_90")
    assert ptx.ptx_isa == Version(9, 0)
    assert ptx.kernels == ("_Z11write_valuePi",)


def test_cuobjdump_13_0_symbol_format_is_read_too() -> None:
    # The H200's toolkit cuobjdump (13.0) prints STT_/STB_/STO_ prefixes and one column less.
    old = SYMBOLS.replace(
        "FUNC          GLOBAL  DEFAULT    ENTRY                                _Z11write_valuePi",
        "STT_FUNC         STB_GLOBAL STO_ENTRY      _Z11write_valuePi",
    ).replace(
        "FUNC          LOCAL   DEFAULT    -                                    $_Z2k1Pi$_Z6helperi",
        "STT_FUNC         STB_LOCAL  STV_DEFAULT    $_Z2k1Pi$_Z6helperi",
    )
    assert "STO_ENTRY" in old
    blocks = cuobjdump.parse_symbols(old)
    assert [kernels for _, kernels in blocks] == [(), ("_Z11write_valuePi",)]


def test_ptx_module_without_headers_is_seen_as_such() -> None:
    stripped = PTX_DUMP.replace(".version 9.0\n", "").replace(".target sm_90\n", "")
    (module,) = cuobjdump.parse_ptx_dump(stripped)
    assert module.version is None
    assert module.target is None
    assert module.entries == ("_Z11write_valuePi",)


@pytest.mark.parametrize(
    ("stderr", "shared"),
    [
        ("driver=13000 runtime=13000\ndevice 0: NVIDIA H200, 1 device(s)\ncompute mode 0\n", True),
        ("driver=13000 runtime=13000\ndevice 0: GB10, 1 device(s)\ncompute mode 3\n", False),
        ("driver=13000 runtime=13000\ndevice 0: X, 1 device(s)\ncompute mode 2\n", False),
        ("driver=13000 runtime=13000\ndevice 0: X, 1 device(s)\n", True),  # an older probe
    ],
)
def test_the_gate_runs_its_programs_side_by_side_only_on_a_shared_device(
    stderr: str, shared: bool
) -> None:
    # Exclusive-process mode admits one process at a time: two smoke runs at once would fail.
    from gate.stages.probe import shared_device

    assert shared_device(stderr) is shared

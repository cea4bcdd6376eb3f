"""The decision core's other rules: kernel names, run outcomes, the verdict, the attestation
lists, the hosts a device ships on, and the data file's consistency checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gate.errors import ConfigError, ExitCode
from gate.rules import kernels
from gate.rules.causes import Cause, ExecPath, RunFacts, RuntimeFailure, classify, path_of, rank
from gate.rules.compat import DATA, FamilyRule, load, rules
from gate.rules.hosts import HostRule, host_for
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import (
    ACCEPTED_STATEMENT,
    NOT_EXECUTED,
    Check,
    CheckState,
    Stage,
    StageStatus,
    Verdict,
    attestation_list,
    attestation_result,
    decide,
    executed,
)

pytestmark = pytest.mark.unit

# --- Kernel names (issue 20, item 2) -----------------------------------------------------
SYMBOLS = {
    "plain": "_Z5scalePf",  # scale(float*)
    "longer": "_Z15scale_f32_fast1Pf",  # scale_f32_fast1(float*): holds "5scale"
    "nested": "_ZN2ns5scaleEPf",  # ns::scale(float*)
    "template": "_Z5scaleIfEvPT_",  # void scale<float>(float*)
    "member": "_ZN2ns5OuterIiLi4EE5innerEPf",  # ns::Outer<int, 4>::inner(float*)
    "anonymous": "_ZN12_GLOBAL__N_16kernelEv",  # (anonymous namespace)::kernel()
    "extern_c": "scale_c",
    "clone": "_ZN4cute5applyEv.constprop.0",  # cute::apply() [clone .constprop.0]
}

# (required name, symbols it must match, by key of SYMBOLS)
MATCH_ROWS = [
    ("scale", {"plain", "nested", "template"}),  # the function's own name, any namespace
    ("scale_f32_fast1", {"longer"}),
    ("ns::scale", {"nested"}),  # qualified: the namespaces too
    ("::scale", {"plain", "template"}),  # the global namespace
    ("scale<float>", {"template"}),  # with template arguments
    ("inner", {"member"}),
    ("ns::Outer::inner", {"member"}),  # classes are part of the qualified name, args not
    ("ns::Outer<int, 4>::inner", {"member"}),
    ("ns::Outer<int,4>::inner", {"member"}),  # spaces do not matter
    ("kernel", {"anonymous"}),
    ("scale_c", {"extern_c"}),
    ("apply", {"clone"}),
    ("_Z5scalePf", {"plain"}),  # a mangled name: exactly that symbol
    ("_Z5scale", set()),  # never a prefix of one
    ("cale", set()),  # never a substring
    ("5scale", set()),
    ("Outer", set()),  # a class is not a kernel
    ("", set()),
]


@pytest.mark.parametrize(("wanted", "keys"), MATCH_ROWS)
def test_a_required_kernel_name_matches_whole_names_only(wanted: str, keys: set[str]) -> None:
    found = {key for key, symbol in SYMBOLS.items() if kernels.matches(wanted, symbol)}
    assert found == keys


def test_the_parts_of_a_demangled_name() -> None:
    name = kernels.parse(SYMBOLS["member"])
    assert name.shown == "ns::Outer<int, 4>::inner(float*)"
    assert (name.function, name.qualified) == ("inner", "ns::Outer::inner")
    assert (name.function_args, name.qualified_args) == ("inner", "ns::Outer<int, 4>::inner")
    template = kernels.parse(SYMBOLS["template"])
    assert (template.function, template.function_args) == ("scale", "scale<float>")
    lam = kernels.parse("_Z6kernelIZ4mainEUlvE_EvT_")  # void kernel<main::{lambda()#1}>(...)
    assert (lam.function, lam.qualified) == ("kernel", "kernel")


def test_matching_and_describing_say_which_kernel_matched() -> None:
    found = kernels.matching("scale", list(SYMBOLS.values()))
    assert found == tuple(sorted([SYMBOLS["plain"], SYMBOLS["nested"], SYMBOLS["template"]]))
    assert kernels.describe((SYMBOLS["plain"],)) == "scale(float*)"
    assert kernels.describe(("scale_c",)) == "scale_c"
    many = tuple(f"k{i}" for i in range(5))
    assert kernels.describe(many) == "k0, k1, k2 and 2 more"


@pytest.mark.parametrize(
    ("symbol", "qualified"),
    [
        ("_Z5scalePf", "scale"),
        ("_ZN2ns5scaleEPf", "ns::scale"),
        ("_ZN2ns3sub5scaleEv", "ns::sub::scale"),
        ("_Z5scaleIfEvPT_", None),  # a template: only a demangler reads it
        ("_ZN2ns5OuterIiEE5innerEv", None),  # template arguments mid-name
        ("_Z9shortPf", None),  # the length runs past the name
        ("_Z", None),
    ],
)
def test_without_a_demangler_simple_names_are_still_read(
    monkeypatch: pytest.MonkeyPatch, symbol: str, qualified: str | None
) -> None:
    monkeypatch.setattr(kernels, "demangle", lambda name: name)
    assert kernels._parse(symbol).qualified == qualified


# --- Runs (one rule for why a run failed) -----------------------------------------------
def facts(**changes: Any) -> RunFacts:
    base: dict[str, Any] = {
        "returncode": 0,
        "timed_out": False,
        "expected_returncode": 0,
        "output_ok": True,
        "cache_clean": True,
        "failure": None,
    }
    return RunFacts(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "passed", "cause", "reason"),
    [
        ({}, True, None, "passed"),
        ({"returncode": 3, "expected_returncode": 3}, True, None, "passed"),
        ({"returncode": None, "timed_out": True}, False, Cause.TIMEOUT, "killed (timed out)"),
        ({"returncode": 1}, False, Cause.EXIT_STATUS, "exit status 1"),
        ({"returncode": 0, "expected_returncode": 2}, False, Cause.EXIT_STATUS, "(expected 2)"),
        ({"output_ok": False}, False, Cause.OUTPUT, "the expected output was not found"),
        ({"cache_clean": False}, False, Cause.JIT_CACHE, "left files in its JIT cache"),
        (
            {"returncode": 1, "failure": RuntimeFailure.NO_KERNEL_IMAGE},
            False,
            Cause.NO_KERNEL_IMAGE,
            "no kernel image is available for execution on the device (error 209)",
        ),
        (
            {"returncode": 1, "failure": RuntimeFailure.UNSUPPORTED_PTX},
            False,
            Cause.UNSUPPORTED_PTX,
            "(error 222)",
        ),
        ({"returncode": 1, "failure": RuntimeFailure.NO_DEVICE}, False, Cause.EXIT_STATUS, "100"),
    ],
)
def test_a_run_passes_fails_and_says_why_by_one_rule(
    changes: dict[str, Any], passed: bool, cause: Cause | None, reason: str
) -> None:
    run = facts(**changes)
    assert run.passed() is passed
    assert run.cause() is cause
    assert reason in run.reason()


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, "passed"),
        ({"returncode": None, "timed_out": True}, "killed (timed out)"),
        ({"returncode": 1}, "exit status 1"),
        ({"returncode": 0, "expected_returncode": 2}, "exit status 0 (expected 2)"),
        ({"output_ok": False}, "the expected output was not found"),
        ({"cache_clean": False}, "the run left files in its JIT cache folder"),
    ],
)
def test_a_run_reason_word_for_word(changes: dict[str, Any], reason: str) -> None:
    assert facts(**changes).reason() == reason


def test_a_run_reason_carries_the_details_the_caller_has() -> None:
    killed = facts(returncode=None, timed_out=True)
    assert killed.reason(timeout=30) == "killed after 30 s"
    exited = facts(returncode=2)
    assert exited.reason(error_line="boom") == "exit status 2: boom"
    image = facts(returncode=1, failure=RuntimeFailure.NO_KERNEL_IMAGE)
    assert image.reason() == f"{RuntimeFailure.NO_KERNEL_IMAGE.text} (error 209)"
    # The program's own line, when it carries the runtime's message, says where it came from.
    line = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert image.reason(error_line=line) == f"{line} (error 209)"
    # A line that does not carry the runtime's message never stands in for it.
    assert image.reason(error_line="Traceback (most recent call last):") == image.reason()
    quiet = facts(output_ok=False)
    assert quiet.reason(expected_output="^PASS$") == "expected output /^PASS$/ not found"


def test_runtime_failures_by_text_and_by_the_record_s_words() -> None:
    log = "CUDA error: PTX JIT COMPILATION WAS DISABLED\n"
    assert classify(log) is RuntimeFailure.JIT_DISABLED
    assert classify("segfault") is None
    text = RuntimeFailure.UNSUPPORTED_PTX.text
    assert RuntimeFailure.from_text(text) is RuntimeFailure.UNSUPPORTED_PTX
    assert RuntimeFailure.from_text("nothing like it") is None
    assert RuntimeFailure.from_text(None) is None
    code_failures = {f for f in RuntimeFailure if f.is_code_failure()}
    assert code_failures == {
        RuntimeFailure.NO_KERNEL_IMAGE,
        RuntimeFailure.JIT_DISABLED,
        RuntimeFailure.UNSUPPORTED_PTX,
        RuntimeFailure.INVALID_PTX,
    }
    assert RuntimeFailure.JIT_NOT_FOUND.cause() is Cause.INVALID_PTX
    assert RuntimeFailure.DRIVER_TOO_OLD.cause() is Cause.DRIVER_TOO_OLD


def test_causes_rank_and_stand_against_one_path_where_they_do() -> None:
    assert rank(Cause.HOST_ARCH) == 0
    assert rank(Cause.STALE_ARTIFACT) < rank(Cause.MISSING_SASS) < rank(Cause.NO_KERNEL_IMAGE)
    assert rank(Cause.MISSING_SASS) < rank(Cause.PTX_NEEDS_DRIVER)
    assert rank(None) == len(Cause)
    assert path_of(Cause.MISSING_SASS) is ExecPath.NATIVE
    assert path_of(Cause.JIT_DISABLED) is ExecPath.NATIVE
    for cause in (Cause.MISSING_PTX, Cause.PTX_NEEDS_DRIVER, Cause.UNSUPPORTED_PTX, Cause.PTX_LOAD):
        assert path_of(cause) is ExecPath.JIT
    assert path_of(Cause.NO_KERNEL_IMAGE) is None  # either path
    assert path_of(None) is None


# --- The verdict ------------------------------------------------------------------------
BOTH = (("smoke", ExecPath.NATIVE), ("smoke", ExecPath.JIT))


def check(name: str, state: CheckState, cause: Cause | None = None, **kw: Any) -> Check:
    return Check(
        name, kw.pop("classname", "gate.inspect"), state, f"{name} says so", cause=cause, **kw
    )


def test_two_paths_failing_for_different_reasons_are_both_in_the_headline() -> None:
    checks = [
        check("app [jit]", CheckState.FAILED, Cause.UNSUPPORTED_PTX, path=ExecPath.JIT),
        check("app: driver can JIT compute_90 PTX", CheckState.FAILED, Cause.PTX_NEEDS_DRIVER),
        check("app: SASS for device 9.0", CheckState.FAILED, Cause.MISSING_SASS),
        check("app [native]", CheckState.FAILED, Cause.JIT_DISABLED, path=ExecPath.NATIVE),
    ]
    v = decide((), checks, BOTH)
    assert v.statement == (
        "not accepted: app: SASS for device 9.0: app: SASS for device 9.0 says so; and for "
        "forced JIT: app: driver can JIT compute_90 PTX: app: driver can JIT compute_90 PTX says so"
    )
    assert v.cause is Cause.MISSING_SASS
    assert v.exit_code is ExitCode.NOT_ACCEPTED


def test_one_path_failing_names_only_its_first_cause() -> None:
    checks = [
        check("app: SASS for sm_90", CheckState.FAILED, Cause.MISSING_SASS),
        check("app [native]", CheckState.FAILED, Cause.JIT_DISABLED, path=ExecPath.NATIVE),
        check("app: every kernel", CheckState.FAILED, Cause.MISSING_KERNEL),  # no side
    ]
    v = decide((), checks, BOTH)
    assert v.statement == "not accepted: app: SASS for sm_90: app: SASS for sm_90 says so"
    # The JIT side first, then the native one: still both, the first-ranked leading.
    jit_first = [
        check("app: PTX for compute_90", CheckState.FAILED, Cause.MISSING_PTX),
        check("app [native]", CheckState.FAILED, Cause.EXIT_STATUS, path=ExecPath.NATIVE),
    ]
    assert "; and for the native path: app [native]" in decide((), jit_first, BOTH).statement


@pytest.mark.parametrize(
    ("states", "accepted", "result"),
    [
        ([CheckState.PASSED], True, "PASSED"),
        ([CheckState.PASSED, CheckState.WARNED], True, "WARNED"),
        ([CheckState.PASSED, CheckState.FAILED], False, "FAILED"),
        ([CheckState.PASSED, CheckState.NOT_RUN], False, "FAILED"),
        ([CheckState.WARNED, CheckState.NOT_RUN], False, "FAILED"),
    ],
)
def test_the_verdict_and_the_attestation_result_agree(
    states: list[CheckState], accepted: bool, result: str
) -> None:
    checks = [check(f"c{i}", s) for i, s in enumerate(states)]
    verdict = decide((), checks, BOTH)
    assert verdict.accepted is accepted
    assert attestation_result(verdict, states) == result


def test_each_state_has_exactly_one_attestation_list_and_not_run_is_never_a_pass() -> None:
    lists = {s: attestation_list(s) for s in CheckState}
    assert lists == {
        CheckState.PASSED: "passedTests",
        CheckState.WARNED: "warnedTests",
        CheckState.FAILED: "failedTests",
        CheckState.NOT_RUN: "failedTests",
    }
    assert [s.label for s in CheckState] == ["PASS", "WARN", "FAIL", "SKIP"]
    assert CheckState.of(True) is CheckState.PASSED
    assert CheckState.of(False) is CheckState.FAILED
    assert check("x", CheckState.WARNED).ok
    assert not check("x", CheckState.NOT_RUN).ok
    assert not check("x", CheckState.NOT_RUN).failed


def test_execution_not_verified_stands_for_the_runs_left_unrun() -> None:
    no_device = (Stage("execute", StageStatus.SKIPPED, "no CUDA device", 0.0, 4),)
    unrun = [check("smoke [native]", CheckState.NOT_RUN), check("a", CheckState.PASSED)]
    v = decide(no_device, unrun, ())
    assert v.accepted is False
    assert v.statement == "not accepted: execution not verified (no CUDA device)"
    assert v.reasons == ("execution not verified (no CUDA device)",)  # said once
    assert v.exit_code is ExitCode.NO_DEVICE
    stopped = (Stage("execute", StageStatus.SKIPPED, "--stop-after build", 0.0, None),)
    assert decide(stopped, unrun, ()).exit_code is ExitCode.NOT_ACCEPTED


def test_both_paths_must_run_for_every_entry_point() -> None:
    assert executed(BOTH)
    assert not executed(())
    assert not executed((("smoke", ExecPath.NATIVE),))
    assert not executed((*BOTH, ("app", ExecPath.JIT)))
    assert decide((), [], BOTH) == Verdict(True, ACCEPTED_STATEMENT, (), None, ExitCode.OK)
    assert Verdict(False, "not accepted: x", ("x",)).headline == "x"


def test_a_failed_stage_leads_and_keeps_its_own_exit_status_and_cause() -> None:
    stages = (
        Stage("build", StageStatus.FAILED, "make: no rule", 0.0, int(ExitCode.TOOL)),
        Stage("inspect", StageStatus.SKIPPED, "the build stage failed"),
    )
    checks = [
        check("build make", CheckState.FAILED, Cause.TOOLCHAIN, classname="gate.build"),
        check("late", CheckState.FAILED, Cause.HOST_ARCH),
    ]
    v = decide(stages, checks, ())
    assert v.accepted is False
    assert v.statement == "not accepted: make: no rule"
    assert (v.cause, v.exit_code) == (Cause.TOOLCHAIN, ExitCode.TOOL)
    assert v.reasons == (
        "make: no rule",
        "late: late says so",
        "build make: build make says so",
        NOT_EXECUTED,
    )
    unnamed = decide((Stage("probe", StageStatus.FAILED),), [], BOTH)
    assert unnamed.accepted is False
    assert unnamed.statement == "not accepted: the probe stage failed"
    assert unnamed.exit_code is ExitCode.NOT_ACCEPTED
    assert unnamed.cause is None
    # A failed execute stage is not a skipped one: its detail is the headline, once.
    broken = (Stage("execute", StageStatus.FAILED, "internal error: boom", 0.0, 1),)
    assert decide(broken, [], ()).reasons == ("internal error: boom", NOT_EXECUTED)


# --- Hosts (issue 20, item 7) -----------------------------------------------------------
@pytest.mark.parametrize(
    ("device", "configured", "host", "reason", "conflict"),
    [
        (
            Capability(12, 1),
            None,
            "aarch64",
            "12.1 devices ship on aarch64 hosts only (GB10 (DGX Spark and other GB10 systems))",
            None,
        ),
        (
            Capability(11, 0),
            None,
            "aarch64",
            "11.0 devices ship on aarch64 hosts only (Jetson Thor)",
            None,
        ),
        (
            Capability(8, 7),
            None,
            "aarch64",
            "8.7 devices ship on aarch64 hosts only (Jetson AGX Orin, Orin NX, Orin Nano)",
            None,
        ),
        (Capability(9, 0), None, "x86_64", "this host", None),  # H100 or GH200
        (Capability(9, 0), "aarch64", "aarch64", "the config's host", None),  # GH200
        (Capability(12, 1), "aarch64", "aarch64", "the config's host", None),
        (
            Capability(12, 1),
            "x86_64",
            "x86_64",
            "the config's host",
            "the config says host x86_64, but 12.1 devices ship on aarch64 only",
        ),
        (Capability(13, 0), None, "x86_64", "this host", None),  # not in the table
    ],
)
def test_the_host_an_artifact_must_run_on(
    device: Capability, configured: str | None, host: str, reason: str, conflict: str | None
) -> None:
    assert host_for(device, configured=configured, here="x86_64") == HostRule(
        host, reason, conflict
    )


# --- compat.json's new tables, checked at load ------------------------------------------
def _doc() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda d: d["devices"]["listed"]["12.1"].update(hosts=["sparc"]),
            "hosts: a non-empty list",
        ),
        (lambda d: d["devices"]["listed"]["12.1"].update(hosts=[]), "hosts: a non-empty list"),
        (lambda d: d["devices"]["listed"].update({"twelve": {}}), "compute capability"),
        (lambda d: d["requirements"]["sass"].update(arch=["plain"]), "must accept its own form"),
        (lambda d: d["requirements"]["ptx"].update(device=["family"]), "must accept its own form"),
        (lambda d: d["requirements"]["sass"].update(plain=["plain", "x"]), "a non-empty list"),
        (lambda d: d["requirements"]["sass"].update(odd=["plain"]), "unknown field(s) odd"),
        (lambda d: d["requirements"].update(source="rumour"), "cites source 'rumour'"),
        # A family that stopped serving a device its plain build runs on cannot stand for it.
        (
            lambda d: d["families"]["listed"].update({"sm_120f": ["12.0"]}),
            "accepts sm_120f for sm_120, but the family does not serve 12.1",
        ),
    ],
)
def test_the_new_tables_are_refused_with_one_line_when_broken(edit: Any, words: str) -> None:
    doc = _doc()
    edit(doc)
    with pytest.raises(ConfigError) as info:
        load(json.dumps(doc), "compat.json")
    assert words in info.value.one_line()


def test_the_device_table_and_the_family_table_agree_as_shipped() -> None:
    compat = rules()
    spark = compat.device_class(Capability(12, 1))
    assert spark is not None
    assert (spark.hosts, spark.products) == (
        frozenset({"aarch64"}),
        "GB10 (DGX Spark and other GB10 systems)",
    )
    h200 = compat.device_class(Capability(9, 0))
    assert h200 is not None
    assert h200.hosts == frozenset({"x86_64", "aarch64"})
    assert compat.device_class(Capability(13, 0)) is None
    # Without plain accepting family code, a family may serve fewer devices.
    doc = _doc()
    doc["requirements"]["sass"]["plain"] = ["plain"]
    doc["families"]["listed"]["sm_120f"] = ["12.0"]
    assert load(json.dumps(doc)).families[120].members == frozenset({Capability(12, 0)})


def _set(path: str, value: object) -> Any:
    """An edit of the shipped document: ``a/b/c`` set to ``value`` (None: removed)."""

    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return edit


# Each place a rules file can be wrong, and the one line that names it.
BROKEN = [
    (_set("sources", []), "sources: not an object"),
    (_set("sources/sass", ""), "sources.sass: not a non-empty string"),
    (_set("extra", 1), "document: unknown field(s) extra"),
    (_set("ptx_isa_min_driver", 3), "ptx_isa_min_driver: not an object"),
    (_set("ptx_isa_min_driver/odd", 1), "ptx_isa_min_driver: unknown field(s) odd"),
    (_set("ptx_isa_min_driver/table", []), "ptx_isa_min_driver.table: not an object"),
    (
        _set("ptx_isa_min_driver/table/9.0", 13),
        "ptx_isa_min_driver.table.9.0: not a non-empty string",
    ),
    (
        _set("ptx_isa_min_driver/table/nine", "13.0"),
        "ptx_isa_min_driver.table.nine key: not a MAJOR.MINOR version: 'nine'",
    ),
    (
        _set("ptx_isa_min_driver/table/8.6", "12.4"),
        "ptx_isa_min_driver.table: ISA 8.6 needs an older driver",
    ),
    (_set("ptx_isa_min_driver/series", {}), "ptx_isa_min_driver.series: not a list"),
    (_set("ptx_isa_min_driver/series", [1]), "ptx_isa_min_driver.series[0]: not an object"),
    (
        _set("ptx_isa_min_driver/series", [{"isa_major": 9, "driver_major": 13, "x": 1}]),
        "ptx_isa_min_driver.series[0]: unknown field(s) x",
    ),
    (
        _set(
            "ptx_isa_min_driver/series",
            [{"isa_major": 9, "driver_major": "13", "source": "ptx_isa_series"}],
        ),
        "ptx_isa_min_driver.series[0]: majors must be whole numbers",
    ),
    (
        _set(
            "ptx_isa_min_driver/series",
            [{"isa_major": True, "driver_major": 13, "source": "ptx_isa_series"}],
        ),
        "ptx_isa_min_driver.series[0]: majors must be whole numbers",
    ),
    (
        _set(
            "ptx_isa_min_driver/series",
            [{"isa_major": 0, "driver_major": 13, "source": "ptx_isa_series"}],
        ),
        "ptx_isa_min_driver.series[0]: majors must be from 1 to 99",
    ),
    (
        _set(
            "ptx_isa_min_driver/series",
            [{"isa_major": 9, "driver_major": 100, "source": "ptx_isa_series"}],
        ),
        "ptx_isa_min_driver.series[0]: majors must be from 1 to 99",
    ),
    (
        _set(
            "ptx_isa_min_driver/series",
            [{"isa_major": 9, "driver_major": 14, "source": "ptx_isa_series"}],
        ),
        "ptx_isa_min_driver.series[0]: disagrees with the row for 9.0",
    ),
    (
        _set(
            "ptx_isa_min_driver/series",
            [{"isa_major": 9, "driver_major": 13, "source": "rumour"}],
        ),
        "ptx_isa_min_driver.series[0].source: cites source 'rumour', which sources does not hold",
    ),
    (
        _set("ptx_isa_min_driver/source", "rumour"),
        "ptx_isa_min_driver.source: cites source 'rumour', which sources does not hold",
    ),
    (_set("families", 1), "families: not an object"),
    (_set("families/odd", 1), "families: unknown field(s) odd"),
    (_set("families/listed", []), "families.listed: not an object"),
    (_set("families/listed/sm_120f", "12.0"), "families.listed.sm_120f: not a list"),
    (_set("families/listed/sm_120f", []), "families.listed.sm_120f: lists no capability"),
    (
        _set("families/listed/sm_120f", ["12.0", "11.0", "13.0"]),
        "families.listed.sm_120f: lists capabilities outside the family: 11.0, 13.0",
    ),
    (
        _set("families/listed/sm_120f", ["12.0", 12]),
        "families.listed.sm_120f[1]: not a non-empty string",
    ),
    (
        _set("families/listed/compute_120f", ["12.0"]),
        "families.listed.compute_120f: not an sm_XYf target",
    ),
    (
        _set("families/listed/sm_9f", ["0.9"]),
        (
            "families.listed.sm_9f: not a CUDA target (like sm_121, sm_90a, sm_120f, compute_90): "
            "'sm_9f'"
        ),
    ),
    (_set("families/unlisted", "any"), "families.unlisted: unknown rule 'any'"),
    (
        _set("families/source", "rumour"),
        "families.source: cites source 'rumour', which sources does not hold",
    ),
    (_set("devices", []), "devices: not an object"),
    (_set("devices/odd", 1), "devices: unknown field(s) odd"),
    (_set("devices/listed", []), "devices.listed: not an object"),
    (
        _set("devices/source", "rumour"),
        "devices.source: cites source 'rumour', which sources does not hold",
    ),
    (_set("devices/listed/12.1", []), "devices.listed.12.1: not an object"),
    (
        _set("devices/listed/12.1", {"products": "GB10", "hosts": ["aarch64"], "x": 1}),
        "devices.listed.12.1: unknown field(s) x",
    ),
    (
        _set("devices/listed/12.1", {"products": "", "hosts": ["aarch64"]}),
        "devices.listed.12.1.products: not a non-empty string",
    ),
    (
        _set("devices/listed/12.1", {"products": "GB10", "hosts": "aarch64"}),
        "devices.listed.12.1.hosts: not a list",
    ),
    (
        _set("devices/listed/12.1", {"products": "GB10", "hosts": ["aarch64", "sparc"]}),
        "devices.listed.12.1.hosts: a non-empty list of aarch64, ppc64le, x86_64",
    ),
    (
        _set("devices/listed/12.x", {"products": "GB10", "hosts": ["aarch64"]}),
        "devices.listed.12.x: not a compute capability (like 12.1 or 121): '12.x'",
    ),
    (_set("requirements", []), "requirements: not an object"),
    (_set("requirements/odd", 1), "requirements: unknown field(s) odd"),
    (
        _set("requirements/source", "rumour"),
        "requirements.source: cites source 'rumour', which sources does not hold",
    ),
    (_set("requirements/sass", []), "requirements.sass: not an object"),
    (_set("requirements/ptx/odd", ["plain"]), "requirements.ptx: unknown field(s) odd"),
    (_set("requirements/ptx/arch", "arch"), "requirements.ptx.arch: not a list"),
    (
        _set("requirements/ptx/arch", []),
        "requirements.ptx.arch: a non-empty list of arch, family, plain",
    ),
    (
        _set("requirements/sass/family", ["family", "any"]),
        "requirements.sass.family: a non-empty list of arch, family, plain",
    ),
    (
        _set("requirements/sass/arch", ["plain"]),
        "requirements.sass.arch: must accept its own form, arch",
    ),
    (
        _set("requirements/ptx/device", ["arch", "family"]),
        "requirements.ptx.device: must accept its own form, plain",
    ),
    (
        _set("devices/listed/12.1", {"products": "GB10", "hosts": ["aarch64"], "x": 1, "y": 2}),
        "devices.listed.12.1: unknown field(s) x, y",
    ),
    (
        _set("ptx_isa_min_driver/series", [{"isa_major": 100, "driver_major": 13, "source": "s"}]),
        "ptx_isa_min_driver.series[0]: majors must be from 1 to 99",
    ),
    (
        _set("ptx_isa_min_driver/series", [{"isa_major": 9, "driver_major": 0, "source": "s"}]),
        "ptx_isa_min_driver.series[0]: majors must be from 1 to 99",
    ),
    (_set("version", 2), "version 2, this reader reads 3"),
    (_set("families", None), "missing or mistyped field (KeyError: 'families')"),
    (_set("requirements/sass/plain", None), "missing or mistyped field (KeyError: 'plain')"),
]


@pytest.mark.parametrize(("edit", "message"), BROKEN)
def test_every_place_a_rules_file_can_be_wrong_is_named_in_one_line(
    edit: Any, message: str
) -> None:
    doc = _doc()
    edit(doc)
    with pytest.raises(ConfigError) as info:
        load(json.dumps(doc), "rules.json")
    assert info.value.one_line() == f"rules.json: {message}"


def test_a_rules_file_that_is_not_json_is_one_line_and_the_default_name_is_compat_json() -> None:
    with pytest.raises(ConfigError) as info:
        load("{", "rules.json")
    assert info.value.one_line().startswith("rules.json: not JSON: ")
    with pytest.raises(ConfigError, match=r"^compat\.json: version 2"):
        load(json.dumps({**_doc(), "version": 2}))


def test_rows_may_share_a_driver_and_are_ordered_by_isa_not_by_text() -> None:
    doc = _doc()
    doc["ptx_isa_min_driver"]["table"]["8.7"] = "12.7"  # 8.6 and 8.7 on one driver
    doc["ptx_isa_min_driver"]["table"]["10.0"] = "14.0"  # "10.0" sorts before "6.3" as text
    compat = load(json.dumps(doc))
    assert list(compat.isa_table)[-1] == Version(10, 0)
    assert compat.min_driver(Version(8, 7)) == Version(12, 7)
    series = load(json.dumps(_doc())).isa_series[0]
    assert (series.isa_major, series.driver_major, series.source) == (9, 13, "ptx_isa_series")


# --- The kernel-name parser, on demangled texts as the C++ runtime prints them ----------
# (demangled text, function, qualified, function with arguments, qualified with arguments)
DEMANGLED = [
    ("scale(float*)", "scale", "scale", "scale", "scale"),
    ("scale", "scale", "scale", "scale", "scale"),  # no parameter list at all
    ("ns::scale(float*)", "scale", "ns::scale", "scale", "ns::scale"),
    ("void scale<float>(float*)", "scale", "scale", "scale<float>", "scale<float>"),
    ("unsigned int ns::k<2u>(int)", "k", "ns::k", "k<2u>", "ns::k<2u>"),
    (
        "void at::native::k<4, at::F<float>, std::array<char*, 1ul> >(int, at::F<float>)",
        "k",
        "at::native::k",
        "k<4, at::F<float>, std::array<char*, 1ul> >",
        "at::native::k<4, at::F<float>, std::array<char*, 1ul> >",
    ),
    (
        "ns::Outer<int, 4>::inner(float*)",
        "inner",
        "ns::Outer::inner",
        "inner",
        "ns::Outer<int, 4>::inner",
    ),
    (
        "(anonymous namespace)::kernel()",
        "kernel",
        "(anonymous namespace)::kernel",
        "kernel",
        "(anonymous namespace)::kernel",
    ),
    (
        "void (anonymous namespace)::k<(anonymous namespace)::T>((anonymous namespace)::T)",
        "k",
        "(anonymous namespace)::k",
        "k<(anonymous namespace)::T>",
        "(anonymous namespace)::k<(anonymous namespace)::T>",
    ),
    (
        "void k<main::{lambda()#1}>(main::{lambda()#1})",
        "k",
        "k",
        "k<main::{lambda()#1}>",
        "k<main::{lambda()#1}>",
    ),
    (
        "main::{lambda()#1}::operator()() const",
        "operator()",
        "main::{lambda()#1}::operator()",
        "operator()",
        "main::{lambda()#1}::operator()",
    ),
    ("void k<int (*)(int)>(int (*)(int))", "k", "k", "k<int (*)(int)>", "k<int (*)(int)>"),
    ("void k<a[2]>(int)", "k", "k", "k<a[2]>", "k<a[2]>"),
    ("cute::apply() [clone .constprop.0]", "apply", "cute::apply", "apply", "cute::apply"),
    ("k() [clone .a] [clone .b]", "k", "k", "k", "k"),
    ("void k<1>>(int)", "k>", "k>", "k<1>>", "k<1>>"),  # a stray '>' is part of the name
    ("void k(int) )", "k", "k", "k", "k"),  # a stray ')' closes nothing
]


@pytest.mark.parametrize("row", DEMANGLED, ids=[row[0] for row in DEMANGLED])
def test_the_parts_of_each_demangled_name(
    monkeypatch: pytest.MonkeyPatch, row: tuple[str, str, str, str, str]
) -> None:
    shown = row[0]
    monkeypatch.setattr(kernels, "demangle", lambda _symbol: shown)
    assert kernels._parse("_Zsymbol") == kernels.KernelName("_Zsymbol", *row)


def test_a_symbol_no_demangler_can_read_keeps_only_its_mangled_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernels, "demangle", lambda name: name)
    assert kernels._parse("_Z5scaleIfEvPT_") == kernels.KernelName(
        "_Z5scaleIfEvPT_", "_Z5scaleIfEvPT_", None, None, None, None
    )
    assert not kernels.matches("scale", "_Z5scaleIfEvPT_")
    assert kernels.matches("_Z5scaleIfEvPT_", "_Z5scaleIfEvPT_")
    # A C name that is not mangled is its own name, demangler or not.
    assert kernels._parse("scale_c").qualified == "scale_c"


def test_describing_matches_names_up_to_three() -> None:
    three = ("a", "b", "c")
    assert kernels.describe(three) == "a, b, c"
    assert kernels.describe((*three, "d")) == "a, b, c and 1 more"


def test_the_widest_bounds_of_the_rules_file_load() -> None:
    doc = _doc()
    doc["devices"]["listed"]["9.0"]["hosts"] = ["aarch64", "ppc64le", "x86_64"]
    source = doc["ptx_isa_min_driver"]["series"][0]["source"]
    doc["ptx_isa_min_driver"]["series"].append(
        {"isa_major": 1, "driver_major": 1, "source": source}
    )
    compat = load(json.dumps(doc), "rules.json")
    h200 = compat.device_class(Capability(9, 0))
    assert h200 is not None
    assert h200.hosts == frozenset({"aarch64", "ppc64le", "x86_64"})
    assert compat.min_driver(Version(1, 4)) == Version(1, 4)


def test_a_family_that_stops_serving_devices_names_every_one() -> None:
    doc = _doc()
    doc["devices"]["listed"]["12.3"] = {"products": "a later GB part", "hosts": ["aarch64"]}
    doc["families"]["listed"]["sm_120f"] = ["12.0"]
    with pytest.raises(ConfigError) as info:
        load(json.dumps(doc), "rules.json")
    assert info.value.one_line() == (
        "rules.json: requirements.sass.plain accepts sm_120f for sm_120, but the family does not "
        "serve 12.1, 12.3"
    )


def test_an_unlisted_family_serves_its_own_minor_and_the_later_ones_of_its_major() -> None:
    assert FamilyRule.SAME_MAJOR_AT_OR_ABOVE.members(Target.parse("sm_135f")) == frozenset(
        Capability(13, m) for m in (5, 6, 7, 8, 9)
    )


@pytest.mark.parametrize(
    ("text", "sep", "parts"),
    [
        ("a::::b", "::", ["a", "b"]),  # separators in a row: no empty name, no stray colon
        ("a:::b", "::", ["a", ":b"]),  # read left to right, never overlapping
        ("ns::k<a::b>", "::", ["ns", "k<a::b>"]),  # inside brackets: part of the name
        ("void  k", " ", ["void", "k"]),
        ("::k", "::", ["k"]),
        ("", "::", [""]),
    ],
)
def test_names_split_only_at_top_level_separators(text: str, sep: str, parts: list[str]) -> None:
    assert kernels._split(text, sep) == parts


def test_the_families_table_must_list_a_family() -> None:
    doc = _doc()
    doc["families"]["listed"] = {}
    with pytest.raises(ConfigError) as info:
        load(json.dumps(doc), "rules.json")
    assert info.value.one_line() == "rules.json: families.listed: lists no family"

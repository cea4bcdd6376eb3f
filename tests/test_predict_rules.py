"""What inspection predicts for each path, checked against the runs: every case, whole.

Each expectation, check and diagnosis is compared as a whole (state, cause, every word):
these are what the verdict and the summary say, and ``nox -s mutation`` judges the rules
by them.
"""

from __future__ import annotations

import pytest

from gate.config import EntryPoint
from gate.proc import Result
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.causes import Cause, ExecPath, classify
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState
from gate.stages import predict
from gate.stages.predict import Expectation, Source
from gate.stages.runs import Run

pytestmark = pytest.mark.unit

H200 = Capability(9, 0)
CUDA13 = Version(13, 0)
K = "_Z1kPi"
NO_IMAGE = "no kernel image is available for execution on the device\n"
JIT_OFF = "PTX JIT compilation was disabled\n"
OLD_PTX = "the provided PTX was compiled with an unsupported toolchain\n"


def entries(*specs: str, kernels: tuple[str, ...] = (K,)) -> Listing:
    """``sm_90``, ``compute_90@9.2`` (PTX with its ISA; 9.0 when not given)."""
    found = []
    for spec in specs:
        text, _, isa = spec.partition("@")
        target = Target.parse(text)
        kind = Kind.PTX if target.virtual else Kind.SASS
        version = Version.parse(isa or "9.0") if target.virtual else None
        found.append(DeviceEntry(kind, target, kernels, ptx_isa=version))
    return Listing(tuple(found))


def own(*specs: str, name: str = "app") -> Source:
    return Source(name, entries(*specs), own=True)


def vendor(name: str, *specs: str, linked: bool = False) -> Source:
    return Source(name, entries(*specs), own=False, linked=linked)


def run(path: ExecPath, rc: int = 0, output: str = "PASS\n", name: str = "app") -> Run:
    entry = EntryPoint(name, ("./app",))
    result = Result(("./app",), rc, output, "", 0.1)
    failure = None if rc == 0 else classify(output)
    return Run(entry, path, result, path.log_name, "PASS" in output, True, failure)


def prediction(
    *sources: Source, driver: Version | None = CUDA13, compilers: tuple[str, ...] = ()
) -> predict.Prediction:
    return predict.Prediction(
        "app",
        H200,
        sources,
        predict.expect_native(sources, H200),
        predict.expect_jit(sources, H200, driver),
        compilers,
    )


NAME = "app: runs match inspection on 9.0"


# --- expectations --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sources", "native"),
    [
        ((), Expectation(None, "no inspected device code")),
        ((own("sm_90"),), Expectation(True, "SASS for 9.0 in app")),
        (
            (own("sm_80", "compute_90"),),
            Expectation(False, "app: 1 kernel without SASS for 9.0 (SASS: sm_80)"),
        ),
        (
            (own("sm_100a"),),
            Expectation(
                False,
                "app: every kernel is built only for other devices (a/f builds); none for 9.0",
            ),
        ),
        ((own("sm_90a", "sm_80"),), Expectation(True, "SASS for 9.0 in app")),  # sm_90a runs here
        (
            (vendor("libv.so", "sm_90"), own("sm_90")),
            Expectation(True, "SASS for 9.0 in libv.so, app"),
        ),
        (
            (vendor("libv.so", "sm_80", "compute_80"),),
            Expectation(False, "libv.so has no SASS for 9.0"),
        ),
    ],
)
def test_what_the_native_path_can_run(sources: tuple[Source, ...], native: Expectation) -> None:
    found = predict.expect_native(sources, H200)
    if native.can_run is False:
        native = Expectation(native.can_run, native.basis, sources[0])
    assert found == native


@pytest.mark.parametrize(
    ("sources", "driver", "can_run", "basis"),
    [
        ((), CUDA13, None, "no inspected device code"),
        ((own("sm_90", "compute_90"),), CUDA13, True, "PTX for 9.0 in app"),
        ((own("sm_90", "compute_80"),), CUDA13, True, "PTX for 9.0 in app"),  # JITs forward
        (
            (own("sm_90", "compute_100"),),
            CUDA13,
            False,
            "app: 1 kernel without PTX that JIT-compiles for 9.0",
        ),
        (
            (own("sm_80", "compute_90@9.2"),),
            CUDA13,
            False,
            (
                "app: the PTX of 1 kernel (ISA 9.2) needs driver CUDA >= 13.2; this driver is CUDA "
                "13.0"
            ),
        ),
        (
            (own("sm_80", "compute_90@9.2"),),
            None,
            True,
            "PTX for 9.0 in app",
        ),  # no driver: no claim
        ((own("sm_80", "compute_90@9.2"),), Version(13, 2), True, "PTX for 9.0 in app"),
        (
            (own("sm_80", "compute_90@10.0"),),
            CUDA13,
            False,
            (
                "app: the PTX of 1 kernel (ISA 10.0) needs a driver newer than the rules know; "
                "this "
                "driver is CUDA 13.0"
            ),
        ),
        ((own("sm_100a"),), CUDA13, False, "app: no kernel is built for 9.0"),
        (
            (own("sm_90"), vendor("libv.so", "sm_90", "compute_90")),
            CUDA13,
            False,
            "app: 1 kernel without PTX that JIT-compiles for 9.0",
        ),
        (
            (vendor("libv.so", "sm_90", "compute_90@9.2"),),
            CUDA13,
            False,
            "libv.so needs driver CUDA >= 13.2 for its PTX (this driver is CUDA 13.0)",
        ),
        (
            (
                vendor("liba.so", "sm_90", "compute_90@9.1"),
                vendor("libb.so", "sm_90", "compute_90@9.2"),
            ),
            CUDA13,
            False,
            "liba.so, libb.so need driver CUDA >= 13.2 for their PTX (this driver is CUDA 13.0)",
        ),
        (
            (vendor("libv.so", "sm_90", "compute_90@10.0"),),
            CUDA13,
            False,
            "libv.so needs a newer driver for its PTX (this driver is CUDA 13.0)",
        ),
        (
            (vendor("liba.so", "sm_90"), vendor("libb.so", "sm_90", "compute_90@9.2")),
            CUDA13,
            False,
            "liba.so ships no PTX for 9.0",  # no PTX ranks before a driver too old
        ),
        ((vendor("libv.so", "sm_90", "compute_80@8.0"),), CUDA13, True, "PTX for 9.0 in libv.so"),
    ],
)
def test_what_forced_jit_can_run(
    sources: tuple[Source, ...], driver: Version | None, can_run: bool | None, basis: str
) -> None:
    found = predict.expect_jit(sources, H200, driver)
    assert (found.can_run, found.basis) == (can_run, basis)


def test_the_project_s_own_code_is_judged_first_whatever_the_order() -> None:
    found = predict.expect_jit((vendor("libv.so", "sm_90"), own("sm_90")), H200, CUDA13)
    assert found.basis == "app: 1 kernel without PTX that JIT-compiles for 9.0"
    assert found.blocker is not None
    assert found.blocker.own
    assert found.firm
    blocked = predict.expect_jit((vendor("libv.so", "sm_90"),), H200, CUDA13)
    assert blocked.blocker is not None
    assert blocked.blocker.name == "libv.so"
    assert not blocked.firm


# --- the check ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sources", "runs", "compilers", "check"),
    [
        (
            (),
            [run(ExecPath.NATIVE), run(ExecPath.JIT)],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.WARNED,
                "no inspected device code stands behind this entry point: only its runs do",
            ),
        ),
        (
            (own("sm_90", "compute_90"),),
            [run(ExecPath.NATIVE), run(ExecPath.JIT), run(ExecPath.JIT, name="other")],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.PASSED,
                "native: predicted runs (SASS for 9.0 in app), passed; "
                "jit: predicted runs (PTX for 9.0 in app), passed",
            ),
        ),
        (
            (own("compute_90"),),
            [run(ExecPath.NATIVE), run(ExecPath.JIT)],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.FAILED,
                "native: predicted cannot run (app: 1 kernel without SASS for 9.0 (SASS: none)), "
                "passed; something let code other than the inspected SASS run: a JIT cache, a "
                "library loaded some other way, or code generated at run time; "
                "jit: predicted runs (PTX for 9.0 in app), passed",
                cause=Cause.PREDICTION,
            ),
        ),
        (
            (own("sm_90"),),
            [run(ExecPath.NATIVE), run(ExecPath.JIT)],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.FAILED,
                "jit: predicted cannot run (app: 1 kernel without PTX that JIT-compiles for 9.0), "
                "passed; the kernels it launched did not need the missing PTX; "
                "native: predicted runs (SASS for 9.0 in app), passed",
                cause=Cause.PREDICTION,
            ),
        ),
        (
            (vendor("libtorch_cuda.so", "sm_90"),),
            [run(ExecPath.NATIVE), run(ExecPath.JIT)],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.PASSED,
                "native: predicted runs (SASS for 9.0 in libtorch_cuda.so), passed; "
                "jit: predicted at risk (libtorch_cuda.so ships no PTX for 9.0), passed: "
                "the kernels it launched did not need the missing code",
            ),
        ),
        (
            (own("sm_90", "compute_90"),),
            [run(ExecPath.NATIVE, 1, NO_IMAGE), run(ExecPath.JIT)],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.FAILED,
                "native: predicted runs (SASS for 9.0 in app), failed (no kernel image is "
                "available for execution on the device (error 209)); "
                "jit: predicted runs (PTX for 9.0 in app), passed",
                cause=Cause.PREDICTION,
            ),
        ),
        (
            # A runtime compiler makes code inspection never saw: its failure is no mismatch.
            (own("sm_90", "compute_90"),),
            [run(ExecPath.NATIVE, 1, NO_IMAGE), run(ExecPath.JIT)],
            ("NVRTC",),
            Check(
                NAME,
                "gate.predict",
                CheckState.PASSED,
                "native: predicted runs (SASS for 9.0 in app), failed (no kernel image is "
                "available for execution on the device (error 209)); "
                "jit: predicted runs (PTX for 9.0 in app), passed",
            ),
        ),
        (
            # A failure that is not for want of code is the run's own business.
            (own("sm_90", "compute_90"),),
            [run(ExecPath.NATIVE, 3, "boom\n"), run(ExecPath.JIT)],
            (),
            Check(
                NAME,
                "gate.predict",
                CheckState.PASSED,
                "native: predicted runs (SASS for 9.0 in app), failed (exit status 3: boom); "
                "jit: predicted runs (PTX for 9.0 in app), passed",
            ),
        ),
    ],
)
def test_the_runs_against_the_prediction(
    sources: tuple[Source, ...], runs: list[Run], compilers: tuple[str, ...], check: Check
) -> None:
    assert prediction(*sources, compilers=compilers).check(runs) == check


# --- the diagnosis -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sources", "native", "jit", "diagnosis"),
    [
        (
            (own("compute_90"),),
            (1, JIT_OFF),
            (0, "PASS\n"),
            (
                "app: native fails (PTX JIT compilation was disabled (error 223)) but PTX JIT "
                "passes: "
                "revisit the native target and the final link step. app: SASS none; PTX compute_90 "
                "ISA 9.0 (driver >= 13.0); device 9.0."
            ),
        ),
        (
            (own("sm_90"), vendor("libtorch_cuda.so", "sm_90")),
            (0, "PASS\n"),
            (1, NO_IMAGE),
            (
                "app: native passes but PTX JIT fails (no kernel image is available for execution "
                "on "
                "the device (error 209)): check that PTX is present and that the driver supports "
                "its "
                "ISA version. app: SASS sm_90; PTX none | 1 library outside the project, with SASS "
                "for 9.0 and without PTX for it (loaded-libraries.txt lists it). "
                "Inspection said so: app: 1 kernel without PTX that JIT-compiles for 9.0."
            ),
        ),
        (
            (own("sm_90", "compute_90"), vendor("libtorch_cuda.so", "sm_90")),
            (0, "PASS\n"),
            (1, NO_IMAGE),
            (
                "app: native passes; whole-program forced JIT cannot run because libtorch_cuda.so "
                "ships no PTX for 9.0 (the run: no kernel image is available for execution on the "
                "device (error 209)). app: SASS sm_90; PTX compute_90 ISA 9.0 (driver >= 13.0) | "
                "1 library outside the project, with SASS for 9.0 and without PTX for it "
                "(loaded-libraries.txt lists it)."
            ),
        ),
        (
            (own("sm_90", "compute_90@9.2"),),
            (0, "PASS\n"),
            (1, OLD_PTX),
            (
                "app: native passes but PTX JIT fails (the provided PTX was compiled with an "
                "unsupported toolchain (error 222)): check that PTX is present and that the driver "
                "supports its ISA version. app: SASS sm_90; PTX compute_90 ISA 9.2 (driver >= "
                "13.2). "
                "The driver is older than the PTX ISA needs. Inspection said so: app: the PTX of 1 "
                "kernel (ISA 9.2) needs driver CUDA >= 13.2; this driver is CUDA 13.0."
            ),
        ),
        (
            (own("sm_80", "compute_90@9.2"),),
            (1, JIT_OFF),
            (1, OLD_PTX),
            (
                "app: both paths fail, each for its own reason: native: app: 1 kernel without SASS "
                "for 9.0 (SASS: sm_80) (PTX JIT compilation was disabled (error 223)); forced JIT: "
                "app: the PTX of 1 kernel (ISA 9.2) needs driver CUDA >= 13.2; this driver is CUDA "
                "13.0 (the provided PTX was compiled with an unsupported toolchain (error 222)). "
                "app: SASS sm_80; PTX compute_90 ISA 9.2 (driver >= 13.2); device 9.0."
            ),
        ),
        (
            # Inspection said both run: the failures are the toolchain's or the device's.
            (own("sm_90", "compute_90"),),
            (1, NO_IMAGE),
            (1, NO_IMAGE),
            (
                "app: both paths fail (native: no kernel image is available for execution on the "
                "device (error 209); JIT: no kernel image is available for execution on the device "
                "(error 209)): investigate the toolchain, runtime libraries and device state using "
                "these errors. app: SASS sm_90; PTX compute_90 ISA 9.0 (driver >= 13.0); device "
                "9.0."
            ),
        ),
        (
            (),
            (1, "segfault\n"),
            (1, "segfault\n"),
            (
                "app: both paths fail (native: exit status 1: segfault; JIT: exit status 1: "
                "segfault): investigate the toolchain, runtime libraries and device state using "
                "these errors. No inspected device code; device 9.0."
            ),
        ),
    ],
)
def test_the_diagnosis_of_each_failure_combination(
    sources: tuple[Source, ...], native: tuple[int, str], jit: tuple[int, str], diagnosis: str
) -> None:
    runs = [run(ExecPath.NATIVE, *native), run(ExecPath.JIT, *jit)]
    assert predict.diagnose(runs, [prediction(*sources)]) == [diagnosis]


def test_no_diagnosis_when_both_pass_or_a_path_did_not_run() -> None:
    p = prediction(own("sm_90", "compute_90"))
    assert predict.diagnose([run(ExecPath.NATIVE), run(ExecPath.JIT)], [p]) == []
    assert predict.diagnose([run(ExecPath.NATIVE, 1, NO_IMAGE)], [p]) == []
    # An entry point with one path run is passed over; the next one is still diagnosed.
    other = predict.Prediction("b", H200, (), p.native, p.jit, ())
    runs = [
        run(ExecPath.NATIVE, 1, NO_IMAGE),
        run(ExecPath.NATIVE, 1, "x\n", name="b"),
        run(ExecPath.JIT, 1, "x\n", name="b"),
    ]
    [said] = predict.diagnose(runs, [p, other])
    assert said.startswith("b: both paths fail")


def failed_both(*sources: Source) -> str:
    """The diagnosis of an entry point whose two runs failed with no known cause."""
    (found,) = predict.diagnose(
        [run(ExecPath.NATIVE, 1, "x\n"), run(ExecPath.JIT, 1, "x\n")], [prediction(*sources)]
    )
    return found


def test_the_code_summary_counts_the_libraries_that_have_code_for_the_device() -> None:
    # torch: dozens of libraries with SASS for the device and no PTX: one phrase, not a
    # target list each.
    found = failed_both(own("sm_90"), *[vendor(f"lib{i}.so", "sm_80", "sm_90") for i in range(37)])
    assert found.endswith(
        "errors. app: SASS sm_90; PTX none | 37 libraries outside the project, all with SASS for "
        "9.0 and none with PTX for it (loaded-libraries.txt lists each); device 9.0."
    )
    assert "lib0.so" not in found
    mixed = [vendor("liba.so", "sm_90"), vendor("libb.so", "sm_90", "compute_90")]
    mixed.append(vendor("libc.so", "sm_80", "compute_80"))  # JITs for 9.0: no SASS for it
    assert failed_both(*mixed).endswith(
        "errors. 3 libraries outside the project, 2 with SASS for 9.0 and 2 with PTX for it "
        "(loaded-libraries.txt lists each); device 9.0."
    )


def test_the_code_summary_names_the_libraries_with_nothing_for_the_device() -> None:
    bare = [vendor(f"libold{i}.so", "sm_75") for i in range(5)]
    found = failed_both(*bare, vendor("libok.so", "sm_90"))
    assert found.endswith(
        "errors. libold0.so: SASS sm_75; PTX none | libold1.so: SASS sm_75; PTX none | "
        "libold2.so: SASS sm_75; PTX none | 2 more libraries with nothing for 9.0 | 1 other "
        "library outside the project, with SASS for 9.0 and without PTX for it "
        "(loaded-libraries.txt lists each); device 9.0."
    )
    # Only a/f builds for other devices is nothing for this one too.
    assert failed_both(vendor("libh.so", "sm_100a")).endswith(
        "errors. libh.so: SASS sm_100a; PTX none (loaded-libraries.txt lists it); device 9.0."
    )


def test_the_projects_own_code_is_named_first_wherever_it_was_loaded() -> None:
    sources = [vendor(f"lib{i}.so", "sm_90") for i in range(5)]
    sources += [own("sm_90", name=f"own{i}.so") for i in range(4)]
    assert failed_both(*sources).endswith(
        "errors. own0.so: SASS sm_90; PTX none | own1.so: SASS sm_90; PTX none | own2.so: SASS "
        "sm_90; PTX none | 1 more artifact of the project's | 5 libraries outside the project, "
        "all with SASS for 9.0 and none with PTX for it (loaded-libraries.txt lists each); "
        "device 9.0."
    )
    three = [own("sm_90", name=f"own{i}.so") for i in range(3)]
    three += [vendor(f"libold{i}.so", "sm_75") for i in range(3)]
    assert " more " not in failed_both(*three)  # three of each are named, none counted


def test_entry_points_diagnosed_and_proved_alike_are_said_once() -> None:
    same = prediction(own("sm_90", "compute_90"), vendor("libtorch_cuda.so", "sm_90"))
    names = ("check-float32", "check-float16", "other")
    predictions = [
        predict.Prediction(n, H200, same.sources, same.native, same.jit, ()) for n in names
    ]
    runs = [run(ExecPath.NATIVE, name=n) for n in names] + [
        run(ExecPath.JIT, 1, NO_IMAGE, name=n) for n in names[:2]
    ]
    runs.append(run(ExecPath.JIT, 1, "segfault\n", name="other"))
    found = predict.diagnose(runs, predictions)
    assert [d.split(": native passes")[0] for d in found] == [
        "check-float32, check-float16",
        "other",
    ]
    proved = predict.paths_proved(runs, predictions, frozenset({"app"}))
    assert [p.split(": ")[0] for p in proved] == ["check-float32, check-float16, other"]


def test_an_excused_jit_run_says_what_was_predicted_and_proved() -> None:
    failed = run(ExecPath.JIT, 1, NO_IMAGE)
    torch = vendor("libtorch_cuda.so", "sm_90")
    with_own = prediction(own("sm_90", "compute_90", name="libext.so"), torch)
    assert predict.excuse(failed, [with_own], frozenset({"libext.so"})) == (
        "as predicted: libtorch_cuda.so ships no PTX for 9.0, so the whole program cannot run; "
        "the project's own PTX (libext.so) loads under forced JIT"
    )
    alone = prediction(torch)
    assert predict.excuse(failed, [alone], frozenset()) == (
        "as predicted: libtorch_cuda.so ships no PTX for 9.0, so the whole program cannot run; "
        "the project has no device code of its own here"
    )
    assert predict.excuse(run(ExecPath.JIT), [alone], frozenset()) is None  # it passed
    # A run that passed is never excused, even where its log names a failure of want of code.
    said = run(ExecPath.JIT)
    logged = Run(
        said.entry_point, said.path, said.result, said.log_name, True, True, failed.failure
    )
    assert logged.passed
    assert predict.excuse(logged, [alone], frozenset()) is None
    assert predict.excuse(run(ExecPath.NATIVE, 1, NO_IMAGE), [alone], frozenset()) is None
    assert predict.excuse(failed, [], frozenset()) is None  # no prediction for it
    other = run(ExecPath.JIT, 1, NO_IMAGE, name="other")
    assert predict.excuse(other, [alone], frozenset()) is None


# --- the edges the wording depends on ----------------------------------------------------
def two(*specs: tuple[str, tuple[str, ...]], name: str = "app") -> Source:
    """One own source whose entries carry different kernels: ``("sm_90", ("k1",))``."""
    found: list[DeviceEntry] = []
    for spec, kernels in specs:
        found.extend(entries(spec, kernels=kernels).entries)
    return Source(name, Listing(tuple(found)), own=True)


def test_three_blockers_are_all_named_and_a_fourth_is_counted() -> None:
    three = [vendor(f"lib{i}.so", "sm_80") for i in range(3)]
    assert predict.expect_native(three, H200).basis == (
        "lib0.so, lib1.so, lib2.so have no SASS for 9.0"
    )
    four = [*three, vendor("lib3.so", "sm_80")]
    found = predict.expect_native(four, H200)
    assert found.basis == "lib0.so, lib1.so, lib2.so and 1 more have no SASS for 9.0"
    assert found.blocker is four[0]


def test_own_code_is_judged_per_kernel_in_any_entry_order() -> None:
    # PTX for another device listed first does not hide the PTX that JITs here.
    assert predict.expect_jit((own("sm_90", "compute_100", "compute_90"),), H200, CUDA13) == (
        Expectation(True, "PTX for 9.0 in app")
    )
    # Code without kernels (a stub) is nothing to run: no claim against it.
    stub = Source("app", entries("sm_90", "compute_90", kernels=()), own=True)
    assert predict.expect_jit((stub,), H200, CUDA13) == Expectation(True, "PTX for 9.0 in app")
    # Some kernels need a newer driver, others have no PTX at all: both are said.
    mixed = two(("sm_90", ("k1", "k2", "k3")), ("compute_90@9.2", ("k1",)))
    assert predict.expect_jit((mixed,), H200, CUDA13).basis == (
        "app: the PTX of 1 kernel (ISA 9.2) needs driver CUDA >= 13.2; this driver is CUDA 13.0; "
        "2 more kernels without PTX for 9.0"
    )
    # Every SASS target is listed when a kernel lacks one for this device.
    assert predict.expect_native((own("sm_80", "sm_86", "compute_90"),), H200).basis == (
        "app: 1 kernel without SASS for 9.0 (SASS: sm_80 sm_86)"
    )


def test_the_driver_vendors_need_is_the_highest_in_any_order_or_one_no_rule_knows() -> None:
    found = predict.expect_jit(
        (
            vendor("libb.so", "sm_90", "compute_90@9.2"),
            vendor("liba.so", "sm_90", "compute_90@9.1"),
            vendor("libc.so", "sm_90", "compute_90@10.0"),  # needs a driver no rule knows
        ),
        H200,
        CUDA13,
    )
    assert found.basis == (
        "liba.so, libb.so, libc.so need a newer driver for their PTX (this driver is CUDA 13.0)"
    )
    found = predict.expect_jit(
        (
            vendor("libb.so", "sm_90", "compute_90@9.2"),
            vendor("liba.so", "sm_90", "compute_90@9.1"),
        ),
        H200,
        CUDA13,
    )
    assert found.basis == (
        "liba.so, libb.so need driver CUDA >= 13.2 for their PTX (this driver is CUDA 13.0)"
    )


def test_both_fail_for_want_of_code_only_where_inspection_said_so_for_each_path() -> None:
    # Native was predicted to run: its failure is not for want of the code inspection saw.
    runs = [run(ExecPath.NATIVE, 1, NO_IMAGE), run(ExecPath.JIT, 1, NO_IMAGE)]
    assert predict.diagnose(runs, [prediction(own("sm_90"))]) == [
        (
            "app: both paths fail (native: no kernel image is available for execution on the "
            "device (error 209); JIT: no kernel image is available for execution on the device "
            "(error 209)): investigate the toolchain, runtime libraries and device state using "
            "these errors. app: SASS sm_90; PTX none; device 9.0."
        )
    ]


def test_the_code_summary_lists_every_target_and_what_its_ptx_needs() -> None:
    listing = Listing(
        (
            DeviceEntry(Kind.SASS, Target.parse("sm_80"), (K,)),
            DeviceEntry(Kind.SASS, Target.parse("sm_90"), (K,)),
            DeviceEntry(Kind.PTX, Target.parse("compute_80"), (K,), ptx_isa=None),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (K,), ptx_isa=Version(10, 0)),
            DeviceEntry(Kind.PTX, Target.parse("compute_90"), (K,), ptx_isa=Version(9, 0)),
        )
    )
    runs = [run(ExecPath.NATIVE, 1, "x\n"), run(ExecPath.JIT, 1, "x\n")]
    (found,) = predict.diagnose(runs, [prediction(Source("app", listing, own=True))])
    assert found.endswith(
        ". app: SASS sm_80 sm_90; PTX compute_80 ISA ?, compute_90 ISA 10.0, compute_90 ISA 9.0 "
        "(driver >= 13.0); device 9.0."
    )


def test_each_entry_point_is_diagnosed_on_its_own() -> None:
    passing = prediction(own("sm_90", "compute_90"))
    failing = predict.Prediction("b", H200, (), passing.native, passing.jit, ())
    runs = [
        run(ExecPath.NATIVE),
        run(ExecPath.JIT),
        run(ExecPath.NATIVE, 1, "x\n", name="b"),
        run(ExecPath.JIT, 1, "x\n", name="b"),
    ]
    assert predict.diagnose(runs, [passing, failing]) == [
        (
            "b: both paths fail (native: exit status 1: x; JIT: exit status 1: x): investigate the "
            "toolchain, runtime libraries and device state using these errors. No inspected device "
            "code; device 9.0."
        )
    ]


def test_several_own_artifacts_are_named_in_the_excuse_and_the_proof() -> None:
    sources = (
        own("sm_90", "compute_90", name="libone.so"),
        own("sm_90", "compute_90", name="libtwo.so"),
        vendor("libtorch_cuda.so", "sm_90"),
    )
    p = prediction(*sources)
    proved = frozenset({"libone.so", "libtwo.so"})
    assert predict.excuse(run(ExecPath.JIT, 1, NO_IMAGE), [p], proved) == (
        "as predicted: libtorch_cuda.so ships no PTX for 9.0, so the whole program cannot run; "
        "the project's own PTX (libone.so, libtwo.so) loads under forced JIT"
    )
    assert predict.excuse(run(ExecPath.JIT, 1, NO_IMAGE), [p], frozenset({"libone.so"})) is None
    assert predict.paths_proved(
        [run(ExecPath.NATIVE), run(ExecPath.JIT, 1, NO_IMAGE)], [p], proved
    )[0].endswith("the project's own PTX (libone.so, libtwo.so) proved by driver module load")


# --- a kernel that died on the device: the trap stubs it runs there ----------------------
LAUNCH_FAILED = "CUDA error: unspecified launch failure\n"
ILLEGAL = "CUDA error: an illegal instruction was encountered\n"
AMPERE = "_Z15only_for_amperePf"  # #if __CUDA_ARCH__ == 800 ... #else __trap()
HOPPER = "_Z14only_for_hopperPf"  # #if __CUDA_ARCH__ >= 900 ... #else __trap()
ZERO = "_Z4zeroPf"  # #if __CUDA_ARCH__ == 800 ... #endif: an empty body elsewhere


def sass_of(
    spec: str, kernels: tuple[str, ...], traps: tuple[str, ...] = (), empty: tuple[str, ...] = ()
) -> DeviceEntry:
    """One SASS entry whose ``traps`` are trap stubs and ``empty`` do nothing there."""
    return DeviceEntry(Kind.SASS, Target.parse(spec), kernels, traps=traps, empty=empty)


def stubbed(*found: DeviceEntry, name: str = "app", mine: bool = True) -> Source:
    return Source(name, Listing(found), own=mine)


GUARDED = stubbed(
    sass_of("sm_80", (AMPERE, HOPPER, ZERO), traps=(HOPPER,)),
    sass_of("sm_86", (AMPERE, HOPPER, ZERO), traps=(AMPERE, HOPPER), empty=(ZERO,)),
    sass_of("sm_90", (AMPERE, HOPPER, ZERO), traps=(AMPERE,), empty=(ZERO,)),
)
# A vendor library's trap stubs are its own affair: the diagnosis names the project's.
VENDOR_TRAP = stubbed(sass_of("sm_90", ("_Z1vPf",), traps=("_Z1vPf",)), name="libv.so", mine=False)
# Trap stubs and an empty body, none of them a trap stub that 9.0 runs.
NOT_HERE = stubbed(
    sass_of("sm_80", (HOPPER, ZERO), traps=(HOPPER,)),
    sass_of("sm_90", (HOPPER, ZERO), empty=(ZERO,)),
)
NAMED = (
    "The kernel died on the device; trap stubs 9.0 runs (an architecture guard that excludes "
    "it): only_for_ampere(float*) in app (sm_86 sm_90 SASS)."
)


def test_a_kernel_that_died_names_the_trap_stubs_this_device_runs() -> None:
    # only_for_hopper traps only where 9.0 never runs it; zero is empty, not a trap.
    runs = [run(ExecPath.NATIVE, 1, LAUNCH_FAILED), run(ExecPath.JIT, 1, ILLEGAL)]
    assert predict.diagnose(runs, [prediction(GUARDED, VENDOR_TRAP)]) == [
        (
            "app: both paths fail (native: CUDA error: unspecified launch failure (error 719); "
            "JIT: CUDA error: an illegal instruction was encountered (error 715)): investigate "
            "the toolchain, runtime libraries and device state using these errors. app: SASS "
            "sm_80 sm_86 sm_90; PTX none | 1 library outside the project, with SASS for 9.0 and "
            f"without PTX for it (loaded-libraries.txt lists it); device 9.0. {NAMED}"
        )
    ]
    # One path that died is enough; the other passed.
    runs = [run(ExecPath.NATIVE), run(ExecPath.JIT, 1, ILLEGAL)]
    (found,) = predict.diagnose(runs, [prediction(GUARDED)])
    assert found.endswith(f"Inspection said so: app: 3 kernels without PTX that JIT-compiles "
                          f"for 9.0. {NAMED}")  # fmt: skip


@pytest.mark.parametrize(
    ("sources", "native", "jit"),
    [
        ((GUARDED,), (1, NO_IMAGE), (1, "segfault\n")),  # no run died on the device
        ((NOT_HERE,), (1, LAUNCH_FAILED), (0, "PASS\n")),  # it died, but 9.0 runs no trap stub
        ((VENDOR_TRAP,), (1, LAUNCH_FAILED), (1, ILLEGAL)),  # only a vendor library's
    ],
)
def test_no_trap_stubs_are_named_unless_a_run_died_and_the_project_has_some(
    sources: tuple[Source, ...], native: tuple[int, str], jit: tuple[int, str]
) -> None:
    (found,) = predict.diagnose(
        [run(ExecPath.NATIVE, *native), run(ExecPath.JIT, *jit)], [prediction(*sources)]
    )
    assert "trap stubs" not in found
    assert found.endswith("device 9.0.")


def test_three_trap_stubs_are_named_and_a_fourth_is_counted() -> None:
    def traps(name: str, *kernels: str) -> Source:
        return stubbed(sass_of("sm_90", kernels, traps=kernels), name=name)

    died = [run(ExecPath.NATIVE, 1, LAUNCH_FAILED), run(ExecPath.JIT, 1, LAUNCH_FAILED)]
    three = (traps("app", "_Z1aPf", "_Z1bPf"), traps("libext.so", "_Z1cPf"))
    (found,) = predict.diagnose(died, [prediction(*three)])
    assert found.endswith(
        "excludes it): a(float*) in app (sm_90 SASS), b(float*) in app (sm_90 SASS), "
        "c(float*) in libext.so (sm_90 SASS)."
    )
    four = (traps("app", "_Z1aPf", "_Z1bPf"), traps("libext.so", "_Z1cPf", "_Z1dPf"))
    (found,) = predict.diagnose(died, [prediction(*four)])
    assert found.endswith(
        "excludes it): a(float*) in app (sm_90 SASS), b(float*) in app (sm_90 SASS), "
        "c(float*) in libext.so (sm_90 SASS) and 1 more."
    )

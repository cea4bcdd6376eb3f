"""The pipeline as a fold: a failed stage stops the rest with the reason, ``--stop-after``
stops where it says, a step that raises is accounted for, and nothing in it is mutable."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate.config import Config
from gate.container.place import HOST
from gate.errors import ExitCode, GateError
from gate.evidence import EvidenceDir
from gate.pipeline import beside, fold, outcomes
from gate.pipeline.fold import Context, Ended, NotRun, Outcomes, Step
from gate.pipeline.options import RunOptions
from gate.pipeline.progress import StageProgress
from gate.rules.verdict import StageStatus

pytestmark = pytest.mark.unit


@pytest.fixture
def evidence(tmp_path: Path) -> Iterator[EvidenceDir]:
    folder = EvidenceDir.create(tmp_path / "evidence")
    yield folder
    folder.release()


def context(evidence: EvidenceDir, tmp_path: Path, stop_after: str | None = None) -> Context:
    config = Config(project_dir=tmp_path, smoke=False)
    said: list[str] = []
    return Context(
        RunOptions(stop_after=stop_after),
        config,
        evidence,
        tmp_path,
        StageProgress(said.append),
        HOST,
        lambda: None,
    )


def stage(name: str, failure: GateError | None = None, exit_code: ExitCode | None = None) -> Step:
    """A step that ends stage ``name``, with ``failure`` when given."""

    def step(ctx: Context, _: Outcomes) -> Ended:
        began = ctx.progress.start(name)
        return Ended(name, NotRun((), failure), began, exit_code=exit_code)

    return step


FIVE = ("environment", "probe", "build", "inspect", "execute")


def statuses(ctx: Context) -> list[tuple[str, StageStatus, str]]:
    return [(s.name, s.status, s.detail) for s in ctx.progress.stages]


def test_every_stage_runs_in_order_and_is_kept(evidence: EvidenceDir, tmp_path: Path) -> None:
    ctx = context(evidence, tmp_path)
    done = list(fold.fold(ctx, [(n, stage(n)) for n in FIVE]))[-1]
    assert [s[:2] for s in statuses(ctx)] == [(n, StageStatus.RAN) for n in FIVE]
    assert [name for name, _ in done.steps] == list(FIVE)
    assert done.remaining() == []


def test_a_failed_stage_skips_the_rest_with_the_reason(
    evidence: EvidenceDir, tmp_path: Path
) -> None:
    ctx = context(evidence, tmp_path)
    ran: list[str] = []

    def never(ctx: Context, _: Outcomes) -> Ended:
        ran.append("never")
        raise AssertionError("a step after a failure ran")

    steps = [
        ("environment", stage("environment")),
        ("probe", stage("probe", GateError("no device here"), ExitCode.NO_DEVICE)),
        ("build", never),
    ]
    done = list(fold.fold(ctx, steps))[-1]
    assert ran == []
    assert statuses(ctx)[1] == ("probe", StageStatus.FAILED, "no device here")
    assert statuses(ctx)[2:] == [
        (n, StageStatus.SKIPPED, "the probe stage failed") for n in FIVE[2:]
    ]
    assert {s.exit_code for s in ctx.progress.stages[2:]} == {int(ExitCode.NO_DEVICE)}
    # The failure is a check of its own, and every run is said not to have run.
    assert [c.name for c in ctx.progress.checks if c.failed] == ["probe stage"]
    assert done.remaining() == list(FIVE[2:])


def test_stop_after_skips_the_rest_with_that_reason(evidence: EvidenceDir, tmp_path: Path) -> None:
    ctx = context(evidence, tmp_path, stop_after="build")
    list(fold.fold(ctx, [(n, stage(n)) for n in FIVE]))
    reason = "stopped after the build stage (--stop-after)"
    assert statuses(ctx)[3:] == [(n, StageStatus.SKIPPED, reason) for n in FIVE[3:]]
    assert [s.status for s in ctx.progress.stages[:3]] == [StageStatus.RAN] * 3


def test_a_step_that_raises_leaves_the_outcomes_before_it(
    evidence: EvidenceDir, tmp_path: Path
) -> None:
    ctx = context(evidence, tmp_path)

    def broken(ctx: Context, _: Outcomes) -> Ended:
        raise GateError("broken probe")

    done = Outcomes()
    with pytest.raises(GateError):
        for done in fold.fold(ctx, [("environment", stage("environment")), ("probe", broken)]):  # noqa: B007
            pass
    assert done.remaining() == list(FIVE[1:])
    fold.internal(ctx.progress, done.remaining(), GateError("broken probe"))
    assert statuses(ctx)[1] == ("probe", StageStatus.FAILED, "broken probe")
    assert statuses(ctx)[2:] == [
        (n, StageStatus.SKIPPED, "the probe stage failed") for n in FIVE[2:]
    ]


def test_found_is_derived_from_the_outcomes(evidence: EvidenceDir, tmp_path: Path) -> None:
    ctx = context(evidence, tmp_path)
    done = list(fold.fold(ctx, [("environment", stage("environment"))]))[-1]
    # The environment stage's outcome is not an EnvironmentOutcome here: the defaults.
    found = outcomes.found(done, ctx.options)
    assert found.builds == ()
    assert found.notes == ()
    assert found.device.target is None


def test_nothing_in_the_fold_is_assigned_after_it_is_built() -> None:
    frozen = (
        fold.Context,
        fold.Ended,
        fold.NotRun,
        fold.Outcomes,
        outcomes.Found,
        outcomes.Prepared,
        outcomes.ImageRead,
        outcomes.Ready,
        beside.Beside,
    )
    for kind in frozen:
        assert dataclasses.is_dataclass(kind)
        assert getattr(kind, "__dataclass_params__").frozen, kind  # noqa: B009 - no stub has it
    before = Outcomes()
    after = before.add("environment", None)
    assert before.steps == ()
    assert after.steps == (("environment", None),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.steps = ()  # type: ignore[misc]


def test_a_stage_ends_at_its_first_step_that_says_so(evidence: EvidenceDir, tmp_path: Path) -> None:
    """Execute skipped without a device: its later step (the runs) never runs."""
    ctx = context(evidence, tmp_path)

    def skipped(ctx: Context, _: Outcomes) -> Ended:
        reason = "no CUDA device; see the probe stage"
        return Ended("execute", NotRun(()), exit_code=ExitCode.NO_DEVICE, skipped=reason)

    def never(ctx: Context, _: Outcomes) -> Ended:
        raise AssertionError("a step of an ended stage ran")

    steps = [(n, stage(n)) for n in FIVE[:4]] + [("execute", skipped), ("execute", never)]
    done = list(fold.fold(ctx, steps))[-1]
    assert statuses(ctx)[-1] == (
        "execute",
        StageStatus.SKIPPED,
        "no CUDA device; see the probe stage",
    )
    assert ctx.progress.stages[-1].exit_code == int(ExitCode.NO_DEVICE)
    assert done.remaining() == []


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[[artifact]]\npath = "k.so"\nrequire_launch = ["scale"]\n',
            (
                "launch coverage not measured: no CUDA device to run on (asked for by "
                "artifact[0].require_launch)"
            ),
        ),
        (
            '[policy]\nlaunch_coverage = "warn"\n',
            (
                "launch coverage not measured: no CUDA device to run on (asked for by "
                "policy.launch_coverage)"
            ),
        ),
        ('[policy]\nlaunch_coverage = "off"\n', None),
        ("", None),
    ],
)
def test_without_a_device_launch_coverage_asked_for_is_said_not_done(
    toml: str, said: str | None
) -> None:
    from gate.config import parse_text
    from gate.pipeline.stages import unmeasured
    from gate.rules.targets import Capability

    config = parse_text(toml, Path("cuda-gate.toml"))
    assert unmeasured(config, None) == ((said,) if said else ())
    assert unmeasured(config, Capability(9, 0)) == ()

"""A release policy, as data: what each finding about an artifact's device code does to the run.

The vocabulary is the one release engineers already use, EasyBuild's CUDA sanity check
(easybuild-framework ``EasyBlock.sanity_check_cuda``), plus the gate's own findings:

=======================  ================================  ==============================
key (``[policy]``)       EasyBuild                         default (today's gate)
=======================  ================================  ==============================
``missing_sass``         missing device code is an error;  ``"fail"``
                         ``error_on_failed_checks=False``
                         makes it a warning
``ptx_as_device_code``   ``accept_ptx_as_devcode``: PTX     ``false``
                         that JIT-compiles for the
                         missing cc stands in for it
``missing_ptx``          (no such check)                    ``"fail"``: PTX for every
                                                            required target
``ptx_for_highest``      PTX for the highest cc, unless     ``"off"`` (``missing_ptx``
                         ``accept_missing_ptx``             already asks for it)
``surplus_targets``      device code for ccs not asked      ``"allow"``
                         for: a warning, an error with
                         ``strict``
``trap_stubs``           --                                 ``"fail"``
``launch_coverage``      --                                 ``"off"``
``required_devices``     --                                 none
=======================  ================================  ==============================

EasyBuild's own defaults read ``missing_ptx = "allow"``, ``ptx_for_highest = "fail"``,
``surplus_targets = "warn"``. How each rule reads targets:

1. PTX stands in for a required target's SASS (:func:`stand_ins`) when it satisfies the
   target (gate.rules.require), or, for a plain or device requirement, when it
   JIT-compiles for the target's capability (EasyBuild: PTX for a lower or equal cc).
   An ``a``/``f`` requirement names features that older PTX lacks: only its own stands in.
2. Surplus (:func:`surplus`): SASS that satisfies no required target. As in EasyBuild
   only device code (SASS) counts: PTX for a lower target is how forward compatibility
   and ``ptx_as_device_code`` work, never surplus.
3. The highest required target (:func:`highest_ptx`): the greatest SM number among the
   requirements; its PTX must be the plain ``compute_N`` (exactly N, as EasyBuild
   asks for the highest cc), the only PTX that JIT-compiles for later majors.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.errors import BadInputError, ConfigError
from gate.rules.baseline import Policy, Rule
from gate.rules.compat import Form, ptx_jits_for
from gate.rules.require import Requirement
from gate.rules.stubs import Severity
from gate.rules.targets import Capability, Target, Variant
from gate.rules.verdict import CheckState


class Action(enum.Enum):
    """What a finding does: nothing (``off``, ``allow``), a warning, or a failure."""

    OFF = "off"
    ALLOW = "allow"
    WARN = "warn"
    FAIL = "fail"

    @property
    def judged(self) -> bool:
        """Whether the finding gets a check at all."""
        return self in (Action.WARN, Action.FAIL)

    def state(self, *, found: bool) -> CheckState:
        """The check's state: passed when nothing was found or the finding is allowed."""
        if not found or not self.judged:
            return CheckState.PASSED
        return CheckState.FAILED if self is Action.FAIL else CheckState.WARNED


FAIL_WARN = (Action.FAIL, Action.WARN)
ALLOW_WARN_FAIL = (Action.ALLOW, Action.WARN, Action.FAIL)
OFF_WARN_FAIL = (Action.OFF, Action.WARN, Action.FAIL)
# Each action key, the values it takes (the first is not always the default).
ACTIONS: dict[str, tuple[Action, ...]] = {
    "missing_sass": FAIL_WARN,
    "missing_ptx": (Action.FAIL, Action.WARN, Action.ALLOW),
    "surplus_targets": ALLOW_WARN_FAIL,
    "ptx_for_highest": OFF_WARN_FAIL,
    "trap_stubs": FAIL_WARN,
    "launch_coverage": OFF_WARN_FAIL,
}
FLAGS = ("ptx_as_device_code",)
TABLES = ("required_devices", "baseline")
KEYS = (*ACTIONS, *FLAGS, *TABLES)


@dataclass(frozen=True)
class ReleasePolicy:
    """The effective ``[policy]``: every default is what the gate did before it existed."""

    missing_sass: Action = Action.FAIL
    ptx_as_device_code: bool = False
    missing_ptx: Action = Action.FAIL
    surplus_targets: Action = Action.ALLOW
    ptx_for_highest: Action = Action.OFF
    trap_stubs: Action = Action.FAIL
    launch_coverage: Action = Action.OFF
    # Per runner class, the capabilities every artifact must have a route on.
    required_devices: tuple[tuple[str, tuple[Capability, ...]], ...] = ()
    baseline: Policy = field(default_factory=Policy)

    def devices_for(self, runner_class: str | None) -> tuple[Capability, ...]:
        """The capabilities required on ``runner_class`` (none for a class not listed)."""
        return dict(self.required_devices).get(runner_class or "", ())

    def to_json(self) -> dict[str, Any]:
        """As result.json holds it (``policy``)."""
        return {
            **{key: getattr(self, key).value for key in ACTIONS},
            "ptx_as_device_code": self.ptx_as_device_code,
            "required_devices": {c: [str(d) for d in caps] for c, caps in self.required_devices},
            "baseline": {r.value: self.baseline.level(r).value for r in Rule},
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> ReleasePolicy:
        """The inverse of :meth:`to_json`; BadInputError naming ``where``."""
        if not isinstance(data, dict) or set(data) != set(KEYS):
            raise BadInputError(f"{where}: 'policy' is not a release policy object")
        try:
            actions = {key: Action(data[key]) for key in ACTIONS}
            devices = tuple(
                (name, tuple(Capability.parse(c) for c in caps))
                for name, caps in data["required_devices"].items()
            )
        except (ConfigError, ValueError, AttributeError, TypeError) as e:
            raise BadInputError(f"{where}: 'policy' holds a value it cannot: {e}") from e
        if not isinstance(data["baseline"], dict):
            raise BadInputError(f"{where}: 'policy.baseline' is not an object")
        try:
            baseline = Policy.from_mapping(data["baseline"], f"{where}: 'policy'")
        except ConfigError as e:  # names the file and the table already
            raise BadInputError(e.message) from e
        if not isinstance(data["ptx_as_device_code"], bool):
            raise BadInputError(f"{where}: 'policy.ptx_as_device_code' is not a boolean")
        return cls(
            **actions,
            ptx_as_device_code=data["ptx_as_device_code"],
            required_devices=devices,
            baseline=baseline,
        )


DEFAULT_POLICY = ReleasePolicy()


def stand_ins(requirement: Requirement, ptx: Iterable[Target]) -> tuple[Target, ...]:
    """The PTX targets among ``ptx`` that stand in for ``requirement``'s SASS (rule 1)."""
    cap = requirement.target.capability
    loose = requirement.form in (Form.PLAIN, Form.DEVICE)
    return tuple(
        t
        for t in dict.fromkeys(ptx)
        if requirement.satisfied_by(t)
        or (loose and t.variant is Variant.NONE and ptx_jits_for(t, cap))
    )


def stub_severity(severity: Severity, trap_stubs: Action) -> Severity:
    """A trap stub's severity under ``trap_stubs``: ``warn`` makes a failure a warning."""
    if severity is Severity.FAIL and trap_stubs is Action.WARN:
        return Severity.WARN
    return severity


def surplus(required: Sequence[Requirement], sass: Iterable[Target]) -> tuple[Target, ...]:
    """The SASS targets that satisfy none of ``required`` (rule 2), by SM number."""
    extra = {t for t in sass if not any(r.satisfied_by(t) for r in required)}
    return tuple(sorted(extra, key=lambda t: (t.number, t.variant.value)))


def highest_ptx(required: Sequence[Requirement]) -> Target | None:
    """The PTX the highest required target needs for forward compatibility (rule 3)."""
    if not required:
        return None
    number = max(r.target.number for r in required)
    return Target.from_number(number, virtual=True)


def missing_highest(required: Sequence[Requirement], ptx: Iterable[Target]) -> Target | None:
    """The highest required target's PTX when ``ptx`` lacks it, else None."""
    wanted = highest_ptx(required)
    return wanted if wanted is not None and wanted not in set(ptx) else None

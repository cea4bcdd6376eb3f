"""What satisfies a required target: one table (``compat.json`` ``requirements``), cited.

A requirement has a *form*. A configured or named target keeps the form it is written
in (``sm_90``, ``sm_100f``, ``sm_90a``); the probed device's own requirement is of the
form ``device``. Code for the same SM number satisfies it when its variant is in the
table's row for that form, separately for SASS and for PTX:

=============  ==========================  ================================
required       SASS that satisfies it      PTX that satisfies it
=============  ==========================  ================================
``sm_XY``      ``sm_XY``, ``sm_XYf``       ``compute_XY``
``sm_XYf``     ``sm_XYf``                  ``compute_XYf``
``sm_XYa``     ``sm_XYa``                  ``compute_XYa``
device X.Y     ``sm_XY``, ``f``, ``a``     ``compute_XY``, ``f``, ``a``
=============  ==========================  ================================

Why: ``sm_XYa`` code uses features (wgmma, setmaxnreg, tcgen05) that plain and family
code lack, and runs on X.Y only; ``sm_XYf`` code runs on every family member, which
``sm_XYa`` does not, and has features plain code lacks; a family build serves every
device a plain build of X.Y runs on (checked against the device table at load), but
only plain PTX JIT-compiles for later majors, the reason PTX is shipped at all. The
device in front needs code built for its own capability, and every variant runs there.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.rules.compat import Form, rules
from gate.rules.targets import Capability, Target, Variant


@dataclass(frozen=True)
class Requirement:
    """A target the artifacts must carry, as SASS and as PTX, in a given form."""

    target: Target  # the SASS form: sm_90a, sm_121
    form: Form

    @classmethod
    def of_target(cls, target: Target) -> Requirement:
        """A named target: its own form decides (``sm_90a`` needs ``sm_90a``)."""
        sass = target.as_sass()
        return cls(sass, Form.of(sass.variant))

    @classmethod
    def of_device(cls, cap: Capability) -> Requirement:
        """The probed device's: code built for its capability, any variant."""
        return cls(cap.sm(), Form.DEVICE)

    def satisfied_by(self, code: Target) -> bool:
        """Whether SASS (``sm_``) or PTX (``compute_``) for ``code`` satisfies this."""
        if code.number != self.target.number:
            return False
        return rules().satisfies(ptx=code.virtual, form=self.form, variant=code.variant)

    def accepted(self, *, ptx: bool) -> tuple[Target, ...]:
        """The targets that satisfy it, as SASS or as PTX, in the table's order (no ``f``
        target where its SM number has no family: there is no ``sm_90f``)."""
        compat = rules()
        row = compat.satisfying[ptx, self.form]
        plain = self.target.plain()
        candidates = [Target(plain.major, plain.minor, v, virtual=ptx) for v in _ORDER]
        return tuple(
            t
            for t in candidates
            if t.variant in row and (t.variant is not Variant.FAMILY or compat.has_family(t.number))
        )

    def sass_label(self) -> str:
        """``sm_90a``, or ``device 9.0`` for the probed device's requirement."""
        if self.form is Form.DEVICE:
            return f"device {self.target.capability}"
        return str(self.target)

    def ptx_label(self) -> str:
        """``compute_90a``, or ``device 9.0``."""
        if self.form is Form.DEVICE:
            return f"device {self.target.capability}"
        return str(self.target.as_ptx())


_ORDER = (Variant.NONE, Variant.FAMILY, Variant.ARCH)  # how accepted() lists them


def why_not(requirement: Requirement, present: tuple[Target, ...], *, ptx: bool) -> str:
    """Why none of ``present`` (the artifact's SASS or PTX targets) satisfies ``requirement``."""
    kind = "PTX" if ptx else "SASS"
    label = requirement.ptx_label() if ptx else requirement.sass_label()
    accepted = " or ".join(str(t) for t in requirement.accepted(ptx=ptx))
    listed = " ".join(str(t) for t in present) or "none"
    near = [t for t in present if t.number == requirement.target.number]
    if not near:
        return f"no {kind} for {label} (needs {accepted}); {kind} targets: {listed}"
    return (
        f"no {kind} for {label}: {' '.join(str(t) for t in near)} present, but {label} needs "
        f"{accepted}: {_reason(requirement.form, ptx=ptx)}; {kind} targets: {listed}"
    )


def _reason(form: Form, *, ptx: bool) -> str:
    """Why the other variants of the same SM number do not stand for ``form``."""
    if form is Form.ARCH:
        return "plain and family code lack the arch-specific features (wgmma, setmaxnreg, tcgen05)"
    if form is Form.FAMILY:
        return "plain code lacks the family features, and arch-specific code runs on X.Y only"
    if ptx:
        return "a/f PTX JIT-compiles for its own devices only, never for a later major"
    return "arch-specific code runs on X.Y only (sm_120a does not run on 12.1)"

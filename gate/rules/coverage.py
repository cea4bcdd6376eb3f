"""Which of an artifact's kernels the entry points really launched, and whether that is enough.

A kernel an artifact carries is *launched* on a path when some process of some entry
point launched a function of that symbol on that path (the launch recorder's counts).
Coverage is informative unless the configuration requires launches
(``require_launch``): ``"all"`` asks for every kernel carried; a list asks, for each
name, that at least one kernel it names (gate.rules.kernels: plain, qualified,
templated or mangled) was launched. A required name that names no kernel carried is
a failure of its own: the requirement could never be met.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gate.rules.kernels import matching, parse

ALL = "all"


@dataclass(frozen=True)
class Coverage:
    """One artifact's kernels on one path: carried, launched (with counts), never launched."""

    carried: tuple[str, ...]  # symbols, sorted
    launched: tuple[tuple[str, int], ...]  # (symbol, launches), carried ones only, sorted
    never: tuple[str, ...]  # symbols, shortest demangled name first

    @property
    def figures(self) -> str:
        """``3/5``: kernels launched / kernels carried."""
        return f"{len(self.launched)}/{len(self.carried)}"


@dataclass(frozen=True)
class Unmet:
    """One part of ``require_launch`` that the runs did not satisfy."""

    wanted: str  # the configured name, or "all"
    kernels: tuple[str, ...]  # the symbols it names that never ran (none: it names nothing)


def coverage(carried: Iterable[str], launches: Mapping[str, int]) -> Coverage:
    """The coverage of the kernels ``carried`` by the launch counts ``launches`` (by symbol)."""
    kernels = tuple(sorted(set(carried)))
    launched = tuple((s, launches[s]) for s in kernels if launches.get(s, 0) > 0)
    ran = {s for s, _ in launched}
    never = sorted((s for s in kernels if s not in ran), key=lambda s: (len(parse(s).shown), s))
    return Coverage(kernels, launched, tuple(never))


def unmet(required: str | tuple[str, ...], cov: Coverage) -> tuple[Unmet, ...]:
    """The parts of ``required`` (``"all"`` or names) that ``cov`` leaves unsatisfied."""
    if required == ALL:
        return (Unmet(ALL, cov.never),) if cov.never else ()
    ran = {s for s, _ in cov.launched}
    out: list[Unmet] = []
    for wanted in required:
        named = matching(wanted, cov.carried)
        if not named:
            out.append(Unmet(wanted, ()))
        elif not ran.intersection(named):
            out.append(Unmet(wanted, named))
    return tuple(out)

"""How counts of kernels and the routes they take are said, in English.

One place for the phrases that `inspect`, the loaded-library checks and the run's
summary share: a count agrees with its noun (``1 kernel``, ``3 kernels``), "no code"
says of how many kernels and which (``no code for 3 of 12 kernels (k1, k2, k3)``), and
a route reads as what a kernel does on the device (``3 kernels from exact SASS
(sm_90)``, ``1 kernel with no code``), never a bare ``nothing: 1 kernel``.

Presentation, yet below the other renderers (layer 3, over the rules alone): the
container images' lines and an audit's verdict phrases are said in these words too.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.rules import kernels
from gate.rules.coverage import Coverage, Unmet
from gate.rules.routes import Path, Route
from gate.rules.targets import Capability

NAMES_SHOWN = 3  # kernels named in a phrase; the rest are counted
_NAME_WIDTH = 60


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 kernel``, ``3 kernels``, ``1,200 kernels``: a count with its noun agreeing."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def short_name(symbol: str) -> str:
    """A kernel as a phrase names it: ``scale``, ``silu<float>``; the symbol when it
    cannot be read; at most 60 characters."""
    return _cut(kernels.parse(symbol).function_args or symbol)


def _cut(name: str) -> str:
    return name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 3] + "..."


def some_names(symbols: Sequence[str], shown: int = NAMES_SHOWN) -> str:
    """``k1, k2, k3`` or ``k1, k2, k3 and 4 more``: the first ``shown`` by their short names,
    two overloads by their whole names (:func:`gate.rules.kernels.readable`)."""
    said = kernels.readable(symbols[:shown], short=True)
    names = ", ".join(_cut(said[s]) for s in symbols[:shown])
    rest = len(symbols) - shown
    return f"{names} and {rest:,} more" if rest > 0 else names


def no_code_for(missing: Sequence[str], expected: int) -> str:
    """What lacks code on a device, of the ``expected`` kernels built for it.

    ``no code for its 1 kernel``, ``no code for any of its 12 kernels`` (every one), ``no
    code for 3 of 12 kernels (k1, k2, k3)`` (which ones, when some do have code); the
    edges read as English too: ``no kernels``, ``code for all 12 kernels``.
    """
    if expected <= 0:
        return "no kernels"
    if not missing:
        return "code for its 1 kernel" if expected == 1 else f"code for all {expected:,} kernels"
    if len(missing) >= expected:
        return (
            "no code for its 1 kernel"
            if expected == 1
            else (f"no code for any of its {expected:,} kernels")
        )
    return f"no code for {len(missing):,} of {plural(expected, 'kernel')} ({some_names(missing)})"


_HOW = {
    Path.EXACT_SASS: "from",
    Path.COMPATIBLE_SASS: "from",
    Path.FAMILY_SASS: "from",
    Path.PTX_JIT: "through",
    Path.TILE_IR: "through",
}


def kernels_by(path: Path, count: int, route: str | None = None) -> str:
    """``3 kernels from exact SASS (sm_90)``, ``1 kernel through PTX JIT (...)``, ``2 kernels
    with no code``, ``1 kernel only for other devices``.

    ``route`` is the route as :meth:`gate.rules.routes.Route.describe` says it (with its
    target); without it, the path's name alone.
    """
    return f"{plural(count, 'kernel')} {reached(path, route)}"


def reached(path: Path, route: str | None = None) -> str:
    """How code reaches the device by ``path``: ``from exact SASS (sm_90)``, ``through PTX
    JIT (...)``, ``with no code``, ``only for other devices``."""
    if path is Path.NONE:
        return "with no code"
    if path is Path.OTHER_DEVICES:
        return str(path.value)
    return f"{_HOW[path]} {route or path.value}"


def library_on(route: Route, cap: Capability, *, runs: bool | None, has_ptx: bool) -> str:
    """How one loaded library runs on ``cap``, from its best route (per target) and whether
    anything (the project's: every kernel) runs: ``runs from exact SASS (sm_90); no PTX for
    9.0: forced JIT cannot run its kernels``, ``NOTHING RUNS HERE (no code for 9.0)``."""
    if runs is False:
        why = {
            Path.NONE: f"no code for {cap}",
            Path.OTHER_DEVICES: "only a/f builds for other devices",
            Path.PTX_JIT: f"its PTX needs a newer driver: {route.describe()}",
        }.get(route.path, f"not every kernel has code for {cap}")
        return f"NOTHING RUNS HERE ({why})"
    said = f"runs {reached(route.path, route.describe())}"
    return said if has_ptx else f"{said}; no PTX for {cap}: forced JIT cannot run its kernels"


# How many never-launched kernels a one-line summary names before "and N more".
SHOWN = 5


def never_shown(cov: Coverage, limit: int = SHOWN) -> str:
    """The never-launched kernels as people read them (demangled), a few and a count."""
    said = kernels.readable(cov.never[:limit])
    names = [said[s] for s in cov.never[:limit]]
    more = len(cov.never) - limit
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def coverage_line(cov: Coverage) -> str:
    """``3 of 5 kernels launched; never launched: a(float*), b and 1 more``."""
    head = f"{len(cov.launched)} of {len(cov.carried)} kernels launched"
    if not cov.never:
        return head
    return f"{head}; never launched: {never_shown(cov)}"


def unmet_line(unmet: Unmet) -> str:
    """What to tell the user about one part of ``require_launch`` the runs left unmet."""
    if not unmet.kernels:
        return f"{unmet.wanted}: names no kernel this artifact carries"
    said = kernels.readable(unmet.kernels[:SHOWN])
    shown = ", ".join(said[s] for s in unmet.kernels[:SHOWN])
    more = len(unmet.kernels) - SHOWN
    return f"{unmet.wanted}: never launched: {shown}" + (f" and {more} more" if more > 0 else "")

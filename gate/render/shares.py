"""How a distribution's kernels on a device are said: the share of them each route takes.

``partly: no code for 2 of 3 kernels (b1, c1); exact SASS (sm_90) for 1``: the majority
first, counted of the whole, the rest by their counts; every share without code named
(a few kernels and a count). The shares and what they add up to are the decision core's
(:mod:`gate.rules.shares`).
"""

from __future__ import annotations

from gate.render.wording import plural, some_names
from gate.rules.routes import Path
from gate.rules.shares import Reach, Share, Shares

ROUTES_SHOWN = 3  # routes a distribution's line gives before counting the rest


def share_words(share: Share, of: int | None = None) -> str:
    """One route's share of the kernels: ``exact SASS (sm_90) for 12``, ``no code for 2
    of 3 kernels (b1, c1)`` (each name once, however many files hold it), ``3 only for
    other devices``; ``of``: the whole count, said with the first share."""
    count = f"{share.count:,} of {plural(of, 'kernel')}" if of is not None else f"{share.count:,}"
    path = share.route.path
    if path is Path.NONE:
        # One name in two files is two kernels, named once.
        return f"no code for {count} ({some_names(tuple(dict.fromkeys(share.kernels)))})"
    if path is Path.OTHER_DEVICES:
        return f"{count} only for other devices"
    return f"{share.route.describe()} for {count}"


def shares_text(shares: Shares, how: Reach) -> str:
    """A distribution's kernels on a device, the majority first: ``partly: no code for 2
    of 3 kernels (b1, c1); exact SASS (sm_90) for 1``, ``runs: compatible SASS (sm_120)
    for 2,988 of 3,000 kernels; exact SASS (sm_121a) for 12``; one route that runs them
    all reads ``native: exact SASS (sm_90) for all 3 kernels``. Past a few routes, those
    that run are counted; every one without code is said."""
    first, *rest = shares.shares
    if how is Reach.RUNS and not rest:
        native = "native: " if first.route.path is Path.EXACT_SASS else ""
        every = "its 1 kernel" if first.count == 1 else f"all {first.count:,} kernels"
        return f"{native}{first.route.describe()} for {every}"
    said = [share_words(first, shares.total)]
    hidden = 0
    for i, share in enumerate(rest, start=1):
        if i < ROUTES_SHOWN or share in shares.missing:
            said.append(share_words(share))
        else:
            hidden += share.count
    if hidden:
        said.append(f"{hidden:,} by other routes")
    return f"{how.value}: {'; '.join(said)}"

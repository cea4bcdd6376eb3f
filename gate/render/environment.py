"""What `cuda-gate inspect` shows for an environment (or a wheel): one line per
distribution per device, the libraries behind a mixed answer, the alternatives of
runtime-selected builds, and a closing summary table (the JSON document:
:mod:`gate.render.environment_json`).

A mixed answer says its bottom line first (``partly: 40 of 52 libraries by exact SASS
(sm_120); 12 with nothing for this device: ...``). Identical artifacts of a distribution
(same targets, same routes on every device) are one line with a count; files without
device code are counted in one line; a line of names ends where the terminal does
(``... and 37 more``, never a name cut); ``verbose`` lists every group and every name.
The answers are the audit's (:mod:`gate.audit.verdicts`); this module only says them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gate.audit.artifact import has_code, target_text, targets_text
from gate.audit.verdicts import DistributionVerdict
from gate.reader.distributions import Owner
from gate.reader.listing import Kind, totals
from gate.reader.sections import PRIMARY_SECTIONS
from gate.render.shares import share_words, shares_text
from gate.render.wording import plural
from gate.rules.environment import Category, DeviceVerdict, Outcome, Part, shortfalls
from gate.rules.shares import reach
from gate.rules.targets import Capability, Version
from gate.rules.variants import Selector, VariantSet

if TYPE_CHECKING:
    pass

_SHOWN = 3  # details and errors shown per line before "+N more" (all with verbose)
_UNBOUNDED = 1 << 30  # a width no line reaches: every name (verbose)
# The summary's columns, in the order of Category (best first).
_COLUMNS = tuple(Category)


def verdict_text(dev: DeviceVerdict) -> str:
    """The verdict phrase for one distribution on one device: its kernels' shares per
    route where they were counted (:func:`gate.render.wording.shares_text`), else what
    its libraries' targets give."""
    if dev.kernels is not None:
        notes = [t for p in dev.parts if (t := selection_text(p))]
        text = shares_text(dev.kernels, reach(dev.kernels, passes=dev.passes))
        return text + (f" {'; '.join(notes)}" if notes else "")
    if dev.category is Category.NO_DEVICE_CODE:
        return "no device code"
    if dev.category is Category.UNREADABLE:
        return "unreadable (see the errors)"
    if dev.category is Category.MIXED:
        counts = dev.counts()
        text = ", ".join(f"{n} {c.value}" for c, n in counts.items())
        return f"mixed: {text}" + _fails(dev)
    details = sorted({_detail(p) for p in dev.parts})
    how = "; ".join(details[:_SHOWN]) + (
        f"; +{len(details) - _SHOWN} more" if len(details) > _SHOWN else ""
    )
    if dev.category is Category.NATIVE:
        how = f"native: {how}"
    notes = [t for p in dev.parts if (t := selection_text(p))]
    return how + (f" {'; '.join(notes)}" if notes else "") + _fails(dev)


def detail(o: Outcome) -> str:
    """``exact SASS (sm_121)``, ``PTX JIT (compute_90, ISA 9.0, driver >= 13.0)``."""
    if o.route is None:
        return o.category.value
    return o.route.describe()


def _detail(p: Part) -> str:
    """A part's route; for nothing, what it has instead."""
    if p.outcome.category is Category.NOTHING and p.targets:
        return f"nothing for this device (has {p.targets})"
    return detail(p.outcome)


def selection_text(part: Part) -> str:
    """How a set's answer depends on what loads it: ``by CUDA runtime 12.8, 13.0``."""
    if part.variants is None or len(part.chosen) == len(part.variants.selectable):
        return ""  # every build gives the same answer: nothing depends on the selection
    if part.variants.rule.selector is Selector.CUDA_RUNTIME:
        runtimes = [
            str(v.runtime) for v in part.variants.selectable if v.label in part.chosen and v.runtime
        ]
        return f"with CUDA runtime {', '.join(runtimes)}" if runtimes else ""
    return f"with {', '.join(f'{c}/' for c in part.chosen)}" if part.chosen else ""


def unmet_lines(v: DistributionVerdict, required: Sequence[Capability]) -> list[str]:
    """One line per required device the distribution cannot run on
    (:func:`gate.rules.environment.shortfalls`)."""
    dist = v.group.distribution
    lines = []
    for short in shortfalls(v.devices, required, v.unnamed):
        failing = short.failing
        shown = ", ".join(failing[:3]) + (f", +{len(failing) - 3} more" if len(failing) > 3 else "")
        # Without names a cubin's kernels are unknown: one with none (nvcc builds one per
        # target for host code) fails by its target alone; --names tells it apart.
        hint = (
            " (judged by targets: --names tells cubins without kernels apart)"
            if short.by_targets
            else ""
        )
        missing = short.kernels.missing if short.kernels is not None else ()
        total = short.kernels.total if short.kernels is not None else 0
        what = (
            "; ".join(share_words(m, total if not i else None) for i, m in enumerate(missing))
            if missing
            else "nothing is known to run there"
            if short.undecided
            else "nothing runs there"
        )
        verb = "is not known to run" if short.undecided else "does not run"
        lines.append(
            f"{dist.name} {dist.version}: {verb} on {short.capability}: {what} in {shown}{hint}"
        )
    return lines


def _fails(dev: DeviceVerdict) -> str:
    if dev.passes or dev.category is not Category.MIXED:
        return ""
    return "; unknown" if dev.undecided else "; does not run"


def console(
    verdicts: Sequence[DistributionVerdict],
    caps: Sequence[Capability],
    *,
    verbose: bool = False,
    runtime: Version | None = None,
    notes: Sequence[Sequence[str]] | None = None,
    width: int | None = None,
) -> str:
    """The whole text report; with ``verbose``, each verdict's ``notes`` (lines, such as
    where in an image its files are) under its block. Lines of names end at ``width``
    (default: the console's, :func:`gate.render.text.width`; no end with ``verbose``)."""
    if width is None:
        from gate.render.text import width as console_width  # noqa: PLC0415  (start-up)

        width = console_width()
    if verbose:
        width = _UNBOUNDED
    noted = [tuple(n) for n in notes] if notes is not None else [()] * len(verdicts)
    if len(noted) != len(verdicts):
        raise ValueError("console: one sequence of notes per verdict")
    both = list(zip(verdicts, noted, strict=True))
    with_code = [v for v in verdicts if v.has_device_code or v.errors]
    without = [v for v in verdicts if not (v.has_device_code or v.errors)]
    notes_with = [n for v, n in both if v.has_device_code or v.errors]
    notes_without = [n for v, n in both if not (v.has_device_code or v.errors)]
    read = sum(len(v.group.reports) for v in verdicts)
    lines = [
        f"{plural(len(with_code), 'distribution')} with device code, {len(without)} without; "
        f"{plural(read, 'artifact')} read"
        + (f"; CUDA runtime {runtime}" if runtime is not None else "")
    ]
    name_w = max([len(v.group.distribution.name) for v in with_code] + [12])
    ver_w = max([len(v.group.distribution.version) for v in with_code] + [7])
    lines.append(f"{'distribution':<{name_w}}  {'version':<{ver_w}}  {'device':<6}  verdict")
    for v, note in zip(with_code, notes_with, strict=True):
        lines += _block(v, (name_w, ver_w, width), verbose, runtime)
        lines += note if verbose else ()
    if without:
        shown = [_title(v) for v in without]
        lines.append(fit(f"no device code ({len(without)})", shown, width))
        for v, note in zip(without, notes_without, strict=True):
            lines += [f"  {_title(v)}", *note] if verbose and note else []
    lines += _summary(verdicts, caps)
    return "\n".join(lines) + "\n"


def _title(v: DistributionVerdict) -> str:
    """``pip 24.0``; a folder (no version) by its name alone."""
    dist = v.group.distribution
    return dist.name if dist.owner is Owner.FOLDER else f"{dist.name} {dist.version}"


def _block(
    v: DistributionVerdict, widths: tuple[int, int, int], verbose: bool, runtime: Version | None
) -> list[str]:
    name_w, ver_w, width = widths
    dist = v.group.distribution
    lines, details = [], []
    if not v.devices:  # no device given: what it carries stands in for a verdict
        lines.append(f"{dist.name:<{name_w}}  {dist.version:<{ver_w}}  {'-':<6}  {carried(v)}")
    for i, dev in enumerate(v.devices):
        name, version = (dist.name, dist.version) if i == 0 else ("", "")
        row = f"{name:<{name_w}}  {version:<{ver_w}}  {dev.capability!s:<6}  "
        # On every row it holds for, as in the JSON's verdict: a row read alone (grep, a
        # device's lines) never passes for a per-kernel answer.
        said = by_target_note(v, dev)
        if dev.category is not Category.MIXED:
            lines.append(row + verdict_text(dev) + said)
            if dev.kernels is not None and len(_routes_of(dev)) > 1:
                details += _mixed_lines(dev, set(), width)
            continue
        text, named = _mixed(dev, width - len(row) - len(said))
        lines.append(row + text + said)
        details += _mixed_lines(dev, named, width)
    for s in v.sets:
        lines += _set_lines(s, v, runtime)
    lines += details
    lines += _count_lines(v)
    if verbose:
        lines += _group_lines(v)
    for error in v.errors[: None if verbose else _SHOWN]:
        lines.append(f"    error: {error}")
    return lines


BY_TARGET = "; by target only (--names: per kernel)"


def by_target_note(v: DistributionVerdict, dev: DeviceVerdict) -> str:
    """:data:`BY_TARGET` where the distribution's verdict on a device was judged by its
    libraries' targets because some library's kernel names were not read; else empty."""
    return BY_TARGET if v.unnamed and dev.kernels is None and dev.parts else ""


def carried(v: DistributionVerdict) -> str:
    """``SASS sm_75..sm_120 (5), PTX compute_90``: the targets of all its artifacts."""
    found: dict[Kind, set[tuple[int, str, str]]] = {kind: set() for kind in Kind}
    for report in v.group.reports:
        if report.error is None:
            for kind in Kind:
                found[kind] |= {
                    (t.number, t.variant.value, target_text(kind, t))
                    for t in report.listing.targets(kind)
                }
    parts = []
    for kind, label in ((Kind.SASS, "SASS"), (Kind.PTX, "PTX"), (Kind.LTOIR, "LTO IR")):
        names = [text for _, _, text in sorted(found[kind])]
        if names:
            shown = names[0] if len(names) == 1 else f"{names[0]}..{names[-1]} ({len(names)})"
            parts.append(f"{label} {shown}")
    return ", ".join(parts) or "unreadable (see the errors)"


def _count_lines(v: DistributionVerdict) -> list[str]:
    """Its files without device code, counted in one line; the device code that
    cuobjdump --list-elf (--list-ptx) does not list, outside .nv_fatbin, in another."""
    lines = []
    without = sum(1 for r in v.group.reports if r.error is None and not r.listing.entries)
    if without:
        lines.append(f"    {plural(without, 'file')} without device code")
    outside = outside_fatbin(v)
    if outside is not None:
        counts, sections = outside
        found = [(n, noun, flag) for n, noun, flag in (
            (counts[Kind.SASS], "cubin", "--list-elf"), (counts[Kind.PTX], "PTX", "--list-ptx")
        ) if n]  # fmt: skip
        what = " and ".join(
            plural(n, noun, noun if noun == "PTX" else None) for n, noun, _ in found
        )
        flags = " and ".join(flag for _, _, flag in found)
        lines.append(
            f"    {what} outside .nv_fatbin ({', '.join(sections)}): "
            f"cuobjdump {flags} {'does' if len(found) == 1 else 'do'} not list them"
        )
    return lines


def outside_fatbin(v: DistributionVerdict) -> tuple[dict[Kind, int], list[str]] | None:
    """Cubins and PTX found in sections other than ``.nv_fatbin`` and ``__nv_relfatbin``
    (libcurand's ``.data``, cuBLASLt's ``.cask_resource``: the reader scans them for
    fatbin containers, cuobjdump does not), per kind, and those sections; None when there
    are none. A raw ``.cubin`` or ``.fatbin`` file (``(cubin)``, ``(fatbin)``) is not."""
    counts = dict.fromkeys(Kind, 0)
    sections: dict[str, None] = {}
    for report in v.group.reports:
        if report.error is not None:
            continue
        for t in totals(report.listing.entries):
            if t.section in PRIMARY_SECTIONS or t.section.startswith("(") or t.kind is Kind.LTOIR:
                continue
            counts[t.kind] += t.entries
            sections[t.section] = None
    return (counts, sorted(sections)) if sections else None


def _set_lines(s: VariantSet, v: DistributionVerdict, runtime: Version | None) -> list[str]:
    lines = [f"    alternatives {s.rule.says}: {s.family}"]
    for dev in v.devices:
        part = next((p for p in dev.parts if p.variants is s), None)
        if part is None:
            continue
        by: dict[str, list[str]] = {}
        ranked = sorted(part.builds, key=lambda b: _COLUMNS.index(b[1].category) if b[1] else 99)
        for label, found in ranked:
            by.setdefault(detail(found) if found else "no device code", []).append(label)
        # Build labels are short: all of them, whatever the verbosity.
        text = "; ".join(f"{what}: {', '.join(labels)}" for what, labels in by.items())
        loads = ""
        if runtime is not None and s.rule.selector is Selector.CUDA_RUNTIME:
            named = [v.label for v in s.loaded(runtime)]
            loads = f" (CUDA runtime {runtime} loads {', '.join(named) or 'no build'})"
        lines.append(f"      {dev.capability}{loads}: {text}")
    return lines


def _routes_of(dev: DeviceVerdict) -> list[tuple[str, list[str], bool]]:
    """The parts by route, best first: ``(route words, names, whether they pass)``."""
    by: dict[tuple[str, bool], list[str]] = {}
    for p in sorted(dev.parts, key=lambda p: _COLUMNS.index(p.outcome.category)):
        by.setdefault((_part_route(p), p.outcome.passes), []).append(p.name)
    return [(what, names, ok) for (what, ok), names in by.items()]


def _part_route(p: Part) -> str:
    """A library's route, ``partly`` where that route runs but some kernels built for the
    device have no code there (it passes unless --strict)."""
    o = p.outcome
    runs = o.route is not None and o.route.usable(None) and o.route.expected()
    partly = p.kernels is not None and p.kernels.partly
    return f"partly {detail(o)}" if runs and partly else detail(o)


def _by_category(dev: DeviceVerdict) -> list[tuple[str, list[str], bool, set[str]]]:
    """The parts by category, best first: ``(words, names, whether they pass, the routes
    among them)``; the words are the route's when they share one (``exact SASS
    (sm_120)``), else the route's kind (``exact SASS``)."""
    by: dict[tuple[Category, bool], list[Part]] = {}
    for p in sorted(dev.parts, key=lambda p: _COLUMNS.index(p.outcome.category)):
        by.setdefault((p.outcome.category, p.outcome.passes), []).append(p)
    found = []
    for (category, ok), parts in by.items():
        details = {detail(p.outcome) for p in parts}
        route = parts[0].outcome.route
        words = (
            next(iter(details))
            if len(details) == 1
            else route.path.value
            if route is not None
            else category.value
        )
        found.append((words, [p.name for p in parts], ok, details))
    return found


def _failing_words(what: str, *, undecided: bool = False) -> str:
    if what == Category.NOTHING.value:
        return "with nothing for this device"
    if what == Category.OTHER_DEVICES.value:
        return "only for other devices"
    if undecided:
        return f"whose driver support is unknown ({what})"
    return f"that do not run ({what})"


def mixed_text(dev: DeviceVerdict, width: int = _UNBOUNDED) -> str:
    """A mixed answer, its bottom line first (:func:`_mixed`)."""
    return _mixed(dev, width)[0]


def _mixed(dev: DeviceVerdict, width: int) -> tuple[str, set[str]]:
    """``partly: 40 of 52 libraries by exact SASS (sm_120); 12 with nothing for this
    device: libx.so, ... and 10 more`` (or ``runs: ...``, ``does not run: ...``): the
    names of those that do not run fill what ``width`` leaves; and the routes whose
    every name it gave."""
    groups = _by_category(dev)
    passing = [(what, names) for what, names, ok, _ in groups if ok]
    failing = [(details, names) for _, names, ok, details in groups if not ok]
    words = [what for what, _, ok, _ in groups if not ok]
    undecided = set(dev.undecided_parts)
    head = _mixed_head(dev, passing=bool(passing), failing=bool(failing))
    said = _running(passing, len(dev.parts) if failing else 0)
    bases = []
    for i, ((_, names), what) in enumerate(zip(failing, words, strict=True)):
        count = plural(len(names), "library", "libraries") if not (i or passing) else len(names)
        bases.append(f"{count} {_failing_words(what, undecided=undecided >= set(names))}")
    text = f"{head}: {said}"
    named = set()
    for j, (base, (details, names)) in enumerate(zip(bases, failing, strict=True)):
        text += "; " if said or j else ""
        rest = sum(len(b) + 2 for b in bases[j + 1 :])
        part, shown = _fit(base, names, width - len(text) - rest)
        named |= details if shown == len(names) else set()
        text += part
    return text, named


def _mixed_head(dev: DeviceVerdict, *, passing: bool, failing: bool) -> str:
    """A mixed answer's bottom line: runs, unknown (it fails only by Tile IR of unknown
    driver support), partly or does not run."""
    if not failing:
        return "runs"
    if dev.undecided:
        return "unknown"
    return "partly" if passing else "does not run"


def _running(passing: list[tuple[str, list[str]]], total: int) -> str:
    """Those that run: ``40 of 52 libraries by exact SASS (sm_120)``, ``42 of 52
    libraries run (40 by ..., 2 by ...)``; with no ``total`` (all run) ``40 libraries by
    exact SASS (sm_120), 2 by PTX JIT (...)``."""
    if not passing:
        return ""
    each = [f"{len(names)} by {what}" for what, names in passing]
    if not total:
        first, names = passing[0]
        return ", ".join([f"{plural(len(names), 'library', 'libraries')} by {first}", *each[1:]])
    if len(passing) == 1:
        return f"{len(passing[0][1])} of {total} libraries by {passing[0][0]}"
    ran = sum(len(names) for _, names in passing)
    return f"{ran} of {total} libraries run ({', '.join(each)})"


def _mixed_lines(dev: DeviceVerdict, named: set[str], width: int) -> list[str]:
    """The libraries behind a mixed answer, one line per route the verdict did not
    name in full."""
    return [
        fit(f"    {dev.capability} {what}: {_count(names)}", names, width)
        for what, names, ok in _routes_of(dev)
        if ok or what not in named
    ]


def fit(head: str, names: Sequence[str], width: int) -> str:
    """``head: a, b, ... and 37 more`` in at most ``width`` characters, never a name cut;
    ``head`` alone when not even one name fits (its count says how many)."""
    return _fit(head, names, width)[0]


def _fit(head: str, names: Sequence[str], width: int) -> tuple[str, int]:
    """:func:`fit`, and how many names it gave."""
    if not names:
        return head, 0
    used, shown = len(head) + 2, 0
    if used + sum(len(n) + 2 for n in names) - 2 <= width:
        return f"{head}: {', '.join(names)}", len(names)
    for i, name in enumerate(names):
        rest = len(names) - i - 1
        tail = len(f", ... and {rest} more") if rest else 0
        if used + (2 if i else 0) + len(name) + tail > width:
            break
        used += (2 if i else 0) + len(name)
        shown += 1
    if not shown:
        return head, 0
    more = len(names) - shown
    listed = ", ".join(names[:shown]) + (f", ... and {more} more" if more else "")
    return f"{head}: {listed}", shown


def _count(names: Sequence[str]) -> str:
    return plural(len(names), "file")


def identical(v: DistributionVerdict) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """Artifacts with device code grouped by (targets, the route on every device):
    ``(targets text, route per device, member names)``, in first-seen order. A build of
    a set of alternatives has its own route per device too (its set's answer is apart)."""
    routes: dict[str, list[str]] = {}
    for dev in v.devices:
        for p in dev.parts:
            if p.variants is None:
                routes.setdefault(p.name, []).append(detail(p.outcome))
                continue
            paths = {b.label: b.path for b in p.variants.variants}
            for label, found in p.builds:
                routes.setdefault(paths[label], []).append(detail(found) if found else "-")
    same: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for member, report in zip(v.group.members, v.group.reports, strict=True):
        if has_code(report):
            key = (targets_text(report), tuple(routes.get(member, ())))
            same.setdefault(key, []).append(member)
    return [(t, r, names) for (t, r), names in same.items()]


def _group_lines(v: DistributionVerdict) -> list[str]:
    caps = [str(d.capability) for d in v.devices]
    lines = []
    for targets, routes, names in identical(v):
        how = "; ".join(f"{c}: {r}" for c, r in zip(caps, routes, strict=False))
        lines.append(f"    {_count(names)} [{targets}] {how}: {', '.join(names)}")
    return lines


def summary_counts(
    verdicts: Sequence[DistributionVerdict], caps: Sequence[Capability]
) -> dict[str, dict[str, int]]:
    """Distributions per category, per device."""
    table: dict[str, dict[str, int]] = {}
    for i, cap in enumerate(caps):
        row = {c.value: 0 for c in _COLUMNS}
        for v in verdicts:
            row[v.devices[i].category.value] += 1
        table[str(cap)] = row
    return table


def _summary(verdicts: Sequence[DistributionVerdict], caps: Sequence[Capability]) -> list[str]:
    if not caps:
        return ["no device given (--device CAP): no verdict"]
    counts = summary_counts(verdicts, caps)
    used = [c.value for c in _COLUMNS if any(row[c.value] for row in counts.values())]
    # A distribution that fails only by Tile IR of unknown driver support is counted
    # apart: it is not known to run, nor known not to.
    fails = {
        str(cap): sum(1 for v in verdicts if not v.devices[i].passes and not v.devices[i].undecided)
        for i, cap in enumerate(caps)
    }
    unknown = {
        str(cap): sum(1 for v in verdicts if v.devices[i].undecided) for i, cap in enumerate(caps)
    }
    shown = any(unknown.values())
    header = ["summary", *used, *(["unknown"] if shown else []), "cannot run"]
    widths = [max(len(h), 6) for h in header]
    lines = [
        "  ".join(
            f"{h:>{w}}" if j else f"{h:<{w}}"
            for j, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    for cap, row in counts.items():
        cells = [
            cap,
            *(str(row[c]) for c in used),
            *([str(unknown[cap])] if shown else []),
            str(fails[cap]),
        ]
        lines.append(
            "  ".join(
                f"{c:>{w}}" if j else f"{c:<{w}}"
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    return lines

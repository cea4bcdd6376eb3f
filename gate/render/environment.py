"""What `cuda-gate inspect` shows for an environment: one line per distribution per device,
the libraries behind a mixed answer, the alternatives of runtime-selected builds, and a
closing summary table; the JSON document (``gate/schemas/environment.schema.json``).

Identical artifacts of a distribution (same targets, same routes on every device) are
one line with a count; ``verbose`` lists every group and every name. The answers are the
audit's (:mod:`gate.audit.verdicts`); this module only says them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gate import __version__
from gate.audit.artifact import has_code, targets_text
from gate.audit.verdicts import DistributionVerdict
from gate.reader.distributions import Owner
from gate.render.inspect import route_json
from gate.render.wording import plural
from gate.rules.environment import Category, DeviceVerdict, Outcome, Part, shortfalls
from gate.rules.targets import Capability, Version
from gate.rules.variants import Selector, VariantSet

SCHEMA_VERSION = 1
DOCUMENT = "cuda-gate-environment"
_SHOWN = 3  # names shown per line before "+N more" (all with verbose)
# The summary's columns, in the order of Category (best first).
_COLUMNS = tuple(Category)


def verdict_text(dev: DeviceVerdict) -> str:
    """The verdict phrase for one distribution on one device."""
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
        lines.append(
            f"{dist.name} {dist.version}: does not run on {short.capability}: "
            f"nothing runs there in {shown}{hint}"
        )
    return lines


def _fails(dev: DeviceVerdict) -> str:
    return "; does not run" if not dev.passes and dev.category is Category.MIXED else ""


def _names(names: Sequence[str], verbose: bool) -> str:
    if verbose or len(names) <= _SHOWN:
        return ", ".join(names)
    return ", ".join(names[:_SHOWN]) + f", +{len(names) - _SHOWN} more"


def console(
    verdicts: Sequence[DistributionVerdict],
    caps: Sequence[Capability],
    *,
    verbose: bool = False,
    runtime: Version | None = None,
    notes: Sequence[Sequence[str]] | None = None,
) -> str:
    """The whole text report; with ``verbose``, each verdict's ``notes`` (lines, such as
    where in an image its files are) under its block."""
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
        lines += _block(v, (name_w, ver_w), verbose, runtime)
        lines += note if verbose else ()
    if without:
        shown = [_title(v) for v in without]
        lines.append(f"no device code ({len(without)}): {_names(shown, verbose)}")
        for v, note in zip(without, notes_without, strict=True):
            lines += [f"  {_title(v)}", *note] if verbose and note else []
    lines += _summary(verdicts, caps)
    return "\n".join(lines) + "\n"


def _title(v: DistributionVerdict) -> str:
    """``pip 24.0``; a folder (no version) by its name alone."""
    dist = v.group.distribution
    return dist.name if dist.owner is Owner.FOLDER else f"{dist.name} {dist.version}"


def _block(
    v: DistributionVerdict, widths: tuple[int, int], verbose: bool, runtime: Version | None
) -> list[str]:
    name_w, ver_w = widths
    dist = v.group.distribution
    lines = []
    for i, dev in enumerate(v.devices):
        name, version = (dist.name, dist.version) if i == 0 else ("", "")
        lines.append(
            f"{name:<{name_w}}  {version:<{ver_w}}  {dev.capability!s:<6}  {verdict_text(dev)}"
        )
    for s in v.sets:
        lines += _set_lines(s, v, runtime)
    for dev in v.devices:
        if dev.category is Category.MIXED:
            lines += _mixed_lines(dev, verbose)
    if verbose:
        lines += _group_lines(v)
    for error in v.errors[: None if verbose else _SHOWN]:
        lines.append(f"    error: {error}")
    return lines


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


def _mixed_lines(dev: DeviceVerdict, verbose: bool) -> list[str]:
    """The libraries behind a mixed answer, one line per route."""
    by: dict[str, list[str]] = {}
    for p in sorted(dev.parts, key=lambda p: _COLUMNS.index(p.outcome.category)):
        by.setdefault(detail(p.outcome), []).append(p.name)
    return [
        f"    {dev.capability} {what}: {_count(names)}: {_names(names, verbose)}"
        for what, names in by.items()
    ]


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
    fails = {
        str(cap): sum(1 for v in verdicts if not v.devices[i].passes) for i, cap in enumerate(caps)
    }
    header = ["summary", *used, "cannot run"]
    widths = [max(len(h), 6) for h in header]
    lines = [
        "  ".join(
            f"{h:>{w}}" if j else f"{h:<{w}}"
            for j, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    for cap, row in counts.items():
        cells = [cap, *(str(row[c]) for c in used), str(fails[cap])]
        lines.append(
            "  ".join(
                f"{c:>{w}}" if j else f"{c:<{w}}"
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    return lines


def _outcome_json(o: Outcome | None) -> dict[str, Any] | None:
    if o is None:
        return None
    route = route_json(o.route) if o.route is not None else None
    return {"category": o.category.value, "route": route, "reason": o.reason}


def _part_json(p: Part) -> dict[str, Any]:
    return {
        "name": p.name,
        **(_outcome_json(p.outcome) or {}),
        "passes": p.outcome.passes,
        "alternatives": p.variants.family if p.variants else None,
        "chosen": list(p.chosen),
        "builds": [{"label": label, "outcome": _outcome_json(o)} for label, o in p.builds],
    }


def _set_json(s: VariantSet) -> dict[str, Any]:
    return {
        "family": s.family,
        "rule": s.rule.name,
        "selector": s.rule.selector.value,
        "says": s.rule.says,
        "source": s.rule.source,
        "builds": [
            {
                "label": b.label,
                "path": b.path,
                "other_backend": b.other_backend,
                "runtime": str(b.runtime) if b.runtime else None,
            }
            for b in s.variants
        ],
    }


def distribution_json(v: DistributionVerdict) -> dict[str, Any]:
    """One distribution of the document."""
    dist = v.group.distribution
    return {
        "name": dist.name,
        "version": dist.version,
        "owner": dist.owner.value,
        "source": dist.source,
        "artifacts": len(v.group.reports),
        "with_device_code": sum(1 for r in v.group.reports if has_code(r)),
        "errors": list(v.errors),
        "variant_sets": [_set_json(s) for s in v.sets],
        "groups": [
            {"count": len(names), "targets": targets, "routes": list(routes), "members": names}
            for targets, routes, names in identical(v)
        ],
        "devices": [
            {
                "capability": str(dev.capability),
                "category": dev.category.value,
                "verdict": verdict_text(dev),
                "passes": dev.passes,
                "parts": [_part_json(p) for p in dev.parts],
            }
            for dev in v.devices
        ],
    }


def document(
    verdicts: Sequence[DistributionVerdict],
    caps: Sequence[Capability],
    errors: Sequence[str],
    *,
    names: bool,
    scan: bool,
    runtime: Version | None,
) -> dict[str, Any]:
    """The whole environment document (``inspect --json`` on an environment)."""
    return {
        "version": SCHEMA_VERSION,
        "document": DOCUMENT,
        "tool": {"name": "cuda-gate", "version": __version__},
        "names": names,
        "scan": scan,
        "cuda_runtime": str(runtime) if runtime else None,
        "devices": [str(c) for c in caps],
        "distributions": [distribution_json(v) for v in verdicts],
        "summary": summary_counts(verdicts, caps),
        "errors": list(errors),
    }

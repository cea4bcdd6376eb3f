"""What `cuda-gate inspect` shows for each artifact: the JSON document and the console table.

The JSON document (schema ``gate/schemas/inspect.schema.json``, ``version`` 1) holds,
per artifact, every entry, the SASS / PTX / LTO IR targets, kernel counts per target
and kernels missing from some target (when names were read), and per device
capability the route each kernel takes and a verdict (:mod:`gate.audit.artifact`).
Without names the routes are per target: every kernel is assumed to be in every entry,
and the document says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gate import __version__
from gate.audit.artifact import ALL_KERNELS, predict, target_text, tile_blocked, verdict
from gate.reader.listing import (
    DeviceEntry,
    DevicePrediction,
    KernelPrediction,
    Kind,
    Listing,
    missing_by_target,
    totals,
)
from gate.reader.read import ArtifactReport
from gate.reader.stubs import stubs_of, unread_targets
from gate.render.wording import kernels_by, plural
from gate.rules.kernels import readable
from gate.rules.routes import Path, Route
from gate.rules.targets import Capability, Target, Version

SCHEMA_VERSION = 1
NOT_UNDERSTOOD = "not understood by this version of cuda-gate"


def kind_target_text(kind: Kind, target: Target, number: int = 0) -> str:
    """An entry's target as the document names it: ``sm_90``, ``compute_90``, ``lto_90``;
    ``tileir`` (Tile IR is architecture-independent); ``kind_4096`` for an entry of a kind
    this reader does not know (its header's kind number)."""
    if kind is Kind.TILEIR:
        return "tileir"
    if kind is Kind.UNKNOWN:
        return f"kind_{number}"
    return target_text(kind, target)


def tile_verdict(prediction: DevicePrediction) -> str | None:
    """The verdict where Tile IR decides it (some kernel's route is Tile IR and none lacks
    code): :func:`gate.audit.artifact.tile_blocked`'s short form, else None."""
    if any(r.path is Path.NONE for r, _ in prediction.by_route):
        return None
    return tile_blocked(prediction)


def route_json(r: Route) -> dict[str, Any]:
    """A route as both documents hold it: its words, path, target, PTX ISA, minimum driver."""
    return {
        "route": r.describe(),
        "path": r.path.value,
        "target": str(r.target) if r.target else None,
        "ptx_isa": str(r.ptx_isa) if r.ptx_isa else None,
        "min_driver": str(r.min_driver) if r.min_driver else None,
    }


class _Group:
    """What one (kind, target) of an artifact holds, summed over its entries."""

    __slots__ = ("compression", "entries", "isas", "kernels", "sections", "size", "stored")

    def __init__(self) -> None:
        self.entries = self.stored = self.size = 0
        self.kernels: set[str] = set()
        self.isas: set[Version] = set()
        self.compression: set[str] = set()
        self.sections: set[str] = set()


_Key = tuple[Kind, Target, int]  # kind, target, unknown kind's number


def _groups(listing: Listing) -> dict[_Key, _Group]:
    """Entries summed per (kind, target), in first-seen order (:func:`totals`: no entry of a
    packed listing is made); entries of an unknown kind per kind number."""
    groups: dict[_Key, _Group] = {}
    for t in totals(listing.entries):
        group = groups.get((t.kind, t.target, t.number))
        if group is None:
            group = groups[t.kind, t.target, t.number] = _Group()
        group.entries += t.entries
        group.kernels |= t.kernels
        if t.ptx_isa:
            group.isas.add(t.ptx_isa)
        group.compression.add(t.compression)
        group.stored += t.stored_size
        group.size += t.size
        group.sections.add(t.section)
    return groups


def _rows(groups: dict[_Key, _Group], names: bool) -> list[dict[str, Any]]:
    """One row per (kind, target): entry count, kernels, compression, sizes, sections
    (a Tile IR row's ``ptx_isa``: its bytecode versions)."""
    return [
        {
            "kind": kind.value,
            "target": kind_target_text(kind, target, number),
            "entries": group.entries,
            "kernels": len(group.kernels) if names and kind.routed else None,
            "ptx_isa": sorted({str(v) for v in group.isas}),
            "compression": sorted(group.compression),
            "stored_size": group.stored,
            "size": group.size,
            "sections": sorted(group.sections),
        }
        for (kind, target, number), group in groups.items()
    ]


def artifact_json(
    report: ArtifactReport, caps: Sequence[Capability], *, with_entries: bool = True
) -> dict[str, Any]:
    """One artifact of the JSON document (``entries`` left empty when not ``with_entries``)."""
    listing, names = report.listing, report.names
    groups = _groups(listing)
    # Distinct targets per kind in first-seen order: what Listing.targets gives, from
    # the groups already built instead of three more passes over every entry.
    targets: dict[Kind, list[Target]] = {kind: [] for kind in Kind}
    for kind, target, _ in groups:
        if target not in targets[kind]:
            targets[kind].append(target)
    everything = set().union(*(g.kernels for g in groups.values())) if names else set()
    devices = []
    for cap in caps if report.error is None else ():
        prediction = _predict(report, cap)
        routes: dict[str, list[str]] = {}
        by_text: dict[str, Route] = {}
        for r, ks in prediction.by_route:  # one group per route: describe() once each
            routes.setdefault(r.describe(), []).extend(ks)
            by_text[r.describe()] = r
        devices.append(
            {
                "capability": str(cap),
                "verdict": tile_verdict(prediction) or verdict(report, prediction),
                "native": prediction.native,
                "runnable": prediction.runnable,
                "per_kernel": names,
                "routes": [
                    {
                        **route_json(by_text[text]),
                        "kernels": len(ks) if names else None,
                        "kernel_names": sorted(ks) if names else None,
                    }
                    for text, ks in routes.items()
                ],
            }
        )
    return {
        "path": report.path,
        "format": report.format,
        "elf_class": report.elf_class,
        "machine": report.machine,
        "error": report.error,
        "names": names,
        "entries": [
            {
                "kind": e.kind.value,
                "target": kind_target_text(e.kind, e.target, e.number),
                "ptx_isa": str(e.ptx_isa) if e.ptx_isa and e.kind is Kind.PTX else None,
                **_entry_extra(e),
                "compression": e.compression,
                "stored_size": e.stored_size,
                "size": e.size,
                "section": e.section,
                "producer": e.producer,
                "debug": e.debug,
                "ident": e.name,
                "kernels": list(e.kernels) if names and e.kind.routed else None,
            }
            for e in (listing.entries if with_entries else ())
        ],
        "targets": {
            "sass": [str(t) for t in targets[Kind.SASS]],
            "ptx": [str(t) for t in targets[Kind.PTX]],
            "lto": [target_text(Kind.LTOIR, t) for t in targets[Kind.LTOIR]],
        },
        "by_target": _rows(groups, names),
        "kernels": len(everything) if names else None,
        "missing_kernels": missing_by_target(
            {(kind, target): g.kernels for (kind, target, _), g in groups.items()}
        )
        if names
        else None,
        "stubs": _stubs_json(listing, caps) if names and report.error is None else None,
        "devices": devices,
    }


def _predict(report: ArtifactReport, cap: Capability) -> DevicePrediction:
    """:func:`gate.audit.artifact.predict`, and without names for an artifact whose only
    routed code is Tile IR, its Tile IR route standing for every kernel (not "no kernels")."""
    listing = report.listing
    if report.names or not listing.has_tile or listing.targets(Kind.SASS) or listing.has_ptx:
        return predict(report, cap)
    return DevicePrediction(cap, (KernelPrediction(ALL_KERNELS, listing.target_route(cap)),))


def _entry_extra(e: DeviceEntry) -> dict[str, Any]:
    """What only a Tile IR entry (its bytecode version) or an entry of an unknown kind (its
    kind number, and that this reader does not understand it) adds."""
    if e.kind is Kind.TILEIR:
        return {"tileir_version": str(e.ptx_isa) if e.ptx_isa else None}
    if e.kind is Kind.UNKNOWN:
        return {"kind_number": e.number, "note": NOT_UNDERSTOOD}
    return {}


def _stubs_json(listing: Listing, caps: Sequence[Capability]) -> dict[str, Any]:
    """Kernels that are trap stubs or empty in some SASS target (gate.reader.stubs)."""
    return {
        "kernels": [
            {
                "kernel": s.kernel,
                "body": "trap" if s.trap else "empty",
                "targets": [str(t) for t in s.targets],
                "devices": [str(c) for c in s.devices],
                "code_elsewhere": s.has_code,
            }
            for s in stubs_of(listing, caps)
        ],
        "unread_targets": list(unread_targets(listing)),
    }


def document(
    reports: Sequence[ArtifactReport], caps: Sequence[Capability], *, names: bool, scan: bool
) -> dict[str, Any]:
    """The whole `inspect --json` document."""
    return {
        "version": SCHEMA_VERSION,
        "tool": {"name": "cuda-gate", "version": __version__},
        "names": names,
        "scan": scan,
        "devices": [str(c) for c in caps],
        "artifacts": [artifact_json(r, caps) for r in reports],
        "errors": [r.error for r in reports if r.error],
    }


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


Names = Callable[[Sequence[str]], Mapping[str, str]]


def console(art: dict[str, Any], names: Names = readable) -> str:
    """The readable table for one artifact of the document.

    Each list of kernel names is shown through ``names`` (by default the one helper,
    :func:`gate.rules.kernels.readable`: demangled, the symbol in brackets only where two
    in the list read alike); the JSON keeps the mangled names.
    """
    if art["error"]:
        return f"{art['path']}: ERROR: {art['error']}\n"
    counts: Counter[str] = Counter()
    for row in art["by_target"]:
        counts[row["kind"]] += row["entries"]
    head = f"ELF{art['elf_class']} {art['machine']}" if art["elf_class"] else art["format"]
    lines = [
        f"{art['path']}  [{head}]  "
        # Tile IR and unknown kinds are counted where the file has them.
        + ", ".join(
            f"{counts.get(k.value, 0)} {k.value}"
            for k in Kind
            if k in (Kind.SASS, Kind.PTX, Kind.LTOIR) or counts.get(k.value)
        )
        + (f", {plural(art['kernels'], 'kernel')}" if art["kernels"] is not None else "")
    ]
    if not art["by_target"]:
        lines.append("  no device code")
    else:
        lines.append(
            f"  {'kind':<6} {'target':<14} {'entries':>7} {'kernels':>7}  {'ISA':<8} "
            f"{'compression':<12} {'stored':>10} {'size':>10}  sections"
        )
        for row in art["by_target"]:
            kernels = "-" if row["kernels"] is None else str(row["kernels"])
            lines.append(
                f"  {row['kind']:<6} {row['target']:<14} {row['entries']:>7} {kernels:>7}  "
                f"{','.join(row['ptx_isa']) or '-':<8} {','.join(row['compression']):<12} "
                f"{_mb(row['stored_size']):>10} {_mb(row['size']):>10}  {','.join(row['sections'])}"
            )
    lines += _unknown_lines(art["by_target"])
    for target, missing in (art["missing_kernels"] or {}).items():
        said = names(missing[:3])
        shown = [_short(said[k]) for k in missing[:3]]
        sample = "; ".join(shown) + ("; ..." if len(missing) > 3 else "")
        lines.append(f"  {target} lacks {plural(len(missing), 'kernel')}: {sample}")
    lines += _stub_lines(art["stubs"], names)
    if any(dev["routes"] and not dev["per_kernel"] for dev in art["devices"]):
        # Said once, not on every device line.
        lines.append("  routes per target, each standing for every kernel (--names: per kernel)")
    for dev in art["devices"]:
        parts = [
            _by_route(r) if dev["per_kernel"] else r["route"]
            for r in dev["routes"]
            # The verdict already says how many have no code or are only for other devices.
            if Path(r["path"]) not in (Path.NONE, Path.OTHER_DEVICES)
        ]
        if not parts:
            lines.append(f"  device {dev['capability']}: {dev['verdict']}")
            continue
        lines.append(f"  device {dev['capability']}: {dev['verdict']}: {'; '.join(parts)}")
    return "\n".join(lines) + "\n"


def _by_route(r: dict[str, Any]) -> str:
    """``1 kernel from exact SASS (sm_90a)``; Tile IR: ``1 kernel through Tile IR (...)``."""
    path = Path(r["path"])
    if path is Path.TILE_IR:
        return f"{plural(r['kernels'], 'kernel')} through {r['route']}"
    return kernels_by(path, r["kernels"], r["route"])


def _unknown_lines(rows: list[dict[str, Any]]) -> list[str]:
    """``  kind 4096: 1 entry, 0.1 kB stored, not understood by ...``, one per unknown kind."""
    return [
        f"  {row['target'].replace('_', ' ')}: {plural(row['entries'], 'entry', 'entries')}, "
        f"{_mb(row['stored_size'])} stored, {NOT_UNDERSTOOD}"
        for row in rows
        if row["kind"] == Kind.UNKNOWN.value
    ]


def _stub_lines(stubs: dict[str, Any] | None, names: Names) -> list[str]:
    """``  trap stub: k(float*) in sm_121 SASS: present but traps on 12.1``, at most five."""
    if stubs is None:
        return []
    lines = []
    shown = stubs["kernels"][:_STUBS_SHOWN]
    said = names([s["kernel"] for s in shown])
    for s in shown:
        trap = s["body"] == "trap"
        where = f"{_short(said[s['kernel']])} in {' '.join(s['targets'])} SASS"
        caps = ", ".join(s["devices"])
        verb = "traps" if trap else "does nothing"
        runs = f": present but {verb} on {caps}" if caps else ""
        if not trap and not s["code_elsewhere"]:
            runs += " (empty on every target)"
        lines.append(f"  {'trap stub' if trap else 'empty kernel'}: {where}{runs}")
    if len(stubs["kernels"]) > _STUBS_SHOWN:
        lines.append(f"  and {plural(len(stubs['kernels']) - _STUBS_SHOWN, 'more such kernel')}")
    if stubs["unread_targets"]:
        shown = ", ".join(stubs["unread_targets"])
        lines.append(f"  trap stubs not checked in {shown}: SASS before sm_70 is not read")
    return lines


_STUBS_SHOWN = 5


def _short(name: str) -> str:
    """At most 60 characters of the name; a symbol in brackets that tells it from another
    (:func:`gate.rules.kernels.readable`) is kept whole, the name before it cut."""
    if len(name) <= _NAME_WIDTH:
        return name
    head, bracket, symbol = name.rpartition(" [")
    if bracket and symbol.endswith("]") and head:
        return f"{_short(head)} [{symbol}"
    return name[: _NAME_WIDTH - 3] + "..."


_NAME_WIDTH = 60

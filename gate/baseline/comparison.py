"""A run compared with a baseline run: the facts compared, the result, and its JSON form.

The rules (what counts as a loss) are :mod:`gate.rules.baseline`; this module turns
listings into the facts those rules read, and owns the one JSON form of a comparison:
the ``baseline`` member of result.json and the body of ``cuda-gate diff --json``
(schema ``gate/schemas/diff.schema.json``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import BadInputError
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.rules.baseline import Change, CodeFacts, Diff, Level, Row, Rule, TargetCode, TileCode
from gate.rules.targets import Target


def facts(artifacts: Iterable[tuple[str, Listing]]) -> tuple[CodeFacts, ...]:
    """Each artifact's SASS and PTX targets, merged per target, and its Tile IR, merged
    (LTO IR runs nowhere; unknown kinds are not compared: :func:`_targets`).

    Two artifacts of one name (the same library in two wheels) are told apart as
    ``name``, ``name#2``, ... in the order the run lists them.
    """
    found: list[CodeFacts] = []
    seen: dict[str, int] = {}
    for name, listing in artifacts:
        seen[name] = seen.get(name, 0) + 1
        key = name if seen[name] == 1 else f"{name}#{seen[name]}"
        found.append(CodeFacts(key, _targets(listing), _tile(listing)))
    return tuple(found)


def _targets(listing: Listing) -> tuple[TargetCode, ...]:
    """One TargetCode per (kind, target): kernels united, the newest ISA, bytes summed.

    An entry of size 0 is what a record older than result.json version 4 reads as:
    its target's bytes are then unknown (None), never a false 0.
    """
    groups: dict[tuple[bool, Target], list[DeviceEntry]] = {}
    for e in listing.entries:
        # SASS and PTX by target: LTO IR runs nowhere; Tile IR has no target to compare by
        # (:func:`_tile`); an unknown kind is not understood.
        if e.kind in (Kind.SASS, Kind.PTX):
            ptx = e.kind is Kind.PTX
            target = e.target.as_ptx() if ptx else e.target.as_sass()
            groups.setdefault((ptx, target), []).append(e)
    return tuple(
        TargetCode(
            ptx,
            target,
            frozenset(k for e in entries for k in e.kernels),
            max((e.ptx_isa for e in entries if e.ptx_isa is not None), default=None),
            None if any(e.size == 0 for e in entries) else sum(e.size for e in entries),
        )
        for (ptx, target), entries in groups.items()
    )


def _tile(listing: Listing) -> TileCode | None:
    """The artifact's Tile IR entries as one: kernels united, the newest bytecode version,
    bytes summed (unknown where an entry's size is 0, as for a target); None without any."""
    entries = listing.of_kind(Kind.TILEIR)
    if not entries:
        return None
    return TileCode(
        frozenset(k for e in entries for k in e.kernels),
        max((e.ptx_isa for e in entries if e.ptx_isa is not None), default=None),
        None if any(e.size == 0 for e in entries) else sum(e.size for e in entries),
    )


@dataclass(frozen=True)
class Baseline:
    """The run a run was compared with, and what the comparison found.

    ``digest`` is the SHA-256 of the baseline's result.json: the signed predicate names
    it, so the comparison can be repeated against exactly that run.
    """

    reference: str  # as the user named it: a folder, latest-accepted, a revision, a tag
    location: str  # the folder or the store location it was read from
    digest: str
    diff: Diff
    revision: str | None = None
    runner: str | None = None
    run_id: str | None = None

    def describe(self) -> str:
        """``v1.2 (run gh-12-1 of h200-01 at 0123456789ab)``, or the reference alone."""
        if self.run_id is None or self.revision is None:
            return self.reference
        return f"{self.reference} (run {self.run_id} of {self.runner} at {self.revision[:12]})"

    def to_json(self) -> dict[str, Any]:
        """The ``baseline`` member of result.json."""
        return {
            "reference": self.reference,
            "location": self.location,
            "result_sha256": self.digest,
            "revision": self.revision,
            "runner": self.runner,
            "run_id": self.run_id,
            **diff_json(self.diff),
        }

    @classmethod
    def from_json(cls, doc: object, where: str) -> Baseline:
        """Parse the ``baseline`` member; BadInputError naming ``where``."""
        if not isinstance(doc, Mapping):
            raise BadInputError(f"{where}: the baseline comparison is not an object")
        try:
            return cls(
                reference=str(doc["reference"]),
                location=str(doc["location"]),
                digest=str(doc["result_sha256"]),
                diff=diff_from_json(doc),
                revision=_optional(doc.get("revision")),
                runner=_optional(doc.get("runner")),
                run_id=_optional(doc.get("run_id")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise BadInputError(f"{where}: the baseline comparison is malformed: {e}") from e


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def diff_json(diff: Diff) -> dict[str, Any]:
    """Rows and changes, with the counts a script checks first; a change about a kernel
    names it by its symbol (``kernel``) beside the sentence (``what``) that reads it."""
    return {
        "regressions": len(diff.failed),
        "warnings": len(diff.warned),
        "rows": [
            {
                "artifact": r.artifact,
                "quantity": r.quantity,
                "before": r.before,
                "after": r.after,
                "change": r.change,
            }
            for r in diff.rows
        ],
        "changes": [
            {
                "artifact": c.artifact,
                "level": c.level.value,
                "rule": None if c.rule is None else c.rule.value,
                "what": c.what,
                "kernel": c.kernel,
            }
            for c in diff.changes
        ],
    }


def diff_from_json(doc: Mapping[str, Any]) -> Diff:
    """The rows and changes :func:`diff_json` wrote (KeyError, ValueError when malformed)."""
    rows = tuple(
        Row(str(r["artifact"]), str(r["quantity"]), str(r["before"]), str(r["after"]),
            str(r["change"]))
        for r in doc["rows"]
    )  # fmt: skip
    changes = tuple(
        Change(
            str(c["artifact"]),
            Level(c["level"]),
            str(c["what"]),
            None if c["rule"] is None else Rule(c["rule"]),
            _optional(c.get("kernel")),  # since result.json 7 and diff --json 2
        )
        for c in doc["changes"]
    )
    return Diff(rows, changes)

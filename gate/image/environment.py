"""Images read by distribution: their Python environments and other libraries, each layer kept.

An image is an environment: its candidate files (ELF files, archives, wheels and
``*.dist-info`` metadata) are written under a temp folder that mirrors the image's tree
(:func:`gate.image.reports.open_image`), so every RECORD's paths, relative to the
site-packages folder that holds it (``../../../bin/tool`` too), name the files written,
and the folder is audited as any root is (:func:`gate.reader.distributions.audit_root`):
distributions in any site-packages or dist-packages folder (``/usr/lib/python3``,
``/usr/local/lib/python3.X``, venvs under ``/opt``, conda), other libraries grouped by
folder. What named the temp folder is then renamed ``SOURCE!/path/in/image``, and each
group gets its :class:`Place`: the image, where the group is in it, each artifact's layer.

Arguments that name no image are audited as before (:func:`audit_paths`), in order.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import BadInputError
from gate.image.source import parse
from gate.reader.artifacts import shown
from gate.reader.distributions import Audit, Distribution, Group, Owner
from gate.reader.limits import Limits
from gate.scan.audit import audit_paths, audit_root

# What reads an image is imported when one is read: most environments audited are none.
if TYPE_CHECKING:
    from gate.image.layout import Image
    from gate.image.merge import Entry, Merged
    from gate.image.platforms import Platform
    from gate.reader.locks import Target


@dataclass(frozen=True, slots=True)
class Artifact:
    """One artifact of a group: its path in the group, its file in the image, that file's layer."""

    member: str
    path: str  # /path/in/image of the file read (the wheel or archive, for a member of one)
    layer: int | None  # None only if the file is not in the merged view (never expected)
    layer_digest: str | None

    def to_json(self) -> dict[str, Any]:
        """One entry of a distribution's ``image.artifacts``."""
        return {
            "member": self.member,
            "path": self.path,
            "layer": self.layer,
            "layer_digest": self.layer_digest,
        }


@dataclass(frozen=True, slots=True)
class Place:
    """Where a group is in an image: its dist-info, wheel or folder, and each artifact's layer."""

    image: Image
    path: str  # /usr/lib/python3/dist-packages/x-1.0.dist-info, /opt/x.whl, /usr/lib
    layer: int | None  # the layer of the RECORD (of the wheel); None for a folder
    layer_digest: str | None
    artifacts: tuple[Artifact, ...]  # in the group's member order

    def to_json(self) -> dict[str, Any]:
        """A distribution's ``image`` object in the environment document."""
        return {
            "source": self.image.source,
            "digest": self.image.digest,
            "path": self.path,
            "layer": self.layer,
            "layer_digest": self.layer_digest,
            "artifacts": [a.to_json() for a in self.artifacts],
        }

    def lines(self) -> tuple[str, ...]:
        """With ``--verbose``: where the distribution was installed, and its files by layer."""
        found = []
        if self.layer is not None:
            found.append(f"    {self.path}: {self._layer(self.layer, self.layer_digest)}")
        by: dict[tuple[int | None, str | None], list[str]] = {}
        for a in self.artifacts:
            by.setdefault((a.layer, a.layer_digest), []).append(a.member)
        for (layer, digest), members in sorted(
            by.items(), key=lambda i: -1 if i[0][0] is None else i[0][0]
        ):
            found.append(f"    {self._layer(layer, digest)}: {', '.join(members)}")
        return tuple(found)

    def _layer(self, layer: int | None, digest: str | None) -> str:
        if layer is None:
            return "in no layer"
        return f"layer {layer + 1} of {len(self.image.layers)} ({digest})"


@dataclass(frozen=True)
class Located:
    """An audit of images and paths: the groups, each group's place (None off an image),
    and the images read, in order."""

    audit: Audit
    places: tuple[Place | None, ...]  # parallel to audit.groups
    images: tuple[Image, ...]

    def __add__(self, other: Located) -> Located:
        return Located(
            self.audit + other.audit, self.places + other.places, self.images + other.images
        )


@dataclass(frozen=True, slots=True)
class Reading:
    """How artifacts are read (as :func:`gate.scan.audit.audit_paths` takes it)."""

    names: bool
    scan: bool
    limits: Limits
    cache: bool
    platform: Platform | None = None
    digests: bool = True  # each entry's SHA-256 (gate.reader.read)
    audited: Target | None = None  # what a lock's markers are evaluated for (None: here)


def audit_sources(paths: Sequence[str], how: Reading) -> Located:
    """Every argument by distribution, in order: images as environments, paths as before.

    An argument that names an unreadable image is one error of the audit; a runtime that
    fails to save an image raises its ToolError.
    """
    located = Located(Audit((), ()), (), ())
    plain: list[Path] = []  # paths in a row that name no image: read at once

    def pending() -> Located:
        audit = audit_paths(plain, names=how.names, scan=how.scan, limits=how.limits,
                            cache=how.cache, digests=how.digests,
                            audited=how.audited)  # fmt: skip
        plain.clear()
        return Located(audit, (None,) * len(audit.groups), ())

    for text in paths:
        try:
            source = parse(text)
        except BadInputError as e:
            located += pending() + Located(Audit((), (e.one_line(),)), (), ())
            continue
        if source is None:
            plain.append(Path(text))
            continue
        located += pending()
        from gate.image.reports import open_image  # noqa: PLC0415  (see the imports)

        with tempfile.TemporaryDirectory(prefix="cuda-gate-image-") as work:
            try:
                merged = open_image(source, Path(work), platform=how.platform, limits=how.limits)
            except BadInputError as e:
                located += Located(Audit((), (e.one_line(),)), (), ())
                continue
            located += audit_image(merged, how)
    return located + pending()


def audit_image(merged: Merged, how: Reading) -> Located:
    """The merged view's written files audited as a root, renamed and placed in the image."""
    dest = merged.dest
    if dest is None:
        raise ValueError("audit_image needs the files written (merge with dest)")
    dest.mkdir(parents=True, exist_ok=True)  # an image with no candidate file writes none
    audit = audit_root(
        dest, names=how.names, scan=how.scan, limits=how.limits, cache=how.cache,
        digests=how.digests, temporary=True,
    )  # fmt: skip
    root = f"{shown(dest)}/"
    label = f"{merged.image.source}!/"

    def renamed(text: str) -> str:
        return text.replace(root, label)

    groups, places = [], []
    for group in audit.groups:
        places.append(_place(merged, group, root))
        dist = replace(group.distribution, source=renamed(group.distribution.source))
        reports = tuple(
            replace(r, path=renamed(r.path), error=renamed(r.error) if r.error else None)
            for r in group.reports
        )
        groups.append(Group(dist, reports, group.members))
    errors = tuple(renamed(e) for e in audit.errors)
    return Located(Audit(tuple(groups), errors), tuple(places), (merged.image,))


def _place(merged: Merged, group: Group, root: str) -> Place:
    """The group's place, from paths that still name the temp folder (``root``)."""
    from gate.image.reports import entry_of  # noqa: PLC0415  (see the imports)

    dist = group.distribution
    artifacts = []
    for member, report in zip(group.members, group.reports, strict=True):
        inside = report.path.removeprefix(root)
        entry = entry_of(merged, inside)
        artifacts.append(_artifact(member, entry, inside))
    if dist.owner is Owner.FOLDER:
        folder = "" if dist.source == "." else dist.source
        return Place(merged.image, f"/{folder}", None, None, tuple(artifacts))
    inside = dist.source.removeprefix(root)
    entry = _installed_by(merged, dist, inside)
    return Place(
        merged.image,
        f"/{inside}",
        entry.layer if entry else None,
        entry.layer_digest if entry else None,
        tuple(artifacts),
    )


def _artifact(member: str, entry: Entry | None, inside: str) -> Artifact:
    if entry is None:
        return Artifact(member, f"/{inside}", None, None)
    return Artifact(member, f"/{entry.path}", entry.layer, entry.layer_digest)


def _installed_by(merged: Merged, dist: Distribution, inside: str) -> Entry | None:
    """The entry that says which layer installed a distribution: its RECORD (pip writes it
    last), else its METADATA, else the dist-info folder; a wheel's own file."""
    if dist.owner is Owner.WHEEL:
        return merged.entries.get(inside)
    for name in (f"{inside}/RECORD", f"{inside}/METADATA", inside):
        if name in merged.entries:
            return merged.entries[name]
    return None

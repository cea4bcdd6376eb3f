"""The per-file inspection of images: each candidate file read by the existing reader.

An image's candidate files are written to a temp folder by :func:`gate.image.merge.merge`
and read there with :func:`gate.scan.walk.read_paths`; each report is then named as
``SOURCE!/path/in/image`` (a wheel's member as ``SOURCE!/opt/x.whl!lib/x.so``) and comes
with the image and the merged-view entry it was read from (its layer). Arguments that
name no image are read as before, in the order given.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import BadInputError
from gate.image.source import Source, opened, parse
from gate.reader.artifacts import shown
from gate.reader.limits import Limits
from gate.reader.read import ArtifactReport, Progress
from gate.render.wording import plural
from gate.scan.walk import read_paths

if TYPE_CHECKING:
    # An image's layout, layers and platforms: imported where an image is opened, so that
    # a plain file's inspect never loads them (start-up: hashlib's OpenSSL alone is 4 MB).
    from gate.image.layout import Image
    from gate.image.merge import Entry, Merged
    from gate.image.platforms import Platform


@dataclass(frozen=True, slots=True)
class Origin:
    """Where in an image a report's file is: the image and its merged-view entry."""

    image: Image
    entry: Entry

    def to_json(self) -> dict[str, Any]:
        """The artifact's ``image`` object in the inspect document."""
        return {
            "source": self.image.source,
            "digest": self.image.digest,
            "path": f"/{self.entry.path}",
            "layer": self.entry.layer,
            "layer_digest": self.entry.layer_digest,
        }

    def console(self) -> str:
        """The line under the artifact's table."""
        count = len(self.image.layers)
        return f"  in layer {self.entry.layer + 1} of {count} ({self.entry.layer_digest})\n"


@dataclass(frozen=True, slots=True)
class Found:
    """One report, and its place in an image when it was read from one."""

    report: ArtifactReport
    origin: Origin | None = None


def image_console(image: Image) -> str:
    """The line before an image's files."""
    runtime = (
        f", {image.kind} reports {image.runtime_digest}"
        if image.runtime_digest and image.runtime_digest != image.digest
        else ""
    )
    return (
        f"image {image.source}: {image.platform}, {plural(len(image.layers), 'layer')}, "
        f"digest {image.digest}{runtime}, config {image.config_digest}\n"
    )


class Seen:
    """The images read, in order; each announced once through ``say`` before its files."""

    def __init__(self, say: Callable[[str], None] | None) -> None:
        self.images: list[Image] = []
        self.say = say

    def __call__(self, image: Image) -> None:
        """Record ``image`` and say its line."""
        self.images.append(image)
        if self.say is not None:
            self.say(image_console(image))


def with_images(
    doc: dict[str, Any], images: Sequence[Image], origins: Sequence[Origin | None]
) -> dict[str, Any]:
    """The inspect document with the images read and, per artifact, its place in one.

    Unchanged when no image was read: ``images`` and each artifact's ``image`` are there
    only when an argument named an image.
    """
    if images:
        doc["images"] = [image.to_json() for image in images]
        for art, origin in zip(doc["artifacts"], origins, strict=True):
            art["image"] = origin.to_json() if origin else None
    return doc


def read_sources(
    paths: Sequence[str | os.PathLike[str]],
    *,
    platform: Platform | None,
    names: bool,
    scan: bool,
    limits: Limits,
    cache: bool,
    on_image: Callable[[Image], None],
    progress: Progress | None = None,
    digests: bool = True,
) -> Iterator[Found]:
    """Reports for every argument in order: images file by file, other paths as before.

    ``on_image`` is called with each image once it is read, before its files' reports.
    Never raises BadInputError: an image that cannot be read is one report with ``error``.
    """
    plain: list[str | os.PathLike[str]] = []

    def pending() -> Iterator[Found]:
        if plain:
            yield from (Found(r) for r in read_paths(plain, names=names, scan=scan,
                        limits=limits, cache=cache, progress=progress,
                        digests=digests))  # fmt: skip
            plain.clear()

    for raw in paths:
        text = os.fspath(raw)
        try:
            source = parse(text)
        except BadInputError as e:
            yield from pending()
            yield Found(ArtifactReport(shown(text), "unknown", error=e.one_line()))
            continue
        if source is None:
            plain.append(raw)
            continue
        yield from pending()
        with tempfile.TemporaryDirectory(prefix="cuda-gate-image-") as work:
            try:
                merged = open_image(source, Path(work), platform=platform, limits=limits)
            except BadInputError as e:
                yield Found(ArtifactReport(shown(text), "unknown", error=e.one_line()))
                continue
            on_image(merged.image)
            yield from _files(
                merged, names=names, scan=scan, limits=limits, cache=cache, progress=progress,
                digests=digests,
            )  # fmt: skip
    yield from pending()


def open_image(source: Source, work: Path, *, platform: Platform | None, limits: Limits) -> Merged:
    """The image's merged view, its candidate files written under ``work/root``."""
    from gate.image.layout import read_image  # noqa: PLC0415  (images only: start-up)
    from gate.image.merge import merge  # noqa: PLC0415

    saved = work / "saved"
    saved.mkdir()
    with opened(source, saved) as (store, runtime_digest):
        image = read_image(store, source.text, source.kind, platform, source.ref)
        if runtime_digest:
            image = replace(image, runtime_digest=runtime_digest)
        return merge(store, image, dest=work / "root", limits=limits)


def _files(
    merged: Merged,
    *,
    names: bool,
    scan: bool,
    limits: Limits,
    cache: bool,
    progress: Progress | None,
    digests: bool = True,
) -> Iterator[Found]:
    """The reports of the files written, named and placed in the image."""
    if not merged.written or merged.dest is None:
        return
    root = f"{merged.dest}/"
    label = f"{merged.image.source}!/"
    relabelled = (
        None
        if progress is None
        else lambda done, known, now: progress(done, known, now.replace(root, label))
    )
    found = read_paths(
        [merged.dest], names=names, scan=scan, limits=limits, cache=cache, progress=relabelled,
        digests=digests,
    )  # fmt: skip
    for report in found:
        inside = report.path.removeprefix(root)
        entry = entry_of(merged, inside)
        renamed = replace(
            report,
            path=label + inside,
            error=report.error.replace(root, label) if report.error else None,
        )
        yield Found(renamed, Origin(merged.image, entry) if entry else None)


def entry_of(merged: Merged, inside: str) -> Entry | None:
    """The file a report is of: the path itself, or the wheel or archive it is a member of."""
    if inside in merged.entries:
        return merged.entries[inside]
    for i, char in enumerate(inside):
        if char in "!(" and inside[:i] in merged.entries:
            return merged.entries[inside[:i]]
    return None

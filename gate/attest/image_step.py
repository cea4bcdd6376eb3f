"""Part of ``verify``'s step 2: the delivery image and the artifacts read from it.

The signed image subject (its repository and manifest digest) is compared with what the
container runtime here holds under the recorded reference: a tag that now names
another manifest makes the evidence another image's (exit 11, as a relinked artifact).
An artifact recorded as ``IMAGE!/path`` is read from that image's own layers (saved by
the runtime, every blob checked against its digest, as ``cuda-gate inspect`` reads
images) and hashed. Where no runtime is here, or it does not hold the image, neither
can be checked, and the step says so instead of failing: the artifacts can still be
named with ``--artifacts DIR``.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.attest.predicate import SignedImage
from gate.container.reference import parse
from gate.container.runtime import ImageFacts, find, inspect
from gate.errors import GateError
from gate.fsutil import sha256_file
from gate.image import runtime as saving
from gate.image.blobs import TarStore
from gate.image.layout import read_image
from gate.image.merge import merge

SEPARATOR = "!/"


@dataclass(frozen=True)
class ImageCheck:
    """What step 2 learned about the image: problems, what could not be checked (and why),
    the subjects it stands for and their digests here (None: not found in the image)."""

    problems: tuple[str, ...]
    unchecked: tuple[str, ...]
    covered: frozenset[str]  # subject names: the image's, and the artifacts read from it
    found: Mapping[str, str | None]  # subject name -> sha256 here

    def compare(self, name: str, expected: str) -> str | None:
        """Why the subject ``name`` differs here, or None (also when it could not be read)."""
        if self.unchecked or self.problems:
            return None  # not read, or the image is another one: said once, in problems
        actual = self.found.get(name)
        if actual is None:
            return f"{name}: not found in the image"
        if actual != expected:
            return (
                f"{name}: sha256 {actual[:16]}... in the image, manifest records {expected[:16]}..."
            )
        return None


NOTHING = ImageCheck((), (), frozenset(), {})


def look(
    image: SignedImage | None, paths: Mapping[str, str | None], artifacts_dir: Path | None
) -> ImageCheck:
    """The image's subject and the artifacts recorded in it (``paths``: subject -> path),
    checked by the runtime here; with ``artifacts_dir`` the artifacts are read from there."""
    if image is None:
        return NOTHING
    from_image = (
        {}
        if artifacts_dir is not None
        else {name: path for name, path in paths.items() if path is not None and in_image(path)}
    )
    if image.subject is None and not from_image:
        return NOTHING
    looked = check(image, tuple(from_image.values()))
    covered = set(from_image) | ({image.subject} if image.subject else set())
    found: dict[str, str | None] = {n: looked.hashed.get(p) for n, p in from_image.items()}
    if image.subject and image.digest:
        found[image.subject] = image.digest.removeprefix("sha256:")  # checked in `check`
    return ImageCheck(looked.problems, looked.unchecked, frozenset(covered), found)


@dataclass(frozen=True)
class _Looked:
    problems: tuple[str, ...]
    unchecked: tuple[str, ...]
    hashed: Mapping[str, str]  # recorded path -> sha256 of the file in the image


def in_image(path: str | None) -> bool:
    """Whether a recorded artifact path names a file of an image (``IMAGE!/path``)."""
    return path is not None and SEPARATOR in path


def check(image: SignedImage, paths: tuple[str, ...]) -> _Looked:
    """The image subject against the runtime here, and ``paths`` (``IMAGE!/path``) hashed."""
    try:
        reference = parse(image.reference)
        runtime = find(image.runtime)
        facts = inspect(runtime, reference)
    except GateError as e:
        why = f"image {image.reference}: not checked here ({e.one_line()})"
        return _Looked((), (why,), {})
    if image.digest is not None and image.digest not in facts.digests:
        held = ", ".join(facts.digests) or facts.image_id
        problem = (
            f"image {image.reference}: {runtime.name} holds it as {held}, "
            f"the manifest records {image.digest}"
        )
        return _Looked((problem,), (), {})
    try:
        hashed = _hashed(runtime.name, runtime.program, facts, paths) if paths else {}
    except GateError as e:
        return _Looked((), (f"image {image.reference}: its files not read ({e.one_line()})",), {})
    return _Looked((), (), hashed)


def _hashed(tool: str, program: str, facts: ImageFacts, paths: tuple[str, ...]) -> dict[str, str]:
    """Each ``IMAGE!/path``'s SHA-256 as the image's layers hold the file."""
    wanted = {p: p.split(SEPARATOR, 1)[1] for p in paths}
    with tempfile.TemporaryDirectory(prefix="cuda-gate-verify-image-") as work:
        saved = saving.save(tool, facts.run_name, Path(work), program=program)
        with tarfile.open(saved.path, "r:") as tar:
            store = TarStore(tar, facts.reference.text)
            image = read_image(store, facts.reference.text, "oci-archive", None, None)
            inside = set(wanted.values())
            merged = merge(store, image, dest=Path(work) / "root", select=lambda p, _h: p in inside)
            return {
                recorded: sha256_file(merged.dest / path)
                for recorded, path in wanted.items()
                if merged.dest is not None and path in merged.written
            }

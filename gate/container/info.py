"""What a run records about the image it ran in: :class:`ContainerInfo`, in result.json.

Two ways a run is in an image. ``runtime``: ``cuda-gate run --image`` ran every
command in containers of it, and the runtime's own inspection gave the digest.
``inside``: the gate itself runs in a container (the workflow's ``container:`` job), named
by ``CUDA_GATE_IMAGE``; the runner's runtime pulled it by the digest its reference pins
(the runner-classes schema takes only pinned images), so the digest is the pin. A
reference without a pin records no digest: from inside, nothing can vouch for one.
Which runtime started the container is read from what each leaves inside
(``/run/.containerenv``: podman, which also names the image and its id there;
``/.dockerenv``: docker).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.container.place import InImage
from gate.container.reference import parse
from gate.errors import BadInputError

IMAGE_VARIABLE = "CUDA_GATE_IMAGE"
MODES = ("runtime", "inside")
_CONTAINERENV = Path("/run/.containerenv")
_DOCKERENV = Path("/.dockerenv")
_FIELD = re.compile(r'^(\w+)="?([^"\n]*)"?$', re.MULTILINE)


@dataclass(frozen=True)
class ContainerInfo:
    """The delivery image a run was in, and how that is known."""

    reference: str  # as given
    digest: str | None  # the manifest digest, "sha256:<hex>"
    mode: str = "inside"  # "runtime" (--image) or "inside" (the gate ran in it)
    digest_source: str | None = None  # "runtime", "pin", "environment" (before version 6)
    image_id: str | None = None
    name: str | None = None  # the repository: the manifest subject's name
    platform: str | None = None
    runtime: str | None = None  # "podman", "docker"
    runtime_version: str | None = None
    gpus: str | None = None  # what was passed to the container, or why nothing was

    def subject(self) -> tuple[str, str] | None:
        """The in-toto subject (name, sha256 hex) for the image, when its digest is known."""
        if self.digest is None or not self.digest.startswith("sha256:"):
            return None
        return self.name or self.reference, self.digest.removeprefix("sha256:")

    def to_json(self) -> dict[str, Any]:
        """``environment.container`` in result.json (version 6)."""
        return {
            "mode": self.mode,
            "reference": self.reference,
            "name": self.name,
            "digest": self.digest,
            "digest_source": self.digest_source,
            "image_id": self.image_id,
            "platform": self.platform,
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            "gpus": self.gpus,
            # Before version 6 the reference was ``image``: kept for readers of that name.
            "image": self.reference,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> ContainerInfo:
        """Version 6's object, or the ``{image, digest}`` of earlier versions."""

        def text(key: str) -> str | None:
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise BadInputError(f"{where}: container {key!r} is not a string")
            return value

        reference = text("reference") or text("image")
        if reference is None:
            raise BadInputError(f"{where}: container has no 'reference'")
        mode = text("mode") or "inside"
        if mode not in MODES:
            raise BadInputError(f"{where}: container mode {mode!r} is not one of {MODES}")
        old = "mode" not in data
        return cls(
            reference=reference,
            digest=text("digest"),
            mode=mode,
            digest_source="environment" if old and data.get("digest") else text("digest_source"),
            image_id=text("image_id"),
            name=text("name"),
            platform=text("platform"),
            runtime=text("runtime"),
            runtime_version=text("runtime_version"),
            gpus=text("gpus"),
        )


def of_place(place: InImage) -> ContainerInfo:
    """What ``cuda-gate run --image`` records: the runtime's own facts."""
    image = place.image
    return ContainerInfo(
        reference=image.reference.text,
        digest=image.digest,
        mode="runtime",
        digest_source="runtime" if image.digest else None,
        image_id=image.image_id,
        name=image.reference.subject_name(),
        platform=image.platform,
        runtime=place.runtime.name,
        runtime_version=place.runtime.version,
        gpus=place.gpus_said,
    )


def inside(
    environ: Mapping[str, str] | None = None,
    containerenv: Path = _CONTAINERENV,
    dockerenv: Path = _DOCKERENV,
) -> ContainerInfo | None:
    """The image the gate runs inside, named by ``CUDA_GATE_IMAGE``; None outside one."""
    env = os.environ if environ is None else environ
    given = env.get(IMAGE_VARIABLE, "").strip()
    if not given:
        return None
    fields = _containerenv(containerenv)
    runtime = "podman" if fields is not None else ("docker" if dockerenv.exists() else None)
    try:
        reference = parse(given)
    except BadInputError:
        return ContainerInfo(given, None, runtime=runtime)
    image_id = fields.get("imageid") if fields else None
    return ContainerInfo(
        reference=given,
        digest=reference.digest,
        mode="inside",
        digest_source="pin" if reference.digest else None,
        image_id=f"sha256:{image_id}" if image_id and ":" not in image_id else image_id,
        name=reference.subject_name(),
        runtime=runtime,
        runtime_version=fields.get("version") if fields else None,
    )


def _containerenv(path: Path) -> dict[str, str] | None:
    """podman's ``/run/.containerenv`` fields (empty when it is empty); None when absent."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return {m.group(1): m.group(2) for m in _FIELD.finditer(text)}

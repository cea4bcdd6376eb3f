"""Image platforms (``linux/arm64/v8``) and choosing one image from a multi-platform index."""

from __future__ import annotations

import platform as host
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gate.errors import BadInputError, ConfigError

# `uname -m` to the Go architecture names images use (the OCI image spec's platform field).
_ARCHITECTURES = {
    "x86_64": ("amd64", None),
    "amd64": ("amd64", None),
    "aarch64": ("arm64", None),
    "arm64": ("arm64", None),
    "armv7l": ("arm", "v7"),
    "armv6l": ("arm", "v6"),
    "i386": ("386", None),
    "i686": ("386", None),
    "ppc64le": ("ppc64le", None),
    "s390x": ("s390x", None),
    "riscv64": ("riscv64", None),
}
_PART = re.compile(r"^[a-z0-9_.-]+$")


@dataclass(frozen=True, slots=True)
class Platform:
    """An image's operating system, architecture and (ARM) variant."""

    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)

    @classmethod
    def parse(cls, text: str) -> Platform:
        """``os/arch`` or ``os/arch/variant``; ConfigError otherwise."""
        parts = text.strip().lower().split("/")
        if not 2 <= len(parts) <= 3 or not all(_PART.match(p) for p in parts):
            raise ConfigError(f"--platform: not os/arch[/variant]: {text[:60]!r}")
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None).normal()

    @classmethod
    def host(cls) -> Platform:
        """This machine's platform, as images name it."""
        machine = host.machine().lower()
        architecture, variant = _ARCHITECTURES.get(machine, (machine, None))
        return cls("linux", architecture, variant)

    def normal(self) -> Platform:
        """arm64's only variant, v8, is the same as none (images write it either way)."""
        if self.architecture == "arm64" and self.variant == "v8":
            return Platform(self.os, self.architecture)
        return self

    def matches(self, wanted: Platform) -> bool:
        """Same os and architecture, and the same variant when ``wanted`` names one."""
        mine, other = self.normal(), wanted.normal()
        if (mine.os, mine.architecture) != (other.os, other.architecture):
            return False
        return other.variant is None or mine.variant == other.variant


@dataclass(frozen=True, slots=True)
class Candidate:
    """One image manifest an index lists: its digest, size, platform and reference name."""

    digest: str
    size: int | None
    platform: Platform
    ref: str | None
    media_type: str | None = None


def choose(
    found: Sequence[Candidate], wanted: Platform | None, ref: str | None, name: str
) -> Candidate:
    """The one image to read: by reference name, then platform (default: the host's).

    A single image is read whatever its platform unless one was asked for; among
    several, the host's platform is the default. Every refusal lists what is there.
    """
    images = [c for c in found if c.platform.os != "unknown"]  # attestations, not images
    if ref is not None:
        images = [c for c in images if c.ref == ref]
        if not images:
            refs = sorted({c.ref for c in found if c.ref})
            raise BadInputError(
                f"{name}: no image named {ref!r}; it has: {', '.join(refs) or 'no names'}"
            )
    if not images:
        raise BadInputError(f"{name}: no image manifest in the index")
    available = ", ".join(sorted({str(c.platform) for c in images}))
    if wanted is not None:
        matching = [c for c in images if c.platform.matches(wanted)]
        if not matching:
            raise BadInputError(f"{name}: no {wanted} image; it has: {available}")
    elif len(images) == 1:
        matching = images
    else:
        matching = [c for c in images if c.platform.matches(Platform.host())]
        if not matching:
            raise BadInputError(
                f"{name}: no image for this machine ({Platform.host()}); it has: {available}",
                hint="choose one with --platform",
            )
    distinct = {c.digest: c for c in matching}
    if len(distinct) > 1:
        named = sorted(f"{c.ref or c.digest} ({c.platform})" for c in distinct.values())
        raise BadInputError(
            f"{name}: {len(distinct)} images match: {', '.join(named)}",
            hint="name one as oci:PATH:REF, or choose with --platform",
        )
    return matching[0]

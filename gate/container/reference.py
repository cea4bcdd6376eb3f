"""An image reference as the user wrote it: ``name[:tag][@sha256:...]``, or an image id.

Parsed once at the edge (distribution/reference's grammar, reduced to what the gate
needs): the repository name, the tag, the pinned digest. A tag's colon comes after the
last ``/`` (``registry:5000/app`` has a port, not a tag). A pin is ``sha256:`` and 64
lowercase hex digits; anything else after ``@`` is refused. An image id (64 hex digits,
with or without ``sha256:``) names an image of the local runtime by its config digest.

Lengths are the grammar's too: a repository name (registry host included, as written) of
at most 255 characters, as docker's and podman's parsers (containers/image
``docker/reference``: ``NameTotalLengthMax``) and the OCI distribution spec's clients hold
it; a tag of at most 128. Longer is refused here, before any runtime is asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gate.errors import BadInputError

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# Repository path components and tags as the distribution spec allows them.
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]+)?$")
_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TAG = re.compile(r"^[\w][\w.-]*$", re.ASCII)  # Go's \w: ASCII only
# distribution/reference: NameTotalLengthMax (counted over the name as written) and the
# tag pattern's {0,127}.
NAME_MAX = 255
TAG_MAX = 128
_SHOWN = 120


@dataclass(frozen=True, slots=True)
class Reference:
    """One image reference: what names it, and what pins it."""

    text: str  # as given
    name: str | None  # the repository (None for an image id)
    tag: str | None
    digest: str | None  # the pinned manifest digest, "sha256:<hex>"
    image_id: str | None = None  # "sha256:<hex>" when the text is an image id

    @property
    def pinned(self) -> bool:
        """Whether the reference names one manifest (``name@sha256:...``)."""
        return self.digest is not None

    def subject_name(self) -> str:
        """The in-toto subject's name: the repository, else the image id."""
        return self.name or self.image_id or self.text


def parse(text: str) -> Reference:
    """The reference ``text`` names; BadInputError (one line) when it is not one."""
    given = text.strip()
    shown = _shorten(given)
    if not given or any(c.isspace() for c in given) or "://" in given:
        raise BadInputError(
            f"image {shown!r}: not an image reference (name[:tag][@sha256:...] or an image id)"
        )
    bare = given.removeprefix("sha256:")
    if _HEX64.match(bare):
        return Reference(given, None, None, None, f"sha256:{bare}")
    rest, at, digest = given.partition("@")
    if at and not _DIGEST.match(digest):
        raise BadInputError(
            f"image {shown!r}: the pin after '@' must be sha256: and 64 lowercase hex digits"
        )
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    name, tag = (rest[:colon], rest[colon + 1 :]) if colon > slash else (rest, None)
    if len(name) > NAME_MAX:
        raise BadInputError(f"image {shown!r}: {_too_long(name, NAME_MAX, 'repository name')}")
    if not _good_name(name):
        raise BadInputError(f"image {shown!r}: {_shorten(name)!r} is not a repository name")
    if tag is not None and len(tag) > TAG_MAX:
        raise BadInputError(f"image {shown!r}: {_too_long(tag, TAG_MAX, 'tag')}")
    if tag is not None and not _TAG.match(tag):
        raise BadInputError(f"image {shown!r}: {_shorten(tag)!r} is not a tag")
    return Reference(given, name, tag, digest if at else None)


def _too_long(part: str, most: int, what: str) -> str:
    """The problem with a name or tag past the grammar's length, in a few words."""
    return (
        f"{_shorten(part)!r} is not a {what}: {len(part)} characters, "
        f"more than the {most} a reference allows"
    )


def _shorten(text: str) -> str:
    """``text``, cut to fit one line of an error."""
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _good_name(name: str) -> bool:
    """Path components, the first of which may be a registry host with a port."""
    parts = name.split("/")
    first, rest = (parts[0], parts[1:]) if len(parts) > 1 else (None, parts)
    if first is not None and not _HOST.match(first):
        return False
    return all(_COMPONENT.match(part) for part in rest)


def same_repository(stored: str, given: str) -> bool:
    """Whether a runtime's repository name is the one the user wrote: runtimes keep names
    whole (``app`` is ``localhost/app`` to podman, ``docker.io/library/app`` to docker)."""
    return stored == given or stored.endswith(f"/{given}")

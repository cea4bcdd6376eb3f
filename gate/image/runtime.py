"""An image of the local podman or docker, saved to a tarball to be read like any other.

podman saves an ``oci-archive`` with ``--uncompressed``: the layers stay as podman
stores them, so the archive's manifest is the one podman holds and its digest the one
``podman image inspect --format '{{.Digest}}'`` prints (recorded beside it, so a
difference would show). docker saves a ``docker-archive`` (with an OCI index from
Docker 25 on).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate import proc

# Saving a large image (several GB of layers) is disk-bound.
SAVE_TIMEOUT = 1800.0
INSPECT_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Saved:
    """The tarball written and the manifest digest the runtime reports (podman only)."""

    path: Path
    digest: str | None


def save(tool: str, name: str, into: Path, program: str | None = None) -> Saved:
    """``podman``/``docker image save`` of ``name`` into ``into``; ToolError if it fails.

    ``program`` is the runtime's path when the caller found it already (else ``tool``
    is looked up on PATH).
    """
    program = program or proc.which(tool)
    target = into / "image.tar"
    if tool == "podman":
        argv = [program, "image", "save", "--format", "oci-archive", "--uncompressed"]
    else:
        argv = [program, "image", "save"]
    proc.run_checked(
        [*argv, "-o", str(target), name], what=f"{tool} image save", timeout=SAVE_TIMEOUT
    )
    digest = None
    if tool == "podman":
        shown = proc.run_checked(
            [program, "image", "inspect", "--format", "{{.Digest}}", name],
            what=f"{tool} image inspect",
            timeout=INSPECT_TIMEOUT,
        )
        digest = shown.stdout.strip() or None
    return Saved(target, digest)

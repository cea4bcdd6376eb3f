"""OCI image layouts written by hand with the standard library (tar, gzip, json, sha256).

What the image spec says a layout is: ``oci-layout``, ``index.json`` and
``blobs/sha256/<hex>`` (manifest, config, layer tarballs), every blob named by its
digest. Tests build layers member by member, including the whiteouts, links, device
nodes and hostile names a real builder would not write.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Member:
    """One tar member of a layer: a file (data), a folder, or a link/device by type."""

    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    mode: int = 0o644


def folder(name: str) -> Member:
    return Member(name, type=tarfile.DIRTYPE, mode=0o755)


def symlink(name: str, target: str) -> Member:
    return Member(name, type=tarfile.SYMTYPE, linkname=target, mode=0o777)


def hardlink(name: str, target: str) -> Member:
    return Member(name, type=tarfile.LNKTYPE, linkname=target)


def whiteout(path: str) -> Member:
    parent, _, base = path.rpartition("/")
    return Member(f"{parent}/.wh.{base}" if parent else f".wh.{base}")


def opaque(folder_path: str) -> Member:
    return Member(f"{folder_path}/.wh..wh..opq")


def layer_tar(members: list[Member]) -> bytes:
    """The uncompressed tar of a layer, members in the order given."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type, info.linkname, info.mode = m.type, m.linkname, m.mode
            info.size = len(m.data) if m.type == tarfile.REGTYPE else 0
            if m.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            tar.addfile(info, io.BytesIO(m.data) if m.type == tarfile.REGTYPE else None)
    return out.getvalue()


def sha(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


@dataclass
class Layout:
    """A layout being written: its folder and the digests of what it holds."""

    root: Path
    manifests: list[dict[str, Any]] = field(default_factory=list)
    layer_digests: list[str] = field(default_factory=list)

    def blob(self, data: bytes) -> str:
        digest = sha(data)
        path = self.root / "blobs" / "sha256" / digest.split(":")[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return digest

    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / "sha256" / digest.split(":")[1]

    def image(
        self,
        layers: list[list[Member]],
        *,
        compression: str = "gzip",
        arch: str = "amd64",
        ref: str | None = None,
        platform_in_index: bool = False,
    ) -> str:
        """Add one image (its layers, config and manifest); the manifest's digest."""
        descriptors, diff_ids = [], []
        self.layer_digests = []
        for members in layers:
            tar = layer_tar(members)
            diff_ids.append(sha(tar))
            stored, media = _compress(tar, compression)
            digest = self.blob(stored)
            self.layer_digests.append(digest)
            descriptors.append({"mediaType": media, "digest": digest, "size": len(stored)})
        config = json.dumps(
            {"architecture": arch, "os": "linux",
             "rootfs": {"type": "layers", "diff_ids": diff_ids}, "config": {}}
        ).encode()  # fmt: skip
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": self.blob(config),
                    "size": len(config),
                },
                "layers": descriptors,
            }
        ).encode()
        digest = self.blob(manifest)
        entry: dict[str, Any] = {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "size": len(manifest),
        }
        if platform_in_index:
            entry["platform"] = {"architecture": arch, "os": "linux"}
        if ref:
            entry["annotations"] = {"org.opencontainers.image.ref.name": ref}
        self.manifests.append(entry)
        self.finish()
        return digest

    def finish(self) -> None:
        (self.root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        index = {"schemaVersion": 2, "manifests": self.manifests}
        (self.root / "index.json").write_text(json.dumps(index))


def _compress(tar: bytes, compression: str) -> tuple[bytes, str]:
    if compression == "gzip":
        return gzip.compress(tar, mtime=0), f"{LAYER_TAR}+gzip"
    if compression == "zstd":
        return zstandard.ZstdCompressor().compress(tar), f"{LAYER_TAR}+zstd"
    return tar, LAYER_TAR


def archive(layout: Path, target: Path) -> Path:
    """The layout as an oci-archive tarball."""
    with tarfile.open(target, "w") as tar:
        for path in sorted(layout.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(layout)), recursive=False)
    return target

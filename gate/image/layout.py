"""One image of a layout or an archive: its manifest digest, config, platform and layers.

An OCI layout (a folder, or the tarball ``oci-archive`` is) starts at ``index.json``,
whose entries are manifests or further indexes (multi-platform images); the one image
is chosen by reference name and platform (:mod:`gate.image.platforms`). A
``docker-archive`` (``docker save``, ``podman save --format docker-archive``) has no
manifest, only ``manifest.json`` naming each image's config and layer tarballs; its
digest is the one podman and skopeo give the image when they load the archive: the
SHA-256 of the schema 2 manifest they derive from it, reproduced here byte for byte.
An archive holding both (Docker 25 and later) is read as the OCI layout it also is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gate.errors import BadInputError
from gate.image.blobs import Expected, Store, blob_path, check_digest, read_json
from gate.image.platforms import Candidate, Platform, choose
from gate.reader.artifacts import shown

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+prettyjws"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
# What c/image's docker-archive source says of every layer, compressed or not.
DOCKER_ARCHIVE_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
REF_NAME = "org.opencontainers.image.ref.name"
_INDEXES = (OCI_INDEX, DOCKER_LIST)
# Indexes inside indexes: real ones nest once (a layout's index naming a platform index).
_MAX_DEPTH = 4
_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer: its place in the manifest, its blob and the digest of its tar (diff_id)."""

    index: int
    digest: str
    media_type: str
    size: int | None
    diff_id: str | None
    path: str  # inside the layout or archive
    stored: str | None  # what the stored bytes hash to, where the archive says

    def label(self) -> str:
        """How errors name it."""
        return f"layer {self.index} {self.digest}"


@dataclass(frozen=True, slots=True)
class Image:
    """The image read: what pins it, what it is for, and its layers bottom first."""

    source: str
    kind: str  # "oci", "oci-archive", "docker-archive"
    digest: str  # the manifest digest: what name@sha256:... pins
    digest_of: str  # what ``digest`` is the hash of, in words
    config_digest: str  # the image id
    platform: Platform
    layers: tuple[Layer, ...]
    ref: str | None = None
    runtime_digest: str | None = None  # what the runtime reports, when read through one

    def to_json(self) -> dict[str, Any]:
        """The image as the inspect document holds it."""
        return {
            "source": self.source,
            "kind": self.kind,
            "digest": self.digest,
            "digest_of": self.digest_of,
            "runtime_digest": self.runtime_digest,
            "config_digest": self.config_digest,
            "platform": str(self.platform),
            "ref": self.ref,
            "layers": [
                {
                    "digest": layer.digest,
                    "media_type": layer.media_type,
                    "size": layer.size,
                    "diff_id": layer.diff_id,
                }
                for layer in self.layers
            ],
        }


def read_image(
    store: Store, source: str, kind: str, wanted: Platform | None, ref: str | None
) -> Image:
    """The image of a layout or archive; an OCI layout is preferred when both are there."""
    if store.exists("index.json"):
        return _read_oci(store, source, kind, wanted, ref)
    if store.exists("manifest.json"):
        return _read_docker(store, source, wanted, ref)
    raise BadInputError(f"{store.name}: no index.json or manifest.json: not an image")


def _descriptor(raw: object, where: str) -> tuple[str, int | None, str | None, dict[str, Any]]:
    """digest, size, mediaType and the whole descriptor; BadInputError when malformed."""
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: a descriptor that is not an object")
    digest = check_digest(raw.get("digest"), where)
    size = raw.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise BadInputError(f"{where}: descriptor {digest}: size is not a whole number")
    media = raw.get("mediaType")
    return digest, size, media if isinstance(media, str) else None, raw


def _platform(raw: object) -> Platform | None:
    if not isinstance(raw, dict):
        return None
    os_, arch = raw.get("os"), raw.get("architecture")
    if not isinstance(os_, str) or not isinstance(arch, str):
        return None
    variant = raw.get("variant")
    return Platform(os_, arch, variant if isinstance(variant, str) and variant else None)


def _candidates(store: Store, index: dict[str, Any], label: str, depth: int) -> Iterator[Candidate]:
    """Every manifest an index lists, nested indexes opened (platforms from descriptors)."""
    manifests = index.get("manifests")
    if not isinstance(manifests, list):
        raise BadInputError(f"{store.name}: {label}: no manifests list")
    for raw in manifests:
        digest, size, media, desc = _descriptor(raw, f"{store.name}: {label}")
        annotations = desc.get("annotations")
        ref = annotations.get(REF_NAME) if isinstance(annotations, dict) else None
        ref = ref if isinstance(ref, str) else None
        if media in _INDEXES:
            if depth >= _MAX_DEPTH:
                raise BadInputError(f"{store.name}: indexes nested past {_MAX_DEPTH} levels")
            nested = read_json(store, blob_path(digest), Expected(digest, size, f"index {digest}"))
            for found in _candidates(store, nested, f"index {digest}", depth + 1):
                yield Candidate(found.digest, found.size, found.platform, found.ref or ref)
            continue
        platform = _platform(desc.get("platform"))
        if platform is None:  # a layout's single image: the platform is in its config
            manifest = _manifest(store, digest, size)
            platform = _config_platform(store, manifest)[1]
        yield Candidate(digest, size, platform, ref, media)


def _manifest(store: Store, digest: str, size: int | None) -> dict[str, Any]:
    manifest = read_json(store, blob_path(digest), Expected(digest, size, f"manifest {digest}"))
    media = manifest.get("mediaType")
    if media == DOCKER_SCHEMA1 or manifest.get("schemaVersion") == 1:
        raise BadInputError(f"{store.name}: manifest {digest}: Docker schema 1, not supported")
    if "layers" not in manifest or "config" not in manifest:
        raise BadInputError(f"{store.name}: manifest {digest}: no config or layers")
    return manifest


def _config_platform(store: Store, manifest: dict[str, Any]) -> tuple[dict[str, Any], Platform]:
    digest, size, _, _ = _descriptor(manifest.get("config"), f"{store.name}: config")
    config = read_json(store, blob_path(digest), Expected(digest, size, f"config {digest}"))
    platform = _platform(config)
    if platform is None:
        raise BadInputError(f"{store.name}: config {digest}: no os and architecture")
    return config, platform


def _diff_ids(config: dict[str, Any], count: int, where: str) -> tuple[str, ...]:
    rootfs = config.get("rootfs")
    ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(ids, list) or len(ids) != count:
        raise BadInputError(
            f"{where}: the config lists {len(ids or [])} diff_ids for {count} layers"
        )
    return tuple(check_digest(d, where) for d in ids)


def _read_oci(
    store: Store, source: str, kind: str, wanted: Platform | None, ref: str | None
) -> Image:
    index = read_json(store, "index.json", Expected(None, None, "index.json"))
    chosen = choose(list(_candidates(store, index, "index.json", 0)), wanted, ref, store.name)
    manifest = _manifest(store, chosen.digest, chosen.size)
    config, platform = _config_platform(store, manifest)
    config_digest = check_digest(manifest["config"].get("digest"), store.name)
    raw_layers = manifest["layers"]
    if not isinstance(raw_layers, list):
        raise BadInputError(f"{store.name}: manifest {chosen.digest}: layers is not a list")
    diff_ids = _diff_ids(config, len(raw_layers), f"{store.name}: config {config_digest}")
    layers = []
    for i, raw in enumerate(raw_layers):
        digest, size, media, _ = _descriptor(raw, f"{store.name}: manifest {chosen.digest}")
        layers.append(Layer(i, digest, media or "", size, diff_ids[i], blob_path(digest), digest))
    return Image(
        source, kind, chosen.digest, "the image manifest", config_digest, platform,
        tuple(layers), chosen.ref,
    )  # fmt: skip


def _read_docker(store: Store, source: str, wanted: Platform | None, ref: str | None) -> Image:
    listed = read_json_list(store, "manifest.json")
    if ref is not None:
        listed = [m for m in listed if ref in (m.get("RepoTags") or [])]
        if not listed:
            raise BadInputError(f"{store.name}: no image tagged {ref!r}")
    if len(listed) != 1:
        tags = sorted(t for m in listed for t in m.get("RepoTags") or [] if isinstance(t, str))
        raise BadInputError(
            f"{store.name}: {len(listed)} images: {', '.join(tags) or 'untagged'}",
            hint="name one as docker-archive:PATH:NAME:TAG",
        )
    (entry,) = listed
    config_path, layer_paths = entry.get("Config"), entry.get("Layers")
    if not isinstance(config_path, str) or not isinstance(layer_paths, list):
        raise BadInputError(f"{store.name}: manifest.json: no Config or Layers")
    config_digest = _named_digest(config_path)
    config = read_json(
        store, config_path, Expected(config_digest, None, f"config {shown(config_path)}")
    )
    config_digest = config_digest or _sha256_of(store, config_path)
    platform = _platform(config)
    if platform is None:
        raise BadInputError(f"{store.name}: config {config_digest}: no os and architecture")
    if wanted is not None and not platform.matches(wanted):
        raise BadInputError(f"{store.name}: no {wanted} image; it has: {platform}")
    diff_ids = _diff_ids(config, len(layer_paths), f"{store.name}: config {config_digest}")
    layers = []
    for i, path in enumerate(layer_paths):
        if not isinstance(path, str):
            raise BadInputError(f"{store.name}: manifest.json: a layer path that is not text")
        layers.append(
            Layer(i, diff_ids[i], DOCKER_ARCHIVE_LAYER, store.size(path), diff_ids[i], path,
                  _named_digest(path))
        )  # fmt: skip
    tags = [t for t in entry.get("RepoTags") or [] if isinstance(t, str)]
    return Image(
        source, "docker-archive", _derived_digest(store, config_path, config_digest, layers),
        "the schema 2 manifest podman and skopeo derive when loading the archive",
        config_digest, platform, tuple(layers), tags[0] if tags else None,
    )  # fmt: skip


def read_json_list(store: Store, path: str) -> list[dict[str, Any]]:
    """docker-archive's manifest.json: a list of objects."""
    with store.open(path) as handle:
        data = handle.read(16 << 20)
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadInputError(f"{store.name}: {path}: not JSON ({e})") from e
    if not isinstance(parsed, list) or not all(isinstance(m, dict) for m in parsed):
        raise BadInputError(f"{store.name}: {path}: not a list of images")
    return parsed


def _named_digest(path: str) -> str | None:
    """The digest a docker-archive file is named by (``<hex>.json``, ``blobs/sha256/<hex>``)."""
    name = path.rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".tar")
    return f"sha256:{name}" if _HEX.match(name) else None


def _sha256_of(store: Store, path: str) -> str:
    sha = hashlib.sha256()
    with store.open(path) as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
    return f"sha256:{sha.hexdigest()}"


def _derived_digest(store: Store, config_path: str, config_digest: str, layers: list[Layer]) -> str:
    """The digest of the schema 2 manifest c/image's docker-archive source derives.

    Field order and compact separators are Go's encoding of its manifest struct; every
    layer is called gzip there and sized as stored, its digest the diff_id.
    """
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {
            "mediaType": DOCKER_CONFIG,
            "size": store.size(config_path),
            "digest": config_digest,
        },
        "layers": [
            {"mediaType": DOCKER_ARCHIVE_LAYER, "size": layer.size, "digest": layer.diff_id}
            for layer in layers
        ],
    }
    text = json.dumps(manifest, separators=(",", ":")).encode("utf-8")
    return f"sha256:{hashlib.sha256(text).hexdigest()}"

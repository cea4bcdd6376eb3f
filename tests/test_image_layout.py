"""Container images read without a runtime: layers merged with whiteouts, digests checked.

Layouts are written by hand (tests/oci_layouts.py); the shared library in them is the
nvcc-built golden one (tests/golden/libkernels.so). The integration tests build one
with nvcc and read podman's own tarballs (tests/test_image_cli.py).
"""

from __future__ import annotations

import gzip
import json
import tarfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.cli import main
from gate.errors import BadInputError, ExitCode
from gate.image.layout import read_image
from gate.image.merge import Kind, Merged, merge
from gate.image.platforms import Platform
from gate.image.source import Source, opened, parse
from gate.reader.limits import Limits
from tests.oci_layouts import (
    Layout,
    Member,
    archive,
    folder,
    hardlink,
    opaque,
    symlink,
    whiteout,
)

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
LIB = (GOLDEN / "libkernels.so").read_bytes()


def two_layers() -> list[list[Member]]:
    """A base layer, and one that deletes a library, empties a folder and adds files."""
    base = [
        folder("usr"), folder("usr/lib"),
        Member("usr/lib/libkernels.so", LIB),
        Member("usr/lib/libgone.so", LIB),
        folder("opt"), folder("opt/plugins"),
        Member("opt/plugins/old.so", LIB),
        Member("etc/os-release", b"ID=test\n"),
        folder("site/pkg-1.0.dist-info"),
        Member("site/pkg-1.0.dist-info/METADATA", b"Name: pkg\nVersion: 1.0\n"),
    ]  # fmt: skip
    top = [
        whiteout("usr/lib/libgone.so"),
        opaque("opt/plugins"),
        Member("opt/plugins/new.so", LIB),
        symlink("usr/lib/libkernels.so.1", "libkernels.so"),
        hardlink("usr/lib/libsame.so", "usr/lib/libkernels.so"),
        Member("dev/null", type=tarfile.CHRTYPE),
        Member("etc/os-release", b"ID=test2\n"),
    ]
    return [base, top]


def read(root: Path, dest: Path | None = None, **kwargs: Any) -> Merged:
    source = parse(str(root)) or Source(str(root), "oci", root, None)
    with opened(source, root) as (store, _):
        image = read_image(store, source.text, source.kind, kwargs.pop("platform", None), None)
        return merge(store, image, dest=dest, limits=Limits(), **kwargs)


def test_layers_merge_with_whiteouts_and_each_file_keeps_its_layer(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "img")
    digest = layout.image(two_layers())
    merged = read(layout.root, tmp_path / "out")
    assert merged.image.digest == digest
    bottom, top = layout.layer_digests
    entries = merged.entries
    assert "usr/lib/libgone.so" not in entries  # .wh.libgone.so
    assert "opt/plugins/old.so" not in entries  # the opaque folder hid it
    assert (entries["opt/plugins/new.so"].layer, entries["opt/plugins/new.so"].layer_digest) == (
        1,
        top,
    )
    assert entries["opt/plugins"].kind is Kind.DIR
    lib = entries["usr/lib/libkernels.so"]
    assert (lib.layer, lib.layer_digest, lib.size, lib.kind) == (0, bottom, len(LIB), Kind.FILE)
    assert entries["usr/lib/libkernels.so.1"].link == "libkernels.so"
    assert entries["usr/lib/libsame.so"].kind is Kind.HARDLINK
    assert entries["usr/lib/libsame.so"].size == len(LIB)
    assert entries["etc/os-release"].layer == 1
    assert entries["dev/null"].kind is Kind.DEVICE
    # Only candidates are written: libraries and dist-info metadata, no text, link or device.
    assert merged.written == (
        "opt/plugins/new.so",
        "site/pkg-1.0.dist-info/METADATA",
        "usr/lib/libkernels.so",
        "usr/lib/libsame.so",
    )
    out = tmp_path / "out"
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir())
    assert on_disk == list(merged.written)
    assert (out / "usr/lib/libsame.so").read_bytes() == LIB


def test_the_view_alone_writes_nothing(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "img")
    layout.image(two_layers())
    merged = read(layout.root)
    assert merged.written == ()
    assert "usr/lib/libkernels.so" in merged.entries


def test_a_file_over_a_folder_replaces_the_folder_and_a_folder_over_a_link_replaces_it(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path / "img")
    layout.image(
        [
            [Member("a/b/x.so", LIB), symlink("lib", "usr/lib")],
            [Member("a/b", b"now a file\n"), Member("lib/y.so", LIB)],
        ]
    )
    merged = read(layout.root, tmp_path / "out")
    assert "a/b/x.so" not in merged.entries
    assert merged.entries["a/b"].kind is Kind.FILE
    assert merged.entries["lib"].kind is Kind.DIR  # the link is not followed
    assert merged.written == ("lib/y.so",)
    assert not (tmp_path / "out/a/b/x.so").exists()


def test_the_inspect_document_names_the_image_and_each_files_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path / "img")
    digest = layout.image(two_layers())
    code = main(["inspect", "--by-file", "--json", "--device", "9.0", f"oci:{layout.root}"])
    doc = json.loads(capsys.readouterr().out)
    schema = json.loads(
        resources.files("gate").joinpath("schemas/inspect.schema.json").read_text("utf-8")
    )
    jsonschema.validate(doc, schema)
    assert code == 0
    (image,) = doc["images"]
    assert (image["digest"], image["kind"], image["platform"]) == (digest, "oci", "linux/amd64")
    placed = {a["image"]["path"]: (a["image"]["layer"], a["path"]) for a in doc["artifacts"]}
    assert placed == {
        "/opt/plugins/new.so": (1, f"oci:{layout.root}!/opt/plugins/new.so"),
        "/usr/lib/libkernels.so": (0, f"oci:{layout.root}!/usr/lib/libkernels.so"),
        "/usr/lib/libsame.so": (1, f"oci:{layout.root}!/usr/lib/libsame.so"),
    }
    assert all(a["targets"]["sass"] for a in doc["artifacts"])


def test_the_table_shows_the_image_line_and_the_layer_of_each_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path / "img")
    digest = layout.image(two_layers())
    tarball = archive(layout.root, tmp_path / "img.tar")
    assert main(["inspect", "--by-file", "--device", "9.0", str(tarball)]) == 0
    out = capsys.readouterr().out
    assert f"image {tarball}: linux/amd64, 2 layers, digest {digest}" in out
    assert f"{tarball}!/usr/lib/libkernels.so  [ELF64 x86-64]" in out
    assert f"  in layer 1 of 2 ({layout.layer_digests[0]})" in out
    assert f"  in layer 2 of 2 ({layout.layer_digests[1]})" in out
    assert "libgone" not in out
    assert "old.so" not in out


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_zstd_and_uncompressed_layers_are_read(tmp_path: Path, compression: str) -> None:
    layout = Layout(tmp_path / "img")
    layout.image(two_layers(), compression=compression)
    merged = read(layout.root, tmp_path / "out")
    assert "usr/lib/libkernels.so" in merged.written


def corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_layer_that_does_not_match_its_digest_is_one_error_naming_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "img")
    layout.image(two_layers(), compression="none")
    bad = layout.layer_digests[1]
    corrupt(layout.blob_path(bad))
    with pytest.raises(BadInputError) as caught:
        read(layout.root, tmp_path / "out")
    assert caught.value.message.startswith(f"{layout.root}: layer 1 {bad}: content hashes to ")
    assert "\n" not in caught.value.message


def test_a_gzip_layer_corrupted_mid_stream_is_reported_by_its_digest(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "img")
    layout.image(two_layers())
    bad = layout.layer_digests[0]
    corrupt(layout.blob_path(bad))
    with pytest.raises(BadInputError, match=rf"layer 0 {bad}: content hashes to "):
        read(layout.root)


def test_a_manifest_or_config_that_does_not_match_is_refused(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "img")
    manifest = layout.image(two_layers())
    manifest_path = layout.blob_path(manifest)
    config = json.loads(manifest_path.read_text())["config"]["digest"]
    layout.blob_path(config).write_bytes(b'{"os": "linux", "architecture": "arm64"}')
    with pytest.raises(BadInputError, match=rf"config {config}: \d+ bytes, the descriptor says"):
        read(layout.root)
    manifest_path.write_bytes(manifest_path.read_bytes().replace(b'"layers"', b'"layers" '))
    with pytest.raises(BadInputError, match=rf"manifest {manifest}: "):
        read(layout.root)


def test_a_layer_that_is_not_its_diff_id_is_refused(tmp_path: Path) -> None:
    """Compressed bytes and descriptor agree, yet the tar is not the one the config names."""
    layout = Layout(tmp_path / "img")
    manifest = layout.image(two_layers())
    data = json.loads(layout.blob_path(manifest).read_text())
    layer = data["layers"][0]
    other = gzip.compress(b"\0" * 1024, mtime=0)
    new = layout.blob(other)
    data["layers"][0] = {**layer, "digest": new, "size": len(other)}
    text = json.dumps(data).encode()
    layout.manifests = [{**layout.manifests[0], "digest": layout.blob(text), "size": len(text)}]
    layout.finish()
    with pytest.raises(
        BadInputError, match=r"uncompressed content hashes to .*the config's diff_id"
    ):
        read(layout.root)


@pytest.mark.parametrize(
    ("member", "said"),
    [
        (Member("../escape.so", LIB), "a path leaving the image"),
        (Member("usr/../../escape.so", LIB), "a path leaving the image"),
        (Member("/etc/passwd", b"x"), "an absolute path in a layer"),
        (hardlink("usr/lib/l.so", "../../etc/shadow"), "a path leaving the image"),
        (hardlink("usr/lib/l.so", "usr/lib/none.so"), "a hard link to usr/lib/none.so"),
        (Member("usr/.wh..."), "a whiteout of nothing"),
    ],
)
def test_names_that_leave_the_image_are_refused(tmp_path: Path, member: Member, said: str) -> None:
    layout = Layout(tmp_path / "img")
    layout.image([[Member("usr/lib/libkernels.so", LIB), member]])
    with pytest.raises(BadInputError, match=said):
        read(layout.root, tmp_path / "out")
    assert not (tmp_path / "escape.so").exists()


def test_an_image_with_a_hostile_name_fails_the_inspect_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path / "img")
    layout.image([[Member("../../escape.so", LIB)]])
    assert main(["inspect", "--no-detect", str(layout.root)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"cuda-gate: error: {layout.root}: layer 0 sha256:")
    assert "../../escape.so: a path leaving the image; refusing" in err[0]


def multi_platform(tmp_path: Path) -> Layout:
    layout = Layout(tmp_path / "img")
    layout.image([[Member("x86.so", LIB)]], arch="amd64", platform_in_index=True)
    layout.image([[Member("arm.so", LIB)]], arch="arm64", platform_in_index=True)
    return layout


def test_a_platform_is_chosen_from_a_multi_platform_index(tmp_path: Path) -> None:
    layout = multi_platform(tmp_path)
    arm = read(layout.root, platform=Platform.parse("linux/arm64/v8"))
    assert (str(arm.image.platform), list(arm.entries)) == ("linux/arm64", ["arm.so"])
    default = read(layout.root)  # the host's (these machines are amd64)
    assert str(default.image.platform) == str(Platform.host())


def test_a_missing_platform_lists_the_ones_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = multi_platform(tmp_path)
    code = main(["inspect", "--no-detect", "--platform", "linux/s390x", f"oci:{layout.root}"])
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{layout.root}: no linux/s390x image; it has: linux/amd64, linux/arm64" in err


def test_a_bad_platform_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["inspect", "--platform", "amd64", "x"])
    assert caught.value.code == ExitCode.USAGE
    assert "not os/arch[/variant]" in capsys.readouterr().err


def test_a_decompression_bomb_layer_is_refused(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "img")
    layout.image([[Member("zeros", b"\0" * (80 << 20))]])
    with pytest.raises(BadInputError, match=r"decompresses past 200x its size"):
        read(layout.root)


def test_a_registry_reference_is_refused_with_what_to_do() -> None:
    with pytest.raises(BadInputError, match="not a registry") as caught:
        parse("docker://nvidia/cuda:13.0")
    assert caught.value.hint is not None
    assert "podman:NAME" in caught.value.hint

"""`cuda-gate inspect --by-file` of container images, as a real process, with real nvcc-built
libraries: each file's table, named in the image, with its layer (the per-distribution
report of an image is tests/test_image_environment*.py's).

A layout written by hand (two layers, a whiteout, an opaque folder), and podman's own
images: imported from a tiny busybox rootfs, built on with ``podman build`` (a real
runtime's whiteout), saved as oci-archive and docker-archive, and read by name. The
podman tests need podman (and busybox-static); under ``CI=true`` they fail without it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate import proc
from gate.errors import ExitCode
from tests.containers import BUSYBOX, PodmanStore, missing, need, podman_store
from tests.oci_layouts import Layout, Member, folder, opaque, symlink, whiteout

pytestmark = pytest.mark.integration

SOURCE = "__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A shared library nvcc builds here: sm_80 SASS and compute_80 PTX."""
    nvcc = need("nvcc", "the image tests put an nvcc-built library in their images")
    work = tmp_path_factory.mktemp("nvcc")
    (work / "k.cu").write_text(SOURCE, encoding="utf-8")
    proc.run_checked(
        [nvcc, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_80", "-o", "libk.so", "k.cu"],
        cwd=work,
        timeout=300,
    )
    return (work / "libk.so").read_bytes()


def inspect(*args: str, env: dict[str, str] | None = None) -> proc.Result:
    return proc.run(
        [sys.executable, "-m", "gate", "inspect", "--no-detect", "--by-file", *args],
        env_set=env,
        timeout=300,
    )


def document(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = inspect("--json", "--device", "9.0", *args, env=env)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    schema = json.loads(
        resources.files("gate").joinpath("schemas/inspect.schema.json").read_text("utf-8")
    )
    jsonschema.validate(doc, schema)
    return doc


def by_path(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each artifact by its path in the image, without what names the source."""
    found = {}
    for art in doc["artifacts"]:
        place = art.pop("image")
        art.pop("path")
        found[place["path"]] = {**art, "layer": place["layer"]}
    return found


def test_a_hand_written_layout_reports_each_file_and_its_layer(
    tmp_path: Path, library: bytes
) -> None:
    layout = Layout(tmp_path / "img")
    digest = layout.image(
        [
            [
                folder("usr"), folder("usr/lib"), Member("usr/lib/libk.so", library),
                Member("usr/lib/libgone.so", library), folder("plugins"),
                Member("plugins/old.so", library),
            ],
            [
                whiteout("usr/lib/libgone.so"), opaque("plugins"),
                Member("plugins/new.so", library), symlink("usr/lib/libk.so.1", "libk.so"),
            ],
        ]
    )  # fmt: skip
    doc = document(f"oci:{layout.root}")
    (image,) = doc["images"]
    assert image["digest"] == digest
    assert [layer["digest"] for layer in image["layers"]] == layout.layer_digests
    found = by_path(doc)
    assert sorted(found) == ["/plugins/new.so", "/usr/lib/libk.so"]
    assert found["/usr/lib/libk.so"]["layer"] == 0
    assert found["/plugins/new.so"]["layer"] == 1
    for art in found.values():
        assert art["targets"] == {"sass": ["sm_80"], "ptx": ["compute_80"], "lto": []}
        (device,) = art["devices"]
        assert device["routes"][0]["route"].startswith("PTX JIT (compute_80")


def test_a_corrupted_blob_and_a_hostile_name_are_one_line_each_and_exit_6(
    tmp_path: Path, library: bytes
) -> None:
    bad = Layout(tmp_path / "bad")
    bad.image([[Member("usr/lib/libk.so", library)]])
    blob = bad.blob_path(bad.layer_digests[0])
    data = bytearray(blob.read_bytes())
    data[100] ^= 1
    blob.write_bytes(bytes(data))
    hostile = Layout(tmp_path / "hostile")
    hostile.image([[Member("../../../tmp/escaped.so", library)]])
    result = inspect(str(bad.root), f"oci:{hostile.root}")
    assert result.returncode == ExitCode.BAD_INPUT
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"cuda-gate: error: {bad.root}: layer 0 {bad.layer_digests[0]}: ")
    assert "content hashes to sha256:" in lines[0]
    assert "../../../tmp/escaped.so: a path leaving the image; refusing" in lines[1]
    assert lines[2].startswith("cuda-gate: error: none of the 2 artifacts could be read: ")
    assert lines[2].endswith(" and 1 more")
    assert not Path("/tmp/escaped.so").exists()


@pytest.fixture(scope="module")
def podman_image(tmp_path_factory: pytest.TempPathFactory, library: bytes) -> PodmanStore:
    """``localhost/gate-test:2``: a busybox rootfs imported, then a podman build on it that
    deletes one library and adds another (its layer holds a real whiteout)."""
    work = tmp_path_factory.mktemp("podman")
    podman = podman_store(work / "store")
    if not BUSYBOX.is_file():
        missing(f"no {BUSYBOX}: apt-get install -y busybox-static")
    rootfs = work / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "usr/lib").mkdir(parents=True)
    shutil.copy(BUSYBOX, rootfs / "bin/busybox")
    (rootfs / "bin/sh").symlink_to("busybox")
    (rootfs / "usr/lib/libk.so").write_bytes(library)
    (rootfs / "usr/lib/libgone.so").write_bytes(library)
    with tarfile.open(work / "rootfs.tar", "w") as tar:
        tar.add(rootfs, arcname=".")
    podman("import", str(work / "rootfs.tar"), "localhost/gate-test:1")
    context = work / "context"
    context.mkdir()
    (context / "Containerfile").write_text(
        "FROM localhost/gate-test:1\n"
        "RUN rm /usr/lib/libgone.so && mkdir /opt && cp /usr/lib/libk.so /opt/libk2.so\n"
    )
    podman(
        "build", "--isolation", "chroot", "-t", "localhost/gate-test:2",
        "-f", str(context / "Containerfile"), str(context),
    )  # fmt: skip
    return podman


def test_podman_tarballs_give_the_same_report_and_the_digest_podman_gives(
    tmp_path: Path, podman_image: PodmanStore
) -> None:
    podman, name = podman_image, "localhost/gate-test:2"
    oci, plain, docker = tmp_path / "oci.tar", tmp_path / "plain.tar", tmp_path / "docker.tar"
    podman("save", "--format", "oci-archive", "-o", str(oci), name)
    podman("save", "--format", "oci-archive", "--uncompressed", "-o", str(plain), name)
    podman("save", "--format", "docker-archive", "-o", str(docker), name)
    docs = {
        "oci": document(str(oci)),
        "plain": document(f"oci-archive:{plain}"),
        "docker": document(f"docker-archive:{docker}"),
    }
    reports = {kind: by_path(doc) for kind, doc in docs.items()}
    assert sorted(reports["oci"]) == ["/bin/busybox", "/opt/libk2.so", "/usr/lib/libk.so"]
    assert reports["oci"] == reports["plain"] == reports["docker"]
    assert reports["oci"]["/usr/lib/libk.so"]["layer"] == 0
    assert reports["oci"]["/opt/libk2.so"]["layer"] == 1
    assert reports["oci"]["/opt/libk2.so"]["targets"]["sass"] == ["sm_80"]
    images = {kind: doc["images"][0] for kind, doc in docs.items()}
    config = podman("image", "inspect", "--format", "{{.Id}}", name)
    assert {i["config_digest"] for i in images.values()} == {f"sha256:{config}"}
    # Uncompressed, the archive holds the manifest podman stores: the same digest.
    assert images["plain"]["digest"] == podman.digest(name)
    # Each tarball's digest is the one podman gives the image once it loads that tarball.
    for kind, tarball in (("oci", oci), ("docker", docker)):
        other = podman_store(tmp_path / f"load-{kind}")
        other("load", "-i", str(tarball))
        assert images[kind]["digest"] == other.digest(name), kind


def test_an_image_by_name_is_saved_through_podman_and_read(podman_image: PodmanStore) -> None:
    podman, name = podman_image, "localhost/gate-test:2"
    doc = document(f"podman:{name}", env=podman.env)
    (image,) = doc["images"]
    assert image["digest"] == image["runtime_digest"] == podman.digest(name)
    assert sorted(by_path(doc)) == ["/bin/busybox", "/opt/libk2.so", "/usr/lib/libk.so"]
    text = inspect(f"podman:{name}", env=podman.env)
    assert text.returncode == 0, text.stderr
    assert f"image podman:{name}: linux/amd64, 2 layers, digest {image['digest']}" in text.stdout
    assert f"podman:{name}!/opt/libk2.so  [ELF64 x86-64]" in text.stdout
    assert "libgone" not in text.stdout


def test_an_image_podman_does_not_have_is_its_error_and_exit_3(podman_image: PodmanStore) -> None:
    result = inspect("podman:localhost/not-there:1", env=podman_image.env)
    assert result.returncode == ExitCode.TOOL
    assert "podman image save failed with exit status 125" in result.stderr
    assert "Traceback" not in result.stderr

"""A podman-built image with a real pip-installed CUDA wheel reads as its exported files do.

The image: a busybox rootfs with nvidia-cuda-cupti 13.0.85 installed by pip into
/usr/local/lib/python3.12/site-packages (a real RECORD; the wheel from the test wheel
cache of tests/test_environment_pypi.py) and a library of no distribution, imported;
then a ``podman build`` step that deletes one of cupti's libraries (a whiteout written
by a real runtime) and adds a library in /opt. The image read by name and from an
oci-archive gives the report that the files podman itself exports from a container of
it give, once the image-only fields are dropped. Needs podman and busybox-static; under
``CI=true`` it fails without them.
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
from tests.containers import BUSYBOX, PodmanStore, missing, podman_store
from tests.test_environment_pypi import wheels  # noqa: F401  (the wheel cache, a fixture)
from tests.test_image_environment import without_image

pytestmark = pytest.mark.integration

NAME = "localhost/gate-env:2"
SITE = "usr/local/lib/python3.12/site-packages"
CUPTI = "nvidia-cuda-cupti"
DELETED = "nvidia/cu13/lib/libcheckpoint.so"
LOOSE = Path(__file__).parent / "golden" / "libkernels.so"  # sm_80, sm_120 SASS


@pytest.fixture(scope="module")
def podman_image(tmp_path_factory: pytest.TempPathFactory, wheels: list[Path]) -> PodmanStore:  # noqa: F811
    """The image, built in a podman store of the test's own."""
    work = tmp_path_factory.mktemp("podman-env")
    podman = podman_store(work / "store")
    if not BUSYBOX.is_file():
        missing(f"no {BUSYBOX}: apt-get install -y busybox-static")
    (cupti,) = [w for w in wheels if w.name.startswith("nvidia_cuda_cupti-13.0.85-")]
    rootfs = work / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "usr/lib").mkdir(parents=True)
    shutil.copy(BUSYBOX, rootfs / "bin/busybox")
    for tool in ("sh", "rm", "cp", "mkdir"):
        (rootfs / "bin" / tool).symlink_to("busybox")
    shutil.copy(LOOSE, rootfs / "usr/lib/libloose.so")
    proc.run_checked(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--no-compile", "--target", str(rootfs / SITE),
         str(cupti)],
        what="pip install --target", timeout=600,
    )  # fmt: skip
    with tarfile.open(work / "rootfs.tar", "w") as tar:
        tar.add(rootfs, arcname=".")
    podman("import", str(work / "rootfs.tar"), "localhost/gate-env:1")
    context = work / "context"
    context.mkdir()
    (context / "Containerfile").write_text(
        "FROM localhost/gate-env:1\n"
        f"RUN rm /{SITE}/{DELETED} && mkdir /opt && cp /usr/lib/libloose.so /opt/libcopy.so\n"
    )
    podman(
        "build", "--isolation", "chroot", "-t", NAME,
        "-f", str(context / "Containerfile"), str(context),
    )  # fmt: skip
    return podman


@pytest.fixture(scope="module")
def exported(podman_image: PodmanStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's files as podman merges them: a container of it, exported and unpacked."""
    work = tmp_path_factory.mktemp("exported")
    container = podman_image("create", NAME, "/bin/sh")
    podman_image("export", "-o", str(work / "fs.tar"), container)
    podman_image("rm", container)
    root = work / "root"
    with tarfile.open(work / "fs.tar") as tar:
        kept = [m for m in tar.getmembers() if m.isfile() or m.isdir() or m.issym()]
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(root, members=kept, filter="tar")
        else:  # Python before 3.11.4 (Debian 12's system 3.11.2) has no extraction filters
            tar.extractall(root, members=kept)  # noqa: S202  (the test's own image's files)
    return root


def _inspect(podman: PodmanStore, *args: str) -> proc.Result:
    argv = [sys.executable, "-m", "gate", "inspect", "--no-detect", "--device", "12.1", *args]
    return proc.run(argv, env_set=podman.env, timeout=600)


def _document(podman: PodmanStore, *args: str) -> dict[str, Any]:
    result = _inspect(podman, "--json", *args)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    text = resources.files("gate").joinpath("schemas/environment.schema.json").read_text("utf-8")
    jsonschema.validate(doc, json.loads(text))
    return doc


def test_the_image_by_name_and_saved_gives_the_report_of_its_exported_files(
    podman_image: PodmanStore, exported: Path, tmp_path: Path
) -> None:
    podman = podman_image
    archive = tmp_path / "img.tar"
    podman("save", "--format", "oci-archive", "-o", str(archive), NAME)
    from_folder = _document(podman, "--by-distribution", str(exported))
    for source in (f"podman:{NAME}", f"oci-archive:{archive}"):
        from_image = _document(podman, source)
        assert without_image(from_image, f"{source}!/", exported) == from_folder, source
    doc = _document(podman, f"podman:{NAME}")
    (image,) = doc["images"]
    assert image["digest"] == image["runtime_digest"] == podman.digest(NAME)
    by = {d["name"]: d for d in doc["distributions"]}
    assert sorted(by) == ["bin/", CUPTI, "opt/", "usr/lib/"]  # bin/: busybox
    cupti = by[CUPTI]
    members = [a["member"] for a in cupti["image"]["artifacts"]]
    assert "nvidia/cu13/lib/libcupti.so.13" in members
    assert DELETED not in members  # the build step's whiteout
    assert {a["layer"] for a in cupti["image"]["artifacts"]} == {0}
    assert cupti["image"]["path"] == f"/{SITE}/nvidia_cuda_cupti-13.0.85.dist-info"
    assert cupti["devices"][0]["category"] == "native"  # cupti 13.0 carries sm_121 SASS
    assert by["opt/"]["image"]["artifacts"][0]["layer"] == 1


def test_an_image_podman_does_not_have_is_its_error_and_exit_3(podman_image: PodmanStore) -> None:
    result = _inspect(podman_image, "podman:localhost/not-there:1")
    assert result.returncode == ExitCode.TOOL
    assert "podman image save failed with exit status 125" in result.stderr
    assert "Traceback" not in result.stderr

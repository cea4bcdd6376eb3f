"""`cuda-gate run --image`: the run inside the delivery image, through real podman.

Two images, built here in a podman store of the test's own (never the machine's):

* ``app``: a fresh Debian (mmdebstrap, with g++ for nvcc's host side) with this machine's
  CUDA toolkit copied into a layer, and the project's artifact in /opt/app (its WORKDIR):
  the image's own nvcc builds the probe and the smoke program inside it.
* ``tiny``: busybox and a marker file, imported from a root tree (under a second).

There is no GPU here: the probe fails inside the image as it does outside (exit 4 when
nothing else fails), while the image's digest (podman's own inspection), the artifact
read from the image's layers and the commands run in its containers are real. The entry
point's run is shown through the very runner the execute stage uses. Needs root, podman,
runc, mmdebstrap and busybox-static; under ``CI=true`` their absence fails, never skips.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate import proc
from gate.config import EntryPoint
from gate.container.place import InImage, resolve
from gate.container.runtime import SYSTEM_SBIN
from gate.errors import ExitCode
from gate.fsutil import sha256_file
from gate.rules.causes import ExecPath
from gate.stages.inimage import ImageFiles
from gate.stages.runs import RunsIn, run_entry_point
from tests.containers import (
    BUSYBOX,
    PodmanStore,
    cuda_toolkit,
    debian_rootfs,
    missing,
    podman_runner,
    remove_runner,
    require_container_tools,
)

pytestmark = pytest.mark.integration

APP = "localhost/gate-app:1"
TINY = "localhost/gate-tiny:1"
LIBRARY = Path(__file__).parent / "golden" / "libkernels.so"  # sm_80, sm_120 SASS, compute_80
MARKER = "only-in-the-tiny-image"
# The README's machine: the same package set shares the day's mmdebstrap tarball.
PACKAGES = ("python3", "python3-venv", "g++", "git")
CONFIG = """\
[[artifact]]
path = "lib/libkernels.so"

[[entry_point]]
name = "selftest"
command = ["sh", "-c", "echo PASS"]
"""


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodmanStore]:
    """podman with a store of the test's own, holding ``app`` and ``tiny``."""
    require_container_tools()
    if not BUSYBOX.is_file():
        missing(f"no {BUSYBOX}: apt-get install -y busybox-static")
    work = tmp_path_factory.mktemp("run-in-image")
    engine = podman_runner(work / "store")
    try:
        _tiny(engine, work / "tiny")
        _app(engine, work / "app")
        yield engine
    finally:
        remove_runner(engine)


def _tiny(podman: PodmanStore, work: Path) -> None:
    root = work / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    shutil.copy(BUSYBOX, root / "bin/busybox")
    for tool in ("sh", "cat", "env", "sleep"):
        (root / "bin" / tool).symlink_to("busybox")
    (root / "etc/marker").write_text(MARKER + "\n")
    with tarfile.open(work / "rootfs.tar", "w") as tar:
        tar.add(root, arcname=".")
    podman("import", "--change", "WORKDIR=/", str(work / "rootfs.tar"), TINY)


def _app(podman: PodmanStore, work: Path) -> None:
    podman("import", str(debian_rootfs("bookworm", PACKAGES)), "localhost/gate-debian:1")
    context = work / "context"
    (context / "app/lib").mkdir(parents=True)
    shutil.copy(LIBRARY, context / "app/lib/libkernels.so")
    toolkit = cuda_toolkit()
    shutil.copytree(toolkit, context / "cuda", symlinks=True)
    (context / "Containerfile").write_text(
        "FROM localhost/gate-debian:1\n"
        f"COPY cuda {toolkit}\n"
        f"ENV PATH={toolkit}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        "COPY app /opt/app\n"
        "WORKDIR /opt/app\n"
    )
    podman("build", "-q", "--isolation", "chroot", "-t", APP, str(context))


def gate(podman: PodmanStore, *args: str, cwd: Path, path: str | None = None) -> proc.Result:
    """The CLI as a real process, with podman's store of the test (and ``path`` as PATH)."""
    env = podman.env if path is None else {**podman.env, "PATH": path}
    return proc.run([sys.executable, "-m", "gate", *args], env_set=env, cwd=cwd, timeout=900)


def project(tmp_path: Path, config: str = CONFIG) -> Path:
    """A project folder with a *different* lib/libkernels.so than the image's: the run must
    read the image's, not a copy of this machine's."""
    folder = tmp_path / "project"
    (folder / "lib").mkdir(parents=True)
    (folder / "lib/libkernels.so").write_bytes(b"\x7fELF not the image's library")
    (folder / "cuda-gate.toml").write_text(config)
    return folder


def schema(name: str) -> dict[str, Any]:
    text = resources.files("gate").joinpath(f"schemas/{name}").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_run_in_the_image_records_its_digest_reads_its_artifact_and_probes_inside(
    tmp_path: Path, podman: PodmanStore
) -> None:
    folder = project(tmp_path)
    evidence = tmp_path / "ev"
    key = tmp_path / "gate"
    assert gate(podman, "keygen", "--out", str(key), cwd=folder).ok
    # A PATH without the system's sbin folders (env -i, cron): rootful podman's network
    # helper still finds iptables, since the gate gives the runtime those folders.
    without_sbin = os.pathsep.join(
        folder for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and folder not in SYSTEM_SBIN
    )  # fmt: skip
    ran = gate(
        podman, "run", "--image", APP, "--target", "sm_80", "--no-store",
        "--evidence", str(evidence), "--signing-key", f"{key}.key", cwd=folder,
        path=without_sbin,
    )  # fmt: skip
    # No GPU here: the probe fails inside the image; nothing else does (README, exit 4).
    assert ran.returncode == ExitCode.NO_DEVICE, ran.output()
    assert "Traceback" not in ran.output()
    record = json.loads((evidence / "result.json").read_text())
    jsonschema.validate(record, schema("result.schema.json"))
    container = record["environment"]["container"]
    digest = podman.digest(APP)
    assert container["mode"] == "runtime"
    assert container["reference"] == APP
    assert container["digest"] == digest  # a tag, resolved by podman's own inspection
    assert container["digest_source"] == "runtime"
    assert container["runtime"] == "podman"
    assert container["image_id"].removeprefix("sha256:") == podman(
        "image", "inspect", "--format", "{{.Id}}", APP
    ).removeprefix("sha256:")
    assert "no GPU passed" in container["gpus"]
    # The image's toolkit and OS, asked in containers of it.
    commands = (evidence / "commands.txt").read_text()
    assert "podman run --rm --pull=never" in commands
    assert " nvcc --version" in commands
    assert record["environment"]["toolkit"]["nvcc"] == "nvcc"
    assert f"image {APP}" in record["environment"]["os"]
    # The probe, built by the image's nvcc, failed in the image with the runtime's reason.
    error = record["device"]["error"]
    assert f"in the image {APP}" in error
    assert "no NVIDIA driver installed" in error
    assert any("/probe" in line and "podman run" in line for line in commands.splitlines())
    # The artifact is the image's file, not this machine's lib/libkernels.so.
    [library] = [a for a in record["artifacts"] if a["name"] == "libkernels.so"]
    assert library["path"] == f"{APP}!/opt/app/lib/libkernels.so"
    assert library["sha256"] == sha256_file(LIBRARY)
    assert library["sha256"] != sha256_file(folder / "lib/libkernels.so")
    checks = {c["name"]: c["state"] for c in record["checks"]}
    assert checks["libkernels.so: SASS for sm_80"] == "passed"
    assert checks["selftest [native]"] == "not-run"
    # The image is the manifest's subject beside the artifacts, pinned by podman's digest.
    statement = json.loads((evidence / "manifest.json").read_text())
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert subjects["localhost/gate-app"] == digest.removeprefix("sha256:")
    assert subjects["libkernels.so"] == library["sha256"]
    # verify: the image subject against podman here, the artifact hashed from the image.
    envelope = str(evidence / "manifest.dsse.json")
    checked = gate(podman, "verify", envelope, "--key", f"{key}.pub", cwd=folder)
    assert "2. artifacts: ok - 3 of 3 match" in checked.stdout, checked.output()
    # The tag moved: the evidence is another image's.
    podman("tag", TINY, APP)
    try:
        moved = gate(podman, "verify", envelope, "--key", f"{key}.pub", cwd=folder)
    finally:
        podman("tag", f"localhost/gate-app@{digest}", APP)
    assert moved.returncode == ExitCode.ARTIFACT_CHANGED, moved.output()
    assert f"the manifest records {digest}" in moved.stdout


def test_a_pin_the_runtime_does_not_hold_an_unknown_image_or_a_bad_reference_is_one_line(
    tmp_path: Path, podman: PodmanStore
) -> None:
    folder = project(tmp_path)
    digest = podman.digest(TINY)
    other = "sha256:" + "0" * 64
    cases = {
        f"localhost/gate-tiny@{other}": "its localhost/gate-tiny:latest",
        "localhost/gate-nothing:1": "podman has no such image",
        "not a reference": "not an image reference",
    }
    podman("tag", TINY, "localhost/gate-tiny:latest")
    for image, said in cases.items():
        ran = gate(podman, "run", "--image", image, "--no-store", cwd=folder)
        assert ran.returncode == ExitCode.BAD_INPUT, ran.output()
        [line] = ran.stderr.strip().splitlines()
        assert said in line, line
        assert not (folder / "gate-evidence").exists()
    # The right pin runs: the tiny image has no nvcc, said in one line (exit 3).
    ran = gate(podman, "run", "--image", f"localhost/gate-tiny@{digest}", "--no-store", cwd=folder)
    assert ran.returncode == ExitCode.TOOL, ran.output()
    assert f"no nvcc in the image localhost/gate-tiny@{digest}" in ran.stderr
    record = json.loads((folder / "gate-evidence/result.json").read_text())
    assert record["environment"]["container"]["digest"] == digest


def test_no_runtime_is_one_line_and_exit_3(tmp_path: Path, podman: PodmanStore) -> None:
    config = CONFIG + '\n[container]\nruntime = "/nonexistent/podman"\n'
    ran = gate(podman, "run", "--image", TINY, "--no-store", cwd=project(tmp_path, config))
    assert ran.returncode == ExitCode.TOOL, ran.output()
    [line] = ran.stderr.strip().splitlines()
    assert "container runtime /nonexistent/podman: not found" in line


def image_place(
    tmp_path: Path, podman: PodmanStore, monkeypatch: pytest.MonkeyPatch, name: str
) -> tuple[InImage, Path]:
    """Containers of image ``name`` in this test's podman store, with a work folder
    (``tmp_path/work``) mounted as a run mounts the build folder."""
    for variable, value in podman.env.items():
        monkeypatch.setenv(variable, value)
    scratch = tmp_path / "work"
    scratch.mkdir()
    resolved = resolve(name)
    return InImage(resolved.runtime, resolved.image, mounts=(scratch,)), scratch


def test_the_entry_point_runs_in_the_image_with_its_env_and_never_the_gates_secrets(
    tmp_path: Path, podman: PodmanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    place, scratch = image_place(tmp_path, podman, monkeypatch, TINY)
    secrets = {
        "GITHUB_TOKEN": "ghp_secretvalue123456",
        "CUDA_GATE_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----xyz",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value-987",
        "http_proxy": "http://user:proxypassword@proxy.invalid:3128",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    entry = EntryPoint(
        "selftest", ("sh", "-c", "cat /etc/marker; env; echo PASS"), env=(("MODE", "fast"),)
    )
    done = run_entry_point(
        entry, ExecPath.NATIVE, record_loaded=False, runs_in=RunsIn(place, scratch)
    )
    assert done.passed, done.result.output()
    out = done.result.stdout
    assert MARKER in out  # a file only the image has: the process ran in it
    assert "MODE=fast" in out
    assert "CUDA_DISABLE_PTX_JIT=1" in out
    assert f"CUDA_CACHE_PATH={scratch}/" in out  # the JIT cache in the mounted work folder
    for value in secrets.values():
        assert value not in out
        assert value not in done.result.command_line()
    assert done.result.argv[:4] == (place.runtime.program, "run", "--rm", "--pull=never")
    assert not done.result.strays  # podman's conmon finished the removal on its own
    assert not podman("ps", "--all", "--quiet")  # and no container is left


def test_what_a_run_in_the_image_loaded_is_read_from_the_images_layers(
    tmp_path: Path, podman: PodmanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    place, scratch = image_place(tmp_path, podman, monkeypatch, APP)
    files = ImageFiles.open(place, scratch / "image")
    try:
        runs_in = RunsIn(place, scratch, files.host_paths, files.exists)
        done = run_entry_point(
            EntryPoint("shell", ("sh", "-c", "echo PASS")), ExecPath.NATIVE, runs_in=runs_in
        )
    finally:
        files.close()
    assert done.passed, done.result.output()
    # The loader's log names the container's files; each is read from the image's layers.
    [libc] = [p for p in done.loaded if p.name == "libc.so.6"]
    assert libc.is_relative_to(files.root), done.loaded
    assert all(p.is_relative_to(files.root) for p in done.loaded)


def test_an_entry_point_past_its_timeout_goes_with_its_container(
    tmp_path: Path, podman: PodmanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    place, scratch = image_place(tmp_path, podman, monkeypatch, TINY)
    entry = EntryPoint("hangs", ("sleep", "600"), timeout=3.0)
    done = run_entry_point(
        entry, ExecPath.NATIVE, record_loaded=False, runs_in=RunsIn(place, scratch)
    )
    assert done.result.timed_out
    assert not done.passed
    assert not podman("ps", "--all", "--quiet")  # the container was removed with it

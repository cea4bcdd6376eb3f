"""The pieces of the run in an image that need no runtime: references, the record of the
image, the container's command line, the GPU options, globs over image paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate import proc
from gate.container.info import ContainerInfo, inside
from gate.container.place import InImage
from gate.container.reference import parse, same_repository
from gate.container.runtime import ImageFacts, Runtime, gpu_options, runtime_environ
from gate.errors import BadInputError, ConfigError
from gate.stages.inimage import glob_regex

pytestmark = pytest.mark.unit

HEX = "ab" * 32
PODMAN = Runtime("podman", "/usr/bin/podman", "4.3.1")
DOCKER = Runtime("docker", "/usr/bin/docker", "27.1.1")


def image(env: tuple[tuple[str, str], ...] = ()) -> ImageFacts:
    result = proc.Result(argv=("podman",), returncode=0, stdout="[]", stderr="", duration=0.0)
    return ImageFacts(
        parse("localhost/app:1"), f"sha256:{'cd' * 32}", f"sha256:{HEX}", (f"sha256:{HEX}",),
        "linux/amd64", "/opt/app", env, "[]", result,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "name", "tag", "digest"),
    [
        ("app", "app", None, None),
        ("localhost/app:1", "localhost/app", "1", None),
        ("registry:5000/org/app", "registry:5000/org/app", None, None),
        (f"ghcr.io/org/app:2@sha256:{HEX}", "ghcr.io/org/app", "2", f"sha256:{HEX}"),
        (f"nvcr.io/nvidia/cuda@sha256:{HEX}", "nvcr.io/nvidia/cuda", None, f"sha256:{HEX}"),
    ],
)
def test_a_reference_is_its_name_tag_and_pin(
    text: str, name: str, tag: str | None, digest: str | None
) -> None:
    ref = parse(text)
    assert (ref.name, ref.tag, ref.digest, ref.pinned) == (name, tag, digest, digest is not None)
    assert ref.subject_name() == name


def test_an_image_id_is_one_and_bad_references_are_one_line() -> None:
    assert parse(HEX).image_id == f"sha256:{HEX}"
    assert parse(f"sha256:{HEX}").subject_name() == f"sha256:{HEX}"
    for bad, said in [
        ("", "not an image reference"),
        ("a b", "not an image reference"),
        ("docker://app", "not an image reference"),
        ("app@sha256:123", "64 lowercase hex digits"),
        ("app@md5:" + HEX, "64 lowercase hex digits"),
        ("app:bad/tag", "is not a repository name"),
        ("app:" + "x" * 200, "is not a tag"),
    ]:
        with pytest.raises(BadInputError, match=said):
            parse(bad)
    assert same_repository("localhost/app", "app")
    assert same_repository("docker.io/library/app", "app")
    assert not same_repository("localhost/myapp", "app")


def test_the_container_gets_only_the_variables_named_and_never_the_gates_secrets() -> None:
    place = InImage(PODMAN, image(env=(("CUDA_FORCE_PTX_JIT", "1"),)), mounts=(Path("/w"),))
    line = place.argv(
        ["prog", "arg"],
        env_set={"MODE": "fast", "GITHUB_TOKEN": "t" * 20, "CUDA_GATE_SIGNING_KEY": "k" * 20},
        env_unset=("CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT"),
        cwd="/opt/app/bin",
    )
    assert line[:4] == ["/usr/bin/podman", "run", "--rm", "--pull=never"]
    assert "--http-proxy=false" in line
    assert "--volume=/w:/w:rw" in line
    assert "--workdir=/opt/app/bin" in line
    assert "--env=MODE=fast" in line
    assert not [a for a in line if "TOKEN" in a or "SIGNING" in a]
    # Only what the image itself sets needs unsetting; docker has no --unsetenv.
    assert [a for a in line if "unsetenv" in a] == ["--unsetenv=CUDA_FORCE_PTX_JIT"]
    assert line[-3:] == ["cd" * 32, "prog", "arg"]
    docker = InImage(DOCKER, image(env=(("CUDA_FORCE_PTX_JIT", "1"),)))
    line = docker.argv(["prog"], env_unset=("CUDA_FORCE_PTX_JIT",))
    assert "--env=CUDA_FORCE_PTX_JIT=" in line
    assert "--http-proxy=false" not in line
    assert "--workdir=/opt/app" in line  # the image's own working folder by default


def test_gpus_go_in_the_way_the_runtime_supports(tmp_path: Path) -> None:
    none, said = gpu_options(PODMAN, "auto", cdi_dirs=(tmp_path,))
    assert none == ()
    assert "no CDI specification of nvidia.com/gpu" in said
    (tmp_path / "nvidia.yaml").write_text('cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\n')
    assert gpu_options(PODMAN, "auto", cdi_dirs=(tmp_path,))[0] == (
        "--device",
        "nvidia.com/gpu=all",
    )
    assert gpu_options(DOCKER, "flag")[0] == ("--gpus", "all")
    assert gpu_options(DOCKER, "none")[0] == ()
    with pytest.raises(ConfigError, match="expected one of"):
        gpu_options(PODMAN, "all")


def test_the_record_of_the_image_reads_back_and_reads_version_5() -> None:
    info = ContainerInfo(
        "localhost/app:1", f"sha256:{HEX}", "runtime", "runtime", f"sha256:{'cd' * 32}",
        "localhost/app", "linux/amd64", "podman", "4.3.1", "no GPU passed",
    )  # fmt: skip
    assert ContainerInfo.from_json(info.to_json(), "r") == info
    assert info.subject() == ("localhost/app", HEX)
    old = ContainerInfo.from_json({"image": "ghcr.io/o/a@sha256:" + HEX, "digest": None}, "r")
    assert (old.mode, old.digest, old.digest_source) == ("inside", None, None)
    old = ContainerInfo.from_json({"image": "a", "digest": f"sha256:{HEX}"}, "r")
    assert old.digest_source == "environment"
    with pytest.raises(BadInputError, match="mode"):
        ContainerInfo.from_json({"reference": "a", "mode": "elsewhere"}, "r")


def test_inside_a_container_the_digest_is_the_references_own_pin(tmp_path: Path) -> None:
    env = tmp_path / ".containerenv"
    env.write_text(f'engine="podman-4.3.1"\nimage="ghcr.io/o/a"\nimageid="{"cd" * 32}"\n')
    info = inside({"CUDA_GATE_IMAGE": f"ghcr.io/o/a@sha256:{HEX}"}, env, tmp_path / "no")
    assert info is not None
    assert (info.mode, info.digest, info.digest_source) == ("inside", f"sha256:{HEX}", "pin")
    assert (info.runtime, info.image_id) == ("podman", f"sha256:{'cd' * 32}")
    assert info.subject() == ("ghcr.io/o/a", HEX)
    tag = inside({"CUDA_GATE_IMAGE": "ghcr.io/o/a:1"}, tmp_path / "no", tmp_path / "no")
    assert tag is not None
    assert (tag.digest, tag.subject()) == (None, None)  # nothing inside vouches for a tag
    assert inside({}, env, env) is None


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("opt/app/lib/*.so", "opt/app/lib/libk.so", True),
        ("opt/app/lib/*.so", "opt/app/lib/sub/libk.so", False),
        ("opt/**/*.so", "opt/app/lib/sub/libk.so", True),
        ("opt/**/*.so", "opt/libk.so", True),
        ("opt/app/lib/lib?.so", "opt/app/lib/libk.so", True),
        ("opt/app/lib/lib[a-j].so", "opt/app/lib/libk.so", False),
        ("opt/app/lib/lib[!a-j].so", "opt/app/lib/libk.so", True),
    ],
)
def test_artifact_globs_over_image_paths(pattern: str, path: str, matches: bool) -> None:
    assert (glob_regex(pattern).match(path) is not None) is matches


def test_a_path_of_the_image_is_followed_through_its_links() -> None:
    from gate.image.merge import Entry, Kind
    from gate.stages.inimage import ImageFiles

    def entry(path: str, kind: Kind, link: str | None = None) -> Entry:
        return Entry(path, kind, 0, "sha256:" + HEX, 0, 0o755, link)

    entries = {
        "usr": entry("usr", Kind.DIR),
        "usr/lib": entry("usr/lib", Kind.DIR),
        "usr/lib/libc.so.6": entry("usr/lib/libc.so.6", Kind.FILE),
        "usr/lib/libc.so": entry("usr/lib/libc.so", Kind.SYMLINK, "libc.so.6"),
        "lib": entry("lib", Kind.SYMLINK, "usr/lib"),
        "loop": entry("loop", Kind.SYMLINK, "/loop"),
        "abs": entry("abs", Kind.SYMLINK, "/lib/../usr/lib/libc.so"),
    }
    files = ImageFiles.__new__(ImageFiles)
    files.entries = entries
    assert files.real_file("/lib/libc.so.6") == "usr/lib/libc.so.6"
    assert files.real_file("/lib/libc.so") == "usr/lib/libc.so.6"
    assert files.real_file("abs") == "usr/lib/libc.so.6"
    assert files.real_file("/usr/lib") is None  # a folder, not a file
    assert files.real_file("/loop/x") is None
    assert files.real_file("/lib/nothing.so") is None


def test_the_runtime_gets_the_system_sbin_folders_on_its_path_and_nothing_else_changes() -> None:
    # Rootful podman's netavark runs iptables from /usr/sbin, found on podman's PATH: under
    # env -i or cron that PATH has no sbin folder, and every `run` failed.
    env = runtime_environ({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/h"})
    assert env == {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
                   "HOME": "/h"}  # fmt: skip
    full = {"PATH": "/sbin:/usr/bin:/usr/sbin:/usr/local/sbin", "X": "1"}
    assert runtime_environ(full) == full
    assert runtime_environ({})["PATH"] == "/usr/local/sbin:/usr/sbin:/sbin"

"""The container runtime present (podman or docker): found, asked its version, asked about images.

Every call goes through :mod:`gate.proc` and is kept (``commands``) for the evidence.
The runtime's own inspection is what pins an image: its manifest digest (podman's
``Digest``; docker's containerd ``Descriptor`` or the repository digest it pulled by)
and its id (the config digest). A pinned ``name@sha256:...`` must be a digest the
runtime holds for that image, or the run stops before anything runs (exit 6).

GPUs are passed the way the runtime supports: podman through CDI (``--device
nvidia.com/gpu=all``, from a CDI specification ``nvidia-ctk cdi generate`` writes;
podman 4 accepts ``--gpus`` and ignores it), docker with ``--gpus all`` where the NVIDIA
container toolkit is installed, else through CDI. Where neither is there, no GPU is
passed and the record says why: the probe inside then finds no device, as it would
on a machine without one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate import proc
from gate.container.reference import Reference, same_repository
from gate.errors import BadInputError, ConfigError, ToolError

RUNTIMES = ("podman", "docker")
QUERY_TIMEOUT = 120.0
GPU_MODES = ("auto", "cdi", "flag", "none")
CDI_DEVICE = "nvidia.com/gpu=all"
# Where CDI specifications live (the CDI spec's default folders; podman and docker read both).
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
# What docker's --gpus needs: the NVIDIA container toolkit's hook or CLI.
_DOCKER_GPU_TOOLS = ("nvidia-container-cli", "nvidia-container-runtime-hook")
# A rootful runtime's network helper (podman's netavark) runs iptables or nft, found on
# the PATH the runtime was given: without the system's sbin folders on it (env -i, cron,
# a service unit) every `run` fails with "netavark: No such file or directory".
SYSTEM_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
_VERSION = re.compile(r"(?i)\b(podman|docker)\b\s+version\s+v?([0-9][\w.+-]*)")
_CDI_KIND = re.compile(r"""(?m)^\s*["']?kind["']?\s*[:=]\s*["']?nvidia\.com/gpu["']?""")


def runtime_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the runtime's own process starts from (gate.proc scrubs the gate's
    secrets from it, as from every child's): this machine's, its ``PATH`` with the
    system's sbin folders after it where they are missing. Not the container's: that is
    on the runtime's command line."""
    env = dict(os.environ if environ is None else environ)
    have = env["PATH"].split(os.pathsep) if env.get("PATH") else []
    missing = [folder for folder in SYSTEM_SBIN if folder not in have]
    if missing:
        env["PATH"] = os.pathsep.join([*have, *missing])
    return env


@dataclass(frozen=True, slots=True)
class Runtime:
    """One container runtime: which one, the program, its version."""

    name: str  # "podman" or "docker"
    program: str  # absolute path
    version: str
    version_command: proc.Result | None = None

    @property
    def label(self) -> str:
        """``podman 4.3.1``."""
        return f"{self.name} {self.version}"


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """An image as the runtime's own inspection reports it."""

    reference: Reference
    image_id: str  # the config digest, "sha256:<hex>"
    digest: str | None  # the manifest digest the run records ("sha256:<hex>")
    digests: tuple[str, ...]  # every manifest digest the runtime holds for it
    platform: str  # "linux/amd64", "linux/arm64/v8"
    working_dir: str  # the image's WorkingDir ("/" when unset)
    env: tuple[tuple[str, str], ...]  # the image's Env, in order
    raw: str  # the runtime's inspect output, as printed
    command: proc.Result

    @property
    def run_name(self) -> str:
        """What ``run`` is given: the id, so a tag moved meanwhile cannot swap the image."""
        return self.image_id.removeprefix("sha256:")

    def env_names(self) -> frozenset[str]:
        """The names the image's own environment sets."""
        return frozenset(name for name, _ in self.env)


def find(configured: str | None = None) -> Runtime:
    """The runtime to use: ``configured`` (a name or a path) or the first of podman, docker
    on PATH; ToolError (exit 3) when there is none, or it cannot say its version."""
    if configured:
        program = configured if "/" in configured else shutil.which(configured)
        if program is None or not os.access(program, os.X_OK) or Path(program).is_dir():
            raise ToolError(
                f"container runtime {configured}: not found or not executable",
                hint="install podman or docker, or name one with [container] runtime",
            )
    else:
        program = next((p for p in map(shutil.which, RUNTIMES) if p is not None), None)
        if program is None:
            raise ToolError(
                "no container runtime: neither podman nor docker is on PATH",
                hint="--image runs the gate inside the image through one; install podman",
            )
    result = proc.run([program, "--version"], timeout=QUERY_TIMEOUT)
    match = _VERSION.search(result.stdout)
    if not result.ok or match is None:
        said = result.last_line() or f"exit status {result.returncode}"
        raise ToolError(f"{program} --version: not podman or docker ({said})")
    return Runtime(match.group(1).lower(), str(program), match.group(2), result)


def inspect(runtime: Runtime, reference: Reference) -> ImageFacts:
    """The runtime's inspection of the image ``reference`` names.

    BadInputError (exit 6, one line) when the runtime holds no such image, or holds it
    under another digest than the pinned one; ToolError when the runtime itself fails.
    """
    result = proc.run([runtime.program, "image", "inspect", reference.text], timeout=QUERY_TIMEOUT)
    if not result.ok:
        if _unknown(result):
            raise BadInputError(_unknown_message(runtime, reference))
        raise ToolError(result.describe_failure(f"{runtime.name} image inspect", QUERY_TIMEOUT))
    facts = _facts(runtime, reference, result)
    if reference.digest is not None and reference.digest not in facts.digests:
        held = ", ".join(facts.digests) or "no manifest digest"
        raise BadInputError(
            f"image {reference.text}: {runtime.name} holds it as {held}, not the pinned "
            f"{reference.digest}"
        )
    return facts


def _unknown(result: proc.Result) -> bool:
    text = result.output().lower()
    return "image not known" in text or "no such image" in text or "no such object" in text


def _unknown_message(runtime: Runtime, reference: Reference) -> str:
    """No such image; for a pin, what the runtime holds under the name instead."""
    where = f"image {reference.text}: {runtime.name} has no such image"
    if reference.digest is None or reference.name is None:
        return f"{where} (pull or build it first; the gate never pulls)"
    tagged = f"{reference.name}:{reference.tag or 'latest'}"
    other = proc.run([runtime.program, "image", "inspect", tagged], timeout=QUERY_TIMEOUT)
    if other.ok:
        try:
            facts = _facts(runtime, reference, other)
        except BadInputError:
            return where
        held = ", ".join(facts.digests) or facts.image_id
        return f"{where}: its {tagged} is {held}, not the pinned {reference.digest}"
    return f"{where} with the pinned digest (pull it by digest first; the gate never pulls)"


def _facts(runtime: Runtime, reference: Reference, result: proc.Result) -> ImageFacts:
    try:
        data = json.loads(result.stdout)
    except ValueError as e:
        raise ToolError(f"{runtime.name} image inspect printed no JSON: {e}") from e
    item = data[0] if isinstance(data, list) and data else data
    if not isinstance(item, dict) or not isinstance(item.get("Id"), str):
        raise BadInputError(f"image {reference.text}: {runtime.name} reports no image id")
    image_id = _sha(item["Id"])
    raw_config = item.get("Config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    digests = _digests(item, reference)
    chosen = reference.digest if reference.digest in digests else (digests[0] if digests else None)
    return ImageFacts(
        reference=reference,
        image_id=image_id,
        digest=chosen,
        digests=digests,
        platform=_platform(item),
        working_dir=str(config.get("WorkingDir") or "/"),
        env=_env(config.get("Env")),
        raw=result.stdout,
        command=result,
    )


def _sha(text: str) -> str:
    return text if text.startswith("sha256:") else f"sha256:{text}"


def _digests(item: Mapping[str, Any], reference: Reference) -> tuple[str, ...]:
    """The manifest digests the runtime holds, the one it names first (podman's ``Digest``,
    docker's containerd ``Descriptor``), then those of the reference's repository."""
    found: list[str] = []
    own = item.get("Digest")
    descriptor = item.get("Descriptor")
    if isinstance(own, str) and own.startswith("sha256:"):
        found.append(own)
    if isinstance(descriptor, dict) and isinstance(descriptor.get("digest"), str):
        found.append(descriptor["digest"])
    repo_digests = [d for d in item.get("RepoDigests") or () if isinstance(d, str) and "@" in d]
    ours = [
        d
        for d in repo_digests
        if reference.name and same_repository(d.split("@")[0], reference.name)
    ]
    found += [d.split("@", 1)[1] for d in ours + repo_digests]
    return tuple(dict.fromkeys(d for d in found if re.fullmatch(r"sha256:[0-9a-f]{64}", d)))


def _platform(item: Mapping[str, Any]) -> str:
    parts = [str(item.get("Os") or "unknown"), str(item.get("Architecture") or "unknown")]
    if item.get("Variant"):
        parts.append(str(item["Variant"]))
    return "/".join(parts)


def _env(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        return ()
    pairs = (str(v).partition("=") for v in value)
    return tuple((name, text) for name, _, text in pairs if name)


def gpu_options(
    runtime: Runtime, mode: str, *, cdi_dirs: Sequence[Path] = CDI_DIRS
) -> tuple[tuple[str, ...], str]:
    """The ``run`` options that pass the GPUs in, and in words what was passed (or why not)."""
    if mode not in GPU_MODES:
        raise ConfigError(f"container.gpus: {mode!r}: expected one of {', '.join(GPU_MODES)}")
    cdi = ("--device", CDI_DEVICE)
    if mode == "none":
        return (), 'no GPU passed (container gpus = "none")'
    if mode == "cdi":
        return cdi, f"CDI --device {CDI_DEVICE}"
    if mode == "flag":
        return ("--gpus", "all"), "--gpus all"
    spec = cdi_spec(cdi_dirs)
    if runtime.name == "docker" and any(shutil.which(t) for t in _DOCKER_GPU_TOOLS):
        return ("--gpus", "all"), "--gpus all (the NVIDIA container toolkit is installed)"
    if spec is not None:
        return cdi, f"CDI --device {CDI_DEVICE} ({spec})"
    folders = " or ".join(str(d) for d in cdi_dirs)
    return (), (
        f"no GPU passed: no CDI specification of nvidia.com/gpu in {folders}"
        + ("" if runtime.name == "podman" else " and no NVIDIA container toolkit")
        + " (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml writes one)"
    )


def cdi_spec(folders: Sequence[Path]) -> Path | None:
    """The first CDI specification that defines the ``nvidia.com/gpu`` kind."""
    for folder in folders:
        try:
            files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        except OSError:
            continue
        for path in files:
            try:
                if _CDI_KIND.search(path.read_text(encoding="utf-8", errors="replace")):
                    return path
            except OSError:
                continue
    return None

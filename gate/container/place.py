"""Where a command runs: on this machine, or in a fresh container of the delivery image.

A stage runs its commands through a :class:`Place`. :data:`HOST` is :func:`gate.proc.run`
itself. :class:`InImage` turns each command into ``RUNTIME run --rm`` of the resolved
image (by id: a tag moved meanwhile cannot swap it), so each one is a fresh container,
as each entry point is a fresh process: nothing one leaves behind reaches the next.
The command line recorded is the runtime's, exactly as run.

What reaches the container: the image's own environment, and only the variables the
caller names (the entry point's configured ``env``, the path's CUDA variables), never
one of the gate's own secrets (:data:`gate.guard.redact.GATE_SECRETS`); podman's default of
passing this machine's proxy variables (which may carry credentials) is turned off.
The gate's work folder is mounted at its own path, read-write, so the probe, the smoke
program, JIT caches and loader logs are where the gate looks for them; nothing else of
this machine is, unless the configuration's ``[container] options`` says so.

A command that runs past its timeout is killed with its container (``rm --force``), and
so is one still running when the gate is killed (SIGKILL: :mod:`gate.guard.watchdog` removes it).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from gate import proc
from gate.container.reference import parse
from gate.container.runtime import ImageFacts, Runtime, find, gpu_options, inspect, runtime_environ
from gate.guard.redact import GATE_SECRETS

_REMOVE_TIMEOUT = 60.0
# The runtime's monitor (podman's conmon) removes the container just after `run` returns.
_SETTLE = 10.0


class Place(Protocol):
    """Where commands run (:data:`HOST` or an :class:`InImage`)."""

    @property
    def in_image(self) -> bool: ...

    def run(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        env_set: Mapping[str, str] | None = None,
        env_unset: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = proc.DEFAULT_TIMEOUT,
        sink: Callable[[str], None] | None = None,
        claim_strays: bool = True,
    ) -> proc.Result: ...


@dataclass(frozen=True)
class Host:
    """This machine: :func:`gate.proc.run` as it is."""

    @property
    def in_image(self) -> bool:
        """Never: the commands run here."""
        return False

    def run(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        env_set: Mapping[str, str] | None = None,
        env_unset: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = proc.DEFAULT_TIMEOUT,
        sink: Callable[[str], None] | None = None,
        claim_strays: bool = True,
    ) -> proc.Result:
        """``argv`` on this machine (``claim_strays``: proc.run's)."""
        return proc.run(
            argv,
            env_set=env_set,
            env_unset=env_unset,
            cwd=cwd,
            timeout=timeout,
            sink=sink,
            claim_strays=claim_strays,
        )


HOST = Host()


@dataclass(frozen=True)
class InImage:
    """Fresh containers of one resolved image, with the GPUs, mounts and options of the run."""

    runtime: Runtime
    image: ImageFacts
    gpus: tuple[str, ...] = ()
    gpus_said: str = ""
    mounts: tuple[Path, ...] = ()  # this machine's folders, mounted read-write at their path
    options: tuple[str, ...] = ()  # the configuration's own `run` options

    @property
    def in_image(self) -> bool:
        """Always: each command is a container of the image."""
        return True

    def argv(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        env_set: Mapping[str, str] | None = None,
        env_unset: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
    ) -> list[str]:
        """The runtime's command line that runs ``argv`` in a fresh container of the image."""
        line = [self.runtime.program, "run", "--rm", "--pull=never"]
        if name is not None:
            line.append(f"--name={name}")
        if self.runtime.name == "podman":
            line.append("--http-proxy=false")
        line += self.gpus
        line += [f"--volume={folder}:{folder}:rw" for folder in self.mounts]
        line += self.options
        line.append(f"--workdir={os.fspath(cwd) if cwd is not None else self.image.working_dir}")
        for variable in env_unset:
            if variable in self.image.env_names() and variable not in (env_set or {}):
                # docker has no --unsetenv: the image's value is emptied instead.
                line += (
                    [f"--unsetenv={variable}"]
                    if self.runtime.name == "podman"
                    else [f"--env={variable}="]
                )
        for variable, value in (env_set or {}).items():
            if variable not in GATE_SECRETS:
                line.append(f"--env={variable}={value}")
        return [*line, self.image.run_name, *(os.fspath(a) for a in argv)]

    def run(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        env_set: Mapping[str, str] | None = None,
        env_unset: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = proc.DEFAULT_TIMEOUT,
        sink: Callable[[str], None] | None = None,
        claim_strays: bool = True,
    ) -> proc.Result:
        """``argv`` in a fresh container; past ``timeout`` the container goes too."""
        name = f"cuda-gate-{secrets.token_hex(6)}"
        line = self.argv(argv, env_set=env_set, env_unset=env_unset, cwd=cwd, name=name)
        # The container's variables are on its command line; the runtime itself gets this
        # machine's environment without the gate's secrets (gate.proc), as every child,
        # with the system's sbin folders on its PATH (runtime_environ).
        env = runtime_environ()
        remove = [self.runtime.program, "rm", "--force"]
        if self.runtime.name == "podman":
            remove.append("--time=0")  # docker's --force kills at once; podman's waits

        def removed() -> proc.Result:
            # Through the runtime, while its monitor still tends the container: killing the
            # client first would leave a container podman can no longer stop.
            return proc.run([*remove, name], base_env=env, timeout=_REMOVE_TIMEOUT)

        result = proc.run(
            line,
            base_env=env,
            timeout=timeout,
            sink=sink,
            settle=_SETTLE,
            on_timeout=removed,
            on_abandon=[*remove, name],  # the gate killed (SIGKILL): its watchdog removes it
            claim_strays=claim_strays,
        )
        return replace(result, cwd=os.fspath(cwd) if cwd is not None else None)

    def label(self) -> str:
        """``image localhost/app:1 (sha256:...) through podman 4.3.1``."""
        digest = self.image.digest or self.image.image_id
        return f"image {self.image.reference.text} ({digest}) through {self.runtime.label}"


def resolve(
    text: str, *, runtime: str | None = None, gpus: str = "auto", options: Sequence[str] = ()
) -> InImage:
    """The image ``text`` names, as the runtime present holds it, with the GPU options.

    Before anything runs: a reference that is none, an image the runtime does not hold,
    or a pin it holds under another digest is one BadInputError line (exit 6); no
    runtime is a ToolError (exit 3).
    """
    reference = parse(text)
    found = find(runtime)
    image = inspect(found, reference)
    passed, said = gpu_options(found, gpus)
    return InImage(found, image, passed, said, (), tuple(options))

"""What the launch recorder showed, as the run record and the signed predicate keep it.

Per artifact with kernels and per path: how many kernels it carries, each kernel an
entry point launched (how often, and which code ran it: ``sm_90 SASS``, ``JIT-compiled
(sm_90) from PTX``; gate.launch.routes), and the kernels never launched; and every
module the driver was handed that no inspected file accounts for (gate.launch.coverage
keeps and reads them). The stage judges; this module owns the one JSON form, the
``launches`` member of result.json (version 6) and of the gate-run predicate (version 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import BadInputError
from gate.rules.causes import ExecPath


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel an artifact carries, launched on a path: how often, and from which code."""

    kernel: str  # the symbol
    count: int
    route: str


@dataclass(frozen=True)
class ArtifactCoverage:
    """One artifact's kernels on one path: launched, with the code that ran each, and never."""

    artifact: str
    path: ExecPath
    carried: int
    launched: tuple[KernelLaunch, ...]
    never: tuple[str, ...]  # symbols, shortest demangled name first

    @property
    def figures(self) -> str:
        """``3/5``: kernels launched / kernels carried."""
        return f"{len(self.launched)}/{self.carried}"


@dataclass(frozen=True)
class RuntimeModule:
    """A module the driver was handed from no inspected file, as kept in the evidence."""

    sha256: str
    kind: str  # cubin | fatbin | PTX | unknown
    evidence: str  # its path in the evidence folder
    origin: str  # "cuModuleLoad of /opt/x.cubin", "cuModuleLoadData (an image in memory, ...)"
    targets: str  # "sm_80 SASS, compute_80 PTX"
    runs: tuple[str, ...]  # "entry [path]" of the runs that loaded it
    refused: str | None  # the driver's error when it refused the module


@dataclass(frozen=True)
class Launches:
    """Coverage per artifact and path, and the runtime modules, of one run."""

    coverage: tuple[ArtifactCoverage, ...] = ()
    runtime_modules: tuple[RuntimeModule, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``launches`` member."""
        return {
            "coverage": [
                {
                    "artifact": c.artifact,
                    "path": c.path.value,
                    "carried": c.carried,
                    "launched": [
                        {"kernel": k.kernel, "count": k.count, "route": k.route} for k in c.launched
                    ],
                    "never": list(c.never),
                }
                for c in self.coverage
            ],
            "runtime_modules": [
                {
                    "sha256": m.sha256,
                    "kind": m.kind,
                    "evidence": m.evidence,
                    "origin": m.origin,
                    "targets": m.targets,
                    "runs": list(m.runs),
                    "refused": m.refused,
                }
                for m in self.runtime_modules
            ],
        }

    @classmethod
    def from_json(cls, doc: object, where: str) -> Launches:
        """Parse the ``launches`` member; BadInputError naming ``where``."""
        if not isinstance(doc, Mapping):
            raise BadInputError(f"{where}: launches is not an object")
        try:
            return cls(
                tuple(_coverage(c) for c in doc["coverage"]),
                tuple(_module(m) for m in doc["runtime_modules"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BadInputError(f"{where}: launches is malformed: {e!r}") from e


def _coverage(c: Mapping[str, Any]) -> ArtifactCoverage:
    return ArtifactCoverage(
        artifact=_text(c["artifact"]),
        path=ExecPath(c["path"]),
        carried=_count(c["carried"]),
        launched=tuple(
            KernelLaunch(_text(k["kernel"]), _count(k["count"]), _text(k["route"]))
            for k in c["launched"]
        ),
        never=tuple(_text(s) for s in c["never"]),
    )


def _module(m: Mapping[str, Any]) -> RuntimeModule:
    refused = m["refused"]
    return RuntimeModule(
        sha256=_text(m["sha256"]),
        kind=_text(m["kind"]),
        evidence=_text(m["evidence"]),
        origin=_text(m["origin"]),
        targets=_text(m["targets"]),
        runs=tuple(_text(r) for r in m["runs"]),
        refused=None if refused is None else _text(refused),
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value

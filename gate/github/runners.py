"""Runner classes: the one list of self-hosted GPU machines the workflows gate on.

``ci/runner-classes.json`` (schema ``gate/schemas/runner-classes.schema.json``)
names each class, the ``runs-on`` labels that pick it (and the runner group it
must come from, when the class names one), whether a release needs it, and the
delivery image (pinned by digest) to run the gate in. The workflows
read it through ``cuda-gate github runner-matrix``, which turns it into the
``strategy.matrix`` of the gate job; ``cuda-gate matrix`` reads the required
classes from the same file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from gate.errors import BadInputError, ConfigError

SCHEMA = "runner-classes.schema.json"
DEFAULT_TIMEOUT_MINUTES = 60


@dataclass(frozen=True)
class RunnerClass:
    """One class of GPU runner: a name, the labels that select it, and how the gate runs there."""

    name: str
    labels: tuple[str, ...]
    required: bool = True
    group: str | None = None
    container: str | None = None
    timeout_minutes: int = DEFAULT_TIMEOUT_MINUTES
    description: str = ""

    @property
    def image_digest(self) -> str:
        """The ``sha256:...`` digest the container reference is pinned to, or ''."""
        return self.container.rpartition("@")[2] if self.container else ""

    @property
    def runs_on(self) -> list[str] | dict[str, Any]:
        """The job's ``runs-on``: the labels, or ``{group, labels}`` when the class names a group.

        A runner group limits which repositories and workflows may use its machines;
        the labels then pick the machine inside the group.
        """
        if self.group:
            return {"group": self.group, "labels": list(self.labels)}
        return list(self.labels)

    def matrix_entry(self) -> dict[str, Any]:
        """This class as one ``include`` entry of a GitHub Actions matrix."""
        return {
            "name": self.name,
            "labels": list(self.labels),
            "group": self.group or "",
            "runs_on": self.runs_on,
            "required": self.required,
            "container": self.container or "",
            "image_digest": self.image_digest,
            "timeout_minutes": self.timeout_minutes,
        }


def schema() -> dict[str, Any]:
    """The runner-classes JSON Schema shipped in the package."""
    text = resources.files("gate").joinpath("schemas", SCHEMA).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def load_runner_classes(path: str | Path) -> tuple[RunnerClass, ...]:
    """Read and validate a runner-classes file; BadInputError names the file and problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BadInputError(f"{path}: cannot read runner classes: {e.strerror}") from e
    except ValueError as e:
        raise BadInputError(f"{path}: not valid JSON: {e}") from e
    try:
        jsonschema.validate(data, schema())
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "top level"
        raise BadInputError(f"{path}: {where}: {e.message}") from e
    classes = tuple(
        RunnerClass(
            name=c["name"],
            labels=tuple(c["labels"]),
            required=c.get("required", True),
            group=c.get("group"),
            container=c.get("container"),
            timeout_minutes=c.get("timeout_minutes", DEFAULT_TIMEOUT_MINUTES),
            description=c.get("description", ""),
        )
        for c in data["classes"]
    )
    names = [c.name for c in classes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BadInputError(f"{path}: runner class named twice: {', '.join(duplicates)}")
    return classes


def select(
    classes: Iterable[RunnerClass], only: Iterable[str] = (), *, required_only: bool = False
) -> tuple[RunnerClass, ...]:
    """The classes named in ``only`` (all when empty), optionally just the required ones."""
    classes = tuple(classes)
    wanted = tuple(only)
    known = {c.name for c in classes}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ConfigError(
            f"unknown runner class {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    chosen = tuple(
        c for c in classes if (not wanted or c.name in wanted) and (c.required or not required_only)
    )
    if not chosen:
        raise ConfigError("no runner class selected: the matrix would be empty")
    return chosen


def github_matrix(classes: Iterable[RunnerClass]) -> dict[str, Any]:
    """The ``strategy.matrix`` value (read with ``fromJSON``) for these classes."""
    return {"include": [c.matrix_entry() for c in classes]}

"""Records of the evidence store: who ran what (RunMeta), the per-run index, and the key layout.

A run lives under ``<owner>/<repo>/<revision>/<runner>/<run-id>/`` below the
store's prefix (an owner of nested groups, ``group/sub``, takes one segment per
group); its ``index.json`` lists every file with sha256 and size and is written
last, so a run is complete exactly when its index exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from gate import jsonutil
from gate.errors import BadInputError, ConfigError
from gate.fsutil import FileDigest, open_regular
from gate.system.git import check_revision

INDEX_NAME = "index.json"
INDEX_VERSION = 1
# One key segment: what GitHub allows in owner and repository names, runner and run ids.
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]{1,200}")
_FILE_PART = re.compile(r"[A-Za-z0-9_.+=@,-]{1,200}")


def check_segment(value: str, what: str) -> str:
    """A single key segment (letters, digits, ``_.-``); ConfigError otherwise."""
    if not _SEGMENT.fullmatch(value) or value in {".", ".."}:
        raise ConfigError(
            f"{what} {value!r} cannot be used in a storage key (letters, digits, _.-)"
        )
    return value


def safe_segment(value: str) -> str:
    """``value`` with every character a key segment refuses replaced by ``-``."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", value.strip()).strip("-.")
    return cleaned[:200] or "unknown"


def check_file_name(name: str) -> str:
    """A relative POSIX path inside a run: no ``..``, no empty parts, key-safe characters."""
    parts = name.split("/")
    if not all(_FILE_PART.fullmatch(p) and p not in {".", ".."} for p in parts):
        raise BadInputError(
            f"evidence file name {name!r} cannot be stored (use letters, digits, _.-)"
        )
    return name


@dataclass(frozen=True)
class RunMeta:
    """Where a run's evidence belongs: repository, revision, runner, run id."""

    owner: str
    repo: str
    revision: str
    runner: str
    run_id: str
    runner_class: str | None = None
    dirty: bool = False

    def __post_init__(self) -> None:
        check_owner(self.owner)
        check_segment(self.repo, "repository name")
        object.__setattr__(self, "revision", check_revision(self.revision))
        check_segment(self.runner, "runner")
        check_segment(self.run_id, "run id")

    @property
    def repository(self) -> str:
        """``owner/repo``."""
        return f"{self.owner}/{self.repo}"

    def run_key(self) -> str:
        """The run's folder below the store prefix, without a trailing slash."""
        return "/".join((self.owner, self.repo, self.revision, self.runner, self.run_id))


def natural_key(text: str) -> tuple[tuple[int, str], ...]:
    """``123-10`` after ``123-9``: digit runs compare as numbers, the rest as text."""
    return tuple(
        (int(part), "") if part.isdigit() else (-1, part) for part in re.findall(r"\d+|\D+", text)
    )


def check_owner(owner: str) -> str:
    """An owner: one key segment, or several for nested groups (GitLab ``group/sub``)."""
    for part in owner.split("/"):
        check_segment(part, "repository owner")
        if part.startswith("."):
            # GitHub and GitLab names never start with a dot; the spool keeps its own
            # folders (the conflicts area) under such names.
            raise ConfigError(f"repository owner {owner!r} cannot start with a dot")
    return owner


def split_repository(repository: str) -> tuple[str, str]:
    """``owner/repo`` (``group/sub/repo``: the owner is ``group/sub``) into checked parts."""
    owner, sep, repo = repository.strip().rpartition("/")
    if not sep:
        raise ConfigError(f"repository {repository!r} is not of the form owner/repo")
    return check_owner(owner), check_segment(repo, "repository name")


def revision_key(repository: str, revision: str) -> str:
    """The folder holding every run of one revision, without a trailing slash."""
    owner, repo = split_repository(repository)
    return f"{owner}/{repo}/{check_revision(revision)}"


@dataclass(frozen=True)
class Verdict:
    """The gate's verdict, copied from result.json."""

    accepted: bool
    statement: str


@dataclass(frozen=True)
class RunIndex:
    """The per-run index: run metadata plus every file with its digest."""

    meta: RunMeta
    files: tuple[FileDigest, ...]  # each file, named by its path in the run
    verdict: Verdict | None
    tool_version: str
    finished: str | None = None  # when the run finished (result.json), ISO 8601 UTC

    def order(self) -> tuple[str, tuple[tuple[int, str], ...]]:
        """Sort key, oldest first: the recorded finish time, then the run id read naturally."""
        return (self.finished or "", natural_key(self.meta.run_id))

    def to_json(self) -> bytes:
        """Deterministic JSON bytes (the same run always gives the same index)."""
        doc: dict[str, Any] = {
            "version": INDEX_VERSION,
            "tool": {"name": "cuda-gate", "version": self.tool_version},
            "repository": self.meta.repository,
            "revision": self.meta.revision,
            "dirty": self.meta.dirty,
            "runner": self.meta.runner,
            "runner_class": self.meta.runner_class,
            "run_id": self.meta.run_id,
            "finished": self.finished,
            "verdict": (
                None
                if self.verdict is None
                else {"accepted": self.verdict.accepted, "statement": self.verdict.statement}
            ),
            "files": [f.to_json("path") for f in self.files],
        }
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> RunIndex:
        """Parse an index; BadInputError naming ``where`` when it is not one."""
        try:
            doc = jsonutil.loads(data, where)
            _check_version(doc, where)
            owner, repo = split_repository(doc["repository"])
            meta = RunMeta(
                owner=owner,
                repo=repo,
                revision=doc["revision"],
                runner=doc["runner"],
                run_id=doc["run_id"],
                runner_class=doc.get("runner_class"),
                dirty=bool(doc.get("dirty", False)),
            )
            files = tuple(
                FileDigest(check_file_name(f["path"]), str(f["sha256"]), int(f["size"]))
                for f in doc["files"]
            )
            verdict = doc.get("verdict")
            return cls(
                meta=meta,
                files=files,
                verdict=(
                    None
                    if verdict is None
                    else Verdict(bool(verdict["accepted"]), str(verdict["statement"]))
                ),
                tool_version=str(doc.get("tool", {}).get("version", "")),
                finished=str(doc["finished"]) if doc.get("finished") else None,
            )
        except BadInputError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, ConfigError) as e:
            raise BadInputError(f"{where}: not a valid evidence index: {e}") from e


def _check_version(doc: object, where: str) -> None:
    if not isinstance(doc, dict) or doc.get("version") != INDEX_VERSION:
        found = doc.get("version") if isinstance(doc, dict) else None
        raise BadInputError(f"{where}: unsupported evidence index version {found!r}")


def copy_with_digest(source: Path, dest: Path) -> tuple[str, int]:
    """Copy ``source`` (a regular file, not a link) to a new file ``dest``, synced; sha256, size."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(source) as src, dest.open("xb") as out:
        while block := src.read(1 << 20):
            digest.update(block)
            size += len(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest(), size


# The id `cuda-gate run` gives a run outside CI (gate.system.ci.run_id): its UTC start, then
# random hex digits. The digits are the short id a person types; any other id is short.
_LOCAL_RUN_ID = re.compile(r"(\d{8}T\d{6}Z)-([0-9a-f]{4,})")


def short_run_id(run_id: str) -> str:
    """The form `evidence list` shows: ``1a2b3c`` for ``20261129T180000Z-1a2b3c``; any
    other id (``gh-123-1``, an ``upload --run-id``) whole."""
    match = _LOCAL_RUN_ID.fullmatch(run_id)
    return match.group(2) if match else run_id


def started_from_id(run_id: str) -> str | None:
    """When a locally named run started (ISO 8601 UTC, from its id); None for other ids."""
    match = _LOCAL_RUN_ID.fullmatch(run_id)
    if match is None:
        return None
    stamp = match.group(1)
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}Z"


class RunState(StrEnum):
    """What a listed run amounts to, as `evidence list` names it."""

    ACCEPTED = "accepted"
    NOT_ACCEPTED = "not accepted"
    NO_VERDICT = "no verdict"
    INCOMPLETE = "incomplete"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class RunSummary:
    """One run found under a revision: complete when its index exists.

    ``problem`` says why an index that exists could not be used (listings that
    keep unreadable runs); such a run has no ``index`` and is not complete.
    """

    runner: str
    run_id: str
    index: RunIndex | None
    problem: str | None = None
    revision: str = ""  # the revision folder the run was found in

    @property
    def complete(self) -> bool:
        """True when the index exists (it is written last)."""
        return self.index is not None

    @property
    def state(self) -> RunState:
        """Accepted, not accepted, no verdict, incomplete or unreadable."""
        if self.index is None:
            return RunState.INCOMPLETE if self.problem is None else RunState.UNREADABLE
        if self.index.verdict is None:
            return RunState.NO_VERDICT
        return RunState.ACCEPTED if self.index.verdict.accepted else RunState.NOT_ACCEPTED

    def newest_first(self) -> tuple[str, tuple[tuple[int, str], ...], str]:
        """Sort key, descending: the finish time (an incomplete run's start, read from its
        id, where it has one), then the run id read naturally, then the runner."""
        when = self.index.finished if self.index is not None else started_from_id(self.run_id)
        return (when or "", natural_key(self.run_id), self.runner)

    def listing_json(self) -> dict[str, Any]:
        """The run as ``evidence list --json`` gives it (gate/schemas/evidence-list.schema.json)."""
        index = self.index
        return {
            "revision": self.revision,
            "runner": self.runner,
            "run_id": self.run_id,
            "short_id": short_run_id(self.run_id),
            "state": self.state.value,
            "runner_class": None if index is None else index.meta.runner_class,
            "dirty": None if index is None else index.meta.dirty,
            "finished": None if index is None else index.finished,
            "verdict": (
                None
                if index is None or index.verdict is None
                else {"accepted": index.verdict.accepted, "statement": index.verdict.statement}
            ),
            "files": None if index is None else len(index.files),
            "problem": self.problem,
        }


@dataclass(frozen=True)
class PublishResult:
    """What publishing one run did."""

    location: str
    index: RunIndex
    uploaded: tuple[str, ...]
    already_present: tuple[str, ...]

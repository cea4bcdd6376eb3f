"""Find a baseline run, from a folder or the evidence store, and compare a run with it.

A reference is an evidence folder (a path that exists, or one written like a path),
``latest-accepted`` (the newest accepted run of the runner class, or of the runner,
over every revision in the store), or a revision or tag that git resolves here (the
newest complete run of that revision by the runner class or runner). A stored run is
downloaded and every file checked against its index before it is read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gate.baseline.comparison import Baseline, facts
from gate.config import Config
from gate.errors import BadInputError, ConfigError, EvidenceChangedError
from gate.record import RESULT_FILE, RunRecord, parse, read_result
from gate.rules.baseline import Policy, compare
from gate.rules.targets import Capability
from gate.store import fetch_run, find_repository, list_runs, load_settings, open_store
from gate.store.readback import list_repository_runs
from gate.store.records import RunState, RunSummary, check_segment
from gate.system import git

LATEST_ACCEPTED = "latest-accepted"
_LINK_HINT = "evidence is plain files; links are never followed"


@dataclass(frozen=True)
class Which:
    """Whose stored runs a reference means: a runner class, or one runner."""

    runner_class: str | None = None
    runner: str | None = None

    def matches(self, run: RunSummary) -> bool:
        """Whether ``run`` is one of them."""
        if self.runner is not None and run.runner != self.runner:
            return False
        meta = run.index.meta if run.index is not None else None
        return self.runner_class is None or (
            meta is not None and meta.runner_class == self.runner_class
        )

    def describe(self) -> str:
        """``runner class h200`` or ``runner h200-01``."""
        if self.runner is not None:
            return f"runner {self.runner}"
        return f"runner class {self.runner_class}"


@dataclass(frozen=True)
class Found:
    """A baseline run read back: its record and where it came from."""

    record: RunRecord
    reference: str
    location: str
    digest: str  # SHA-256 of its result.json
    summary: RunSummary | None = None  # the stored run, when it came from the store


def choose(runs: Iterable[RunSummary], which: Which, *, accepted: bool) -> RunSummary | None:
    """The newest complete run ``which`` names (only accepted ones with ``accepted``)."""
    found = [
        r
        for r in runs
        if r.index is not None
        and which.matches(r)
        and (not accepted or r.state is RunState.ACCEPTED)
    ]
    return max(found, key=lambda r: r.newest_first(), default=None)


def looks_like_folder(reference: str) -> bool:
    """A reference written as a path (``./ev``, ``/tmp/ev``, ``ev/``) or naming a folder."""
    return "/" in reference or reference.startswith(".") or Path(reference).is_dir()


def from_folder(folder: Path, reference: str) -> Found:
    """The run of an evidence folder; BadInputError when it is not gate evidence.

    result.json is read once, as evidence is (:func:`gate.record.read_result`: a plain
    file, bounded), and its record and digest come from the same bytes. A link in place
    of the folder is refused like a link in place of the file.
    """
    if folder.is_symlink():
        raise BadInputError(f"{folder}: the evidence folder is a symbolic link ({_LINK_HINT})")
    if not folder.exists():
        raise BadInputError(f"{folder}: no such evidence folder")
    if not folder.is_dir():
        raise BadInputError(f"{folder}: not an evidence folder (not a folder)")
    data = read_result(folder)
    record = parse(data, str(folder / RESULT_FILE))
    return Found(record, reference, str(folder), hashlib.sha256(data).hexdigest())


def from_store(
    reference: str,
    which: Which,
    dest: Path,
    *,
    store_url: str | None = None,
    repository: str | None = None,
    config: Config | None = None,
    cwd: Path | None = None,
) -> Found:
    """The stored run ``reference`` names for ``which``, downloaded into ``dest``."""
    if which.runner is None and which.runner_class is None:
        raise ConfigError(
            f"baseline {reference}: whose run? name a runner class or a runner",
            hint="--runner-class CLASS (CUDA_GATE_RUNNER_CLASS) or --runner NAME",
        )
    if which.runner is not None:
        check_segment(which.runner, "--runner")
    here = Path.cwd() if cwd is None else cwd
    store = open_store(load_settings(here, url=store_url, config=config))
    repository = repository or find_repository(os.environ, here)
    if reference == LATEST_ACCEPTED:
        chosen = choose(list_repository_runs(store, repository), which, accepted=True)
        wanted = f"no accepted run of {which.describe()} is stored for {repository}"
    else:
        revision = git.resolve(reference, here)
        chosen = choose(list_runs(store, repository, revision), which, accepted=False)
        wanted = f"no complete run of {which.describe()} is stored for {reference} ({revision})"
    if chosen is None:
        # The store answered: the evidence asked for is missing (13), not an outage (20).
        raise EvidenceChangedError(
            f"baseline {reference}: {wanted} in {store.describe()}",
            hint="`cuda-gate evidence list --all` shows the stored runs",
        )
    fetch_run(
        store,
        repository,
        chosen.revision,
        runner=chosen.runner,
        run_id=chosen.run_id,
        dest=dest,
    )
    found = from_folder(dest, reference)
    location = store.location(f"{repository}/{chosen.revision}/{chosen.runner}/{chosen.run_id}")
    return Found(found.record, reference, location, found.digest, chosen)


def compare_records(
    old: Found, new: RunRecord, policy: Policy, devices: Iterable[Capability] = ()
) -> Baseline:
    """What ``new`` lost against ``old`` (and what it gained), per artifact by name.

    Routes are compared on every device either run was for, besides ``devices``.
    """
    ran_on = [r.device.capability for r in (old.record, new) if r.device.capability]
    targets = [r.device.target.capability for r in (old.record, new) if r.device.target]
    diff = compare(
        facts((a.name, a.listing) for a in old.record.artifacts),
        facts((a.name, a.listing) for a in new.artifacts),
        policy,
        (*ran_on, *targets, *devices),
    )
    summary = old.summary
    return Baseline(
        reference=old.reference,
        location=old.location,
        digest=old.digest,
        diff=diff,
        revision=summary.revision if summary else old.record.source.revision,
        runner=summary.runner if summary else old.record.run.runner,
        run_id=summary.run_id if summary else old.record.run.run_id,
    )

"""Deriving a run's RunMeta from its result.json, the CI environment, and git.

Order for each field: the explicit override, then result.json (the record of the
run itself), then the GitHub Actions environment, then git or the host.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gate.errors import BadInputError, ConfigError
from gate.evidence import evidence_files
from gate.fsutil import sha256_file
from gate.record import RESULT_FILE, load
from gate.store.records import RunMeta, check_segment, safe_segment, split_repository
from gate.system import ci, git


def find_repository(env: Mapping[str, str], cwd: Path) -> str:
    """GITHUB_REPOSITORY, else the checkout's ``origin`` remote, else ``local/<its folder>``."""
    if env.get("GITHUB_REPOSITORY"):
        return env["GITHUB_REPOSITORY"]
    repository = git.origin_repository(cwd)
    if repository is not None:
        return repository
    # A checkout without a remote (a local experiment) still gets a stable key.
    top = git.toplevel(cwd)
    if top is not None:
        return f"local/{safe_segment(top.name)}"
    raise ConfigError(
        f"cannot tell the repository (owner/repo): GITHUB_REPOSITORY is unset and {cwd} "
        "is not a git checkout",
        hint="pass --repository owner/repo",
    )


def _section(doc: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = doc.get(name)
    return value if isinstance(value, Mapping) else {}


def run_meta_from_evidence(
    evidence_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    overrides: Mapping[str, str | None] | None = None,
) -> RunMeta:
    """The RunMeta of the evidence in ``evidence_dir`` (keys of ``overrides`` as RunMeta's)."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    # An empty value given on purpose (``--run-id ""``) is refused below, not ignored.
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    result_path = evidence_dir / RESULT_FILE
    doc = load(evidence_dir).to_json() if result_path.is_file() else {}
    run, source = _section(doc, "run"), _section(doc, "source")

    if "repository" in given:
        repository = given["repository"]
    else:
        repository = source.get("repository") or find_repository(env, cwd)
    owner, repo = split_repository(str(repository))
    if "revision" in given:
        revision: object = git.check_revision(given["revision"])
    else:
        revision = source.get("revision")
    dirty = bool(source.get("dirty", False))
    if not revision:
        # Only when the revision itself comes from git does the work tree's state apply.
        revision = git.head(cwd)
        dirty = bool(git.is_dirty(cwd))
    if not revision:
        raise ConfigError(
            f"{result_path}: no source revision recorded and no git checkout at {cwd}",
            hint="pass --revision SHA",
        )
    runner_class = given.get("runner_class") or run.get("runner_class") or ci.runner_class(env)
    # A name the user typed is used as typed or refused: rewriting it (``../..`` became
    # ``unknown``) would store the run somewhere the user never named. Names the
    # machine supplies (host names, CI variables) are made key-safe instead.
    if "runner" in given:
        runner = check_segment(given["runner"], "--runner")
    else:
        found = run.get("runner") or ci.runner_name(env)
        runner = safe_segment(str(found))
    if "run_id" in given:
        run_id = check_segment(given["run_id"], "--run-id")
    else:
        found = run.get("run_id") or ci.ci_run_id(env) or _content_id(evidence_dir)
        run_id = safe_segment(str(found))
    return RunMeta(
        owner=owner,
        repo=repo,
        revision=str(revision),
        runner=runner,
        run_id=run_id,
        runner_class=str(runner_class) if runner_class else None,
        dirty=dirty,
    )


def _content_id(evidence_dir: Path) -> str:
    """A run id from the evidence's digests: uploading one folder twice is idempotent."""
    if not evidence_dir.is_dir():
        raise BadInputError(f"{evidence_dir}: evidence folder not found")
    names = evidence_files(evidence_dir)
    if not names:
        raise BadInputError(f"{evidence_dir}: the evidence folder is empty")
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"{name}\0{sha256_file(evidence_dir / name)}\n".encode())
    return f"local-{digest.hexdigest()[:16]}"

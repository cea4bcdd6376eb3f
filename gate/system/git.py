"""The source revision: the one revision check, the one dirty-tree rule, refs resolved by git.

A revision is a full commit object name: 40 lowercase hex digits (SHA-1 repositories)
or 64 (SHA-256 repositories). A work tree is *dirty* when a tracked file differs from
the commit; untracked files (the gate's own ``gate-evidence/``, build folders) do not
count, or every run inside a checkout would be dirty.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gate import proc
from gate.errors import ConfigError, GateError

_REVISION = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# git's scp-like form: ``[user@]host:path`` with a colon before any slash.
_SCP_LIKE = re.compile(r"(?:[^@/]+@)?[^/:]+:(?P<path>.+)")
_TIMEOUT = 60.0


@dataclass(frozen=True)
class SourceInfo:
    """The git revision the gate ran on, when it ran inside a repository."""

    revision: str | None
    dirty: bool | None
    repository: str | None


def check_revision(revision: str) -> str:
    """The full commit id, lower case; ConfigError for anything else (short ids, refs)."""
    value = revision.strip().lower()
    if not _REVISION.fullmatch(value):
        raise ConfigError(
            f"revision {revision!r} is not a full commit id (40 or 64 hex digits)",
            hint="give the full id, or a ref that git resolves in the checkout",
        )
    return value


def parse_remote(url: str) -> str | None:
    """The repository path of a git remote URL (``owner/repo``, ``group/sub/repo``), or None.

    The whole path is kept, so a GitLab subgroup project is the same repository whether
    the remote is ``git@host:group/sub/repo.git`` or ``https://host/group/sub/repo``;
    keeping only the last two parts would give two projects of different groups one key.
    A local path or ``file://`` remote names no hosted repository: None.
    """
    text = url.strip()
    if _URL_SCHEME.match(text):
        try:
            parts = urlsplit(text)
        except ValueError:  # a malformed host such as an unclosed ``[`` IPv6 bracket
            return None
        if parts.scheme == "file" or not parts.hostname:
            return None
        path = parts.path
    else:
        scp = _SCP_LIKE.fullmatch(text)
        if scp is None:
            return None
        path = scp["path"]
    path = path.strip("/").removesuffix(".git")
    names = [name for name in path.split("/") if name]
    return "/".join(names) if len(names) >= 2 else None


def git_output(args: list[str], cwd: Path) -> str | None:
    """What ``git ARGS`` printed, stripped; None when git is absent or the command failed."""
    try:
        result = proc.run([proc.which("git"), *args], cwd=cwd, timeout=_TIMEOUT)
    except GateError:
        return None
    return result.stdout.strip() if result.ok else None


def head(cwd: Path) -> str | None:
    """The checkout's HEAD commit, or None outside a repository."""
    return git_output(["rev-parse", "HEAD"], cwd)


def is_dirty(cwd: Path) -> bool | None:
    """Whether a tracked file differs from HEAD; None when git cannot tell."""
    status = git_output(["status", "--porcelain", "--untracked-files=no"], cwd)
    return None if status is None else bool(status)


def toplevel(cwd: Path) -> Path | None:
    """The checkout's top folder, or None outside a repository."""
    top = git_output(["rev-parse", "--show-toplevel"], cwd)
    return Path(top) if top else None


def origin_repository(cwd: Path) -> str | None:
    """The repository path of the ``origin`` remote (nested groups kept), or None."""
    url = git_output(["remote", "get-url", "origin"], cwd)
    return parse_remote(url) if url else None


def resolve(ref: str, cwd: Path) -> str:
    """A full commit id for ``ref``: a full id as is, else whatever git resolves in ``cwd``.

    Short ids, branch and tag names and ``HEAD`` need a checkout; ConfigError says so.
    """
    text = ref.strip()
    if _REVISION.fullmatch(text.lower()):
        return text.lower()
    if not text or text.startswith("-"):
        raise ConfigError(f"revision {ref!r} is not a commit id or a ref")
    resolved = git_output(["rev-parse", "--verify", "--quiet", f"{text}^{{commit}}"], cwd)
    if resolved is None:
        raise ConfigError(
            f"revision {ref!r}: git cannot resolve it in {cwd}",
            hint="give a full commit id, or run inside the checkout",
        )
    return check_revision(resolved)


def source_info(cwd: Path) -> SourceInfo:
    """Revision, dirty flag and owner/repo of the git repository at ``cwd``, if any."""
    repository = os.environ.get("GITHUB_REPOSITORY") or None
    revision = head(cwd)
    if revision is None:
        return SourceInfo(None, None, repository)
    return SourceInfo(revision, is_dirty(cwd), repository or origin_repository(cwd))

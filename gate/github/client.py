"""A small GitHub REST client: commit statuses for the gate's runner classes.

The token comes from the workflow (``GITHUB_TOKEN``) and the base URL from
``GITHUB_API_URL`` (GitHub Enterprise Server sets it to ``https://HOST/api/v3``).
Transient failures (5xx, connection errors) are retried with exponential
backoff; 401/403/404 become a one-line :class:`~gate.errors.GitHubError` that says
what to check. The token never appears in a log line or an error message: every
text this module emits goes through :func:`_redact` first.
"""

from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import requests

from gate.errors import ConfigError, GitHubError
from gate.git import check_revision

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
# GitHub rejects a commit status description longer than this.
MAX_DESCRIPTION = 140
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# SHA-1 object names, or SHA-256 in repositories that use it.
_HINTS = {
    401: "the token was refused: is GITHUB_TOKEN set from the workflow and still valid?",
    403: "the token lacks a permission: the job needs `statuses: write`, and a pull "
    "request from a fork only gets a read-only token",
    404: "no such repository or commit for this token: check the repository, the "
    "revision and GITHUB_API_URL",
}


class State(enum.StrEnum):
    """A commit status state, as the API spells it."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILURE = "failure"
    ERROR = "error"


@dataclass(frozen=True)
class CommitStatus:
    """One commit status: a runner class's verdict on one revision."""

    state: State
    context: str
    description: str
    target_url: str | None = None

    def payload(self) -> dict[str, str]:
        """The JSON body of ``POST /repos/{owner}/{repo}/statuses/{sha}``."""
        description = " ".join(self.description.split())
        if len(description) > MAX_DESCRIPTION:
            description = description[: MAX_DESCRIPTION - 3] + "..."
        body = {"state": self.state.value, "context": self.context, "description": description}
        if self.target_url:
            body["target_url"] = self.target_url
        return body


def check_repository(repository: str) -> str:
    """``owner/name`` unchanged, or ConfigError naming the bad value."""
    if not _REPO.match(repository):
        raise ConfigError(f"repository {repository!r} is not of the form owner/name")
    return repository


class GitHubClient:
    """Talks to one GitHub (or GitHub Enterprise) REST API with one token."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        session: requests.Session | None = None,
        attempts: int = 4,
        backoff: float = 1.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not token.strip():
            raise ConfigError("no GitHub token: set GITHUB_TOKEN from the workflow")
        if not api_url.startswith(("https://", "http://")):
            raise ConfigError(f"GitHub API URL {api_url!r} is not an http(s) URL")
        self._token = token
        self.api_url = api_url.rstrip("/")
        self._session = session or requests.Session()
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.timeout = timeout
        self._sleep = sleep

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> GitHubClient:  # noqa: ANN401
        """A client from ``GITHUB_TOKEN`` and ``GITHUB_API_URL`` (default api.github.com)."""
        token = env.get("GITHUB_TOKEN", "")
        api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
        return cls(token, api_url=api_url, **kwargs)

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r})"

    def create_status(self, repository: str, revision: str, status: CommitStatus) -> Any:  # noqa: ANN401 - JSON
        """Post one commit status; returns the API's JSON answer."""
        path = f"/repos/{check_repository(repository)}/statuses/{check_revision(revision)}"
        return self.request("POST", path, json=status.payload())

    def request(self, method: str, path: str, *, json: Mapping[str, Any] | None = None) -> Any:  # noqa: ANN401 - JSON
        """One API call with retries on 5xx and connection errors; GitHubError otherwise."""
        url = f"{self.api_url}{path}"
        where = f"GitHub API {method} {self._redact(url)}"
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "cuda-gate",
        }
        for attempt in range(1, self.attempts + 1):
            try:
                response = self._session.request(
                    method, url, headers=headers, json=json, timeout=self.timeout
                )
            except requests.RequestException as e:
                problem = f"could not connect: {type(e).__name__}"
                if attempt == self.attempts:
                    raise GitHubError(self._redact(f"{where}: {problem}")) from e
                self._wait(where, problem, attempt)
                continue
            if response.status_code >= 500 and attempt < self.attempts:
                self._wait(where, f"answered {response.status_code}", attempt)
                continue
            if response.status_code >= 400:
                raise self._error(where, response)
            return response.json() if response.content else None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(self, where: str, problem: str, attempt: int) -> None:
        delay = self.backoff * 2 ** (attempt - 1)
        log.warning(
            self._redact(f"{where} {problem}; retry {attempt}/{self.attempts - 1} in {delay:g} s")
        )
        self._sleep(delay)

    def _error(self, where: str, response: requests.Response) -> GitHubError:
        """A one-line error with the API's own message and what to check."""
        try:
            message = str(response.json().get("message", ""))
        except (ValueError, AttributeError):
            message = response.text[:200]
        text = f"{where}: {response.status_code} {response.reason or ''}".rstrip()
        if message:
            text += f": {' '.join(message.split())}"
        hint = _HINTS.get(response.status_code)
        return GitHubError(self._redact(text), hint=self._redact(hint) if hint else None)

    def _redact(self, text: str) -> str:
        """The text with the token (should anything echo it back) replaced by ***."""
        return text.replace(self._token, "***") if self._token else text


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str) -> str:
    """One Actions workflow command line, e.g. ``::error title=T::message``.

    Escaping the message's newlines keeps text from a build log (untrusted in a
    pull request) from starting a workflow command of its own on the next line.
    """
    props = ",".join(f"{k}={_escape_property(v)}" for k, v in properties.items() if v)
    return f"::{command}{' ' + props if props else ''}::{_escape_data(message)}"

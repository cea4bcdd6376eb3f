"""A small GitHub REST client: commit statuses for the gate's runner classes.

The token comes from the workflow (``GITHUB_TOKEN``) and the base URL from
``GITHUB_API_URL`` (GitHub Enterprise Server sets it to ``https://HOST/api/v3``).

Retries are urllib3's :class:`~urllib3.util.Retry` mounted on the requests
session, not a loop of our own: connection errors, 5xx and 429 are retried a
bounded number of times; a ``Retry-After`` header (seconds or an HTTP date, on a
429, a 503 or a secondary-rate-limit 403) is honoured, each wait capped at
:data:`MAX_WAIT` seconds, otherwise urllib3's exponential backoff applies. So the
total wait is bounded by ``(attempts - 1) * MAX_WAIT``. What is left after the
last attempt, and any 401/403/404, becomes a one-line
:class:`~gate.errors.GitHubError` that says what to check. The token never
appears in a log line or an error message: every text this module emits goes
through :meth:`GitHubClient._redact` first.
"""

from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import requests
from requests.adapters import HTTPAdapter
from urllib3.response import BaseHTTPResponse
from urllib3.util import Retry

from gate.errors import ConfigError, GitHubError
from gate.system.git import check_revision

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
# GitHub rejects a commit status description longer than this.
MAX_DESCRIPTION = 140
# The longest one wait may be, Retry-After included (a larger value is cut to this).
MAX_WAIT = 60
# Statuses worth another try: rate limited, or the server's own trouble.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# SHA-1 object names, or SHA-256 in repositories that use it.
_HINTS = {
    401: "the token was refused: is GITHUB_TOKEN set from the workflow and still valid?",
    403: "the token lacks a permission: the job needs `statuses: write`, and a pull "
    "request from a fork only gets a read-only token",
    404: "no such repository or commit for this token: check the repository, the "
    "revision and GITHUB_API_URL",
    429: "GitHub's rate limit: try again later, or give the job its own token",
}


class RetryPolicy(Retry):
    """urllib3's Retry for the GitHub API, with its waits logged and its sleep injectable.

    Only :meth:`sleep` differs from urllib3: the wait (Retry-After when the server
    sent one, else the backoff) is logged with the redacted request, then handed
    to ``sleep`` (``time.sleep`` unless a test gives its own clock).
    """

    # A secondary rate limit answers 403 with Retry-After; without the header a 403
    # is a permission problem and is not retried.
    RETRY_AFTER_STATUS_CODES = frozenset({403, 413, 429, 503})

    def __init__(
        self,
        *args: Any,  # noqa: ANN401 - urllib3's own signature
        sleep: Callable[[float], None] = time.sleep,
        redact: Callable[[str], str] = str,
        **kwargs: Any,  # noqa: ANN401
    ) -> None:
        super().__init__(*args, **kwargs)
        self._sleep = sleep
        self._redact = redact

    def new(self, **kw: Any) -> Self:  # noqa: ANN401 - urllib3's own signature
        """A copy for the next attempt (urllib3 rebuilds the object on every retry)."""
        copy = super().new(**kw)
        copy._sleep, copy._redact = self._sleep, self._redact
        return copy

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        """Wait before the next attempt: Retry-After if the server sent one, else backoff."""
        retry_after = (
            self.get_retry_after(response)
            if self.respect_retry_after_header and response is not None
            else None
        )
        delay = retry_after if retry_after is not None else self.get_backoff_time()
        last = self.history[-1] if self.history else None
        if last is not None:
            problem = f"answered {last.status}" if last.status else "could not connect"
            if last.error is not None and not last.status:
                problem = f"could not connect: {type(last.error).__name__}"
            why = " (Retry-After)" if retry_after is not None else ""
            log.warning(
                self._redact(
                    f"GitHub API {last.method} {last.url} {problem}; "
                    f"retry {len(self.history)} in {delay:g} s{why}"
                )
            )
        if delay > 0:
            self._sleep(delay)


class State(enum.StrEnum):
    """A commit status state the gate posts, as the API spells it (never ``pending``)."""

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
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.retry = RetryPolicy(
            total=self.attempts - 1,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=None,  # a commit status POST may be repeated: same context, same state
            backoff_factor=backoff,
            backoff_max=MAX_WAIT,
            retry_after_max=MAX_WAIT,
            respect_retry_after_header=True,
            raise_on_status=False,  # the last answer becomes our one-line error
            sleep=sleep,
            redact=self._redact,
        )
        self._session = session or requests.Session()
        adapter = HTTPAdapter(max_retries=self.retry)
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)

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
        """One API call, retried as :class:`RetryPolicy` says; GitHubError on failure."""
        url = f"{self.api_url}{path}"
        where = f"GitHub API {method} {self._redact(url)}"
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "cuda-gate",
        }
        try:
            response = self._session.request(
                method, url, headers=headers, json=json, timeout=self.timeout
            )
        except requests.RequestException as e:
            problem = f"could not connect: {type(e).__name__}"
            raise GitHubError(
                self._redact(f"{where}: {problem} (after {self.attempts} attempts)")
            ) from e
        if response.status_code >= 400:
            raise self._error(where, response)
        return response.json() if response.content else None

    def _error(self, where: str, response: requests.Response) -> GitHubError:
        """A one-line error with the API's own message, the attempts made and what to check."""
        try:
            message = str(response.json().get("message", ""))
        except (ValueError, AttributeError):
            message = response.text[:200]
        text = f"{where}: {response.status_code} {response.reason or ''}".rstrip()
        if message:
            text += f": {' '.join(message.split())}"
        tries = _attempts(response)
        if tries > 1:
            text += f" (after {tries} attempts)"
        hint = _HINTS.get(response.status_code)
        return GitHubError(self._redact(text), hint=self._redact(hint) if hint else None)

    def _redact(self, text: str) -> str:
        """The text with the token (should anything echo it back) replaced by ***."""
        return text.replace(self._token, "***") if self._token else text


def _attempts(response: requests.Response) -> int:
    """How many requests urllib3 made for this answer (its Retry history plus the last)."""
    retries = getattr(response.raw, "retries", None)
    return len(retries.history) + 1 if isinstance(retries, Retry) else 1


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

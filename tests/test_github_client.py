"""The GitHub REST client against a local server that records requests."""

from __future__ import annotations

import email.utils
import logging
import socket
import time

import pytest
import requests

from gate.errors import ConfigError, GitHubError
from gate.github.client import MAX_WAIT, CommitStatus, GitHubClient, State
from tests.githubserver import fake_github

pytestmark = pytest.mark.integration

TOKEN = "ghs_SeCrEtT0kenValue1234567890abcdef"
SHA = "0123456789abcdef0123456789abcdef01234567"
STATUS = CommitStatus(
    State.SUCCESS,
    "cuda-gate/dgx-spark",
    "Passed with the current driver, current artifacts, and tested entry points.",
    "https://github.example/o/r/actions/runs/7",
)


def _client(url: str, sleeps: list[float] | None = None, attempts: int = 4) -> GitHubClient:
    sink = sleeps if sleeps is not None else []
    return GitHubClient(TOKEN, api_url=url, attempts=attempts, sleep=sink.append, timeout=5)


@pytest.fixture(autouse=True)
def _all_logs(caplog: pytest.LogCaptureFixture) -> None:
    # Everything at DEBUG, urllib3 and requests included, so a leak would be caught.
    caplog.set_level(logging.DEBUG)


def _assert_no_token(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    out, err = capsys.readouterr()
    assert TOKEN not in out
    assert TOKEN not in err
    assert TOKEN not in caplog.text
    for record in caplog.records:
        assert TOKEN not in record.getMessage()


def test_status_posts_payload_and_auth_to_the_right_endpoint(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_github() as gh:
        answer = _client(gh.url).create_status("acme/kernels", SHA, STATUS)
    assert answer == {"id": 1}
    [req] = gh.requests
    assert req.method == "POST"
    assert req.path == f"/repos/acme/kernels/statuses/{SHA}"
    assert req.headers["authorization"] == f"Bearer {TOKEN}"
    assert req.headers["accept"] == "application/vnd.github+json"
    assert req.headers["x-github-api-version"] == "2022-11-28"
    assert req.body == {
        "state": "success",
        "context": "cuda-gate/dgx-spark",
        "description": STATUS.description,
        "target_url": STATUS.target_url,
    }
    _assert_no_token(caplog, capsys)


def test_enterprise_base_url_prefix_is_kept() -> None:
    with fake_github(prefix="/api/v3") as gh:
        GitHubClient.from_env(
            {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url + "/"}, sleep=lambda _: None
        ).create_status("acme/kernels", SHA, STATUS)
    assert [r.path for r in gh.requests] == [f"/api/v3/repos/acme/kernels/statuses/{SHA}"]


def test_long_description_is_cut_to_githubs_limit() -> None:
    long = CommitStatus(State.FAILURE, "cuda-gate/x", "word " * 100)
    with fake_github() as gh:
        _client(gh.url).create_status("acme/kernels", SHA, long)
    body = gh.requests[0].body
    assert len(body["description"]) == 140
    assert body["description"].endswith("...")
    assert "target_url" not in body


def test_retries_5xx_with_backoff_then_succeeds(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeps: list[float] = []
    with fake_github() as gh:
        gh.answer((502, {"message": "Bad Gateway"}), (503, {}), (201, {"id": 9}))
        answer = _client(gh.url, sleeps).create_status("acme/kernels", SHA, STATUS)
    assert answer == {"id": 9}
    assert len(gh.requests) == 3
    assert all(r.body == gh.requests[0].body for r in gh.requests)
    # urllib3's backoff: the first retry at once, then backoff * 2 ** (n - 1).
    assert sleeps == [2.0]
    assert "answered 502; retry 1 in 0 s" in caplog.text
    assert "answered 503; retry 2 in 2 s" in caplog.text
    _assert_no_token(caplog, capsys)


def test_429_waits_the_seconds_retry_after_names(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeps: list[float] = []
    with fake_github() as gh:
        gh.answer(
            (429, {"message": "API rate limit exceeded"}, {"Retry-After": "7"}), (201, {"id": 3})
        )
        assert _client(gh.url, sleeps).create_status("acme/kernels", SHA, STATUS) == {"id": 3}
    assert len(gh.requests) == 2
    assert sleeps == [7.0]
    assert "answered 429; retry 1 in 7 s (Retry-After)" in caplog.text
    _assert_no_token(caplog, capsys)


def test_429_with_an_http_date_waits_until_then() -> None:
    sleeps: list[float] = []
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    with fake_github() as gh:
        gh.answer((429, {}, {"Retry-After": when}), (201, {"id": 4}))
        assert _client(gh.url, sleeps).create_status("acme/kernels", SHA, STATUS) == {"id": 4}
    assert len(gh.requests) == 2
    [waited] = sleeps
    # The date has one-second resolution and the clock moved on a little since.
    assert 27.0 <= waited <= 30.0


def test_a_long_retry_after_is_cut_to_the_bound_and_the_attempts_are_bounded() -> None:
    sleeps: list[float] = []
    with fake_github() as gh:
        gh.answer((429, {"message": "slow down"}, {"Retry-After": "86400"}))
        with pytest.raises(GitHubError) as info:
            _client(gh.url, sleeps, attempts=3).create_status("acme/kernels", SHA, STATUS)
    assert len(gh.requests) == 3
    assert sleeps == [MAX_WAIT, MAX_WAIT]
    line = info.value.one_line()
    assert "429" in line
    assert "after 3 attempts" in line
    assert "rate limit" in line


def test_a_permission_403_is_not_retried_but_a_rate_limit_403_is() -> None:
    sleeps: list[float] = []
    with fake_github() as gh:
        gh.answer((403, {"message": "secondary rate limit"}, {"Retry-After": "2"}), (201, {}))
        _client(gh.url, sleeps).create_status("acme/kernels", SHA, STATUS)
    assert (len(gh.requests), sleeps) == (2, [2.0])


def test_gives_up_after_the_last_attempt_on_5xx(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeps: list[float] = []
    with fake_github() as gh:
        gh.answer((500, {"message": f"boom {TOKEN}"}))
        with pytest.raises(GitHubError) as info:
            _client(gh.url, sleeps, attempts=3).create_status("acme/kernels", SHA, STATUS)
    assert len(gh.requests) == 3
    assert sleeps == [2.0]
    line = info.value.one_line()
    assert "\n" not in line
    assert line.startswith(f"GitHub API POST {gh.url}/repos/acme/kernels/statuses/{SHA}: 500")
    assert "(after 3 attempts)" in line
    assert TOKEN not in line
    _assert_no_token(caplog, capsys)


@pytest.mark.parametrize(
    ("code", "api_message", "expect"),
    [
        (401, "Bad credentials", "token was refused"),
        (403, "Resource not accessible by integration", "statuses: write"),
        (404, "Not Found", "no such repository or commit"),
    ],
)
def test_client_errors_are_one_clear_line_without_retry(
    code: int,
    api_message: str,
    expect: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with fake_github() as gh:
        # A server that echoes the token back must not get it into our message.
        gh.answer((code, {"message": f"{api_message} (token {TOKEN})"}))
        with pytest.raises(GitHubError) as info:
            _client(gh.url).create_status("acme/kernels", SHA, STATUS)
    line = info.value.one_line()
    assert len(gh.requests) == 1
    assert "\n" not in line
    assert f"POST {gh.url}/repos/acme/kernels/statuses/{SHA}: {code}" in line
    assert api_message in line
    assert expect in line
    assert TOKEN not in line
    assert "***" in line
    assert info.value.exit_code == 21
    _assert_no_token(caplog, capsys)


def test_connection_refused_is_retried_then_reported(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    with pytest.raises(GitHubError, match=r"could not connect: ConnectionError \(after 3 attempts"):
        _client(f"http://127.0.0.1:{port}", sleeps, attempts=3).create_status(
            "acme/kernels", SHA, STATUS
        )
    assert sleeps == [2.0]
    assert "could not connect: NewConnectionError; retry 1 in 0 s" in caplog.text
    _assert_no_token(caplog, capsys)


@pytest.mark.parametrize(
    ("repository", "revision", "problem"),
    [
        ("acme", SHA, "owner/name"),
        ("acme/kernels/x", SHA, "owner/name"),
        ("acme/kernels", "HEAD", "full commit id"),
        ("acme/kernels", SHA[:12], "full commit id"),
    ],
)
def test_bad_repository_or_revision_is_refused_before_any_request(
    repository: str, revision: str, problem: str
) -> None:
    with fake_github() as gh, pytest.raises(ConfigError, match=problem):
        _client(gh.url).create_status(repository, revision, STATUS)
    assert gh.requests == []


def test_missing_token_and_bad_url_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="GITHUB_TOKEN"):
        GitHubClient.from_env({})
    with pytest.raises(ConfigError, match="not an http"):
        GitHubClient(TOKEN, api_url="api.github.com")
    assert TOKEN not in repr(GitHubClient(TOKEN, session=requests.Session()))

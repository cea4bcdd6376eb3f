"""A local HTTP server standing in for the GitHub REST API: it records every request.

Each test scripts the answers (status code, JSON body and, optionally, response
headers such as ``Retry-After``) the server gives in order; once the script runs
out, the last answer repeats. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any] | tuple[int, Any, dict[str, str]]


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGitHub:
    """The running server: its base URL, the scripted answers, the recorded requests."""

    url: str
    answers: list[Answer] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)

    def answer(self, *answers: Answer) -> None:
        """Replace the script of answers: ``(status, body)`` or ``(status, body, headers)``."""
        self.answers[:] = answers


@contextmanager
def fake_github(prefix: str = "") -> Iterator[FakeGitHub]:
    """Serve on a free loopback port; ``prefix`` mimics GitHub Enterprise's ``/api/v3``."""
    state = FakeGitHub(url="", answers=[(201, {"id": 1})])
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with lock:
                state.requests.append(
                    Recorded(
                        method="POST",
                        path=self.path,
                        headers={k.lower(): v for k, v in self.headers.items()},
                        body=json.loads(raw) if raw else None,
                    )
                )
                index = min(len(state.requests), len(state.answers)) - 1
                code, body, *more = state.answers[index]
            data = json.dumps(body).encode()
            self.send_response(code)
            for name, value in (more[0] if more else {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: pytest treats stray stderr output as noise."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}{prefix}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

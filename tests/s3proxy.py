"""A fault-injecting HTTP proxy for the S3 tests, on 127.0.0.1 in front of a real server.

Every request is forwarded to the server unchanged (its Host header too, so the
client's SigV4 signature still verifies there), except those a rule matches: a
rule names a method and/or a query parameter the request carries (``partNumber``
for UploadPart, ``partNumber=7`` for its part 7 only, ``uploadId`` with DELETE for
AbortMultipartUpload, ``uploads`` for CreateMultipartUpload) and answers that many
of them with a fault instead:

* ``Fault.slow_down()``: 503 with S3's ``SlowDown`` XML error body;
* ``Fault.internal()``: 500 with S3's ``InternalError`` XML error body;
* ``Fault.reset()``: the body is read, then the connection is reset (TCP RST);
* ``Fault.delay(seconds)``: forwarded, after that long;
* ``Fault.truncate()``: forwarded, but the answer's body breaks off half-way (RST);
* ``Fault.corrupt()``: forwarded, one byte of the answer's body flipped.

The proxy records every request it saw (method, path, query parameters), so a
test can show which S3 operations really ran and how often (multipart, aborts,
retries). Answers are streamed, so a big object read back costs no memory here.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import ClassVar

# Hop-by-hop headers are the proxy's own business; Expect is answered here (100 Continue).
_NOT_FORWARDED = {"connection", "keep-alive", "proxy-connection", "expect", "te", "upgrade"}
_NOT_RETURNED = {"connection", "keep-alive", "transfer-encoding", "content-length"}
_ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>{code}</Code><Message>{message}</Message>"
    "<Resource>{resource}</Resource><RequestId>s3proxy</RequestId></Error>"
)


@dataclass(frozen=True)
class Fault:
    """What the proxy does instead of (or before) forwarding a matched request."""

    kind: str  # "status", "reset", "delay", "truncate" or "corrupt"
    status: int = 0
    code: str = ""
    message: str = ""
    seconds: float = 0.0

    @classmethod
    def slow_down(cls) -> Fault:
        """503 SlowDown, as S3 answers when throttling."""
        return cls("status", 503, "SlowDown", "Please reduce your request rate.")

    @classmethod
    def internal(cls) -> Fault:
        """500 InternalError."""
        return cls("status", 500, "InternalError", "We encountered an internal error.")

    @classmethod
    def reset(cls) -> Fault:
        """The connection reset after the request was read."""
        return cls("reset")

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """The request forwarded after ``seconds``."""
        return cls("delay", seconds=seconds)

    @classmethod
    def truncate(cls) -> Fault:
        """The answer forwarded with its full Content-Length, its body cut off half-way."""
        return cls("truncate")

    @classmethod
    def corrupt(cls) -> Fault:
        """The answer forwarded with the first byte of its body flipped."""
        return cls("corrupt")


@dataclass
class Rule:
    """Answer up to ``times`` matching requests (None: every one) with ``fault``.

    ``query`` is a parameter's name (``partNumber``), or name and value (``partNumber=7``).
    """

    fault: Fault
    method: str | None = None
    query: str | None = None
    times: int | None = None
    hits: int = 0

    def take(self, method: str, values: Mapping[str, str]) -> bool:
        """Whether this rule answers the request; counts it when it does."""
        if self.method is not None and method != self.method:
            return False
        if self.query is not None:
            name, has_value, value = self.query.partition("=")
            if name not in values or (has_value and values[name] != value):
                return False
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


@dataclass(frozen=True)
class Seen:
    """One request as the proxy received it, and what it did with it."""

    method: str
    path: str
    params: frozenset[str]
    fault: str | None
    values: tuple[tuple[str, str], ...] = ()

    def param(self, name: str) -> str | None:
        """The query parameter's value (``partNumber``: ``"7"``), or None without it."""
        return dict(self.values).get(name)

    @property
    def forwarded(self) -> bool:
        """Whether the server got the request (a delayed, truncated or corrupted one too)."""
        return self.fault in (None, "delay", "truncate", "corrupt")


@dataclass
class _State:
    upstream: tuple[str, int]
    rules: list[Rule] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: ClassVar[_State]

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads :attr:`FaultProxy.seen` instead."""

    def do_GET(self) -> None:
        self._relay()

    def do_PUT(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def do_DELETE(self) -> None:
        self._relay()

    def do_HEAD(self) -> None:
        self._relay()

    def _relay(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        pairs = tuple(urllib.parse.parse_qsl(target.query, keep_blank_values=True))
        values = dict(pairs)
        body = self._body()
        with self.state.lock:
            rule = next((r for r in self.state.rules if r.take(self.command, values)), None)
            fault = rule.fault if rule is not None else None
            kind = fault.kind if fault else None
            self.state.seen.append(Seen(self.command, target.path, frozenset(values), kind, pairs))
        if fault is not None and fault.kind == "reset":
            self._reset()
            return
        if fault is not None and fault.kind == "status":
            self._error(fault, target.path)
            return
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
        self._forward(body, fault.kind if fault is not None else None)

    def _body(self) -> bytes:
        """The request body as sent: Content-Length bytes, or the raw chunked encoding."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = bytearray()
            while True:
                line = self.rfile.readline()
                raw += line
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    break
                raw += self.rfile.read(size + 2)
            while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                raw += line  # trailers (aws-chunked checksums)
            return bytes(raw + b"\r\n")
        return self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))

    def _forward(self, body: bytes, damage: str | None) -> None:
        host, port = self.state.upstream
        upstream = http.client.HTTPConnection(host, port, timeout=120)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _NOT_FORWARDED:
                    upstream.putheader(name, value)
            upstream.endheaders(body if body else None)
            response = upstream.getresponse()
            self.send_response(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in _NOT_RETURNED:
                    self.send_header(name, value)
            if self.command == "HEAD":
                self.send_header("Content-Length", response.getheader("Content-Length") or "0")
                self.end_headers()
                return
            self._relay_body(response, damage)
        finally:
            upstream.close()

    def _relay_body(self, response: http.client.HTTPResponse, damage: str | None) -> None:
        """The answer's body as it comes (its Content-Length kept), damaged as asked."""
        length = response.getheader("Content-Length")
        data = b"" if length is not None else response.read()
        total = int(length) if length is not None else len(data)
        self.send_header("Content-Length", str(total))
        self.end_headers()
        sent = 0
        while sent < total:
            block = data[sent:] if length is None else response.read(min(1 << 20, total - sent))
            if not block:
                break
            if damage == "truncate" and sent + len(block) >= total // 2:
                self.wfile.write(block[: total // 2 - sent])
                self.wfile.flush()
                self._reset()
                return
            if damage == "corrupt" and sent == 0:
                block = bytes([block[0] ^ 0xFF]) + block[1:]
            self.wfile.write(block)
            sent += len(block)

    def _error(self, fault: Fault, resource: str) -> None:
        data = _ERROR_BODY.format(code=fault.code, message=fault.message, resource=resource)
        encoded = data.encode() if self.command != "HEAD" else b""
        self.send_response(fault.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data.encode())))
        if fault.status == 503:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(encoded)

    def _reset(self) -> None:
        # Linger on, timeout 0: close() sends RST instead of FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.rfile.close()
        self.connection.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away (or a reset of ours) is not an error here."""


class FaultProxy:
    """The proxy: ``with FaultProxy(server.endpoint) as proxy:`` then ``proxy.endpoint``."""

    def __init__(self, upstream: str) -> None:
        split = urllib.parse.urlsplit(upstream)
        assert split.hostname is not None
        assert split.port is not None
        self._state = _State((split.hostname, split.port))

        class Handler(_Handler):
            state = self._state

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The URL clients use instead of the server's."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(
        self,
        fault: Fault,
        *,
        method: str | None = None,
        query: str | None = None,
        times: int | None = None,
    ) -> Rule:
        """Answer up to ``times`` requests (None: all) of ``method`` carrying ``query``."""
        rule = Rule(fault, method, query, times)
        with self._state.lock:
            self._state.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Forward everything from now on."""
        with self._state.lock:
            self._state.rules.clear()

    @property
    def seen(self) -> tuple[Seen, ...]:
        """Every request so far, in order."""
        with self._state.lock:
            return tuple(self._state.seen)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

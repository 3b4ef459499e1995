"""A real HTTP server on 127.0.0.1 that replays recorded provider traffic (and scripted answers).

Adapters under test are pointed at ``server.base_url``; the whole httpx/SSE path runs against real
sockets. Recorded streams can be served as recorded (one write per SSE event) or re-chunked at
arbitrary byte offsets, including inside multi-byte UTF-8 characters.

Cassettes: see ``tests/fixtures/provider-cassettes/README.md`` for the two dialects.
"""

from __future__ import annotations

import gzip
import json
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

#: The fixtures live in the repository (tests/fixtures, see its NOTICE), so a clone tests on its own.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASSETTES = FIXTURES / "provider-cassettes"
assert CASSETTES.is_dir(), f"the recorded provider cassettes are missing: {CASSETTES}"

_HOP_HEADERS = {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class RecordedRequest:
    method: str
    uri: str
    headers: dict[str, str]
    body: Any  # decoded JSON (dict) or raw text, or None


@dataclass
class RecordedResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def is_sse(self) -> bool:
        ctype = self.headers.get("content-type", "")
        return "text/event-stream" in ctype or self.body.lstrip().startswith((b"data:", b"event:"))

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Interaction:
    request: RecordedRequest
    response: RecordedResponse


def cassette_path(api: str, name: str) -> Path:
    return CASSETTES / api / name


def load_cassette(path: str | Path) -> list[Interaction]:
    """Load a vcrpy cassette in either dialect, decoding gzip and ``parsed_body``."""
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    out = []
    for item in data["interactions"]:
        req, resp = item["request"], item["response"]
        out.append(Interaction(_request(req), _response(resp)))
    return out


def _headers(raw: dict[str, Any] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in (raw or {}).items():
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        headers[key.lower()] = str(value)
    return headers


def _request(req: dict[str, Any]) -> RecordedRequest:
    body: Any = None
    if "parsed_body" in req:
        body = req["parsed_body"]
    elif req.get("body") is not None:
        raw = req["body"]
        if isinstance(raw, dict):
            raw = raw.get("string")
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "replace")
        try:
            body = json.loads(raw) if raw else None
        except (TypeError, ValueError):
            body = raw
    return RecordedRequest(req.get("method", "POST"), req["uri"], _headers(req.get("headers")), body)


def _response(resp: dict[str, Any]) -> RecordedResponse:
    if "parsed_body" in resp:
        body = json.dumps(resp["parsed_body"]).encode()
    else:
        s = (resp.get("body") or {}).get("string")
        if s is None:
            body = b""
        elif isinstance(s, str):
            body = s.encode("utf-8")
        elif s[:2] == b"\x1f\x8b":
            body = gzip.decompress(s)
        else:
            body = s
    headers = {k: v for k, v in _headers(resp.get("headers")).items() if k not in _HOP_HEADERS}
    return RecordedResponse(int(resp["status"]["code"]), headers, body)


# -- chunking --------------------------------------------------------------------------------
def split_events(body: bytes) -> list[bytes]:
    """Split after each blank-line event separator, as a provider flushes them."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    pieces = body.split(sep)
    out = [p + sep for p in pieces[:-1]]
    if pieces[-1]:
        out.append(pieces[-1])
    return out or [body]


def split_random(body: bytes, seed: int, max_size: int = 17) -> list[bytes]:
    """Split at arbitrary byte offsets (which land inside UTF-8 characters now and then)."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(body):
        n = rng.randint(1, max_size)
        out.append(body[i : i + n])
        i += n
    return out or [body]


def split_fixed(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)] or [body]


def chunked(body: bytes, chunking: str | int | None) -> list[bytes]:
    """``None``/"whole": one write; "events": per SSE event; "random:<seed>"; an int: fixed size."""
    if chunking is None or chunking == "whole":
        return [body]
    if chunking == "events":
        return split_events(body)
    if isinstance(chunking, int):
        return split_fixed(body, chunking)
    if isinstance(chunking, str) and chunking.startswith("random:"):
        return split_random(body, int(chunking.split(":", 1)[1]))
    raise ValueError(f"unknown chunking {chunking!r}")


# -- the server ------------------------------------------------------------------------------
@dataclass
class Scripted:
    """One answer the server will give. ``drop_after`` closes the socket after that many chunks
    (no terminating chunk: the client sees a broken stream); ``stall_after`` stops sending after
    that many chunks and holds the connection open for ``stall_seconds``."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    drop_after: int | None = None
    stall_after: int | None = None
    stall_seconds: float = 5.0
    delay: float = 0.0  # seconds to wait between chunks


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


#: Answers a request when the queue is empty: gets the request (already recorded in
#: ``server.requests``), returns the answer, or None for the usual "queue empty" 599.
Responder = Callable[["Received"], "Scripted | None"]


class ReplayServer:
    def __init__(self, responder: Responder | None = None) -> None:
        self.queue: deque[Scripted] = deque()
        #: Consulted only when the queue is empty, so a scripted conversation can answer by what
        #: the client sent (it runs on the server's request threads; it must be thread-safe).
        self.responder: Responder | None = responder
        self.requests: list[Received] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate small writes; with Nagle's algorithm on, the
            # second waits for the client's delayed ACK (~40 ms a request on Linux).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                server._handle(self)

            do_GET = do_POST
            do_DELETE = do_POST

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- scripting --------------------------------------------------------------------------
    def enqueue(
        self,
        status: int = 200,
        body: bytes | str | dict[str, Any] | list[Any] = b"",
        headers: dict[str, str] | None = None,
        *,
        chunking: str | int | None = None,
        chunks: list[bytes] | None = None,
        **kwargs: Any,
    ) -> Scripted:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"content-type": "application/json", **(headers or {})}
        elif isinstance(body, str):
            body = body.encode()
        item = Scripted(
            status, dict(headers or {}), chunks if chunks is not None else chunked(body, chunking), **kwargs
        )
        with self._lock:
            self.queue.append(item)
        return item

    def enqueue_response(self, response: RecordedResponse, *, chunking: str | int | None = "events", **kw: Any) -> None:
        chunk_mode = chunking if response.is_sse or chunking != "events" else None
        self.enqueue(response.status, response.body, response.headers, chunking=chunk_mode, **kw)

    def enqueue_cassette(self, interactions: list[Interaction], *, chunking: str | int | None = "events") -> None:
        for inter in interactions:
            self.enqueue_response(inter.response, chunking=chunking)

    # -- serving ----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length) if length else b""
        parts = urlsplit(h.path)
        received = Received(
            h.command,
            parts.path,
            parse_qs(parts.query),
            {k.lower(): v for k, v in h.headers.items()},
            body,
        )
        with self._lock:
            self.requests.append(received)
            item = self.queue.popleft() if self.queue else None
            responder = self.responder
        if item is None and responder is not None:
            try:
                item = responder(received)
            except Exception as exc:  # the test's script broke: answer so that the client sees why
                message = json.dumps({"error": {"message": f"responder failed: {type(exc).__name__}: {exc}"}})
                item = Scripted(599, {"content-type": "application/json"}, [message.encode()])
        if item is None:
            item = Scripted(
                599, {"content-type": "application/json"}, [b'{"error": {"message": "replay queue empty"}}']
            )
        h.send_response(item.status)
        for key, value in item.headers.items():
            h.send_header(key, value)
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        try:
            for i, chunk in enumerate(item.chunks):
                if item.drop_after is not None and i >= item.drop_after:
                    h.wfile.flush()
                    h.close_connection = True
                    h.connection.shutdown(2)
                    return
                if item.stall_after is not None and i >= item.stall_after:
                    h.wfile.flush()
                    self._stop.wait(item.stall_seconds)
                    h.close_connection = True
                    return
                if item.delay:
                    self._stop.wait(item.delay)
                if chunk:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    h.wfile.flush()
            if item.drop_after is not None and item.drop_after >= len(item.chunks):
                h.close_connection = True
                h.connection.shutdown(2)
                return
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True

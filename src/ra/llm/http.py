"""Provider utilities (spec layer 2): the HTTP plumbing every native adapter shares.

One ``httpx.AsyncClient`` per adapter and event loop (a pooled connection cannot outlive the loop
that opened it, and the sync wrappers run a fresh loop per call), on httpx's own transport.
(``sniffio`` is a dependency because without it httpx's async stack retries a failed import of it
on every request, which cost about a millisecond a step in the agent benchmark.) The three
timeouts of spec 4.7 map onto httpx: ``connect`` is httpx's connect timeout, ``stream_read`` is its
read timeout (the longest silence between two chunks), and ``request`` bounds a whole
non-streaming call. Two more bound a streamed call, because a server can keep a stream alive
forever with keep-alives alone (SSE comments, Anthropic ``ping`` events), which reset httpx's
read timeout: ``stream_idle`` is the longest wait for *content* (text, reasoning, a tool call,
the end), and ``stream_total`` the longest a streamed call may take. :func:`guard_stream`
enforces them; the client applies it to every adapter that has these settings.

The status is always checked before a body is parsed as SSE: an error answer to a streaming
request arrives as plain JSON, sometimes even labelled ``text/event-stream``.

What every adapter would otherwise write again lives here too, once: the constructor (a subclass
declares its key's environment variables and default URL as class attributes and takes the
shared keywords as ``**http: Unpack[HTTPOptions]``), the tool-choice modes, the decoding of an
error body (a subclass refines only the classification, :meth:`HTTPAdapter.classify_error`), the
decoding of an SSE event's JSON (:meth:`SSEEvent.json`) and the loop that relays a translated
SSE stream up to its terminal event (:meth:`HTTPAdapter.relay_sse`).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import httpx

from .errors import (
    NetworkError,
    RequestTimeoutError,
    SDKError,
    StreamError,
    error_from_response,
)
from .redaction import remember_secret
from .timeouts import AdapterTimeout, guard_stream
from .types import TOOL_CHOICE_MODES

if TYPE_CHECKING:
    from .types import StreamEvent

__all__ = [
    "DRAIN_SECONDS",
    "AdapterTimeout",
    "HTTPAdapter",
    "HTTPOptions",
    "SSEEvent",
    "SSETranslator",
    "drain",
    "guard_stream",
]

#: How long the rest of a stream body is awaited after its terminal event (see :func:`drain`).
DRAIN_SECONDS = 0.25


@dataclass(slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None = None

    def json(self, provider: str, *, object_only: bool = True) -> Any:
        """The event's data decoded as JSON; StreamError (naming ``provider``, the event and the
        start of the data) when it is not JSON, or, with ``object_only``, not a JSON object."""
        try:
            value = json.loads(self.data)
        except (ValueError, RecursionError) as exc:
            raise self._malformed(provider, "undecodable JSON", exc) from exc
        if object_only and not isinstance(value, dict):
            raise self._malformed(provider, "not a JSON object")
        return value

    def _malformed(self, provider: str, why: str, cause: BaseException | None = None) -> StreamError:
        name = f" {self.event!r}" if self.event and self.event != "message" else ""  # "message": SSE's default
        return StreamError(f"{provider}: malformed stream event{name}, {why}: {self.data[:200]!r}", cause=cause)


class HTTPOptions(TypedDict, total=False):
    """The keywords every adapter's constructor passes on to :class:`HTTPAdapter` unchanged, so
    a subclass names only its own (``**http: Unpack[HTTPOptions]`` keeps them typed)."""

    default_headers: Mapping[str, str] | None
    timeout: float | AdapterTimeout | None
    http_client: httpx.AsyncClient | None


class SSETranslator(Protocol):
    """What :meth:`HTTPAdapter.relay_sse` drives: ``feed`` turns one SSE event into unified
    events; ``finished`` turns true with the event that ends the answer (its last is FINISH)."""

    finished: bool

    def feed(self, sse: SSEEvent) -> list[StreamEvent]: ...


class HTTPAdapter:
    """Base for adapters that speak a JSON-over-HTTP API. Subclasses set ``name``,
    ``default_base_url`` and ``api_key_env`` and build bodies; this class sends them and
    translates failures."""

    name: str = "http"
    default_base_url: str = ""
    #: Environment variables the key is read from when none is passed (the first one set wins).
    api_key_env: tuple[str, ...] = ()
    #: The tool_choice modes :meth:`supports_tool_choice` accepts (every native adapter: all).
    tool_choice_modes: frozenset[str] = TOOL_CHOICE_MODES

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        default_headers: Mapping[str, str] | None = None,
        timeout: float | AdapterTimeout | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if api_key is None:
            api_key = next((os.environ[v] for v in self.api_key_env if os.environ.get(v)), None)
        self.api_key = api_key
        # A 401 body often repeats the key, and errors inside a 200 answer are made far from
        # here: every error of the process redacts it (ra.llm.errors), given in code or not.
        remember_secret(api_key)
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.default_headers = dict(default_headers or {})
        self.timeout = AdapterTimeout.coerce(timeout)
        self._shared_client = http_client
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}

    # -- connection management -------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        if self._shared_client is not None:
            return self._shared_client
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is not None and entry[0] is loop:
            return entry[1]
        # Drop clients whose loop is gone; they cannot be closed from here any more.
        for key, (old_loop, _) in list(self._clients.items()):
            if old_loop.is_closed():
                del self._clients[key]
        t = self.timeout
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=t.connect, read=t.stream_read, write=t.stream_read, pool=t.connect),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        )
        self._clients[id(loop)] = (loop, client)
        return client

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for loop, client in clients.values():
            if not loop.is_closed() and loop is asyncio.get_running_loop():
                await client.aclose()

    # -- hooks for subclasses --------------------------------------------------------------
    def supports_tool_choice(self, mode: str) -> bool:
        return mode in self.tool_choice_modes

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Request headers: defaults, then ``extra``. Subclasses add authentication."""
        headers = {"content-type": "application/json", **self.default_headers}
        if extra:
            headers.update(extra)
        return headers

    def translate_error(self, status: int, content: bytes, headers: Mapping[str, str]) -> SDKError:
        """The error for an HTTP error answer: the body decoded (JSON, else its text), then
        :meth:`classify_error` (the error redacts this adapter's key: see :func:`remember_secret`)."""
        body: Any
        try:
            body = json.loads(content) if content else None
        except (ValueError, RecursionError):
            body = content.decode("utf-8", "replace").strip() or None
        return self.classify_error(status, body, headers)

    def classify_error(self, status: int, body: Any, headers: Mapping[str, str] | None) -> SDKError:
        """The error a decoded error body stands for; a subclass refines provider specifics."""
        return error_from_response(self.name, status, body, headers)

    # -- requests --------------------------------------------------------------------------
    async def post_json(
        self, url: str, body: Mapping[str, Any] | bytes, headers: Mapping[str, str]
    ) -> tuple[dict[str, Any], httpx.Headers]:
        """POST and return the decoded JSON answer; raise the mapped error otherwise. ``body`` is
        a JSON object, or its encoding already (adapters that cache encoded history send bytes)."""
        client = self._client()
        try:
            async with asyncio.timeout(self.timeout.request):
                response = await client.post(url, content=_content(body), headers=headers)
        except TimeoutError as exc:
            raise RequestTimeoutError(
                f"{self.name}: no complete answer within {self.timeout.request:g}s", cause=exc, network=True
            ) from exc
        except httpx.HTTPError as exc:
            raise _transport_error(self.name, exc, streaming=False) from exc
        if response.status_code >= 400:
            raise self.translate_error(response.status_code, response.content, response.headers)
        try:
            data = response.json()
        except (ValueError, RecursionError) as exc:
            raise self.translate_error(response.status_code, response.content, response.headers) from exc
        return data, response.headers

    @asynccontextmanager
    async def open_stream(
        self, url: str, body: Mapping[str, Any] | bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """Open a streaming POST (``body`` as for :meth:`post_json`). The status is checked (and an
        error body read and mapped) before the caller sees the response; leaving the block closes
        the connection."""
        client = self._client()
        request = client.build_request("POST", url, content=_content(body), headers=headers)
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_error(self.name, exc, streaming=False) from exc
        try:
            if response.status_code >= 400:
                try:
                    content = await response.aread()
                except httpx.HTTPError:
                    content = b""
                raise self.translate_error(response.status_code, content, response.headers)
            yield response
        finally:
            await response.aclose()

    async def iter_sse(self, response: httpx.Response) -> AsyncIterator[SSEEvent]:
        """Parse ``text/event-stream`` incrementally. Comment lines (``: keep-alive``) are skipped
        by the parser; a stall longer than ``stream_read`` raises RequestTimeoutError and a
        dropped connection raises StreamError."""
        from httpx_sse import EventSource

        try:
            async for sse in EventSource(response).aiter_sse():
                yield SSEEvent(sse.event, sse.data, sse.id or None)
        except httpx.HTTPError as exc:
            raise _transport_error(self.name, exc, streaming=True) from exc

    async def relay_sse(
        self, response: httpx.Response, translator: SSETranslator, *, terminal: str
    ) -> AsyncIterator[StreamEvent]:
        """Yield what ``translator`` makes of each SSE event of ``response``. Once it has
        finished, the rest of the body is drained before FINISH is yielded (a consumer that
        stops at FINISH must not cost the connection: an unread tail makes httpx close it); a
        body that ends first raises StreamError naming the ``terminal`` event it lacked. The
        event iterator is closed however the loop ends."""
        async with aclosing(self.iter_sse(response)) as events:
            async for sse in events:
                out = translator.feed(sse)
                if translator.finished:
                    for event in out[:-1]:
                        yield event
                    await drain(events)
                    if out:
                        yield out[-1]
                    return
                for event in out:
                    yield event
        raise StreamError(f"{self.name}: the stream ended before {terminal}")

    async def iter_bytes(self, response: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise _transport_error(self.name, exc, streaming=True) from exc


async def drain(events: AsyncIterator[Any], *, close: bool = False) -> None:
    """Read what follows a stream's terminal event (``message_stop``, ``response.completed``,
    ``[DONE]``: normally only the end of the chunked body, already buffered) so the connection
    goes back to the pool for the next call instead of being torn down; a fresh TLS handshake per
    agent turn costs more than this. Bounded: a server that keeps the stream open afterwards
    delays the end by at most :data:`DRAIN_SECONDS`. ``close`` closes ``events`` afterwards."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in events:
                pass
    except (TimeoutError, SDKError):
        pass
    finally:
        if close:
            await events.aclose()  # type: ignore[attr-defined]


def _dumps(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _content(body: Mapping[str, Any] | bytes) -> bytes:
    return body if isinstance(body, bytes) else _dumps(body)


def _transport_error(provider: str, exc: httpx.HTTPError, *, streaming: bool) -> SDKError:
    if isinstance(exc, httpx.TimeoutException):
        what = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
        return RequestTimeoutError(f"{provider}: {what} timed out ({exc.__class__.__name__})", cause=exc, network=True)
    if streaming and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return StreamError(f"{provider}: the stream broke off: {exc}", cause=exc)
    if isinstance(exc, httpx.TransportError):
        return NetworkError(f"{provider}: {exc.__class__.__name__}: {exc}", cause=exc)
    return NetworkError(f"{provider}: {exc}", cause=exc)

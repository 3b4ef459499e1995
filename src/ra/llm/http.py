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

At most ``max_concurrency`` requests per adapter and event loop are in flight (default 64, or
``RA_HTTP_MAX_CONCURRENCY``); the rest queue in ra, first come first served, for as long as their
caller lets them (:mod:`ra.llm.slots` says why the queue is not httpx's). Each slot has its own
one-connection client, kept alive, so a request never waits inside a pool; a stream
holds its slot until it is closed. A wait in the pool that happens anyway (a client passed in
with smaller limits, or shared by several adapters) ends in :class:`ConnectionPoolError`: local
and transient, never the provider's failure.

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
import contextlib
import functools
import json
import os
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import httpx

from .errors import (
    ConnectionPoolError,
    NetworkError,
    RequestTimeoutError,
    SDKError,
    StreamError,
    error_from_response,
)
from .redaction import remember_secret
from .slots import Slots, max_concurrency_setting
from .timeouts import AdapterTimeout, guard_stream, stream_clock_paused
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
    max_concurrency: int | None


class SSETranslator(Protocol):
    """What :meth:`HTTPAdapter.relay_sse` drives: ``feed`` turns one SSE event into unified
    events; ``finished`` turns true with the event that ends the answer (its last is FINISH)."""

    finished: bool

    def feed(self, sse: SSEEvent) -> list[StreamEvent]: ...


@functools.cache
def _trusts_nothing() -> ssl.SSLContext:
    """A TLS client context with no CA certificates: certificates and host names are required
    (the defaults of ``PROTOCOL_TLS_CLIENT``), and none can be verified."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


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
        max_concurrency: int | None = None,
    ) -> None:
        """``max_concurrency``: requests in flight at once per event loop (None: the environment's
        ``RA_HTTP_MAX_CONCURRENCY``, else 64); more wait their turn in ra. ConfigurationError
        unless it is a whole number >= 1."""
        #: The bound on requests in flight (see :mod:`ra.llm.slots`), read once, here.
        self.max_concurrency = max_concurrency_setting(max_concurrency)
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
        self._loops: dict[int, _OnLoop] = {}
        self._ssl: ssl.SSLContext | None = None

    # -- connection management -------------------------------------------------------------
    def _on_loop(self) -> _OnLoop:
        loop = asyncio.get_running_loop()
        entry = self._loops.get(id(loop))
        if entry is not None and entry.loop is loop:
            return entry
        # Drop clients whose loop is gone; they cannot be closed from here any more.
        for key, old in list(self._loops.items()):
            if old.loop.is_closed():
                del self._loops[key]
        entry = _OnLoop(loop, Slots(self.max_concurrency), self._shared_client, self._new_client)
        self._loops[id(loop)] = entry
        return entry

    def _new_client(self) -> httpx.AsyncClient:
        """One slot's client: a single kept-alive connection (see :mod:`ra.llm.slots`). ``pool``
        is only a backstop, since a slot's client never has two requests at once (a bug would show
        as a ConnectionPoolError, not as a hang). The TLS context, the costly part of a client,
        is made once per adapter and shared (:meth:`_tls_context`)."""
        t = self.timeout
        return httpx.AsyncClient(
            verify=self._tls_context(),
            timeout=httpx.Timeout(connect=t.connect, read=t.stream_read, write=t.stream_read, pool=t.connect),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    def _tls_context(self) -> ssl.SSLContext:
        """The adapter's TLS context, made at its first request. Loading the system's CA
        certificates takes 20-25 ms, the largest part of a session's first step; an adapter whose
        base URL is plain ``http://`` (a local server, a proxy on loopback) and that goes through
        no proxy from the environment never needs them, and gets a context that trusts nothing: a
        TLS connection through it fails verification (closed, never unverified)."""
        if self._ssl is None:
            if self.base_url.startswith("http://") and not urllib.request.getproxies_environment():
                self._ssl = _trusts_nothing()
            else:
                self._ssl = httpx.create_ssl_context()
        return self._ssl

    def _client(self) -> httpx.AsyncClient:
        """The client of this loop's first slot (the one every request uses while they come one
        at a time), or the client passed in."""
        return self._on_loop().client(0)

    async def close(self) -> None:
        entries, self._loops = self._loops, {}
        for entry in entries.values():
            if not entry.loop.is_closed() and entry.loop is asyncio.get_running_loop():
                for client in entry.owned():
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
        on_loop = self._on_loop()
        slot = await on_loop.slots.acquire()  # the request timeout starts once the request may go out
        done = False
        try:
            async with asyncio.timeout(self.timeout.request):
                response = await on_loop.client(slot).post(url, content=_content(body), headers=headers)
            done = True
        except TimeoutError as exc:
            raise RequestTimeoutError(
                f"{self.name}: no complete answer within {self.timeout.request:g}s", cause=exc, network=True
            ) from exc
        except httpx.HTTPError as exc:
            raise _transport_error(self.name, exc, streaming=False) from exc
        finally:
            try:
                if not done:
                    await on_loop.discard(slot)
            finally:
                on_loop.slots.release(slot)  # the body is read: the connection is back in the pool
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
        the connection. The request holds one of the adapter's slots until then, however the block
        is left (an abandoned stream's generator is closed by the event loop, which frees it too)."""
        on_loop = self._on_loop()
        slot = on_loop.slots.try_acquire()
        if slot is None:
            with stream_clock_paused():  # a turn in the queue is not the provider's silence
                slot = await on_loop.slots.acquire()
        try:
            client = on_loop.client(slot)
            request = client.build_request("POST", url, content=_content(body), headers=headers)
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise _transport_error(self.name, exc, streaming=False) from exc
        except BaseException:
            on_loop.slots.release(slot)
            raise
        closed = False
        on_loop.streams[slot] = response
        try:
            if response.status_code >= 400:
                try:
                    content = await response.aread()
                except httpx.HTTPError:
                    content = b""
                raise self.translate_error(response.status_code, content, response.headers)
            yield response
            await response.aclose()
            closed = True
        finally:
            try:
                # Left on an error, a cancellation or an abandoned generator before the body was read
                # to its end (reading it to the end closes the response and frees the connection).
                if not closed and not response.is_closed:
                    await on_loop.discard(slot, response)
            finally:
                on_loop.streams.pop(slot, None)
                on_loop.slots.release(slot)

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


#: Clients being closed by :meth:`_OnLoop.discard` (a task must stay referenced until it is done).
_CLOSING: set[asyncio.Task[None]] = set()


class _OnLoop:
    """An adapter's HTTP state on one event loop: the queue of its requests and a client per slot,
    each made on the slot's first use - or the one client passed in, which every slot shares."""

    __slots__ = ("_clients", "_make", "_shared", "loop", "slots", "streams")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        slots: Slots,
        shared: httpx.AsyncClient | None,
        make: Callable[[], httpx.AsyncClient],
    ) -> None:
        self.loop = loop
        self.slots = slots
        self._shared = shared
        self._make = make
        self._clients: dict[int, httpx.AsyncClient] = {}  # made on a slot's first use
        #: The open stream of each slot that has one.
        self.streams: dict[int, httpx.Response] = {}

    def client(self, slot: int) -> httpx.AsyncClient:
        if self._shared is not None:
            return self._shared
        client = self._clients.get(slot)
        if client is None:
            client = self._clients[slot] = self._idle_client_of_a_held_slot() or self._make()
        return client

    def _idle_client_of_a_held_slot(self) -> httpx.AsyncClient | None:
        """A client whose stream was read to its end but whose generator is not closed yet (a
        consumer that stopped at FINISH and dropped it: the event loop closes it a moment later,
        and frees its slot then). Its connection is idle: taken over rather than a new one opened."""
        for held, response in self.streams.items():
            client = self._clients.get(held)
            if response.is_closed and client is not None:
                del self._clients[held]
                del self.streams[held]
                return client
        return None

    async def discard(self, slot: int, response: httpx.Response | None = None) -> None:
        """After a request left on an error, a cancellation or an abandoned stream: drop the slot's
        client (the slot's next request gets a new one) and close it, with ``response``, in a task
        of its own. httpcore's own close, run in the leaving task where a cancellation is often
        still pending, can be cut short and leave the connection marked busy in its pool for good
        (each session aborted mid-stream cost the old shared pool one of its connections). A
        client passed in is not ours to drop: only ``response`` is closed, here."""
        if self._shared is not None:
            if response is not None:
                await response.aclose()
            return
        client = self._clients.pop(slot, None)
        if client is None:
            return

        async def close() -> None:
            with contextlib.suppress(Exception):
                if response is not None:
                    await response.aclose()
            with contextlib.suppress(Exception):
                await client.aclose()

        task = self.loop.create_task(close())
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)

    def owned(self) -> list[httpx.AsyncClient]:
        """The clients made here (a client passed in is its owner's to close)."""
        return list(self._clients.values())


def _transport_error(provider: str, exc: httpx.HTTPError, *, streaming: bool) -> SDKError:
    if isinstance(exc, httpx.PoolTimeout):
        # Checked before TimeoutException, its base: this wait happened here, not at the provider.
        return ConnectionPoolError(
            f"{provider}: no connection of this process's HTTP pool came free in time (PoolTimeout); "
            "the request was not sent. Too many requests share one httpx client: lower max_concurrency "
            "(RA_HTTP_MAX_CONCURRENCY) or give the client more connections",
            cause=exc,
        )
    if isinstance(exc, httpx.TimeoutException):
        what = {httpx.ConnectTimeout: "connect", httpx.WriteTimeout: "write"}.get(type(exc), "read")
        return RequestTimeoutError(f"{provider}: {what} timed out ({exc.__class__.__name__})", cause=exc, network=True)
    if streaming and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return StreamError(f"{provider}: the stream broke off: {exc}", cause=exc)
    if isinstance(exc, httpx.TransportError):
        return NetworkError(f"{provider}: {exc.__class__.__name__}: {exc}", cause=exc)
    return NetworkError(f"{provider}: {exc}", cause=exc)

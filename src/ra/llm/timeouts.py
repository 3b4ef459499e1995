"""How long a model call may take: the adapters' timeout settings and the stream guard.

Kept apart from :mod:`ra.llm.http` (which imports httpx) so that the client can bound every
stream without importing an HTTP stack: a stream that sends only keep-alives - SSE comments,
Anthropic ``ping`` events - resets httpx's read timeout for ever, so the bound that matters is on
*content*, and it belongs above the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from .errors import RequestTimeoutError
from .types import StreamEvent, StreamEventType

__all__ = ["AdapterTimeout", "guard_stream", "stream_clock_paused"]


@dataclass(slots=True)
class AdapterTimeout:
    """Seconds; ``None`` switches a stream bound off.

    * ``connect`` - opening the connection;
    * ``request`` - a whole non-streamed call;
    * ``stream_read`` - the longest silence between two chunks of bytes;
    * ``stream_idle`` - the longest wait for the next *content* event of a stream; keep-alives
      do not reset it. 300 s: long enough for a reasoning model that thinks out of sight for
      minutes, short enough that a stream of pings ends;
    * ``stream_total`` - a whole streamed call, 1800 s (30 minutes).
    """

    connect: float = 10.0
    request: float = 120.0
    stream_read: float = 30.0
    stream_idle: float | None = 300.0
    stream_total: float | None = 1800.0

    @classmethod
    def coerce(cls, value: float | AdapterTimeout | None) -> AdapterTimeout:
        if value is None:
            return cls()
        if isinstance(value, AdapterTimeout):
            return value
        return cls(request=float(value))


#: Stream events that are not content: they never reset the idle clock.
_HEARTBEATS = frozenset({StreamEventType.STREAM_START, StreamEventType.PROVIDER_EVENT})


async def guard_stream(
    events: AsyncIterator[StreamEvent], *, idle: float | None, total: float | None, provider: str
) -> AsyncIterator[StreamEvent]:
    """``events``, bounded: RequestTimeoutError once ``idle`` seconds pass with no content event
    (keep-alives do not count) or the whole stream takes longer than ``total``.

    Only time spent waiting on the stream counts as idle: the clock restarts when the consumer
    asks for the event after a content event, so a slow consumer is never blamed on the server.
    Time the call spends queued for a slot of its adapter (:mod:`ra.llm.slots`) counts as neither:
    the adapter waits inside :func:`stream_clock_paused`. The cost per event is two attribute
    stores; the timers are re-armed lazily. On a timeout the adapter's generator is cancelled
    where it waits, which closes the connection.
    """
    task = asyncio.current_task()
    iterator = events.__aiter__()
    if task is None or (idle is None and total is None):
        async for event in iterator:
            yield event
        return
    loop = asyncio.get_running_loop()
    watch = _Watch(loop, task)
    watch.since = loop.time()
    if idle is not None:
        watch.idle = idle
        watch.idle_handle = loop.call_at(watch.since + idle, watch.idle_check)
    if total is not None:
        watch.total_due = watch.since + total
        watch.total_handle = loop.call_at(watch.total_due, watch.fire, "total")
    outer = _WATCHES.get(task)
    _WATCHES[task] = watch
    reset = False
    try:
        while True:
            if reset:
                watch.since = loop.time()
            watch.waiting = True
            try:
                event = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                which = watch.fired
                if not which:
                    raise
                task.uncancel()
                if which == "idle":
                    raise RequestTimeoutError(
                        f"{provider}: no content for {idle:g}s (only keep-alives, or nothing) - stream_idle",
                        network=True,
                    ) from None
                raise RequestTimeoutError(
                    f"{provider}: the stream took longer than {total:g}s - stream_total"
                ) from None
            finally:
                watch.waiting = False
            reset = event.type not in _HEARTBEATS
            yield event
    finally:
        if outer is None:
            _WATCHES.pop(task, None)
        else:
            _WATCHES[task] = outer
        if watch.idle_handle is not None:
            watch.idle_handle.cancel()
        if watch.total_handle is not None:
            watch.total_handle.cancel()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


#: The guarded stream each task is reading now (see :func:`stream_clock_paused`).
_WATCHES: weakref.WeakKeyDictionary[asyncio.Task[Any], _Watch] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def stream_clock_paused() -> Iterator[None]:
    """Stop the clocks of the stream the current task is reading, if any, for the block: an
    adapter waits in here for its turn to send, which is neither the provider's silence
    (``stream_idle``) nor the call's duration (``stream_total``)."""
    task = asyncio.current_task()
    watch = _WATCHES.get(task) if task is not None else None
    if watch is None or watch.paused_at is not None:
        yield
        return
    watch.paused_at = watch.loop.time()
    try:
        yield
    finally:
        watch.resume()


class _Watch:
    """The timers of one guarded stream (see :func:`guard_stream`)."""

    __slots__ = (
        "fired",
        "idle",
        "idle_handle",
        "loop",
        "paused_at",
        "since",
        "task",
        "total_due",
        "total_handle",
        "waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        self.loop = loop
        self.task = task
        self.waiting = False
        self.fired = ""
        self.since = 0.0
        self.idle = 0.0
        self.idle_handle: asyncio.TimerHandle | None = None
        self.total_due = 0.0
        self.total_handle: asyncio.TimerHandle | None = None
        #: When the clocks were stopped (None: running).
        self.paused_at: float | None = None

    def resume(self) -> None:
        """Start the clocks again, moved on by the time they were stopped."""
        assert self.paused_at is not None
        gap = self.loop.time() - self.paused_at
        self.paused_at = None
        self.since += gap
        if self.total_handle is not None:
            self.total_handle.cancel()
            self.total_due += gap
            self.total_handle = self.loop.call_at(self.total_due, self.fire, "total")

    def fire(self, which: str) -> None:
        if self.waiting and not self.fired and self.paused_at is None:
            self.fired = which
            self.task.cancel()

    def idle_check(self) -> None:
        now = self.loop.time()
        if self.waiting and self.paused_at is None:
            due = self.since + self.idle
            if now >= due:
                self.fire("idle")
                return
        else:
            due = now + self.idle  # the consumer is busy: look again once it could be idle
        self.idle_handle = self.loop.call_at(due, self.idle_check)

"""Delivery of a session's events: sync listeners and async iterators, with a first-consumer backlog.

An event is emitted synchronously on the session's event loop: it is built (one small object and
its payload), handed to each synchronous listener, and appended to the queue of each async
consumer. Nothing is copied.

Delivery rules:

* Events emitted before the first consumer subscribes are kept (the *backlog*) and delivered to
  that first consumer, so nothing is lost between creating a session and iterating its events.
  The first consumer may be an async iterator (``subscribe``) or a listener (``add_listener``).
* Consumers that subscribe later see events from the moment they subscribe.
* Every consumer's iterator ends after it has yielded SESSION_END.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from .events import EventData, EventKind, SessionEvent

__all__ = ["EventHub", "EventSubscription", "Listener"]

_log = logging.getLogger("ra.agent")

Listener = Callable[[SessionEvent], None]


class EventSubscription:
    """One consumer's async iterator over the session's events."""

    __slots__ = ("_done", "_hub", "_queue", "_waiter")

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub
        self._queue: deque[SessionEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False

    def _push(self, event: SessionEvent) -> None:
        self._queue.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> SessionEvent:
        while not self._queue:
            if self._done or self._hub.ended:
                self.close()
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._done:
            raise StopAsyncIteration
        event = self._queue.popleft()
        if event.kind is EventKind.SESSION_END:
            self.close()
        return event

    def close(self) -> None:
        """Stop receiving events; a pending ``__anext__`` ends the iteration."""
        if not self._done:
            self._done = True
            self._hub._unsubscribe(self)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def aclose(self) -> None:
        self.close()

    def pending(self) -> int:
        """Events received and not yet consumed."""
        return len(self._queue)


class EventHub:
    """Fan-out of one session's events to listeners and async consumers."""

    __slots__ = ("_backlog", "_listeners", "_subs", "ended", "session_id")

    def __init__(self, session_id: str, backlog_limit: int | None = None) -> None:
        self.session_id = session_id
        self._backlog: deque[SessionEvent] | None = deque(maxlen=backlog_limit)
        self._subs: list[EventSubscription] = []
        self._listeners: list[Listener] = []
        self.ended = False

    def emit(self, payload: EventData) -> SessionEvent:
        event = SessionEvent(payload, time.time(), self.session_id)
        for listener in self._listeners:
            self._call(listener, event)
        if self._backlog is not None:
            self._backlog.append(event)
        for sub in self._subs:
            sub._push(event)
        if payload.kind is EventKind.SESSION_END:
            self.ended = True
        return event

    @staticmethod
    def _call(listener: Listener, event: SessionEvent) -> None:
        try:
            listener(event)
        except Exception:  # a broken UI callback must not break the agent
            _log.exception("event listener %r failed on %s", listener, event.kind)

    def subscribe(self) -> EventSubscription:
        sub = EventSubscription(self)
        if self._backlog is not None:
            sub._queue.extend(self._backlog)
            self._backlog = None
        if not self.ended:
            self._subs.append(sub)
        return sub

    def add_listener(self, listener: Listener, *, replay: bool = True) -> Callable[[], None]:
        """Call ``listener(event)`` synchronously for every later event; returns an unsubscriber.

        A listener is a consumer too: the first one receives the backlog (unless ``replay`` is
        False) and releases it, so a host that only uses listeners does not accumulate events.
        """
        backlog = self._backlog
        if backlog is not None:
            self._backlog = None
            if replay:
                for event in backlog:
                    self._call(listener, event)
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _unsubscribe(self, sub: EventSubscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

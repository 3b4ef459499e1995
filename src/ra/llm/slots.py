"""How many model calls may be in flight to one provider endpoint at once, and the queue for the rest.

Many sessions in one process share an adapter, and so one httpx connection pool. Left to itself,
httpcore queues what exceeds its connection limit inside the pool, where every change rescans
every waiting request against every connection (quadratic in the number of waiters: 1,000
concurrent sessions spent ~90 % of their time there and most ended in ``PoolTimeout``), and a
wait there is capped by the pool timeout. Even with no waiter, each request scans every
connection of the pool, and every idle one against all the others (64 kept-alive connections
cost ~70 % of a loopback step). So ra queues first: an adapter lets at most ``max_concurrency``
requests (``RA_HTTP_MAX_CONCURRENCY``, default :data:`DEFAULT_MAX_CONCURRENCY`) go out at once,
and each slot sends through its own one-connection httpx client: no pool ever has a waiter or
more than one connection to scan, and a connection stays warm for the slot's next request.

:class:`Slots` is that queue: first come, first served (a freed slot goes straight to the
longest waiter, a newcomer never overtakes it), constant work per acquire and release, and no
timeout of its own - a wait is bounded by whatever bounds the caller (an abort, a deadline, a
cancelled task), and a waiter cancelled in the queue leaves it without taking or losing a slot.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Mapping

from .errors import ConfigurationError

__all__ = ["DEFAULT_MAX_CONCURRENCY", "ENV_MAX_CONCURRENCY", "Slots", "max_concurrency_setting"]

#: Requests in flight per adapter (provider endpoint) and event loop when nothing else is set:
#: enough to keep a provider busy, few enough that a burst of sessions queues in ra.
DEFAULT_MAX_CONCURRENCY = 64
#: The environment variable that sets it for every adapter built without ``max_concurrency``.
ENV_MAX_CONCURRENCY = "RA_HTTP_MAX_CONCURRENCY"


def max_concurrency_setting(value: int | None, environ: Mapping[str, str] | None = None) -> int:
    """The bound to use: ``value`` if given, else the environment's, else the default. A value that
    is not a whole number >= 1 is refused with ConfigurationError naming where it came from."""
    if value is None:
        raw = (os.environ if environ is None else environ).get(ENV_MAX_CONCURRENCY, "").strip()
        if not raw:
            return DEFAULT_MAX_CONCURRENCY
        if not raw.isdecimal() or int(raw) < 1:
            raise ConfigurationError(f"{ENV_MAX_CONCURRENCY} must be a whole number >= 1, got {raw!r}")
        return int(raw)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_concurrency must be a whole number >= 1, got {value!r}")
    return value


class Slots:
    """At most ``limit`` holders at once; the others wait in arrival order. Each holder gets a slot
    number in ``range(limit)``, unique while held (an adapter gives each slot its own connection);
    the slot freed last is handed out first, so a lone caller keeps reusing one warm connection.
    Bound to the event loop it is first used on (an adapter keeps one per loop). :meth:`acquire`
    and :meth:`release` go in pairs, ``try``/``finally``."""

    __slots__ = ("_free", "_fresh", "_waiters", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self._free: list[int] = []  # released slots, a stack: the last released on top
        self._fresh = 0  # slots numbered below this have been handed out once (so a huge limit costs nothing)
        self._waiters: deque[asyncio.Future[int]] = deque()

    @property
    def in_use(self) -> int:
        """Slots held now."""
        return self._fresh - len(self._free)

    @property
    def waiting(self) -> int:
        """Callers queued for a slot."""
        return len(self._waiters)

    def try_acquire(self) -> int | None:
        """A free slot's number if one is free and nobody queues, else None (nothing changes)."""
        if self._waiters:
            return None
        if self._free:
            return self._free.pop()
        if self._fresh < self.limit:
            self._fresh += 1
            return self._fresh - 1
        return None

    async def acquire(self) -> int:
        """A free slot's number, at once when one is free and nobody queues, else in turn."""
        slot = self.try_acquire()
        if slot is not None:
            return slot
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                # The slot was handed over just as this caller was cancelled: pass it on.
                self.release(waiter.result())
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass  # release() already dropped it, cancelled, on its way to the next waiter
            raise

    def release(self, slot: int) -> None:
        """Give ``slot`` to the longest waiter, or back to the free ones."""
        if not 0 <= slot < self._fresh or self.in_use <= 0:
            raise RuntimeError(f"Slots.release({slot}) without a matching acquire()")
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(slot)  # the slot changes hands without ever being free
                return
        self._free.append(slot)

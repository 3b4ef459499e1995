"""Cancellation and deadlines shared by the high-level API and the agent's tools.

:class:`AbortSignal` is the one abort primitive of ra: the read side of an
:class:`AbortController` for ``generate()``/``stream()``, and - as ``ra.tools.registry.AbortState``
- what tools read to learn that their session was aborted. It is thread-safe: ``abort()`` may come
from any thread, and listeners run on the loop they asked for.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import AbortError, RequestTimeoutError

__all__ = ["AbortController", "AbortScope", "AbortSignal", "Deadline", "TimeoutConfig"]


class AbortSignal:
    """Read side of an :class:`AbortController`. Thread-safe: ``abort()`` may come from anywhere."""

    __slots__ = ("_aborted", "_listeners", "_lock", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._lock = threading.Lock()
        self._listeners: list[tuple[asyncio.AbstractEventLoop | None, Callable[[], Any]]] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def error(self) -> AbortError:
        """The error an aborted operation raises."""
        if isinstance(self._reason, AbortError):
            return self._reason
        suffix = f": {self._reason}" if self._reason is not None else ""
        return AbortError(f"the operation was aborted{suffix}")

    def throw_if_aborted(self) -> None:
        if self._aborted:
            raise self.error()

    def add_listener(
        self, callback: Callable[[], Any], *, loop: asyncio.AbstractEventLoop | None = None
    ) -> Callable[[], None]:
        """Call ``callback`` once when the signal fires (at once if it already has). With ``loop``
        it runs in that loop's thread; otherwise in the thread that aborts. Returns a function that
        removes the listener."""
        entry = (loop, callback)
        with self._lock:
            fire_now = self._aborted
            if not fire_now:
                self._listeners.append(entry)
        if fire_now:
            _dispatch(entry)

        def remove() -> None:
            with self._lock:
                try:
                    self._listeners.remove(entry)
                except ValueError:
                    pass

        return remove

    async def wait(self) -> None:
        """Return once the signal has fired."""
        if self._aborted:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        remove = self.add_listener(wake, loop=loop)
        try:
            await future
        finally:
            remove()

    def _abort(self, reason: Any) -> None:
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            self._reason = reason
            listeners, self._listeners = self._listeners, []
        errors: list[BaseException] = []
        for entry in listeners:
            try:
                _dispatch(entry)
            except Exception as exc:  # one broken listener must not keep the others from firing
                errors.append(exc)
        if errors:
            raise errors[0]


def _dispatch(entry: tuple[asyncio.AbstractEventLoop | None, Callable[[], Any]]) -> None:
    loop, callback = entry
    if loop is None:
        callback()
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        callback()
    else:
        try:
            loop.call_soon_threadsafe(callback)
        except RuntimeError:
            pass  # that loop is closed: nothing left to cancel there


class AbortController:
    """Cooperative cancellation: pass ``controller.signal`` to a call, then ``controller.abort()``."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        self.signal._abort(reason)


class AbortScope:
    """Cancel the current task when ``signal`` fires, and report that as AbortError.

    Built on ``asyncio.timeout``: firing the signal reschedules the timeout to *now*, so the
    standard library does the delicate part (cancelling, un-cancelling, telling our cancellation
    apart from an outer one) and we only rename the result.
    """

    __slots__ = ("_remove", "_signal", "_timeout")

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._timeout: asyncio.Timeout | None = None
        self._remove: Callable[[], None] | None = None

    async def __aenter__(self) -> AbortScope:
        signal = self._signal
        if signal is None:
            return self
        signal.throw_if_aborted()
        loop = asyncio.get_running_loop()
        self._timeout = asyncio.timeout(None)
        await self._timeout.__aenter__()
        self._remove = signal.add_listener(self._fire, loop=loop)
        return self

    def _fire(self) -> None:
        timeout = self._timeout
        if timeout is None:
            return
        try:
            timeout.reschedule(asyncio.get_running_loop().time())
        except RuntimeError:
            pass  # the scope was left before the callback ran

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        timeout = self._timeout
        if timeout is None:
            return
        assert self._signal is not None and self._remove is not None
        self._remove()
        try:
            await timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            if timeout.expired():
                raise self._signal.error() from None
            raise


class Deadline:
    """``asyncio.timeout_at`` that raises RequestTimeoutError naming which budget ran out."""

    __slots__ = ("_label", "_seconds", "_timeout", "_when")

    def __init__(self, when: float | None, seconds: float | None, label: str) -> None:
        self._when = when
        self._seconds = seconds
        self._label = label
        self._timeout: asyncio.Timeout | None = None

    async def __aenter__(self) -> Deadline:
        if self._when is not None:
            self._timeout = asyncio.timeout_at(self._when)
            await self._timeout.__aenter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        timeout = self._timeout
        if timeout is None:
            return
        try:
            await timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            if timeout.expired():
                raise RequestTimeoutError(f"{self._label} timeout of {self._seconds:g}s exceeded") from None
            raise


@dataclass(slots=True, frozen=True)
class TimeoutConfig:
    """``total`` bounds the whole operation (every step and tool run); ``per_step`` bounds each
    single model call (one attempt; a stream from opening to its last event). None: unbounded."""

    total: float | None = None
    per_step: float | None = None

    def __post_init__(self) -> None:
        for name in ("total", "per_step"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"TimeoutConfig.{name} must be positive, got {value}")

    @classmethod
    def coerce(cls, value: float | TimeoutConfig | None) -> TimeoutConfig:
        if value is None:
            return cls()
        if isinstance(value, TimeoutConfig):
            return value
        return cls(total=float(value))

"""Retry with exponential backoff and jitter (unified-llm-spec 6.6-6.7).

The low-level ``Client`` never retries; the high-level functions wrap each single model call in
:func:`retry` (or, for streams, :func:`retry_stream`, which retries only until the first event has
arrived). Applications on the low-level API compose the same way::

    response = await retry(lambda: client.complete(request), RetryPolicy(max_retries=3))

What gets retried: an :class:`~ra.llm.errors.SDKError` whose ``retryable`` flag is true (rate
limits, server errors, network and stream errors, unknown provider errors), unless a
``should_retry`` predicate says otherwise. Anything else - a bug in a callback, a cancellation -
propagates at once. A provider's Retry-After wins over the computed backoff when it fits within
``max_delay``; when it asks for longer, the error is raised immediately (with ``retry_after`` set)
rather than silently blocking the caller for minutes.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import RequestTimeoutError, SDKError

__all__ = ["RetryPolicy", "retry", "retry_stream", "transient"]

T = TypeVar("T")

# Indirection so tests can replace the sleep without patching asyncio for everyone.
_sleep = asyncio.sleep

OnRetry = Callable[[BaseException, int, float], Any]
ShouldRetry = Callable[[BaseException], bool]


@dataclass(slots=True)
class RetryPolicy:
    """How often and how long to wait between attempts.

    ``max_retries`` counts retries, not attempts: 2 means at most 3 calls. ``on_retry`` is called
    (and awaited, if it returns an awaitable) before each retry with ``(error, attempt, delay)``,
    where ``attempt`` is 1 for the first retry. ``should_retry`` replaces the ``retryable`` flag as
    the test of whether an error is worth another attempt (e.g. to opt in to timeout retries).
    """

    max_retries: int = 2
    base_delay: float = 1.0
    max_delay: float = 60.0
    backoff_multiplier: float = 2.0
    jitter: bool = True
    on_retry: OnRetry | None = None
    should_retry: ShouldRetry | None = None

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("base_delay and max_delay must be >= 0")
        if self.backoff_multiplier < 1:
            raise ValueError(f"backoff_multiplier must be >= 1, got {self.backoff_multiplier}")

    def backoff(self, n: int) -> float:
        """The delay before retry ``n`` (0-indexed): ``min(base * multiplier**n, max_delay)``,
        then scaled by a uniform factor in [0.5, 1.5) when ``jitter`` is on."""
        try:
            delay = min(self.base_delay * (self.backoff_multiplier**n), self.max_delay)
        except OverflowError:
            delay = self.max_delay
        if self.jitter:
            delay *= random.uniform(0.5, 1.5)
        return delay

    def is_retryable(self, error: BaseException) -> bool:
        if not isinstance(error, Exception):
            return False  # cancellation, KeyboardInterrupt, SystemExit: never
        if self.should_retry is not None:
            return bool(self.should_retry(error))
        return isinstance(error, SDKError) and bool(error.retryable)

    def delay_before_retry(self, error: BaseException, n: int) -> float | None:
        """Seconds to wait before retry ``n`` (0-indexed) after ``error``, or None: raise it."""
        if n >= self.max_retries or not self.is_retryable(error):
            return None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after >= 0:
            if retry_after > self.max_delay:
                return None  # the provider wants longer than we may wait: surface it now
            return float(retry_after)
        return self.backoff(n)


def transient(error: BaseException) -> bool:
    """The agent loop's test of a retryable error (the Go-port spec, section 11): what the
    ``retryable`` flag says, and also a timeout on the network (``RequestTimeoutError.network``:
    connecting, waiting for the answer, a stream gone silent), which ``ra.llm`` alone does not
    retry. A caller's own deadline is never transient. Use as ``RetryPolicy(should_retry=transient)``.

    Retrying a stream that had already sent text is safe in the loop: nothing of a response is
    acted on before it is complete, and the RETRY event says ``discard_partial`` so that a host
    drops what it showed (``ra.sdk`` announces it with an ``api_retry`` message)."""
    if not isinstance(error, Exception):
        return False
    if isinstance(error, RequestTimeoutError):
        return error.network
    return isinstance(error, SDKError) and bool(error.retryable)


async def _before_retry(policy: RetryPolicy, error: BaseException, n: int, delay: float) -> None:
    if policy.on_retry is not None:
        result = policy.on_retry(error, n + 1, delay)
        if inspect.isawaitable(result):
            await result
    if delay > 0:
        await _sleep(delay)


async def retry(fn: Callable[[], Awaitable[T]], policy: RetryPolicy | None = None) -> T:
    """Call ``fn()`` (a zero-argument async callable) and retry it per ``policy``."""
    policy = policy or RetryPolicy()
    n = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            delay = policy.delay_before_retry(exc, n)
            if delay is None:
                raise
            await _before_retry(policy, exc, n, delay)
            n += 1


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


async def retry_stream(
    open_stream: Callable[[], AsyncIterator[T]], policy: RetryPolicy | None = None
) -> AsyncIterator[T]:
    """Yield the items of ``open_stream()``, retrying only the *opening*.

    An attempt counts as opened once its first item has arrived. A failure before that is retried
    per ``policy`` (the failed iterator is closed first, releasing its connection); a failure after
    any item was delivered propagates unchanged, because the consumer has already acted on partial
    output that a second attempt would not reproduce.
    """
    policy = policy or RetryPolicy()
    n = 0
    while True:
        stream: AsyncIterator[T] | None = None
        try:
            stream = open_stream()
            first = await anext(stream)
        except StopAsyncIteration:
            await _aclose(stream)
            return
        except Exception as exc:
            await _aclose(stream)
            delay = policy.delay_before_retry(exc, n)
            if delay is None:
                raise
            await _before_retry(policy, exc, n, delay)
            n += 1
            continue
        except BaseException:
            await _aclose(stream)
            raise
        break
    try:
        yield first
        async for item in stream:
            yield item
    finally:
        await _aclose(stream)

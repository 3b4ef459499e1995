"""Retry policy (spec 6.6-6.7): backoff and jitter, Retry-After, what is retried, stream opening."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator

import pytest

from ra.llm.errors import (
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    StreamError,
)
from ra.llm.retrying import RetryPolicy, retry, retry_stream

retry_module = importlib.import_module("ra.llm.retrying")


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the delays instead of waiting them out."""
    recorded: list[float] = []

    async def fake_sleep(delay: float) -> None:
        recorded.append(delay)

    monkeypatch.setattr(retry_module, "_sleep", fake_sleep)
    return recorded


def _server_error(retry_after: float | None = None) -> ServerError:
    return ServerError("boom", provider="p", status_code=503, retry_after=retry_after)


class Flaky:
    """Fails with the given errors in turn, then returns ``value``."""

    def __init__(self, *errors: BaseException, value: str = "ok") -> None:
        self.errors = list(errors)
        self.value = value
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.value


def test_backoff_without_jitter_follows_the_table() -> None:
    policy = RetryPolicy(jitter=False)
    assert [policy.backoff(n) for n in range(5)] == [1.0, 2.0, 4.0, 8.0, 16.0]
    capped = RetryPolicy(jitter=False, base_delay=10, max_delay=25)
    assert [capped.backoff(n) for n in range(3)] == [10.0, 20.0, 25.0]
    assert RetryPolicy(jitter=False).backoff(5000) == 60.0  # no overflow, just the cap


def test_jitter_scales_by_half_to_one_and_a_half(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = RetryPolicy()
    monkeypatch.setattr(retry_module.random, "uniform", lambda a, b: a)
    assert policy.backoff(2) == 2.0
    monkeypatch.setattr(retry_module.random, "uniform", lambda a, b: b)
    assert policy.backoff(2) == 6.0
    monkeypatch.undo()
    for n in range(4):
        base = min(2.0**n, 60.0)
        assert all(0.5 * base <= policy.backoff(n) <= 1.5 * base for _ in range(50))


async def test_retryable_errors_are_retried_until_success(sleeps: list[float]) -> None:
    fn = Flaky(_server_error(), RateLimitError("slow down", provider="p", status_code=429))
    assert await retry(fn, RetryPolicy(max_retries=2, jitter=False)) == "ok"
    assert fn.calls == 3
    assert sleeps == [1.0, 2.0]


async def test_retries_are_bounded_and_the_last_error_raised(sleeps: list[float]) -> None:
    errors = [_server_error() for _ in range(4)]
    fn = Flaky(*errors)
    with pytest.raises(ServerError) as info:
        await retry(fn, RetryPolicy(max_retries=3, jitter=False))
    assert info.value is errors[3]
    assert fn.calls == 4 and sleeps == [1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationError("bad key", provider="p", status_code=401),
        NotFoundError("no model", provider="p", status_code=404),
        InvalidRequestError("bad", provider="p", status_code=400),
        RequestTimeoutError("slow"),
        ValueError("a bug, not a transient failure"),
    ],
)
async def test_non_retryable_errors_are_raised_at_once(error: Exception, sleeps: list[float]) -> None:
    fn = Flaky(error)
    with pytest.raises(type(error)):
        await retry(fn, RetryPolicy(max_retries=5))
    assert fn.calls == 1 and sleeps == []


async def test_max_retries_zero_disables_retries(sleeps: list[float]) -> None:
    fn = Flaky(_server_error())
    with pytest.raises(ServerError):
        await retry(fn, RetryPolicy(max_retries=0))
    assert fn.calls == 1 and sleeps == []


async def test_retry_after_replaces_the_backoff(sleeps: list[float]) -> None:
    fn = Flaky(_server_error(retry_after=3.5), _server_error(retry_after=0.0))
    assert await retry(fn, RetryPolicy(max_retries=2, max_delay=10)) == "ok"
    assert sleeps == [3.5]  # the zero delay is honoured without sleeping


async def test_retry_after_equal_to_max_delay_is_still_waited(sleeps: list[float]) -> None:
    fn = Flaky(_server_error(retry_after=10.0))
    assert await retry(fn, RetryPolicy(max_delay=10)) == "ok"
    assert sleeps == [10.0]


async def test_retry_after_beyond_max_delay_raises_immediately(sleeps: list[float]) -> None:
    error = RateLimitError("come back in an hour", provider="p", status_code=429, retry_after=3600)
    fn = Flaky(error)
    with pytest.raises(RateLimitError) as info:
        await retry(fn, RetryPolicy(max_retries=5, max_delay=60))
    assert info.value.retry_after == 3600
    assert fn.calls == 1 and sleeps == []


async def test_on_retry_gets_error_attempt_and_delay(sleeps: list[float]) -> None:
    seen: list[tuple[str, int, float]] = []
    e1, e2 = _server_error(), _server_error(retry_after=0.5)
    policy = RetryPolicy(jitter=False, on_retry=lambda err, attempt, delay: seen.append((err.message, attempt, delay)))
    await retry(Flaky(e1, e2), policy)
    assert seen == [("boom", 1, 1.0), ("boom", 2, 0.5)]


async def test_async_on_retry_is_awaited(sleeps: list[float]) -> None:
    seen: list[int] = []

    async def on_retry(error: BaseException, attempt: int, delay: float) -> None:
        await asyncio.sleep(0)
        seen.append(attempt)

    await retry(Flaky(_server_error()), RetryPolicy(on_retry=on_retry))
    assert seen == [1]


async def test_should_retry_overrides_the_flag(sleeps: list[float]) -> None:
    policy = RetryPolicy(should_retry=lambda e: isinstance(e, RequestTimeoutError))
    assert await retry(Flaky(RequestTimeoutError("slow")), policy) == "ok"
    with pytest.raises(ServerError):
        await retry(Flaky(_server_error()), policy)


async def test_cancellation_is_never_retried(sleeps: list[float]) -> None:
    fn = Flaky(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await retry(fn, RetryPolicy(max_retries=3))
    assert fn.calls == 1


async def test_real_sleep_with_tiny_delays() -> None:
    fn = Flaky(_server_error(), _server_error())
    assert await retry(fn, RetryPolicy(base_delay=0.001, max_delay=0.01)) == "ok"
    assert fn.calls == 3


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError):
        RetryPolicy(base_delay=-1)
    with pytest.raises(ValueError):
        RetryPolicy(backoff_multiplier=0.5)


# -- stream opening --------------------------------------------------------------------------------


class Opener:
    """Each call opens a stream; a script decides whether it fails before or after its first item."""

    def __init__(self, *plans: tuple[int, BaseException | None]) -> None:
        self.plans = list(plans)  # (items before failing, error or None)
        self.opened = 0
        self.closed = 0

    def __call__(self) -> AsyncIterator[int]:
        self.opened += 1
        count, error = self.plans.pop(0)
        return self._gen(count, error)

    async def _gen(self, count: int, error: BaseException | None) -> AsyncIterator[int]:
        try:
            for i in range(count):
                yield i
            if error is not None:
                raise error
        finally:
            self.closed += 1


async def test_stream_opening_is_retried(sleeps: list[float]) -> None:
    opener = Opener((0, _server_error()), (0, StreamError("dropped")), (3, None))
    items = [i async for i in retry_stream(opener, RetryPolicy(jitter=False))]
    assert items == [0, 1, 2]
    assert opener.opened == 3 and opener.closed == 3  # failed attempts were closed too
    assert sleeps == [1.0, 2.0]


async def test_stream_is_not_retried_after_the_first_item(sleeps: list[float]) -> None:
    opener = Opener((2, StreamError("dropped mid-way")), (5, None))
    got: list[int] = []
    with pytest.raises(StreamError, match="mid-way"):
        async for i in retry_stream(opener, RetryPolicy(max_retries=5)):
            got.append(i)  # noqa: PERF401 - the list must survive the exception
    assert got == [0, 1] and opener.opened == 1 and sleeps == []


async def test_stream_opening_gives_up_on_non_retryable(sleeps: list[float]) -> None:
    opener = Opener((0, AuthenticationError("bad key", provider="p", status_code=401)), (1, None))
    with pytest.raises(AuthenticationError):
        [i async for i in retry_stream(opener)]
    assert opener.opened == 1 and opener.closed == 1


async def test_empty_stream_and_early_close(sleeps: list[float]) -> None:
    assert [i async for i in retry_stream(Opener((0, None)))] == []
    opener = Opener((10, None))
    stream = retry_stream(opener)
    assert await anext(stream) == 0
    await stream.aclose()  # type: ignore[attr-defined]
    assert opener.closed == 1


async def test_stream_retry_respects_retry_after_limit(sleeps: list[float]) -> None:
    opener = Opener((0, RateLimitError("wait", provider="p", status_code=429, retry_after=120)), (1, None))
    with pytest.raises(RateLimitError):
        [i async for i in retry_stream(opener, RetryPolicy(max_delay=60))]
    assert opener.opened == 1

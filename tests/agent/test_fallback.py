"""Fallback models: a call that still fails with an overloaded / server / not-found error moves on."""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.llm.errors import (
    AuthenticationError,
    ContextLengthError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    ServerError,
)
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import Step, call, reply
from ra.llm.types import Request

from .support import Recorder, make_session

NO_RETRY = RetryPolicy(max_retries=0)


def by_model(answers: dict[str, list]):  # type: ignore[no-untyped-def]
    """A script step that answers according to the requested model, from per-model queues."""

    def answer(request: Request) -> Step | Exception:
        return answers[request.model].pop(0)

    return answer


def overloaded() -> ServerError:
    return ServerError("overloaded", provider="scripted", status_code=529)


async def test_the_same_call_moves_to_the_next_model_and_the_next_call_stays_there() -> None:
    """A fallback sticks: the models that failed over are skipped by the next call (they cool
    down), so it goes straight to the model that answered (before: the primary first, again)."""
    answers = {
        "test-model": [overloaded(), reply("primary again")],
        "backup-1": [ServerError("down", provider="scripted", status_code=500)],
        "backup-2": [call("echo", text="from backup"), reply("backup-2 again")],
    }
    config = SessionConfig(retry_policy=NO_RETRY, fallback_models=("backup-1", "backup-2"))
    session, model = make_session(default=by_model(answers), config=config)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED and result.text == "backup-2 again"
    assert [r.model for r in model.requests] == ["test-model", "backup-1", "backup-2", "backup-2"]
    warnings = [w for w in rec.of(E.WARNING) if w["code"] == "fallback_model"]
    assert [(w["failed_model"], w["fallback_model"]) for w in warnings] == [
        ("test-model", "backup-1"),
        ("backup-1", "backup-2"),
    ]
    assert [u["model"] for u in rec.of(E.USAGE)] == ["backup-2", "backup-2"]


async def test_after_the_cool_down_the_primary_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from ra.agent import fallback

    monkeypatch.setattr(fallback, "FALLBACK_COOLDOWN_S", 0.0)  # cooled down by the next call
    answers = {"test-model": [overloaded(), reply("primary again")], "backup": [call("echo", text="b")]}
    config = SessionConfig(retry_policy=NO_RETRY, fallback_models=("backup",))
    session, model = make_session(default=by_model(answers), config=config)
    result = await session.submit("go")
    assert result.text == "primary again"
    assert [r.model for r in model.requests] == ["test-model", "backup", "test-model"]


async def test_when_every_model_is_cooling_down_all_are_tried_again() -> None:
    answers = {
        "test-model": [overloaded(), overloaded()],
        "backup": [ServerError("down", provider="scripted", status_code=500), reply("backup is back")],
    }
    config = SessionConfig(retry_policy=NO_RETRY, fallback_models=("backup",))
    session, model = make_session(default=by_model(answers), config=config)
    first = await session.submit("go")
    assert first.stop_reason is StopReason.ERROR
    second = await session.submit("again")
    assert second.text == "backup is back"
    assert [r.model for r in model.requests] == ["test-model", "backup", "test-model", "backup"]


async def test_fallback_comes_after_the_retries() -> None:
    answers = {"test-model": [overloaded(), overloaded(), overloaded()], "backup": [reply("ok")]}
    retry = RetryPolicy(max_retries=2, base_delay=0, jitter=False)
    session, model = make_session(
        default=by_model(answers), config=SessionConfig(retry_policy=retry, fallback_models=("backup",))
    )
    rec = Recorder(session)
    assert (await session.submit("go")).text == "ok"
    assert [r.model for r in model.requests] == ["test-model"] * 3 + ["backup"]
    assert len(rec.of(E.RETRY)) == 2


async def test_not_found_moves_on_too() -> None:
    answers = {"test-model": [NotFoundError("no such model", provider="scripted", status_code=404)], "b": [reply("b")]}
    session, _ = make_session(
        default=by_model(answers), config=SessionConfig(retry_policy=NO_RETRY, fallback_models=("b",))
    )
    assert (await session.submit("go")).text == "b"


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationError("bad key", provider="scripted", status_code=401),
        RateLimitError("slow down", provider="scripted", status_code=429, retry_after=120),
        InvalidRequestError("bad field", provider="scripted", status_code=400),
        ContextLengthError("too long", provider="scripted", status_code=400),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_errors_another_model_would_hit_too_never_fall_back(error: Exception) -> None:
    answers = {"test-model": [error], "backup": [reply("should not be used")]}
    session, model = make_session(
        default=by_model(answers), config=SessionConfig(retry_policy=NO_RETRY, fallback_models=("backup",))
    )
    result = await session.submit("go")
    assert result.stop_reason in (StopReason.ERROR, StopReason.CONTEXT_OVERFLOW)
    assert [r.model for r in model.requests] == ["test-model"]


async def test_the_last_failure_is_reported_when_every_model_fails() -> None:
    answers = {"test-model": [overloaded()], "backup": [ServerError("also down", provider="scripted", status_code=503)]}
    session, _ = make_session(
        default=by_model(answers), config=SessionConfig(retry_policy=NO_RETRY, fallback_models=("backup",))
    )
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and "also down" in str(result.error)


def test_fallback_entries_are_validated() -> None:
    with pytest.raises(ValueError, match="fallback_models"):
        SessionConfig(fallback_models=("",))
    SessionConfig(fallback_models=("m", ("anthropic", "claude-haiku-4-5")))

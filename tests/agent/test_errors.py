"""Error handling (spec 2.8, 9.11, Appendix B): retries, fatal errors, context overflow."""

from __future__ import annotations

from ra.agent import ContextOverflowError, SessionConfig, SessionState, StopReason, ToolResultsTurn
from ra.agent.events import EventKind as E
from ra.llm.errors import (
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ContextLengthError,
    InvalidRequestError,
    ProviderError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    StreamError,
)
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import Step, call, fail, reply
from ra.llm.types import Request, Role

from .support import FakeEnv, Recorder, make_session


def server_error() -> ServerError:
    return ServerError("upstream overloaded", provider="scripted", status_code=503)


def too_long() -> ContextLengthError:
    return ContextLengthError("prompt is too long", provider="scripted", status_code=400)


async def test_transient_errors_are_retried_with_events() -> None:
    session, model = make_session(
        [fail(server_error()), fail(RateLimitError("slow down", provider="scripted", status_code=429)), reply("ok")]
    )
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "ok" and result.stop_reason is StopReason.COMPLETED
    retries = rec.of(E.RETRY)
    assert [e["attempt"] for e in retries] == [1, 2]
    assert [e["error_type"] for e in retries] == ["ServerError", "RateLimitError"]
    assert all(e["delay"] >= 0 for e in retries)
    assert len(model.requests) == 3
    assert session.state is SessionState.IDLE


async def test_user_on_retry_hook_still_called() -> None:
    calls: list[int] = []
    policy = RetryPolicy(max_retries=1, base_delay=0, jitter=False, on_retry=lambda e, n, d: calls.append(n))
    session, _ = make_session([fail(server_error()), reply("ok")], config=SessionConfig(retry_policy=policy))
    rec = Recorder(session)
    await session.submit("go")
    assert calls == [1] and len(rec.of(E.RETRY)) == 1


async def test_retries_exhausted_ends_the_input_and_keeps_the_session() -> None:
    env = FakeEnv()
    session, model = make_session([fail(server_error())] * 3 + [reply("back again")], env=env)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, ServerError)
    assert result.state is SessionState.IDLE and session.state is SessionState.IDLE
    assert len(model.requests) == 3  # 1 + max_retries 2
    error = rec.of(E.ERROR)[0]
    assert not error["fatal"] and error["error_type"] == "ServerError"
    assert rec.kinds()[-1] is E.PROCESSING_END and rec.of(E.SESSION_END) == []
    assert rec.of(E.PROCESSING_END)[0]["stop_reason"] is StopReason.ERROR
    assert env.terminated == 0
    # The next submit works, on the same conversation.
    again = await session.submit("try again")
    assert again.text == "back again" and again.stop_reason is StopReason.COMPLETED
    assert [m.text for m in model.requests[-1].messages if m.role == Role.USER] == ["go", "try again"]


async def test_authentication_error_surfaces_at_once() -> None:
    session, model = make_session([fail(AuthenticationError("bad key", provider="scripted", status_code=401))])
    rec = Recorder(session)
    result = await session.submit("go")
    assert len(model.requests) == 1  # never retried
    assert rec.of(E.RETRY) == []
    assert isinstance(result.error, AuthenticationError)
    assert session.state is SessionState.CLOSED
    assert rec.of(E.ERROR)[0]["fatal"]
    kinds = rec.kinds()
    assert kinds.index(E.ERROR) < kinds.index(E.SESSION_END) == len(kinds) - 1


async def test_configuration_and_access_errors_close_the_session() -> None:
    for error in (
        ConfigurationError("no adapter is configured for provider 'x'"),
        AccessDeniedError("this key may not use the model", provider="scripted", status_code=403),
    ):
        session, _ = make_session([fail(error)])
        result = await session.submit("go")
        assert result.state is SessionState.CLOSED and session.state is SessionState.CLOSED
        assert result.error is error


async def test_other_non_retryable_error_keeps_the_session() -> None:
    session, model = make_session(
        [fail(InvalidRequestError("bad field", provider="scripted", status_code=400)), reply("fine")]
    )
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and len(model.requests) == 1
    assert session.state is SessionState.IDLE
    try:
        result.raise_for_error()
    except InvalidRequestError:
        pass
    else:  # pragma: no cover
        raise AssertionError("raise_for_error did not raise")
    assert (await session.submit("again")).text == "fine"


async def test_unexpected_adapter_exception_ends_the_input_cleanly() -> None:
    session, _ = make_session([fail(KeyError("choices")), reply("ok")])
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and session.state is SessionState.IDLE
    assert rec.of(E.ERROR)[0]["error_type"] == "KeyError"
    assert (await session.submit("again")).text == "ok"


async def test_transient_failures_never_close_the_session() -> None:
    """Read timeouts, a Retry-After longer than the policy allows, malformed replies: each ends
    the input; the session answers the next submit on the same history."""
    long_wait = RateLimitError("slow down", provider="scripted", status_code=429, retry_after=3600)
    errors = [
        RequestTimeoutError("scripted: read timed out"),
        long_wait,
        StreamError("scripted: choices[0].delta: expected an object, got list"),
        ProviderError("scripted: the reply is not JSON", provider="scripted", retryable=False),
    ]
    policy = RetryPolicy(max_retries=0)
    for error in errors:
        session, _model = make_session([fail(error), reply("recovered")], config=SessionConfig(retry_policy=policy))
        result = await session.submit("go")
        assert result.stop_reason is StopReason.ERROR and result.error is error
        assert session.state is SessionState.IDLE, error
        assert (await session.submit("again")).text == "recovered"


async def test_an_error_after_a_tool_round_leaves_no_half_turn() -> None:
    session, model = make_session([call("echo", text="hi"), fail(server_error()), reply("done")])
    session.config.retry_policy = RetryPolicy(max_retries=0)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(session.history[-1], ToolResultsTurn)  # the call is answered
    assert (await session.submit("continue")).text == "done"
    messages = model.requests[-1].messages
    open_calls: set[str] = set()
    for message in messages:
        if message.role == Role.ASSISTANT:
            assert not open_calls, "a tool call went unanswered"
            open_calls = {c.id for c in message.tool_calls}
        elif message.role == Role.TOOL:
            open_calls.discard(message.tool_call_id)  # type: ignore[arg-type]
    assert not open_calls


async def test_context_overflow_warn_mode_keeps_the_session() -> None:
    session, _model = make_session([fail(too_long()), reply("fits now")])
    rec = Recorder(session)
    result = await session.submit("huge input")
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert isinstance(result.error, ContextLengthError)
    assert session.state is SessionState.IDLE
    warning = rec.of(E.WARNING)[0]
    assert warning["code"] == "context_overflow"
    assert rec.of(E.ERROR) == [] and rec.of(E.SESSION_END) == []
    assert (await session.submit("smaller")).text == "fits now"


def build_long_history_script(rounds: int) -> list:
    return [call("echo", text="x" * 2000) for _ in range(rounds)]


async def test_prune_drops_old_context_and_retries() -> None:
    sizes: list[int] = []

    def final(request: Request):
        sizes.append(len(request.messages))
        if len(sizes) == 1:
            return too_long()
        return reply("recovered")

    config = SessionConfig(context_overflow="prune", enable_loop_detection=False)
    session, model = make_session(build_long_history_script(10), config=config, default=final)
    rec = Recorder(session)
    result = await session.submit("the task")
    assert result.text == "recovered"
    pruned = rec.of(E.CONTEXT_PRUNED)[0]
    assert pruned["dropped_messages"] > 0
    assert sizes[1] == sizes[0] - pruned["dropped_messages"]
    retried = model.requests[-1].messages
    assert retried[0].role == Role.SYSTEM and retried[1].text == "the task"
    # Every tool result still follows the assistant message that called it.
    open_calls: set[str] = set()
    for message in retried[2:]:
        if message.role == Role.ASSISTANT:
            open_calls = {c.id for c in message.tool_calls}
        elif message.role == Role.TOOL:
            assert message.tool_call_id in open_calls
    assert retried[2].role == Role.ASSISTANT
    # The turns are all still there; only the context shrank.
    assert len(session.history) == 1 + 10 * 2 + 1
    assert session.history.pruned_messages == pruned["dropped_messages"]


async def test_prune_that_cannot_recover_is_a_clear_error() -> None:
    config = SessionConfig(context_overflow="prune", enable_loop_detection=False)
    session, _model = make_session(
        [call("echo", text="a"), call("echo", text="b")], config=config, default=fail(too_long())
    )
    rec = Recorder(session)
    result = await session.submit("task")
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, ContextOverflowError)
    assert "still too long" in str(result.error)
    assert session.state is SessionState.IDLE
    assert len(rec.of(E.CONTEXT_PRUNED)) >= 1
    assert rec.of(E.ERROR)[0]["error_type"] == "ContextOverflowError"


async def test_broken_stream_is_retried_and_partial_text_discarded() -> None:
    session, _ = make_session(
        [Step(text="partial answer", stream_error=StreamError("connection reset")), reply("complete answer")],
        streaming=True,
    )
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "complete answer"
    retry = rec.of(E.RETRY)[0]
    assert retry["discard_partial"] is True and retry["error_type"] == "StreamError"
    assert session.history[-1].content == "complete answer"  # type: ignore[union-attr]


async def test_system_prompt_failure_is_reported() -> None:
    def broken(env, docs) -> str:
        raise FileNotFoundError("AGENTS.md vanished")

    session, _ = make_session([reply("x")], system_prompt=broken)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and session.state is SessionState.IDLE
    assert "AGENTS.md vanished" in rec.of(E.ERROR)[0]["message"]


async def test_tool_errors_are_results_not_failures() -> None:
    session, model = make_session([call("boom"), reply("recovered")])
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED
    end = rec.of(E.TOOL_CALL_END)[0]
    assert end["is_error"] and end["error"] == "Tool error (boom): disk on fire"
    tool_msg = next(m for m in model.requests[1].messages if m.role == Role.TOOL)
    assert tool_msg.content[0].tool_result.is_error  # type: ignore[union-attr]

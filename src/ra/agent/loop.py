"""The agentic loop (coding-agent-loop-spec 2.5 and Appendix B), top to bottom.

    process_input          one submitted input, then any queued follow-ups
      run_input            one input: steps until natural completion, a limit, an error or abort
        run_step           one step: a model call, then the tools it asked for
          call_model       request -> response: retries, streaming, pruning on overflow
          execute_tools    the tool round: parallel / sequential / between-calls steering

The Session owns the state (history, queues, config, events) and the lifecycle (abort, close);
this module owns the order in which things happen. Everything the model sends is untrusted
input: unknown tools, malformed or invalid arguments and failing tools become error results
the model reads, never exceptions here.

Where ra goes beyond the spec's pseudo-code (each is documented in docs/agent.md):

* the system prompt is built once per input, not once per step (it may read files and git);
* messages are built incrementally (``History``), not re-converted from the history each step;
* a natural completion while steering is queued continues the loop with that steering (pi-agent)
  instead of leaving the message for the next submit;
* per-step tool-call limit, between-calls steering, context pruning, AWAITING_INPUT detection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ra.llm.accumulator import StreamAccumulator
from ra.llm.errors import (
    AbortError,
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ContextLengthError,
    StreamError,
)
from ra.llm.types import Request, Response, StreamEventType, ToolCall, ToolChoice, Usage
from ra.tools.pipeline import ToolCallOutcome, ToolPipeline

from .config import SessionState, StopReason
from .context import prune_messages
from .errors import ContextOverflowError
from .events import EventKind
from .history import AssistantTurn, SteeringTurn, ToolResultsTurn, UserTurn

if TYPE_CHECKING:
    from .session import Session

__all__ = ["SubmitResult", "asks_question", "closes_session", "process_input"]

_AUTO = ToolChoice("auto")
#: Errors after which the session closes (see :func:`closes_session`).
_FATAL_ERRORS = (AuthenticationError, AccessDeniedError, ConfigurationError, AbortError)
_FOLLOW_UP_AFTER = (StopReason.COMPLETED, StopReason.ROUND_LIMIT, StopReason.TURN_LIMIT)
_T = StreamEventType
E = EventKind


@dataclass(slots=True)
class SubmitResult:
    """What ``Session.submit()`` returns once the input (and its follow-ups) are processed."""

    #: The last assistant text (the answer, on natural completion).
    text: str
    stop_reason: StopReason
    #: The session state afterwards: IDLE, AWAITING_INPUT or CLOSED.
    state: SessionState
    #: Model calls made while processing this submit.
    steps: int = 0
    #: Tool calls answered (run, failed or skipped).
    tool_calls: int = 0
    #: Inputs processed: 1 plus the follow-ups that ran.
    inputs: int = 0
    usage: Usage = field(default_factory=Usage)
    #: The error that ended processing (stop_reason ERROR), if any.
    error: BaseException | None = None

    def raise_for_error(self) -> SubmitResult:
        if self.error is not None:
            raise self.error
        return self


@dataclass(slots=True)
class _Tally:
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)


# --------------------------------------------------------------------------------------------------
# process_input: an input, then its follow-ups
# --------------------------------------------------------------------------------------------------


async def process_input(s: Session, user_input: str) -> SubmitResult:
    tally = s._tally = _Tally()
    inputs = 0
    text, source = user_input, "submit"
    while True:
        inputs += 1
        reason, answer, error = await run_input(s, text, source, tally)
        # Follow-ups run after an input ends normally or at a limit (spec 2.5); not after an error
        # or an overflow the host has to deal with first.
        if reason in _FOLLOW_UP_AFTER and s._follow_ups:
            text, source = s._follow_ups.popleft(), "follow_up"
            continue
        break

    if reason is StopReason.ABORTED or (reason is StopReason.ERROR and closes_session(error)):
        state = SessionState.CLOSED  # the session shuts down (Appendix B) and emits SESSION_END
    elif reason is StopReason.COMPLETED and s.config.detect_questions and asks_question(answer):
        state = SessionState.AWAITING_INPUT
    else:
        state = SessionState.IDLE
    result = SubmitResult(answer, reason, state, tally.steps, tally.tool_calls, inputs, tally.usage, error)
    if state is not SessionState.CLOSED:
        s.state = state
        s._emit(E.PROCESSING_END, {"state": state, "stop_reason": reason, "text": answer, "inputs": inputs})
    return result


# --------------------------------------------------------------------------------------------------
# run_input: the spec's process_input loop for one input
# --------------------------------------------------------------------------------------------------


async def run_input(s: Session, text: str, source: str, tally: _Tally) -> tuple[StopReason, str, BaseException | None]:
    s.history.append(UserTurn(text))
    s._emit(E.USER_INPUT, {"content": text, "source": source})

    try:
        await prepare_system_prompt(s)
    except Exception as exc:
        return fail(s, exc, "building the system prompt failed"), "", exc

    # Steering queued while idle (or during the previous input's last call) goes first.
    drain_steering(s)

    config = s.config
    round_count = 0
    answer = ""
    while True:
        # 1. Limits and abort.
        if config.max_tool_rounds_per_input > 0 and round_count >= config.max_tool_rounds_per_input:
            s._emit(E.TURN_LIMIT, {"round": round_count, "limit": config.max_tool_rounds_per_input, "scope": "input"})
            return StopReason.ROUND_LIMIT, answer, None
        if config.max_turns > 0 and s.turn_count >= config.max_turns:
            s._emit(E.TURN_LIMIT, {"total_turns": s.turn_count, "limit": config.max_turns, "scope": "session"})
            return StopReason.TURN_LIMIT, answer, None
        if s._abort.aborted:
            return StopReason.ABORTED, answer, None
        if s._interrupted:
            return StopReason.INTERRUPTED, answer, None

        # 2-6. One step: model call, record, tools.
        try:
            response, outcomes = await run_step(s, round_count, tally)
        except ContextLengthError as exc:
            # "warn" (the spec's default): report and end the input; the session stays usable.
            s._emit(
                E.WARNING,
                {
                    "code": "context_overflow",
                    "message": f"The model refused the request: the context is too long ({exc}). "
                    "Nothing was pruned (context_overflow='warn').",
                    "error": exc,
                },
            )
            return StopReason.CONTEXT_OVERFLOW, answer, exc
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return fail(s, exc, "model call failed"), answer, exc

        answer = response.text
        # 5. Natural completion - unless steering arrived during the call: then carry on with it.
        if not outcomes:
            if s._steering:
                drain_steering(s)
                continue
            return StopReason.COMPLETED, answer, None

        round_count += 1
        # A tool that ends the input (ra's submit): its output is the answer. Its result is in
        # the history already, so the conversation stays valid for a next input.
        final = next((o for o in outcomes if o.end_input and not o.is_error), None)
        if final is not None:
            return StopReason.COMPLETED, final.full_output, None
        # 7. Steering that arrived during the tool round.
        drain_steering(s)
        # 8. Loop detection.
        if config.enable_loop_detection:
            check_for_loop(s, [o.call for o in outcomes])


def fail(s: Session, exc: BaseException, context: str) -> StopReason:
    """An error ended the input: report it. ``fatal`` says whether the session closes too."""
    s._emit(
        E.ERROR,
        {
            "message": f"{context}: {exc}",
            "error": exc,
            "error_type": type(exc).__name__,
            "retryable": bool(getattr(exc, "retryable", False)),
            "fatal": closes_session(exc),
        },
    )
    return StopReason.ERROR


def closes_session(error: BaseException | None) -> bool:
    """Whether an error that ended an input also closes the session.

    Only errors that cannot go away by themselves do: bad credentials or permissions, a client
    that is not configured for the provider, an abort. A timeout, a server that stayed down
    through the retries, a long Retry-After, a malformed reply or a refused request end the
    input with stop reason ``error``; the history holds no half turn (an assistant turn is
    recorded only with its tool results), so the next ``submit()`` simply tries again.
    """
    return isinstance(error, _FATAL_ERRORS)


async def prepare_system_prompt(s: Session) -> None:
    """Build the system prompt for this input (project docs, then the profile's prompt)."""
    profile, env = s.profile, s.execution_env
    discover = getattr(profile, "discover_project_docs", None)
    docs = await _maybe_await(discover(env)) if discover is not None else None
    prompt = await _maybe_await(profile.build_system_prompt(env, docs))
    s._set_system_prompt(str(prompt) if prompt else "")


def drain_steering(s: Session) -> int:
    count = 0
    while s._steering:
        message = s._steering.popleft()
        s.history.append(SteeringTurn(message))
        s._emit(E.STEERING_INJECTED, {"content": message})
        count += 1
    return count


def check_for_loop(s: Session, calls: list[ToolCall]) -> None:
    window = s.config.loop_detection_window
    detector = s._loop_detector
    for call in calls:
        detector.record(call, window)
    if detector.check(window):
        warning = f"Loop detected: the last {window} tool calls follow a repeating pattern. Try a different approach."
        s.history.append(SteeringTurn(warning))
        s._emit(E.LOOP_DETECTION, {"message": warning, "window": window})


_QUESTION_TRAILERS = " \t\r\n*_`\"')]>"


def asks_question(text: str) -> bool:
    """The AWAITING_INPUT rule: a text-only answer whose last sentence is a question.

    Trailing whitespace and closing markdown/quote characters are ignored, so ``**Proceed?**``
    counts. Answers with tool calls never count (the loop has not finished).
    """
    return text.rstrip(_QUESTION_TRAILERS).endswith(("?", "\uff1f"))


# --------------------------------------------------------------------------------------------------
# run_step: one model call and the tool round it asks for
# --------------------------------------------------------------------------------------------------


async def run_step(s: Session, round_count: int, tally: _Tally) -> tuple[Response, list[ToolCallOutcome]]:
    s.step_count += 1
    step = s.step_count
    s._emit(E.TURN_START, {"step": step, "round": round_count})
    outcomes: list[ToolCallOutcome] = []
    status = "error"
    try:
        # 2-3. Request and model call.
        s._phase = "model"
        response = await call_model(s)
        s._phase = None
        tally.steps += 1

        # 4. Record the assistant turn.
        calls = response.tool_calls
        s.history.append(
            AssistantTurn(
                content=response.text,
                tool_calls=calls,
                reasoning=response.reasoning,
                usage=response.usage,
                response_id=response.id or None,
                message=response.message,
            )
        )
        s.turn_count += 1
        s._context.record_usage(response.usage, s._system_chars + s.history.chars)
        usage = response.usage
        tally.usage = tally.usage + usage
        s.usage = s.usage + usage
        s._emit(
            E.ASSISTANT_TEXT_END,
            {
                "text": response.text,
                "reasoning": response.reasoning,
                "tool_calls": calls,
                "response_id": response.id,
                "finish_reason": response.finish_reason.reason,
            },
        )
        s._emit(E.USAGE, {"usage": usage, "total": s.usage, "step": step})

        # 6. Execute the tool calls and record their results.
        if calls:
            s._phase = "tools"
            outcomes = await execute_tools(s, calls)
            s._phase = None
            tally.tool_calls += len(outcomes)
            s.history.append(ToolResultsTurn([o.to_result() for o in outcomes], names=[o.call.name for o in outcomes]))
        status = "completed"
        return response, outcomes
    except asyncio.CancelledError:
        status = "aborted"
        raise
    finally:
        s._phase = None
        s._emit(E.TURN_END, {"step": step, "tool_calls": len(outcomes), "status": status})


async def call_model(s: Session) -> Response:
    """One model call, retried on transient errors; on overflow, prune and retry when configured."""
    while True:
        request = build_request(s)
        check_context_usage(s)
        try:
            return await _with_retry(s, request)
        except ContextLengthError as exc:
            if s.config.context_overflow != "prune":
                raise
            pruned = prune_messages(s.history.messages)
            if pruned is None:
                raise ContextOverflowError(
                    "the context is still too long for the model after pruning: only the system messages, "
                    f"the first user message and the latest exchange are left ({len(s.history.messages)} "
                    f"messages, about {(s._system_chars + s.history.chars) // 4} tokens). Start a new session "
                    "or shorten the task."
                ) from exc
            s.history.replace_messages(pruned.messages)
            s._context.reset()
            s._emit(
                E.CONTEXT_PRUNED,
                {
                    "dropped_messages": pruned.dropped_messages,
                    "dropped_chars": pruned.dropped_chars,
                    "remaining_messages": len(pruned.messages),
                    "error": exc,
                },
            )


def build_request(s: Session) -> Request:
    profile = s.profile
    tools = profile.tools()
    context = s.history.messages
    # A fresh list per call: the request may be kept (recorded, logged) after the call, and the
    # context keeps growing. This copies pointers only; no message is rebuilt.
    messages = [s._system_message, *context] if s._system_message is not None else list(context)
    return Request(
        model=profile.model,
        messages=messages,
        provider=getattr(profile, "provider", None) or profile.id,
        tools=tools or None,
        tool_choice=_AUTO if tools else None,
        # Read at every call, so changes apply at once; the profile may supply a default.
        reasoning_effort=s.config.reasoning_effort or getattr(profile, "reasoning_effort", None),
        provider_options=profile.provider_options(),
    )


def check_context_usage(s: Session) -> None:
    window = getattr(s.profile, "context_window_size", 0)
    due = s._context.check(s._system_chars + s.history.chars, window, s.config.context_warning_threshold)
    if due is not None:
        tokens, fraction = due
        s._emit(
            E.WARNING,
            {
                "code": "context_usage",
                "message": f"Context usage at ~{round(fraction * 100)}% of context window",
                "estimated_tokens": tokens,
                "context_window_size": window,
            },
        )


async def _with_retry(s: Session, request: Request) -> Response:
    from ra.llm.retrying import retry

    return await retry(lambda: _model_once(s, request), s._retry_policy())


async def _model_once(s: Session, request: Request) -> Response:
    s._partial_output = False
    stream = s.config.stream
    if stream is None:
        stream = bool(getattr(s.profile, "supports_streaming", False))
    if not stream:
        return await s.llm_client.complete(request)
    return await stream_response(s, request)


async def stream_response(s: Session, request: Request) -> Response:
    """Stream the call, emitting text and reasoning as they arrive; rebuild the Response."""
    acc = StreamAccumulator(provider=request.provider or "", model=request.model)
    started = False
    events = s.llm_client.stream(request)
    try:
        async for event in events:
            acc.process(event)
            kind = event.type
            if kind == _T.TEXT_DELTA:
                if not started:
                    started = True
                    s._emit(E.ASSISTANT_TEXT_START, {})
                if event.delta:
                    s._partial_output = True
                    s._emit(E.ASSISTANT_TEXT_DELTA, {"delta": event.delta})
            elif kind == _T.TEXT_START:
                if not started:
                    started = True
                    s._emit(E.ASSISTANT_TEXT_START, {})
            elif kind == _T.REASONING_DELTA:
                if event.reasoning_delta:
                    s._emit(E.ASSISTANT_REASONING_DELTA, {"delta": event.reasoning_delta})
            elif kind == _T.ERROR:
                raise event.error or StreamError("the provider reported an error in the stream")
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()  # on abort this closes the connection
    return acc.response()


# --------------------------------------------------------------------------------------------------
# execute_tools: the tool round
# --------------------------------------------------------------------------------------------------


async def execute_tools(s: Session, calls: list[ToolCall]) -> list[ToolCallOutcome]:
    """Answer every call, in call order: run, skip (steering), or refuse (per-step limit)."""
    pipeline = s._pipeline
    pipeline.registry = s.profile.tool_registry
    limit = _stricter(s.config.max_tool_calls_per_step, getattr(s.profile, "max_tool_calls_per_step", None))
    runnable = calls if limit is None else calls[:limit]
    over_limit = [] if limit is None else calls[limit:]

    outcomes: list[ToolCallOutcome]
    if s.config.steering_mode == "between_calls":
        # pi-agent: check steering after each call; skip the rest explicitly when it arrived.
        outcomes = []
        for index, call in enumerate(runnable):
            outcomes.append(await pipeline.run(call))
            if s._steering and index + 1 < len(runnable):
                outcomes.extend(pipeline.skip(rest, _SKIPPED_FOR_STEERING) for rest in runnable[index + 1 :])
                break
    elif len(runnable) > 1 and s.profile.supports_parallel_tool_calls:
        outcomes = await run_parallel_round(pipeline, runnable)
    else:
        outcomes = [await pipeline.run(call) for call in runnable]

    for position, call in enumerate(over_limit, start=len(runnable) + 1):
        outcomes.append(
            pipeline.skip(
                call,
                f"Not executed: at most {limit} tool call(s) run per step and this was call {position} of "
                f"{len(calls)}. Make this call again in a later step if you still need it.",
            )
        )
    return outcomes


async def run_parallel_round(pipeline: ToolPipeline, calls: list[ToolCall]) -> list[ToolCallOutcome]:
    """Run a round concurrently where that is safe, in the model's order where it is not.

    Calls whose tool edits files (``ToolEffect.EDIT``) are barriers: each runs alone, after every
    call before it finished and before any call after it starts. The calls between two barriers
    (reads, searches, commands) run together. Without this, two edits of one file read the same
    old content and the second write silently drops the first one's change.
    """
    outcomes: list[ToolCallOutcome] = []
    batch: list[ToolCall] = []
    for call in calls:
        tool = pipeline.registry.get(call.name)
        if tool is None or not tool.exclusive:
            batch.append(call)
            continue
        if batch:
            outcomes.extend(await asyncio.gather(*(pipeline.run(c) for c in batch)))
            batch = []
        outcomes.append(await pipeline.run(call))
    if batch:
        outcomes.extend(await asyncio.gather(*(pipeline.run(c) for c in batch)))
    return outcomes


_SKIPPED_FOR_STEERING = (
    "Skipped: the user sent a new message before this tool call ran, so it was not executed. "
    "Read the user's message, then decide whether this call is still needed."
)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _stricter(a: int | None, b: int | None) -> int | None:
    """The tighter of two optional limits (None = no limit)."""
    if a is None:
        return b
    return a if b is None else min(a, b)


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def retry_policy_with_events(s: Session, policy: Any) -> Any:
    """A copy of ``policy`` whose ``on_retry`` also emits a RETRY event."""
    user_hook = getattr(policy, "on_retry", None)

    def on_retry(error: BaseException, attempt: int, delay: float) -> None:
        s._emit(
            E.RETRY,
            {
                "attempt": attempt,
                "delay": delay,
                "error": error,
                "error_type": type(error).__name__,
                "message": str(error),
                # Text already streamed by the failed attempt is void: the retry answers afresh.
                "discard_partial": s._partial_output,
            },
        )
        if user_hook is not None:
            user_hook(error, attempt, delay)

    if dataclasses.is_dataclass(policy) and not isinstance(policy, type):
        return dataclasses.replace(policy, on_retry=on_retry)
    clone = type(policy).__new__(type(policy))
    clone.__dict__.update(vars(policy))
    clone.on_retry = on_retry
    return clone

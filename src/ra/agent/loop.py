"""The agentic loop (coding-agent-loop-spec 2.5 and Appendix B), top to bottom.

    process_input          one submitted input, then any queued follow-ups
      run_input            one input: steps until natural completion, a limit, an error or a stop
        run_step           one step: a model call, then the tools it asked for
          call_model       request -> response: retries, streaming, compaction or pruning
          execute_tools    the tool round: checks one call at a time, then runs the allowed ones

The loop works on a :class:`~ra.agent.state.RunState` (history, config, counters, queues, emit)
and asks the session's :class:`~ra.agent.controls.Controls`, passed beside it (the run is data,
the controls are policy: neither holds the other); it never sees the Session, which owns the
lifecycle (abort, close, threads). Everything the model
sends is untrusted input: unknown tools, malformed or invalid arguments and failing tools become
error results the model reads, never exceptions here.

Where the controls plug in (:mod:`ra.agent.controls`), each named once below:

    input_start   run_input, before the first step      (refuse the input, or admit it with context)
    before_step   run_input, before each model call     (limits, budget, time)
    after_model   run_step, before the tools run        (stop: the calls are answered as not run)
    before_tool   the pipeline's CHECK, per call        (permissions, hooks)
    after_tool    the pipeline, before TOOL_CALL_END    (rewrite the outcome)
    after_step    run_step, once the step is recorded   (accounting, persistence)
    on_stop       run_input, on a text-only answer      (continue with a message)
    before_prune  call_model, before context is dropped (prune mode)
    before_compact  the compactor, before older turns are summarised (compact mode)
    input_end     process_input, after each input

Where ra goes beyond the spec's pseudo-code (each is documented in docs/agent.md):

* the system prompt is built once per input, not once per step (it may read files and git);
* messages are built incrementally (``History``), not re-converted from the history each step;
* a natural completion while steering is queued continues the loop with that steering (pi-agent)
  instead of leaving the message for the next submit;
* per-step tool-call limit, between-calls steering, context pruning, AWAITING_INPUT detection.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ra.llm.accumulator import StreamAccumulator
from ra.llm.errors import (
    AbortError,
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ContextLengthError,
    StreamError,
)
from ra.llm.types import Request, Response, StreamEventType, ToolCall, ToolChoice
from ra.llm.types import StreamEvent as LLMStreamEvent
from ra.tools.pipeline import ToolCallOutcome, ToolPipeline

from .aio import maybe_await
from .compaction.compactor import compact_after_overflow, compact_if_due
from .config import SessionState, StopReason
from .context import prune_messages
from .controls.decisions import Continue, Stop
from .errors import ContextOverflowError
from .events import (
    AssistantReasoningDelta,
    AssistantStreamEvent,
    AssistantTextDelta,
    AssistantTextEnd,
    AssistantTextStart,
    ContextPruned,
    ErrorEvent,
    LoopDetected,
    SteeringInjected,
    TurnEnd,
    TurnStart,
    UserInput,
    WarningEvent,
)
from .fallback import Answer, with_fallback
from .history import AssistantTurn, ContextTurn, SteeringTurn, ToolResultsTurn, UserTurn
from .output_limit import CUT_CALL_RESULT, continue_cut_text, output_cut
from .result import SubmitResult, Tally

if TYPE_CHECKING:
    from ra.llm.types import ImageData

    from .controls.chain import Controls
    from .state import RunState

__all__ = ["InputEnd", "Prompt", "StepEnd", "asks_question", "closes_session", "process_input"]

_AUTO = ToolChoice("auto")
_FOLLOW_UP_AFTER = (StopReason.COMPLETED, StopReason.ROUND_LIMIT, StopReason.TURN_LIMIT)
#: Errors after which the session closes (see :func:`closes_session`).
_FATAL_ERRORS = (AuthenticationError, AccessDeniedError, ConfigurationError, AbortError)
_T = StreamEventType


# --------------------------------------------------------------------------------------------------
# the loop's inputs and outputs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prompt:
    """An input to process: its text and the images that go with it in one user message (the
    host's ``submit(text, images=...)``; follow-ups are text only)."""

    text: str
    images: tuple[ImageData, ...] = ()


@dataclass(slots=True)
class InputEnd:
    """How one input ended: why, the last answer text, and the error that ended it (if any)."""

    reason: StopReason
    answer: str = ""
    error: BaseException | None = None


@dataclass(slots=True)
class StepEnd:
    """One step's result: the response, its tool outcomes, and the Stop that ends the input
    after it (a control's, or the output token limit), if any. ``cut``: the text was cut at the
    output limit and the model was asked to continue it."""

    response: Response
    outcomes: list[ToolCallOutcome]
    stop: Stop | None
    cut: bool = False


# --------------------------------------------------------------------------------------------------
# process_input: an input, then its follow-ups
# --------------------------------------------------------------------------------------------------


async def process_input(run: RunState, controls: Controls, prompt: Prompt) -> SubmitResult:
    tally = run.tally = Tally()
    inputs = 0
    source = "submit"
    while True:
        inputs += 1
        reason = StopReason.ERROR
        try:
            end = await run_input(run, controls, prompt, source)
            reason = end.reason
        finally:
            await controls.input_end(run, reason)
        # Follow-ups run after an input ends normally or at a limit (spec 2.5); not after an error
        # or an overflow the host has to deal with first.
        if reason in _FOLLOW_UP_AFTER and run.follow_ups:
            prompt, source = Prompt(run.follow_ups.popleft()), "follow_up"
            continue
        break

    if reason is StopReason.ABORTED or (reason is StopReason.ERROR and closes_session(end.error)):
        state = SessionState.CLOSED  # the session shuts down (Appendix B) and emits SESSION_END
    elif reason is StopReason.COMPLETED and run.config.detect_questions and asks_question(end.answer):
        state = SessionState.AWAITING_INPUT
    else:
        state = SessionState.IDLE
    # The session sets its state from the result, then emits PROCESSING_END (or shuts down).
    return SubmitResult.ended(reason, state, tally, text=end.answer, inputs=inputs, error=end.error)


# --------------------------------------------------------------------------------------------------
# run_input: the spec's process_input loop for one input
# --------------------------------------------------------------------------------------------------


async def run_input(run: RunState, controls: Controls, prompt: Prompt, source: str) -> InputEnd:
    run.input_rounds = run.input_steps = 0
    run.stop_hook_active = False
    text = prompt.text
    run.emit(UserInput(text, source))
    answer = ""

    admitted = await controls.input_start(run, text)  # CONTROL: input_start
    if isinstance(admitted, Stop):
        return InputEnd(stopped(run, admitted), answer, admitted.error)
    # Recorded only once admitted; context the controls added for it follows it.
    run.history.append(UserTurn(text, images=prompt.images))
    for admit in admitted:
        run.history.append(ContextTurn(admit.context, source=admit.source))
    try:
        await prepare_system_prompt(run)
    except Exception as exc:
        return InputEnd(fail(run, exc, "building the system prompt failed"), "", exc)

    # Steering queued while idle (or during the previous input's last call) goes first.
    drain_steering(run)
    partial = ""  # the text of responses cut at the output limit, continued by the next step

    while True:
        # 1. Limits, budget, time (controls), and stop requests.
        if (stop := await controls.before_step(run)) is not None:  # CONTROL: before_step
            return InputEnd(stopped(run, stop), answer, stop.error)
        if run.abort.aborted:
            return InputEnd(StopReason.ABORTED, answer)
        if run.stop_requested is not None:
            return InputEnd(run.stop_requested, answer)

        # 2-6. One step: model call, record, tools.
        try:
            step = await run_step(run, controls)
        except ContextLengthError as exc:
            # "warn" (the spec's default): report and end the input; the session stays usable.
            run.emit(
                WarningEvent(
                    "context_overflow",
                    f"The model refused the request: the context is too long ({exc}). "
                    "Nothing was pruned (context_overflow='warn').",
                    {"error": exc},
                )
            )
            return InputEnd(StopReason.CONTEXT_OVERFLOW, answer, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return InputEnd(fail(run, exc, "model call failed"), answer, exc)

        answer = partial + step.response.text
        partial = answer if step.cut else ""
        if (stop := step.stop) is not None:  # a control stopped the input after the model answered, or max_tokens
            return InputEnd(stopped(run, stop), answer, stop.error)
        outcomes = step.outcomes
        # 5. Natural completion - unless steering arrived during the call, or a control wants
        #    the model to go on: then carry on with that message.
        if not outcomes:
            if step.cut:
                continue  # the model continues its cut-off text
            if run.steering:
                drain_steering(run)
                continue
            decision = await controls.on_stop(run, answer)  # CONTROL: on_stop
            if isinstance(decision, Continue):
                inject(run, decision.message)
                continue
            return InputEnd(StopReason.COMPLETED, answer)

        run.input_rounds += 1
        # A tool that ends the input (ra's submit): its output is the answer. Its result is in
        # the history already, so the conversation stays valid for a next input.
        final = next((o for o in outcomes if o.end_input and not o.is_error), None)
        if final is not None:
            return InputEnd(StopReason.COMPLETED, final.full_output)
        # A check denied a call and said to stop there (``Deny(interrupt=True)``).
        if any(o.interrupt for o in outcomes):
            return InputEnd(StopReason.INTERRUPTED, answer)
        # 7. Steering that arrived during the tool round.
        drain_steering(run)
        # 8. Loop detection.
        if run.config.enable_loop_detection:
            check_for_loop(run, [o.call for o in outcomes])


def fail(run: RunState, exc: BaseException, context: str) -> StopReason:
    """An error ended the input: report it (the ERROR event says whether the session closes too)."""
    run.emit(
        ErrorEvent(
            f"{context}: {exc}",
            exc,
            type(exc).__name__,
            bool(getattr(exc, "retryable", False)),
            closes_session(exc),
        )
    )
    return StopReason.ERROR


def stopped(run: RunState, stop: Stop) -> StopReason:
    """The stop reason of an input a control ended; an ERROR stop is reported as one."""
    if stop.reason is StopReason.ERROR:
        return fail(run, stop.error or RuntimeError(stop.message), "stopped")
    return stop.reason


def closes_session(error: BaseException | None) -> bool:
    """Whether an error that ended an input also closes the session.

    Only errors that cannot go away by themselves do: bad credentials or permissions, a client
    that is not configured for the provider, an abort. A timeout, a server that stayed down
    through the retries, a long Retry-After, a malformed reply or a refused request end the
    input with stop reason ``error``; the history holds no half turn (an assistant turn is
    recorded only with its tool results), so the next ``submit()`` simply tries again.
    """
    return isinstance(error, _FATAL_ERRORS)


async def prepare_system_prompt(run: RunState) -> None:
    """Build the system prompt for this input (project docs, then the profile's prompt)."""
    profile, env = run.profile, run.env
    docs = await maybe_await(profile.discover_project_docs(env))
    prompt = await maybe_await(profile.build_system_prompt(env, docs))
    run.set_system_prompt(str(prompt) if prompt else "")


def inject(run: RunState, message: str) -> None:
    """Add ``message`` as a user message before the next model call (steering, a control's continue)."""
    run.history.append(SteeringTurn(message))
    run.emit(SteeringInjected(message))


def drain_steering(run: RunState) -> int:
    count = 0
    steering = run.steering
    while steering:
        inject(run, steering.popleft())
        count += 1
    return count


def check_for_loop(run: RunState, calls: list[ToolCall]) -> None:
    window = run.config.loop_detection_window
    detector = run.loop_detector
    for call in calls:
        detector.record(call, window)
    if detector.check(window):
        warning = f"Loop detected: the last {window} tool calls follow a repeating pattern. Try a different approach."
        run.history.append(SteeringTurn(warning))
        run.emit(LoopDetected(warning, window))


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


async def run_step(run: RunState, controls: Controls) -> StepEnd:
    """One step: a model call, then the tools it asked for."""
    run.step_count += 1
    step = run.step_count
    run.emit(TurnStart(step, run.input_rounds))
    outcomes: list[ToolCallOutcome] = []
    status = "error"
    try:
        # 2-3. Request and model call.
        run.phase = "model"
        response, answered_by = await call_model(run, controls)
        run.phase = None
        run.tally.steps += 1
        run.input_steps += 1

        # 4. Record the assistant turn.
        calls = response.tool_calls
        run.history.append(
            AssistantTurn(
                content=response.text,
                tool_calls=calls,
                reasoning=response.reasoning,
                usage=response.usage,
                response_id=response.id or None,
                message=response.message,
            )
        )
        run.turn_count += 1
        run.context.record_usage(response.usage, run.context_chars)
        usage = response.usage
        run.tally.usage = run.tally.usage + usage
        run.usage = run.usage + usage
        finish = response.finish_reason.reason
        run.emit(AssistantTextEnd(response.text, response.reasoning, calls, response.id, finish))
        model = answered_by or response.model or run.model
        # The provider that answered; the profile's when the response does not say (local = free).
        run.charge(usage, model, response.provider or run.profile.provider or None)
        stop = await controls.after_model(run, response)  # CONTROL: after_model
        cut = finish == "length"
        if not cut:
            run.cut_responses = 0
        elif stop is None:
            # Cut at the output token limit: continue the text, or drop the incomplete last call.
            stop = output_cut(run)

        # 6. Execute the tool calls (or answer them as not run) and record their results.
        if calls:
            run.phase = "tools"
            if stop is None:
                runnable = calls[:-1] if cut else calls
                outcomes = await execute_tools(run, runnable) if runnable else []
                if cut:
                    outcomes.append(run.pipeline.skip(calls[-1], CUT_CALL_RESULT))
            else:
                outcomes = [run.pipeline.skip(call, _stopped_before_tools(stop.message)) for call in calls]
            run.phase = None
            run.tally.tool_calls += len(outcomes)
            run.history.append(
                ToolResultsTurn([o.to_result() for o in outcomes], names=[o.call.name for o in outcomes])
            )
        elif cut and stop is None:
            continue_cut_text(run)
        await controls.after_step(run, response, outcomes)  # CONTROL: after_step
        status = "completed"
        return StepEnd(response, outcomes, stop, cut=cut and stop is None and not calls)
    except asyncio.CancelledError:
        status = "aborted"
        raise
    finally:
        run.phase = None
        run.emit(TurnEnd(step, len(outcomes), status))


def _stopped_before_tools(why: str) -> str:
    reason = f" ({why})" if why else ""
    return f"Not executed: the run was stopped before this tool call ran{reason}."


async def call_model(run: RunState, controls: Controls) -> Answer:
    """One model call, retried on transient errors; compaction before it when the window is
    nearly full; on overflow, compact or prune and retry when configured."""
    overflows = 0
    while True:
        if run.config.context_overflow == "compact":
            await compact_if_due(run, controls)  # COMPACTION: before the window is full
        request = build_request(run)
        check_context_usage(run)
        started = time.monotonic()
        try:
            return await _with_retry(run, request)
        except ContextLengthError as exc:
            mode = run.config.context_overflow
            if mode == "compact":
                overflows += 1
                await compact_after_overflow(run, controls, exc, overflows)  # COMPACTION: the recovery
                continue
            if mode != "prune":
                raise
            messages = run.history.messages
            pruned = prune_messages(messages)
            if pruned is None:
                raise ContextOverflowError(
                    "the context is still too long for the model after pruning: only the system messages, "
                    f"the first user message and the latest exchange are left ({len(messages)} "
                    f"messages, about {run.context_chars // 4} tokens). Start a new session "
                    "or shorten the task."
                ) from exc
            await controls.before_prune(run, messages)  # CONTROL: before_prune
            run.history.replace_messages(pruned.messages)
            run.context.reset()
            run.emit(ContextPruned(pruned.dropped_messages, pruned.dropped_chars, len(pruned.messages), exc))
        finally:
            run.api_seconds += time.monotonic() - started


def build_request(run: RunState) -> Request:
    profile = run.profile
    tools = run.tool_definitions()
    history = run.history
    messages, unchanged = history.request_messages(run.request_system_message())
    return Request(
        model=run.model,
        messages=messages,
        provider=profile.provider or profile.id,
        tools=tools or None,
        tool_choice=_AUTO if tools else None,
        # Read at every call, so changes apply at once; the profile may supply a default.
        reasoning_effort=run.config.reasoning_effort or profile.reasoning_effort,
        provider_options=profile.provider_options(),
        # What the adapter made of the previous request's messages stays good for these.
        conversation=history.conversation,
        unchanged=unchanged,
    )


def check_context_usage(run: RunState) -> None:
    window = run.profile.context_window_size
    due = run.context.check(run.context_chars, window, run.config.context_warning_threshold)
    if due is not None:
        tokens, fraction = due
        run.emit(
            WarningEvent(
                "context_usage",
                f"Context usage at ~{round(fraction * 100)}% of context window",
                {"estimated_tokens": tokens, "context_window_size": window},
            )
        )


async def _with_retry(run: RunState, request: Request) -> Answer:
    from ra.llm.retrying import retry

    policy = run.retry_policy()
    return await with_fallback(run, request, lambda req: retry(lambda: _model_once(run, req), policy))


async def _model_once(run: RunState, request: Request) -> Response:
    run.partial_output = False
    stream = run.config.stream
    if stream is None:
        stream = run.profile.supports_streaming
    if not stream:
        return await run.client().complete(request)
    return await stream_response(run, request)


async def stream_response(run: RunState, request: Request) -> Response:
    """Stream the call, emitting text and reasoning as they arrive; rebuild the Response."""
    acc = StreamAccumulator(provider=request.provider or "", model=request.model)
    started = False
    emit = run.emit
    events = run.client().stream(request)
    try:
        async for event in events:
            acc.process(event)
            kind = event.type
            if kind == _T.TEXT_DELTA:
                if not started:
                    started = True
                    emit(AssistantTextStart())
                if event.delta:
                    run.partial_output = True
                    emit(AssistantTextDelta(event.delta))
            elif kind == _T.TEXT_START:
                if not started:
                    started = True
                    emit(AssistantTextStart())
            elif kind == _T.REASONING_DELTA:
                if event.reasoning_delta:
                    emit(AssistantReasoningDelta(event.reasoning_delta))
            elif kind == _T.ERROR:
                raise event.error or StreamError("the provider reported an error in the stream")
            if kind in _SHAPE_EVENTS:
                emit(_shape_event(event))
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()  # on abort this closes the connection
    return acc.response()


#: Stream events a host needs besides the text and reasoning deltas to rebuild the blocks.
_SHAPE_EVENTS = frozenset(
    {
        _T.STREAM_START,
        _T.TEXT_START,
        _T.TEXT_END,
        _T.REASONING_START,
        _T.REASONING_END,
        _T.TOOL_CALL_START,
        _T.TOOL_CALL_DELTA,
        _T.TOOL_CALL_END,
        _T.FINISH,
    }
)


def _shape_event(event: LLMStreamEvent) -> AssistantStreamEvent:
    call = event.tool_call
    finish = event.finish_reason
    return AssistantStreamEvent(
        str(event.type),
        call.id if call is not None else event.text_id,
        call.name if call is not None else None,
        event.delta if event.type == _T.TOOL_CALL_DELTA else None,
        finish.reason if finish is not None else None,
        event.usage,
    )


# --------------------------------------------------------------------------------------------------
# execute_tools: the tool round
# --------------------------------------------------------------------------------------------------


async def execute_tools(run: RunState, calls: list[ToolCall]) -> list[ToolCallOutcome]:
    """Answer every call, in call order: run, skip (steering, a stop), or refuse (per-step limit)."""
    pipeline = run.pipeline
    pipeline.registry = run.profile.tool_registry
    limit = _stricter(run.config.max_tool_calls_per_step, run.profile.max_tool_calls_per_step)
    runnable = calls if limit is None else calls[:limit]
    over_limit = [] if limit is None else calls[limit:]

    outcomes: list[ToolCallOutcome]
    if run.config.steering_mode == "between_calls":
        # pi-agent: check steering after each call; skip the rest explicitly when it arrived.
        outcomes = []
        for index, call in enumerate(runnable):
            outcomes.append(await pipeline.run(call))
            if (run.steering or outcomes[-1].interrupt) and index + 1 < len(runnable):
                reason = _SKIPPED_FOR_STEERING if run.steering else _SKIPPED_FOR_DENIAL
                outcomes.extend(pipeline.skip(rest, reason) for rest in runnable[index + 1 :])
                break
    elif len(runnable) > 1 and run.profile.supports_parallel_tool_calls:
        outcomes = await run_parallel_round(pipeline, runnable)
    else:
        outcomes = []
        for index, call in enumerate(runnable):
            outcomes.append(await pipeline.run(call))
            if outcomes[-1].interrupt and index + 1 < len(runnable):
                outcomes.extend(pipeline.skip(rest, _SKIPPED_FOR_DENIAL) for rest in runnable[index + 1 :])
                break

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
    """Check every call one at a time, then run the allowed ones: together where that is safe,
    in the model's order where it is not.

    Checks come first and in order (a permission prompt must not fire several times at once).
    Then calls whose tool edits files (``ToolEffect.EDIT``) are barriers: each runs alone, after
    every call before it finished and before any call after it starts. The calls between two
    barriers (reads, searches, commands) run together. Without this, two edits of one file read
    the same old content and the second write silently drops the first one's change.
    """
    from ra.tools.pipeline import PreparedCall

    prepared: list[PreparedCall | ToolCallOutcome] = []
    for index, call in enumerate(calls):
        item = await pipeline.prepare(call)
        prepared.append(item)
        if isinstance(item, ToolCallOutcome) and item.interrupt:
            prepared.extend(pipeline.skip(rest, _SKIPPED_FOR_DENIAL) for rest in calls[index + 1 :])
            break

    outcomes: list[ToolCallOutcome | None] = [item if isinstance(item, ToolCallOutcome) else None for item in prepared]
    batch: list[tuple[int, PreparedCall]] = []

    async def flush() -> None:
        results = await asyncio.gather(*(pipeline.execute(p) for _, p in batch))
        for (position, _), outcome in zip(batch, results, strict=True):
            outcomes[position] = outcome
        batch.clear()

    for position, item in enumerate(prepared):
        if isinstance(item, ToolCallOutcome):
            continue
        if item.tool.exclusive:
            if batch:
                await flush()
            outcomes[position] = await pipeline.execute(item)
        else:
            batch.append((position, item))
    if batch:
        await flush()
    return [o for o in outcomes if o is not None]


_SKIPPED_FOR_STEERING = (
    "Skipped: the user sent a new message before this tool call ran, so it was not executed. "
    "Read the user's message, then decide whether this call is still needed."
)
_SKIPPED_FOR_DENIAL = "Skipped: an earlier call of this round was denied and the run was stopped there."


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _stricter(a: int | None, b: int | None) -> int | None:
    """The tighter of two optional limits (None = no limit)."""
    if a is None:
        return b
    return a if b is None else min(a, b)

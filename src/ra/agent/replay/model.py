"""The replay's model: a provider adapter that answers each model call with the next recorded reply.

It sits on an ordinary ``ra.llm`` Client, so the session's loop, retries and streaming are the
real ones. A call the record does not have raises :class:`ReplayDiverged`; a call from any other
session than the one it answers is refused the same way, so it can never take that session's
recorded replies (each replayed subagent has a model and a client of its own, on its own record).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from ra.llm.types import (
    ContentKind,
    ContentPart,
    FinishReason,
    Message,
    Request,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
)

from .plan import InputPlan, StepPlan

if TYPE_CHECKING:
    from ..history import History
    from ..session import Session

__all__ = ["RecordedModel", "ReplayDiverged"]


class ReplayDiverged(Exception):
    """Raised by :class:`RecordedModel` for a model call the record cannot answer. Not an
    ``ra.llm`` error: it is not retried, moves to no fallback model, and does not close the session
    (the input ends with stop reason ``error``)."""


class RecordedModel:
    """A provider adapter that answers with recorded replies, one input at a time."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: The session it answers (calls from any other, a subagent's, are refused); or, for a
        #: session the replay does not hold (a subagent), that session's history.
        self.session: Session | None = None
        self.history: History | None = None
        self._input: InputPlan | None = None
        #: Replies of the current input used so far.
        self.used = 0
        #: The step answered last (the one whose tools run now).
        self.current: StepPlan | None = None
        #: Called with the input and the last step when a call could not be answered (to report it).
        self.on_divergence: Callable[[InputPlan | None, StepPlan | None], None] | None = None

    @property
    def last_step(self) -> int | None:
        return self.current.number if self.current is not None else None

    def begin(self, planned: InputPlan) -> None:
        self._input = planned
        self.used = 0

    def peek(self) -> StepPlan | None:
        """The step the next call of this input would be answered with."""
        planned = self._input
        if planned is None or self.used >= len(planned.steps):
            return None
        return planned.steps[self.used]

    def answer(self, request: Request) -> Response:
        history = self.history if self.history is not None else self.session.history if self.session else None
        context = history.messages if history is not None else []
        if not (context and request.messages and request.messages[-1] is context[-1]):
            raise ReplayDiverged(
                "a replay answers only the model calls of the session whose record it holds; this call is another's"
            )
        step = self.peek()
        if step is None:
            if self.on_divergence is not None:
                self.on_divergence(self._input, self.current)
            raise ReplayDiverged("the record has no reply for this model call")
        self.used += 1
        self.current = step
        return _response(step, request, self.name)

    async def complete(self, request: Request) -> Response:
        return self.answer(request)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """The recorded reply as a stream: its text, then FINISH carrying the whole response (so
        the provider message, with its tool calls and reasoning, is kept as recorded)."""
        response = self.answer(request)
        T = StreamEventType
        yield StreamEvent(T.STREAM_START)
        if response.text:
            yield StreamEvent(T.TEXT_START, text_id="0")
            yield StreamEvent(T.TEXT_DELTA, delta=response.text, text_id="0")
            yield StreamEvent(T.TEXT_END, text_id="0")
        yield StreamEvent(T.FINISH, finish_reason=response.finish_reason, usage=response.usage, response=response)


def _response(step: StepPlan, request: Request, provider: str) -> Response:
    turn = step.reply
    message = turn.message
    if message is None:
        parts: list[ContentPart] = []
        if turn.reasoning:
            parts.append(ContentPart.of_thinking(ThinkingData(turn.reasoning, None)))
        if turn.content:
            parts.append(ContentPart(ContentKind.TEXT, text=turn.content))
        parts.extend(ContentPart(ContentKind.TOOL_CALL, tool_call=c.to_data()) for c in turn.tool_calls)
        message = Message(Role.ASSISTANT, parts)
    else:
        message = Message(message.role, list(message.content), message.name, message.tool_call_id)
    reason = "tool_calls" if turn.tool_calls else "stop"
    return Response(
        id=turn.response_id or f"replay-{step.number}",
        model=request.model,
        provider=provider,
        message=message,
        finish_reason=FinishReason(reason, reason),
        usage=turn.usage,
    )

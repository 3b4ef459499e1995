"""A deterministic, in-process ``ProviderAdapter`` for tests: scripted replies, recorded requests.

Use it to test anything built on ra (your own agent included) without a network::

    from ra.llm.testing import ScriptedAdapter, reply, call

    model = ScriptedAdapter([call("read_file", path="a.txt"), reply("done")])
    client = Client(providers={"scripted": model})

Each model call consumes the next step. A step is a reply (text and/or tool calls, optional
reasoning), an error to raise, or a function of the request that returns a step (to answer
according to what was sent). ``stream()`` turns the same step into the event sequence a real
adapter produces, so streaming consumers are exercised too.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigurationError
from .types import (
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
    ToolCall,
    ToolCallData,
    Usage,
)

__all__ = ["ScriptedAdapter", "Step", "call", "calls", "fail", "reply"]

_ids = itertools.count(1)


@dataclass(slots=True)
class Step:
    """One scripted model answer."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_signature: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    #: Raise this instead of answering (before any stream event, like a refused request).
    error: Exception | None = None
    #: Raise this after the text has been streamed (a stream that breaks off midway).
    stream_error: Exception | None = None
    #: Seconds to wait before answering (lets tests abort or steer an in-flight call).
    delay: float = 0.0
    #: Split streamed text into deltas of this many characters.
    chunk_size: int = 8

    def response(self, request: Request, provider: str) -> Response:
        parts: list[ContentPart] = []
        if self.reasoning is not None:
            parts.append(ContentPart.of_thinking(ThinkingData(self.reasoning, self.reasoning_signature)))
        if self.text:
            parts.append(ContentPart(ContentKind.TEXT, text=self.text))
        parts.extend(ContentPart(ContentKind.TOOL_CALL, tool_call=c.to_data()) for c in self.tool_calls)
        reason = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        usage = self.usage or _estimate_usage(request, self)
        return Response(
            id=f"scripted-{next(_ids)}",
            model=request.model,
            provider=provider,
            message=Message(Role.ASSISTANT, parts),
            finish_reason=FinishReason(reason, reason),
            usage=usage,
        )


StepLike = Step | Response | Exception | Callable[[Request], "Step | Response | Exception"]


def reply(text: str, **kwargs: Any) -> Step:
    """A text answer (natural completion)."""
    return Step(text=text, **kwargs)


def call(name: str, /, _id: str | None = None, **arguments: Any) -> Step:
    """An answer that calls one tool with keyword ``arguments``."""
    return Step(tool_calls=[ToolCall(_id or f"call_{next(_ids)}", name, arguments)])


def calls(*specs: tuple[str, dict[str, Any]] | ToolCall, text: str = "", **kwargs: Any) -> Step:
    """An answer with several tool calls: ``(name, arguments)`` pairs or ready ToolCalls. A
    ToolCall with ``raw_arguments`` and ``arguments_error`` set simulates malformed JSON."""
    out = [s if isinstance(s, ToolCall) else ToolCall(f"call_{next(_ids)}", s[0], dict(s[1])) for s in specs]
    return Step(text=text, tool_calls=out, **kwargs)


def fail(error: Exception, **kwargs: Any) -> Step:
    return Step(error=error, **kwargs)


def _estimate_usage(request: Request, step: Step) -> Usage:
    """Rough token counts (4 characters a token) so context-window logic has numbers to use."""
    chars = 0
    for message in request.messages:
        for part in message.content:
            if part.text:
                chars += len(part.text)
            elif part.tool_result is not None:
                chars += len(str(part.tool_result.content))
            elif part.tool_call is not None:
                chars += len(str(part.tool_call.arguments)) + len(part.tool_call.name)
    inp = chars // 4 + 1
    out = (len(step.text) + sum(len(str(c.arguments)) for c in step.tool_calls)) // 4 + 1
    return Usage(input_tokens=inp, output_tokens=out, total_tokens=inp + out)


class ScriptedAdapter:
    """Replays ``script`` one step per model call and records every request in ``requests``.

    When the script runs out, ``default`` answers (or a ConfigurationError is raised, so a test
    that makes more calls than it scripted fails loudly).
    """

    def __init__(
        self,
        script: Iterable[StepLike] = (),
        *,
        name: str = "scripted",
        default: StepLike | None = None,
    ) -> None:
        self.name = name
        self.script: list[StepLike] = list(script)
        self.default = default
        self.requests: list[Request] = []
        self.closed = False

    def add(self, *steps: StepLike) -> None:
        self.script.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self.script)

    def _next(self, request: Request) -> Step | Response:
        self.requests.append(request)
        if self.script:
            item = self.script.pop(0)
        elif self.default is not None:
            item = self.default
        else:
            raise ConfigurationError(f"ScriptedAdapter: script exhausted after {len(self.requests) - 1} calls")
        if callable(item) and not isinstance(item, (Step, Response, Exception)):
            item = item(request)
        if isinstance(item, Exception):
            return Step(error=item)
        return item

    async def complete(self, request: Request) -> Response:
        step = self._next(request)
        if isinstance(step, Response):
            return step
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.error is not None:
            raise step.error
        if step.stream_error is not None:
            raise step.stream_error
        return step.response(request, self.name)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        step = self._next(request)
        if isinstance(step, Response):
            response = step
            step = Step(text=response.text, tool_calls=response.tool_calls)
        else:
            if step.delay:
                await asyncio.sleep(step.delay)
            if step.error is not None:
                raise step.error
            response = step.response(request, self.name)
        T = StreamEventType
        yield StreamEvent(T.STREAM_START)
        for part in response.message.content:
            if part.kind in (ContentKind.THINKING, ContentKind.REDACTED_THINKING) and part.thinking:
                yield StreamEvent(T.REASONING_START)
                yield StreamEvent(T.REASONING_DELTA, reasoning_delta=part.thinking.text)
                yield StreamEvent(T.REASONING_END, thinking=part.thinking)
            elif part.kind == ContentKind.TEXT and part.text:
                yield StreamEvent(T.TEXT_START, text_id="0")
                size = max(1, step.chunk_size)
                for i in range(0, len(part.text), size):
                    yield StreamEvent(T.TEXT_DELTA, delta=part.text[i : i + size], text_id="0")
                    await asyncio.sleep(0)
                yield StreamEvent(T.TEXT_END, text_id="0")
            elif part.tool_call is not None:
                data: ToolCallData = part.tool_call
                call_ = ToolCall.from_data(data)
                head = ToolCall(call_.id, call_.name)
                yield StreamEvent(T.TOOL_CALL_START, tool_call=head)
                raw = data.arguments if isinstance(data.arguments, str) else _json(data.arguments)
                yield StreamEvent(T.TOOL_CALL_DELTA, tool_call=head, delta=raw)
                yield StreamEvent(T.TOOL_CALL_END, tool_call=call_)
        if step.stream_error is not None:
            raise step.stream_error
        yield StreamEvent(T.FINISH, finish_reason=response.finish_reason, usage=response.usage, response=response)

    async def close(self) -> None:
        self.closed = True


def _json(value: Any) -> str:
    import json

    return json.dumps(value)

"""StreamAccumulator (spec 4.4): fold stream events back into the Response ``complete()`` gives.

Adapters use it to build the response their FINISH event carries, and callers use it to turn any
stream into a Response. Parts keep the order in which their segments *started*, which matters:
Anthropic rejects a turn whose signed thinking block no longer precedes its tool_use blocks.
Work per event is constant: deltas are appended to lists and joined once, at the end.
"""

from __future__ import annotations

from dataclasses import replace

from .call_ids import renumber_duplicate_call_ids, unused_id
from .types import (
    ContentKind,
    ContentPart,
    FinishReason,
    Message,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCall,
    ToolCallData,
    Usage,
    Warning,
)

__all__ = ["StreamAccumulator"]

_T = StreamEventType


class _Segment:
    __slots__ = ("buf", "call", "ended", "kind", "rename", "thinking")

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "text" | "reasoning" | "tool"
        self.buf: list[str] = []
        self.call: ToolCall | None = None
        self.thinking: ThinkingData | None = None
        self.ended = False  # a tool call's TOOL_CALL_END was seen
        self.rename: str | None = None  # the id a duplicate call was given (ra.llm.call_ids)


class StreamAccumulator:
    def __init__(self, provider: str = "", model: str = "", response_id: str = "") -> None:
        self.provider = provider
        self.model = model
        self.response_id = response_id
        self._segments: list[_Segment] = []
        self._text: dict[str | None, _Segment] = {}
        self._reasoning: _Segment | None = None
        self._tools: dict[str, _Segment] = {}
        self.finish_reason: FinishReason | None = None
        self.usage: Usage | None = None
        self.warnings: list[Warning] = []
        self.final: Response | None = None

    # -- feeding -------------------------------------------------------------------------------
    def process(self, event: StreamEvent) -> None:
        kind = event.type
        if kind == _T.TEXT_DELTA:
            seg = self._text.get(event.text_id)
            if seg is None:
                seg = self._open_text(event.text_id)
            seg.buf.append(event.delta or "")
        elif kind == _T.REASONING_DELTA:
            seg = self._reasoning or self._open_reasoning()
            seg.buf.append(event.reasoning_delta or "")
        elif kind == _T.TOOL_CALL_DELTA:
            call = event.tool_call
            if call is not None:
                seg = self._tools.get(call.id) or self._open_tool(call)
                seg.buf.append(event.delta or "")
        elif kind == _T.TEXT_START:
            if event.text_id not in self._text:
                self._open_text(event.text_id)
        elif kind == _T.TEXT_END:
            self._text.pop(event.text_id, None)
        elif kind == _T.REASONING_START:
            self._open_reasoning()
        elif kind == _T.REASONING_END:
            seg = self._reasoning or self._open_reasoning()
            if event.thinking is not None:
                seg.thinking = event.thinking
            self._reasoning = None
        elif kind == _T.TOOL_CALL_START:
            call = event.tool_call
            if call is not None:
                seg = self._tools.get(call.id)
                if seg is None:
                    self._open_tool(call)
                elif seg.ended:
                    # A second call with an id already used in this reply: a call of its own
                    # (renamed: see ra.llm.call_ids), never merged into the first.
                    taken = {s.call.id for s in self._segments if s.call is not None}
                    self._open_tool(call, rename=unused_id(call.id, taken))
        elif kind == _T.TOOL_CALL_END:
            call = event.tool_call
            if call is not None:
                seg = self._tools.get(call.id) or self._open_tool(call)
                if seg.rename is not None:
                    call = replace(call, id=seg.rename)
                seg.call = call
                seg.buf = []
                seg.ended = True
        elif kind == _T.STREAM_START:
            if event.warnings:
                self.warnings.extend(event.warnings)
        elif kind == _T.FINISH:
            self.finish_reason = event.finish_reason or self.finish_reason
            self.usage = event.usage or self.usage
            if event.response is not None:
                self.final = event.response

    def _open_text(self, text_id: str | None) -> _Segment:
        seg = _Segment("text")
        self._text[text_id] = seg
        self._segments.append(seg)
        return seg

    def _open_reasoning(self) -> _Segment:
        seg = _Segment("reasoning")
        self._reasoning = seg
        self._segments.append(seg)
        return seg

    def _open_tool(self, call: ToolCall, rename: str | None = None) -> _Segment:
        seg = _Segment("tool")
        seg.rename = rename
        seg.call = ToolCall(rename or call.id, call.name, {}, None, call.type, None, call.provider_data)
        self._tools[call.id] = seg  # later events name the wire id: they go to the newest call
        self._segments.append(seg)
        return seg

    # -- reading -------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        return "".join("".join(s.buf) for s in self._segments if s.kind == "text")

    def message(self) -> Message:
        parts: list[ContentPart] = []
        for seg in self._segments:
            if seg.kind == "text":
                text = "".join(seg.buf)
                if text:
                    parts.append(ContentPart(ContentKind.TEXT, text=text))
            elif seg.kind == "reasoning":
                thinking = seg.thinking
                if thinking is None:
                    thinking = ThinkingData("".join(seg.buf))
                elif not thinking.text and seg.buf and not thinking.redacted:
                    thinking = ThinkingData("".join(seg.buf), thinking.signature, False, thinking.provider_data)
                parts.append(ContentPart.of_thinking(thinking))
            else:
                call = seg.call
                assert call is not None
                if seg.buf:  # no TOOL_CALL_END: build the call from its deltas
                    call = ToolCall.from_data(ToolCallData(call.id, call.name, "".join(seg.buf), call.type))
                    call.provider_data = seg.call.provider_data if seg.call else None
                parts.append(ContentPart(ContentKind.TOOL_CALL, tool_call=call.to_data()))
        return Message(Role.ASSISTANT, parts)

    def response(self) -> Response:
        """The accumulated response (the adapter's own final response when it sent one), each
        tool call with an id of its own (:mod:`ra.llm.call_ids`)."""
        if self.final is not None:
            renumber_duplicate_call_ids(self.final.message)
            return self.final
        message = self.message()
        renumber_duplicate_call_ids(message)
        reason = self.finish_reason
        if reason is None:
            has_calls = any(p.kind == ContentKind.TOOL_CALL for p in message.content)
            reason = FinishReason("tool_calls" if has_calls else "stop", None)
        return Response(
            id=self.response_id,
            model=self.model,
            provider=self.provider,
            message=message,
            finish_reason=reason,
            usage=self.usage or Usage(),
            warnings=list(self.warnings),
        )

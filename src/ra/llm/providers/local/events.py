"""Turning the worker's items into ra's unified stream events.

The worker thread reports in small tuples (``("text", delta)``, ``("call_end", id, name, raw,
complete)``, ``("finish", reason, ...)``) that cross the thread boundary cheaply. On the event
loop, :class:`EventBuilder` turns them into :class:`StreamEvent` objects and folds those into a
:class:`StreamAccumulator`, so that FINISH carries the whole Response. Kept apart from the adapter
because it knows nothing of llama.cpp: only the item protocol and ra's event types.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Protocol

from ...accumulator import StreamAccumulator
from ...types import FinishReason, StreamEvent, StreamEventType, ToolCall, ToolCallData, Usage
from .loading import PROVIDER


class ModelFacts(Protocol):
    """What the builder reports about the loaded model (the adapter provides it; naming the
    adapter's type here would make this module and the adapter depend on each other)."""

    @property
    def model_path(self) -> Path | None: ...
    @property
    def active_format(self) -> str: ...
    @property
    def n_ctx(self) -> int | None: ...


_T = StreamEventType


class EventBuilder:
    """Turns worker items into unified stream events, folding them into a StreamAccumulator so
    FINISH can carry the whole Response."""

    def __init__(self, provider: str, model: str, adapter: ModelFacts) -> None:
        self.adapter = adapter
        self.model = model
        self.acc = StreamAccumulator(provider, model, f"local-{uuid.uuid4().hex[:16]}")
        self.text_id: str | None = None
        self.texts = 0
        self.calls: dict[str, ToolCall] = {}

    def _event(self, event: StreamEvent, out: list[StreamEvent]) -> None:
        self.acc.process(event)
        out.append(event)

    def _close_text(self, out: list[StreamEvent]) -> None:
        if self.text_id is not None:
            self._event(StreamEvent(_T.TEXT_END, text_id=self.text_id), out)
            self.text_id = None

    def feed(self, item: tuple[Any, ...]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        kind = item[0]
        if kind == "start":
            if not self.model:
                path = self.adapter.model_path
                self.acc.model = self.model = path.stem if path is not None else PROVIDER
            self._event(StreamEvent(_T.STREAM_START, warnings=list(item[1]) or None), out)
        elif kind == "text":
            if self.text_id is None:
                self.text_id = f"text_{self.texts}"
                self.texts += 1
                self._event(StreamEvent(_T.TEXT_START, text_id=self.text_id), out)
            self._event(StreamEvent(_T.TEXT_DELTA, delta=item[1], text_id=self.text_id), out)
        elif kind == "call_start":
            self._close_text(out)
            head = ToolCall(item[1], item[2])
            self.calls[item[1]] = head
            self._event(StreamEvent(_T.TOOL_CALL_START, tool_call=head), out)
        elif kind == "call_delta":
            self._event(StreamEvent(_T.TOOL_CALL_DELTA, delta=item[3], tool_call=self.calls[item[1]]), out)
        elif kind == "call_end":
            _, call_id, name, raw, _complete = item
            self._event(StreamEvent(_T.TOOL_CALL_END, tool_call=_finished_call(call_id, name, raw)), out)
        elif kind == "finish":
            self._close_text(out)
            _, reason, prompt_tokens, produced, cached = item
            usage = Usage(prompt_tokens, produced, prompt_tokens + produced, cache_read_tokens=cached)
            finish = FinishReason(reason, reason)
            self.acc.finish_reason = finish
            self.acc.usage = usage
            response = self.acc.response()
            response.raw = {
                "model_path": str(self.adapter.model_path),
                "chat_format": self.adapter.active_format,
                "n_ctx": self.adapter.n_ctx,
            }
            self._event(StreamEvent(_T.FINISH, finish_reason=finish, usage=usage, response=response), out)
        return out


def _finished_call(call_id: str, name: str, raw: str) -> ToolCall:
    """The call as parsed. The grammar guarantees JSON, but llama.cpp's JSON grammar lets raw
    control characters into strings, which strict JSON forbids: parse leniently, so such a call
    is still a call. Arguments cut off by the token limit stay raw and carry an error."""
    try:
        value = json.loads(raw, strict=False)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return ToolCall(call_id, name, value, raw)
    return ToolCall.from_data(ToolCallData(call_id, name, raw))

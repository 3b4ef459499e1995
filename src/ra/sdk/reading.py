"""Reading a message stream back: the JSON that ``to_json()`` writes, as typed messages again.

``ra --output-format stream-json`` and a host that saves each message's ``to_json()`` both write
one JSON object per message. :func:`parse_message` turns such an object back into the
:mod:`ra.sdk.messages` dataclass it came from, and :func:`read_messages` does it for the lines
of a file or a pipe (a Python program driving ``ra`` as a subprocess gets the same typed messages
as one calling :func:`ra.sdk.query`). What was written is what comes back:
``parse_message(m.to_json()).to_json() == m.to_json()`` for every message ra writes.

Strict where ra's own fields are concerned - a missing field or a value of the wrong type is a
:class:`MessageFormatError` naming it (``assistant.message.content[1].input``), never a
``KeyError`` - and lenient about additions: unknown keys are ignored, so a newer writer's extra
fields do not break an older reader. An unknown message ``type`` is an error: a reader cannot
know what it means.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ra.llm.fields import json_field, json_object
from ra.llm.types import Usage

from .messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolProgressMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

__all__ = ["MessageFormatError", "parse_message", "read_messages"]


class MessageFormatError(ValueError):
    """A message object that is not what ra writes; the message names the field."""


def _get(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    kinds = types if isinstance(types, tuple) else (types,)
    return json_field(obj, key, kinds, where, required=True, error=MessageFormatError)


def _opt(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    return json_field(obj, key, types if isinstance(types, tuple) else (types,), where, error=MessageFormatError)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    return json_object(value, where, MessageFormatError)


def _usage(obj: Mapping[str, Any], where: str) -> Usage:
    raw = _object(_get(obj, "usage", dict, where), f"{where}.usage")
    inp = _get(raw, "input_tokens", int, f"{where}.usage")
    out = _get(raw, "output_tokens", int, f"{where}.usage")
    return Usage(
        inp,
        out,
        inp + out,
        cache_read_tokens=_opt(raw, "cache_read_input_tokens", int, f"{where}.usage"),
        cache_write_tokens=_opt(raw, "cache_creation_input_tokens", int, f"{where}.usage"),
    )


def _block(raw: Any, where: str) -> ContentBlock:
    block = _object(raw, where)
    kind = _get(block, "type", str, where)
    if kind == "text":
        return TextBlock(_get(block, "text", str, where))
    if kind == "thinking":
        return ThinkingBlock(_get(block, "thinking", str, where))
    if kind == "tool_use":
        return ToolUseBlock(
            _get(block, "id", str, where), _get(block, "name", str, where), _get(block, "input", dict, where)
        )
    raise MessageFormatError(f"{where}.type: unknown content block {kind!r}")


def _result_block(raw: Any, where: str) -> ToolResultBlock:
    block = _object(raw, where)
    if _get(block, "type", str, where) != "tool_result":
        raise MessageFormatError(f"{where}.type: expected 'tool_result'")
    return ToolResultBlock(
        _get(block, "tool_use_id", str, where), _get(block, "content", str, where), _get(block, "is_error", bool, where)
    )


def parse_message(data: Any) -> Message:
    """The typed message a ``to_json()`` object stands for (see the module docstring)."""
    obj = _object(data, "message")
    kind = _get(obj, "type", str, "message")
    sid = _get(obj, "session_id", str, kind)
    uuid = _get(obj, "uuid", str, kind)
    if kind == "system":
        extra = {k: v for k, v in obj.items() if k not in ("type", "subtype", "session_id", "uuid")}
        return SystemMessage(_get(obj, "subtype", str, kind), sid, extra, uuid)
    parent = _opt(obj, "parent_tool_use_id", str, kind)
    if kind == "assistant":
        inner = _object(_get(obj, "message", dict, kind), "assistant.message")
        where = "assistant.message"
        content = _get(inner, "content", list, where)
        return AssistantMessage(
            [_block(b, f"{where}.content[{i}]") for i, b in enumerate(content)],
            _get(inner, "model", str, where),
            sid,
            _usage(inner, where),
            _opt(inner, "stop_reason", str, where),
            _opt(inner, "id", str, where),
            parent_tool_use_id=parent,
            uuid=uuid,
        )
    if kind == "user":
        inner = _object(_get(obj, "message", dict, kind), "user.message")
        raw = _get(inner, "content", (str, list), "user.message")
        blocks = (
            raw if isinstance(raw, str) else [_result_block(b, f"user.message.content[{i}]") for i, b in enumerate(raw)]
        )
        return UserMessage(blocks, sid, parent, uuid)
    if kind == "tool_progress":
        return ToolProgressMessage(
            _get(obj, "tool_use_id", str, kind),
            _get(obj, "tool_name", str, kind),
            float(_get(obj, "elapsed_time_seconds", (int, float), kind)),
            _get(obj, "status", str, kind),
            sid,
            parent,
            uuid,
        )
    if kind == "stream_event":
        return StreamEvent(dict(_get(obj, "event", dict, kind)), sid, parent, uuid)
    if kind == "result":
        fields: dict[str, Any] = {
            "subtype": _get(obj, "subtype", str, kind),
            "is_error": _get(obj, "is_error", bool, kind),
        }
        for name in ("duration_ms", "duration_api_ms", "num_turns"):
            fields[name] = _get(obj, name, int, kind)
        for name in ("result", "stop_reason", "ra_stop_reason"):
            fields[name] = _get(obj, name, str, kind)
        fields["total_cost_usd"] = float(_get(obj, "total_cost_usd", (int, float), kind))
        fields["usage"] = _usage(obj, kind)
        denials = _get(obj, "permission_denials", list, kind)
        fields["permission_denials"] = [
            dict(_object(d, f"result.permission_denials[{i}]")) for i, d in enumerate(denials)
        ]
        fields["errors"] = [str(e) for e in _opt(obj, "errors", list, kind) or []]
        return ResultMessage(session_id=sid, uuid=uuid, **fields)
    raise MessageFormatError(f"message.type: unknown message type {kind!r}")


def read_messages(lines: Iterable[str | bytes]) -> Iterator[Message]:
    """The messages of a JSON-lines stream (blank lines skipped); a line that is not JSON, or not
    a message, raises :class:`MessageFormatError` with its line number."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise MessageFormatError(f"line {number}: not JSON ({exc})") from None
        try:
            yield parse_message(data)
        except MessageFormatError as exc:
            raise MessageFormatError(f"line {number}: {exc}") from None

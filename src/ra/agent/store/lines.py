"""A step's entries straight to JSON lines: the recorder's per-step path.

An entry's line is defined as ``encode_entry(turn_to_entry(turn, ...))`` (:mod:`.format`,
:mod:`.encoding`). Every step of a session writes two entries, an ``assistant`` entry and a
``tool_results`` entry, and building their dicts only to encode them at once costs as much as
encoding them. :func:`turn_line` writes the same text for those two kinds directly, from the
turn's fields and pre-encoded pieces (a string through the C string encoder, an argument object
through the C encoder), and falls back to the dicts for every other kind. The text is the same
character for character (tests compare the two for every field and odd value), so a record does
not depend on which path wrote it.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from ra.llm.serialization import message_to_json

from ..history import AssistantTurn, ToolResultsTurn, Turn
from .encoding import encode_entry, encode_string, encode_value
from .format import is_plain_message, iso_time, turn_to_entry

__all__ = ["extra_json", "turn_line"]

_INF = math.inf


def _value(value: Any) -> str:
    """``value`` as strict compact JSON (the cheap cases first)."""
    kind = type(value)
    if kind is str:
        return encode_string(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    if kind is float and -_INF < value < _INF:
        return float.__repr__(value)
    return encode_value(value)


def extra_json(fields: dict[str, Any]) -> str:
    """``fields`` as the end of a line: ``,"key":value`` for each, then the closing brace.
    The keys must be ones the turn's own fields do not use (they are appended, not merged)."""
    return "".join([f",{encode_string(key)}:{_value(value)}" for key, value in fields.items()]) + "}"


def turn_line(turn: Turn, entry_id: str, parent_id: str | None, extra: dict[str, Any], tail: str | None = None) -> str:
    """The line of ``turn_to_entry(turn, entry_id, parent_id, **extra)`` (no newline).

    ``tail`` is ``extra_json(extra)`` when the caller has it already (the recorder keeps the
    model and provider part of it from step to step)."""
    kind = type(turn)
    if kind is AssistantTurn:
        body = _assistant(turn)  # type: ignore[arg-type]
        name = "assistant"
    elif kind is ToolResultsTurn:
        body = _results(turn)  # type: ignore[arg-type]
        name = "tool_results"
    else:
        return encode_entry(turn_to_entry(turn, entry_id, parent_id, **extra))
    parent = "null" if parent_id is None else _value(parent_id)
    return (
        f'{{"type":"{name}","id":{_value(entry_id)},"parent_id":{parent},"timestamp":"{iso_time(turn.timestamp)}"'
        f"{body}{extra_json(extra) if tail is None else tail}"
    )


def _assistant(turn: AssistantTurn) -> str:
    calls = turn.tool_calls
    text = ",".join([_call(call) for call in calls]) if calls else ""
    out = f',"content":{_value(turn.content)},"tool_calls":[{text}]'
    if turn.reasoning is not None:
        out += f',"reasoning":{_value(turn.reasoning)}'
    usage = turn.usage
    out += (
        f',"usage":{{"input_tokens":{_value(usage.input_tokens)},"output_tokens":{_value(usage.output_tokens)},'
        f'"total_tokens":{_value(usage.total_tokens)}'
    )
    if usage.reasoning_tokens is not None:
        out += f',"reasoning_tokens":{_value(usage.reasoning_tokens)}'
    if usage.cache_read_tokens is not None:
        out += f',"cache_read_tokens":{_value(usage.cache_read_tokens)}'
    if usage.cache_write_tokens is not None:
        out += f',"cache_write_tokens":{_value(usage.cache_write_tokens)}'
    out += "}"
    if turn.response_id is not None:
        out += f',"response_id":{_value(turn.response_id)}'
    if turn.message is not None and not is_plain_message(turn):
        out += f',"message":{encode_value(message_to_json(turn.message))}'
    return out


def _call(call: Any) -> str:
    out = f'{{"id":{_value(call.id)},"name":{_value(call.name)},"arguments":{encode_value(call.arguments)}'
    if call.raw_arguments is not None:
        out += f',"raw_arguments":{_value(call.raw_arguments)}'
    if call.arguments_error is not None:
        out += f',"arguments_error":{_value(call.arguments_error)}'
    if call.type != "function":
        out += f',"type":{_value(call.type)}'
    if call.provider_data is not None:
        out += f',"provider_data":{encode_value(call.provider_data)}'
    return out + "}"


def _results(turn: ToolResultsTurn) -> str:
    names = turn.names
    count = len(names)
    items = []
    for i, result in enumerate(turn.results):
        error = result.is_error
        text = (
            f'{{"tool_call_id":{_value(result.tool_call_id)},"content":{_value(result.content)},'
            f'"is_error":{"true" if error is True else "false" if error is False else _value(error)}'
        )
        name = names[i] if i < count else None
        if name:
            text += f',"name":{_value(name)}'
        if result.image_data is not None:
            text += f',"image_base64":"{base64.b64encode(result.image_data).decode("ascii")}"'
            text += f',"image_media_type":{_value(result.image_media_type)}'
        items.append(text + "}")
    return f',"results":[{",".join(items)}]'

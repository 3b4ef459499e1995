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

__all__ = ["extra_json", "turn_line", "value_json"]

_INF = math.inf
#: Strings are most of a line: encoded by this C function directly where a field is nearly
#: always one (``value_json`` for anything else), which saves a call per field per step.
_S = encode_string


def value_json(value: Any) -> str:
    """``value`` as strict compact JSON, as it is inside a line (the cheap cases first)."""
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
    return "".join([f",{encode_string(key)}:{value_json(value)}" for key, value in fields.items()]) + "}"


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
    eid = _S(entry_id) if type(entry_id) is str else value_json(entry_id)
    parent = "null" if parent_id is None else _S(parent_id) if type(parent_id) is str else value_json(parent_id)
    end = extra_json(extra) if tail is None else tail
    return f'{{"type":"{name}","id":{eid},"parent_id":{parent},"timestamp":"{iso_time(turn.timestamp)}"{body}{end}'


def _assistant(turn: AssistantTurn) -> str:
    calls = turn.tool_calls
    text = ",".join([_call(call) for call in calls]) if calls else ""
    content = turn.content
    out = f',"content":{_S(content) if type(content) is str else value_json(content)},"tool_calls":[{text}]'
    if turn.reasoning is not None:
        out += f',"reasoning":{value_json(turn.reasoning)}'
    usage = turn.usage
    given, taken, total = usage.input_tokens, usage.output_tokens, usage.total_tokens
    out += (
        f',"usage":{{"input_tokens":{str(given) if type(given) is int else value_json(given)},'
        f'"output_tokens":{str(taken) if type(taken) is int else value_json(taken)},'
        f'"total_tokens":{str(total) if type(total) is int else value_json(total)}'
    )
    if usage.reasoning_tokens is not None:
        out += f',"reasoning_tokens":{value_json(usage.reasoning_tokens)}'
    if usage.cache_read_tokens is not None:
        out += f',"cache_read_tokens":{value_json(usage.cache_read_tokens)}'
    if usage.cache_write_tokens is not None:
        out += f',"cache_write_tokens":{value_json(usage.cache_write_tokens)}'
    out += "}"
    if turn.response_id is not None:
        out += f',"response_id":{value_json(turn.response_id)}'
    if turn.message is not None and not is_plain_message(turn):
        out += f',"message":{encode_value(message_to_json(turn.message))}'
    return out


def _call(call: Any) -> str:
    cid, name = call.id, call.name
    cid = _S(cid) if type(cid) is str else value_json(cid)
    name = _S(name) if type(name) is str else value_json(name)
    out = f'{{"id":{cid},"name":{name},"arguments":{encode_value(call.arguments)}'
    if call.raw_arguments is not None:
        out += f',"raw_arguments":{value_json(call.raw_arguments)}'
    if call.arguments_error is not None:
        out += f',"arguments_error":{value_json(call.arguments_error)}'
    if call.type != "function":
        out += f',"type":{value_json(call.type)}'
    if call.provider_data is not None:
        out += f',"provider_data":{encode_value(call.provider_data)}'
    return out + "}"


def _results(turn: ToolResultsTurn) -> str:
    names = turn.names
    count = len(names)
    items = []
    for i, result in enumerate(turn.results):
        cid, content, error = result.tool_call_id, result.content, result.is_error
        cid = _S(cid) if type(cid) is str else value_json(cid)
        content = _S(content) if type(content) is str else value_json(content)
        error = "true" if error is True else "false" if error is False else value_json(error)
        text = f'{{"tool_call_id":{cid},"content":{content},"is_error":{error}'
        name = names[i] if i < count else None
        if name:
            text += f',"name":{_S(name) if type(name) is str else value_json(name)}'
        if result.image_data is not None:
            text += f',"image_base64":"{base64.b64encode(result.image_data).decode("ascii")}"'
            text += f',"image_media_type":{value_json(result.image_media_type)}'
        items.append(text + "}")
    return f',"results":[{",".join(items)}]'

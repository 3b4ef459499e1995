"""The session record's format, version 1: turns as JSON lines and back (docs/sessions.md).

A record is a sequence of JSON objects, one per line when kept in a file. The first is the
*header*; every other one is an *entry* with an ``id`` and the ``parent_id`` of the entry it
follows, so that one record can hold branches (a rewind starts a new child of an older entry):

    {"type": "session", "version": 1, "id": SESSION_ID, "timestamp": ISO, "cwd": ..., "ra_version": ...,
     "model": ..., "provider": ..., "profile": ..., "parent_session": null | {"id": ..., "entry_id": ...}}
    {"type": "user", "id": "5f0c2a9e", "parent_id": null, "timestamp": ISO, "content": "...", "images": [...]}
    {"type": "assistant", "id": ..., "parent_id": ..., "content": "...", "tool_calls": [...], "message": {...},
     "usage": {...}, "model": ..., "provider": ..., "cost_usd": 0.0012, "total_cost_usd": 0.0034}
    {"type": "tool_results", ..., "results": [{"tool_call_id", "name", "content", "is_error"}, ...]}

Turn entries (one per :class:`~ra.agent.history.Turn`): ``user``, ``assistant``,
``tool_results``, ``steering``, ``context``, ``system``, ``compaction``. Other entries, which add
no turn: ``config`` (the model, provider or another setting changed), ``label`` (a name for an
entry), ``custom`` (a host's own data, never sent to the model), ``input_end`` (how an input
ended). A reader skips entry types it does not know, so later versions may add some.

This module converts; it neither reads nor writes files (:mod:`ra.agent.store.files` does) and
holds no state. Bad input raises :class:`RecordFormatError` naming the field.
"""

from __future__ import annotations

import math
import secrets
from datetime import UTC, datetime
from typing import Any

from ra.llm.fields import json_field, json_object
from ra.llm.serialization import image_from_json, image_to_json, message_from_json, message_to_json
from ra.llm.types import ContentKind, ContentPart, Role, ToolCall, ToolCallData, ToolResult, Usage

from ..history import (
    AssistantTurn,
    CompactionTurn,
    ContextTurn,
    SteeringTurn,
    SystemTurn,
    ToolResultsTurn,
    Turn,
    UserTurn,
)

__all__ = [
    "FORMAT_VERSION",
    "TURN_TYPES",
    "RecordFormatError",
    "entry_type",
    "header",
    "is_plain_message",
    "is_turn_entry",
    "iso_time",
    "new_entry_id",
    "parse_time",
    "turn_from_entry",
    "turn_to_entry",
    "usage_from_json",
    "usage_to_json",
]

#: The version this module writes; a reader refuses a header with a newer one.
FORMAT_VERSION = 1

#: Entry types that hold a turn, by turn class.
TURN_TYPES: dict[type, str] = {
    UserTurn: "user",
    AssistantTurn: "assistant",
    ToolResultsTurn: "tool_results",
    SteeringTurn: "steering",
    ContextTurn: "context",
    SystemTurn: "system",
    CompactionTurn: "compaction",
}
_TURN_TYPE_NAMES = frozenset(TURN_TYPES.values())


class RecordFormatError(ValueError):
    """An entry or header that is not the documented shape (the message names the field)."""


def new_entry_id() -> str:
    """A new entry id: 8 hex digits (unique within a record; the writer retries on a clash)."""
    return secrets.token_hex(4)


#: (a whole second, its ISO text up to the seconds): the recorder stamps entries made within
#: the same second, so the date is formatted once per second rather than per entry.
_SECOND: tuple[int, str] = (-1, "")


def iso_time(timestamp: float) -> str:
    """``timestamp`` (seconds since the epoch) as ISO 8601 in UTC with milliseconds
    (``2026-01-02T03:04:05.678Z``; the same text as ``datetime.isoformat``, computed faster)."""
    global _SECOND
    # As datetime.fromtimestamp does: the fraction rounded (half to even) to microseconds,
    # then cut to milliseconds.
    whole = math.floor(timestamp)
    micros = round((timestamp - whole) * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    second = _SECOND
    if second[0] != whole:
        text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        second = _SECOND = (whole, text)
    return f"{second[1]}.{micros // 1000:03d}Z"


def parse_time(text: Any, where: str) -> float:
    if not isinstance(text, str):
        raise RecordFormatError(f"{where}: expected an ISO 8601 time, got {type(text).__name__}")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise RecordFormatError(f"{where}: not an ISO 8601 time: {text!r}") from None


def header(
    session_id: str,
    *,
    cwd: str,
    model: str,
    provider: str | None,
    profile: str,
    ra_version: str,
    timestamp: float,
    parent_session: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The first object of a record. ``parent_session`` names the record and entry a fork starts
    from; ``extra`` keys (e.g. ``agent_id`` for a subagent's record) are kept as they are."""
    out: dict[str, Any] = {
        "type": "session",
        "version": FORMAT_VERSION,
        "id": session_id,
        "timestamp": iso_time(timestamp),
        "cwd": cwd,
        "ra_version": ra_version,
        "model": model,
        "provider": provider,
        "profile": profile,
        "parent_session": parent_session,
    }
    out.update(extra)
    return out


def entry_type(entry: Any) -> str | None:
    """The ``type`` of a decoded line, or None when it has none."""
    if isinstance(entry, dict):
        kind = entry.get("type")
        return kind if isinstance(kind, str) else None
    return None


# -- turns to entries --------------------------------------------------------------------------------------


def usage_to_json(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    for name in ("reasoning_tokens", "cache_read_tokens", "cache_write_tokens"):
        value = getattr(usage, name)
        if value is not None:
            out[name] = value
    return out


def _call_json(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.raw_arguments is not None:
        out["raw_arguments"] = call.raw_arguments
    if call.arguments_error is not None:
        out["arguments_error"] = call.arguments_error
    if call.type != "function":
        out["type"] = call.type
    if call.provider_data is not None:
        out["provider_data"] = call.provider_data
    return out


def _result_json(result: ToolResult, name: str | None) -> dict[str, Any]:
    import base64

    out: dict[str, Any] = {"tool_call_id": result.tool_call_id, "content": result.content, "is_error": result.is_error}
    if name:
        out["name"] = name
    if result.image_data is not None:
        out["image_base64"] = base64.b64encode(result.image_data).decode("ascii")
        out["image_media_type"] = result.image_media_type
    return out


def is_plain_message(turn: AssistantTurn) -> bool:
    """Whether ``turn.message`` is exactly the message a reader makes from the entry's
    ``content`` and ``tool_calls`` (no thinking, no other parts, no reasoning): then the entry
    leaves ``message`` out rather than write the text and the calls twice. The turn read back has
    no message, and everything built from it (the context, a replay's answer, a resume on
    another provider) is the same as from the live turn.

    The same answer as ``message.content == plain_assistant_parts(turn)``, part by part without
    building those parts: the recorder asks at every step."""
    message = turn.message
    if (
        message is None
        or turn.reasoning is not None
        or message.role != Role.ASSISTANT
        or message.name is not None
        or message.tool_call_id is not None
    ):
        return False
    parts = message.content
    calls = turn.tool_calls
    text = turn.content
    first = 1 if text else 0
    if len(parts) != first + len(calls):
        return False
    if first and not _is_text_part(parts[0], text):
        return False
    for i, call in enumerate(calls, first):  # noqa: SIM110 - a loop, not all() over a generator: cheaper
        if not _is_call_part(parts[i], call):
            return False
    return True


def _is_bare(part: ContentPart) -> bool:
    """No image, audio, document, tool result or thinking: what a text or a call part leaves empty."""
    return (
        part.image is None
        and part.audio is None
        and part.document is None
        and part.tool_result is None
        and part.thinking is None
    )


def _is_text_part(part: Any, text: str) -> bool:
    """``part == ContentPart(ContentKind.TEXT, text=text)``."""
    return (
        type(part) is ContentPart
        and part.kind == ContentKind.TEXT
        and part.text == text
        and part.tool_call is None
        and _is_bare(part)
    )


def _is_call_part(part: Any, call: ToolCall) -> bool:
    """``part == ContentPart(ContentKind.TOOL_CALL, tool_call=call.to_data())``."""
    if type(part) is not ContentPart or part.kind != ContentKind.TOOL_CALL or part.text is not None:
        return False
    data = part.tool_call
    if type(data) is not ToolCallData or not _is_bare(part):
        return False
    arguments = (
        call.raw_arguments if call.arguments_error is not None and call.raw_arguments is not None else call.arguments
    )
    return (
        data.id == call.id
        and data.name == call.name
        and data.arguments == arguments
        and data.type == call.type
        and data.provider_data == call.provider_data
    )


def turn_to_entry(turn: Turn, entry_id: str, parent_id: str | None, **extra: Any) -> dict[str, Any]:
    """The entry for ``turn``: ``id``, ``parent_id``, ``timestamp`` and the turn's fields.

    ``extra`` adds fields the turn does not hold (on assistant entries the recorder adds
    ``model``, ``provider``, ``cost_usd`` and ``total_cost_usd``; on a compaction entry,
    ``first_kept_id``).
    """
    kind = TURN_TYPES.get(type(turn))
    if kind is None:
        raise TypeError(f"not a turn: {type(turn).__name__}")
    out: dict[str, Any] = {"type": kind, "id": entry_id, "parent_id": parent_id, "timestamp": iso_time(turn.timestamp)}
    if isinstance(turn, UserTurn):
        out["content"] = turn.content
        if turn.images:
            out["images"] = [image_to_json(image) for image in turn.images]
    elif isinstance(turn, AssistantTurn):
        out["content"] = turn.content
        out["tool_calls"] = [_call_json(c) for c in turn.tool_calls]
        if turn.reasoning is not None:
            out["reasoning"] = turn.reasoning
        out["usage"] = usage_to_json(turn.usage)
        if turn.response_id is not None:
            out["response_id"] = turn.response_id
        if turn.message is not None and not is_plain_message(turn):
            out["message"] = message_to_json(turn.message)
    elif isinstance(turn, ToolResultsTurn):
        names = turn.names
        out["results"] = [_result_json(r, names[i] if i < len(names) else None) for i, r in enumerate(turn.results)]
    elif isinstance(turn, ContextTurn):
        out["content"] = turn.content
        out["source"] = turn.source
    elif isinstance(turn, SteeringTurn | SystemTurn):
        out["content"] = turn.content
    elif isinstance(turn, CompactionTurn):
        out["summary"] = turn.summary
        out["first_kept"] = turn.first_kept
        out["tokens_before"] = turn.tokens_before
        out["tokens_after"] = turn.tokens_after
        out["trigger"] = turn.trigger
        out["user_messages"] = list(turn.user_messages)
        out["details"] = turn.details
    out.update(extra)
    return out


# -- entries to turns ----------------------------------------------------------------------------------------


def _field(obj: Any, key: str, types: tuple[type, ...], where: str, *, required: bool = False) -> Any:
    return json_field(obj, key, types, where, required=required, error=RecordFormatError)


def usage_from_json(obj: Any, where: str) -> Usage:
    if obj is None:
        return Usage()
    raw = json_object(obj, where, RecordFormatError)
    values = {}
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        value = _field(raw, name, (int,), where) or 0
        if value < 0:
            raise RecordFormatError(f"{where}.{name}: must be >= 0, got {value}")
        values[name] = value
    for name in ("reasoning_tokens", "cache_read_tokens", "cache_write_tokens"):
        values[name] = _field(raw, name, (int,), where)
    return Usage(**values)


def _call_from(obj: Any, where: str) -> ToolCall:
    raw = json_object(obj, where, RecordFormatError)
    arguments = _field(raw, "arguments", (dict,), where)
    return ToolCall(
        _field(raw, "id", (str,), where, required=True),
        _field(raw, "name", (str,), where, required=True),
        dict(arguments) if arguments is not None else {},
        _field(raw, "raw_arguments", (str,), where),
        _field(raw, "type", (str,), where) or "function",
        _field(raw, "arguments_error", (str,), where),
        _field(raw, "provider_data", (dict,), where),
    )


def _result_from(obj: Any, where: str) -> tuple[ToolResult, str]:
    import base64
    import binascii

    raw = json_object(obj, where, RecordFormatError)
    image = _field(raw, "image_base64", (str,), where)
    try:
        data = base64.b64decode(image, validate=True) if image is not None else None
    except (binascii.Error, ValueError):
        raise RecordFormatError(f"{where}.image_base64: not valid base64") from None
    result = ToolResult(
        _field(raw, "tool_call_id", (str,), where, required=True),
        _field(raw, "content", (str, dict, list), where, required=True),
        bool(_field(raw, "is_error", (bool,), where)),
        data,
        _field(raw, "image_media_type", (str,), where),
    )
    return result, _field(raw, "name", (str,), where) or ""


def is_turn_entry(entry: dict[str, Any]) -> bool:
    return entry.get("type") in _TURN_TYPE_NAMES


def turn_from_entry(entry: Any, where: str = "entry") -> Turn:
    """The turn an entry holds (raises :class:`RecordFormatError` for one that holds none or is malformed)."""
    raw = json_object(entry, where, RecordFormatError)
    kind = _field(raw, "type", (str,), where, required=True)
    stamp = raw.get("timestamp")
    timestamp = parse_time(stamp, f"{where}.timestamp") if stamp is not None else 0.0
    try:
        if kind == "user":
            images = _field(raw, "images", (list,), where) or []
            return UserTurn(
                _field(raw, "content", (str,), where, required=True),
                timestamp,
                tuple(image_from_json(image, f"{where}.images[{i}]") for i, image in enumerate(images)),
            )
        if kind == "assistant":
            calls = _field(raw, "tool_calls", (list,), where) or []
            message = raw.get("message")
            return AssistantTurn(
                _field(raw, "content", (str,), where) or "",
                [_call_from(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)],
                _field(raw, "reasoning", (str,), where),
                usage_from_json(raw.get("usage"), f"{where}.usage"),
                _field(raw, "response_id", (str,), where),
                timestamp,
                message_from_json(message) if message is not None else None,
            )
        if kind == "tool_results":
            items = _field(raw, "results", (list,), where, required=True)
            pairs = [_result_from(r, f"{where}.results[{i}]") for i, r in enumerate(items)]
            return ToolResultsTurn([r for r, _ in pairs], timestamp, [n for _, n in pairs])
        if kind == "steering":
            return SteeringTurn(_field(raw, "content", (str,), where, required=True), timestamp)
        if kind == "system":
            return SystemTurn(_field(raw, "content", (str,), where, required=True), timestamp)
        if kind == "context":
            return ContextTurn(
                _field(raw, "content", (str,), where, required=True),
                _field(raw, "source", (str,), where) or "",
                timestamp,
            )
        if kind == "compaction":
            first_kept = _field(raw, "first_kept", (int,), where, required=True)
            if first_kept < 0:
                raise RecordFormatError(f"{where}.first_kept: must be >= 0, got {first_kept}")
            users = _field(raw, "user_messages", (list,), where) or []
            if not all(isinstance(u, str) for u in users):
                raise RecordFormatError(f"{where}.user_messages: expected a list of strings")
            return CompactionTurn(
                _field(raw, "summary", (str,), where, required=True),
                first_kept,
                _field(raw, "tokens_before", (int,), where) or 0,
                _field(raw, "tokens_after", (int,), where) or 0,
                _field(raw, "trigger", (str,), where) or "auto",
                list(users),
                dict(_field(raw, "details", (dict,), where) or {}),
                timestamp,
            )
    except RecordFormatError:
        raise
    except ValueError as exc:  # from the message and media readers
        raise RecordFormatError(f"{where}: {exc}") from None
    raise RecordFormatError(f"{where}.type: {kind!r} holds no turn")

"""Messages as plain JSON and back: the form a conversation is saved in.

:func:`message_to_json` turns a :class:`~ra.llm.types.Message` into JSON values only (bytes as
base64); :func:`message_from_json` builds the same Message again, equal field for field. What a
provider needs back byte for byte survives: thinking signatures, redacted thinking, the
adapters' ``provider_data`` (Gemini's thoughtSignature, the Responses API's item ids and
encrypted reasoning), tool arguments that were not valid JSON (kept as their raw text).

The shape (version 1)::

    {"role": "assistant", "content": [PART, ...], "name": ..., "tool_call_id": ...}
    PART = {"kind": "text", "text": "..."}
         | {"kind": "image" | "audio" | "document", "<kind>": {"url" | "data_base64", "media_type", ...}}
         | {"kind": "tool_call", "tool_call": {"id", "name", "arguments", "type", "provider_data"?}}
         | {"kind": "tool_result", "tool_result": {"tool_call_id", "content", "is_error", "image_base64"?, ...}}
         | {"kind": "thinking" | "redacted_thinking", "thinking": {"text", "signature"?, "redacted", ...}}

Keys whose value is None are left out. A part of a kind ra does not know keeps its fields as
they are, so a host's own kinds survive a save. ``provider_data`` must hold JSON values, as the
adapters put there. Input that is not this shape raises :class:`ValueError` naming the field.
"""

from __future__ import annotations

import base64
from typing import Any

from .fields import json_field, json_object
from .types import (
    AudioData,
    ContentKind,
    ContentPart,
    DocumentData,
    ImageData,
    Message,
    Role,
    ThinkingData,
    ToolCallData,
    ToolResultData,
)

__all__ = [
    "image_from_json",
    "image_to_json",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
]

_MEDIA = {"image": ImageData, "audio": AudioData, "document": DocumentData}
_PART_FIELDS = ("text", "image", "audio", "document", "tool_call", "tool_result", "thinking")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any, where: str) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"{where}: expected base64 text, got {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ValueError(f"{where}: not valid base64") from None


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


# -- to JSON --------------------------------------------------------------------------------------


def _media_json(media: ImageData | AudioData | DocumentData) -> dict[str, Any]:
    out = {k: getattr(media, k) for k in media.__slots__ if k != "data"}  # type: ignore[attr-defined]
    if media.data is not None:
        out["data_base64"] = _b64(media.data)
    return _drop_none(out)


def image_to_json(image: ImageData) -> dict[str, Any]:
    """An image as JSON values (the ``"image"`` object of an image part)."""
    return _media_json(image)


def _part_json(part: ContentPart) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": str(part.kind)}
    if part.text is not None:
        out["text"] = part.text
    for name in ("image", "audio", "document"):
        media = getattr(part, name)
        if media is not None:
            out[name] = _media_json(media)
    if (call := part.tool_call) is not None:
        out["tool_call"] = _drop_none(
            {
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "type": call.type,
                "provider_data": call.provider_data,
            }
        )
    if (result := part.tool_result) is not None:
        out["tool_result"] = _drop_none(
            {
                "tool_call_id": result.tool_call_id,
                "content": result.content,
                "is_error": result.is_error,
                "image_base64": _b64(result.image_data) if result.image_data is not None else None,
                "image_media_type": result.image_media_type,
            }
        )
    if (thinking := part.thinking) is not None:
        out["thinking"] = _drop_none(
            {
                "text": thinking.text,
                "signature": thinking.signature,
                "redacted": thinking.redacted,
                "provider_data": thinking.provider_data,
            }
        )
    return out


def message_to_json(message: Message) -> dict[str, Any]:
    """``message`` as JSON values (see the module docstring for the shape)."""
    return _drop_none(
        {
            "role": str(message.role),
            "content": [_part_json(part) for part in message.content],
            "name": message.name,
            "tool_call_id": message.tool_call_id,
        }
    )


def messages_to_json(messages: list[Message]) -> list[dict[str, Any]]:
    return [message_to_json(m) for m in messages]


# -- from JSON ------------------------------------------------------------------------------------


def _media_from(obj: Any, cls: type, where: str) -> Any:
    raw = json_object(obj, where)
    data = _unb64(raw["data_base64"], f"{where}.data_base64") if raw.get("data_base64") is not None else None
    fields = {k: json_field(raw, k, (str,), where) for k in cls.__slots__ if k != "data"}
    try:
        return cls(data=data, **fields)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def image_from_json(obj: Any, where: str = "image") -> ImageData:
    """The image :func:`image_to_json` wrote."""
    image: ImageData = _media_from(obj, ImageData, where)
    return image


def _part_from(obj: Any, where: str) -> ContentPart:
    raw = json_object(obj, where)
    kind_text = json_field(raw, "kind", (str,), where, required=True)
    kind: ContentKind | str = ContentKind(kind_text) if kind_text in ContentKind._value2member_map_ else kind_text
    part = ContentPart(kind, text=json_field(raw, "text", (str,), where))
    for name, cls in _MEDIA.items():
        if raw.get(name) is not None:
            setattr(part, name, _media_from(raw[name], cls, f"{where}.{name}"))
    if raw.get("tool_call") is not None:
        at = f"{where}.tool_call"
        call = json_object(raw["tool_call"], at)
        part.tool_call = ToolCallData(
            json_field(call, "id", (str,), at, required=True),
            json_field(call, "name", (str,), at, required=True),
            json_field(call, "arguments", (dict, str), at, required=True),
            json_field(call, "type", (str,), at) or "function",
            json_field(call, "provider_data", (dict,), at),
        )
    if raw.get("tool_result") is not None:
        at = f"{where}.tool_result"
        result = json_object(raw["tool_result"], at)
        image = result.get("image_base64")
        part.tool_result = ToolResultData(
            json_field(result, "tool_call_id", (str,), at, required=True),
            json_field(result, "content", (str, dict, list), at, required=True),
            bool(json_field(result, "is_error", (bool,), at)),
            _unb64(image, f"{at}.image_base64") if image is not None else None,
            json_field(result, "image_media_type", (str,), at),
        )
    if raw.get("thinking") is not None:
        at = f"{where}.thinking"
        thinking = json_object(raw["thinking"], at)
        part.thinking = ThinkingData(
            json_field(thinking, "text", (str,), at, required=True),
            json_field(thinking, "signature", (str,), at),
            bool(json_field(thinking, "redacted", (bool,), at)),
            json_field(thinking, "provider_data", (dict,), at),
        )
    return part


def message_from_json(obj: Any) -> Message:
    """The Message that :func:`message_to_json` wrote."""
    raw = json_object(obj, "message")
    role = json_field(raw, "role", (str,), "message", required=True)
    if role not in Role._value2member_map_:
        raise ValueError(f"message.role: unknown role {role!r}")
    content = json_field(raw, "content", (list,), "message", required=True)
    return Message(
        Role(role),
        [_part_from(part, f"message.content[{i}]") for i, part in enumerate(content)],
        json_field(raw, "name", (str,), "message"),
        json_field(raw, "tool_call_id", (str,), "message"),
    )


def messages_from_json(objs: Any) -> list[Message]:
    if not isinstance(objs, list):
        raise ValueError(f"messages: expected a list, got {type(objs).__name__}")
    out = []
    for i, obj in enumerate(objs):
        try:
            out.append(message_from_json(obj))
        except ValueError as exc:
            raise ValueError(f"messages[{i}]: {exc}") from None
    return out

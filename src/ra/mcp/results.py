"""An MCP ``CallToolResult`` as ra's :class:`~ra.tools.registry.ToolOutput`.

What the model reads is text, plus at most one image (ra's tool results carry one, and every
provider adapter knows how to send it; Chat Completions sends it as a user image part right after
the tool messages). So:

* text blocks are joined with blank lines between them;
* the first image (an image block, or an embedded resource whose blob is an image) becomes the
  result's image; every further image is named in a text line that says it was not shown;
* an embedded text resource is shown with its URI; an embedded binary resource and audio are
  described (URI, media type, size) rather than pasted as base64;
* a resource link is a line with its name, URI, media type and description;
* ``structuredContent`` is shown as JSON when the result has no text (servers that send both put
  the same data in the text, per the MCP spec); it is always in the metadata for the host;
* ``isError`` makes an error result.

This module reads the result's fields by name and imports nothing from the ``mcp`` package.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ra.tools.registry import ToolOutput

__all__ = ["IMAGE_MAX_BYTES", "to_tool_output"]

#: The largest image passed on to the model (the same bound as ``read_file``'s).
IMAGE_MAX_BYTES = 5 * 1024 * 1024


def _size(data: str) -> int:
    """Decoded size of base64 ``data`` without decoding it."""
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


class _Builder:
    __slots__ = ("image", "image_type", "lines", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.lines: list[str] = []
        self.image: bytes | None = None
        self.image_type: str | None = None

    def add_image(self, data: str, media_type: str | None, where: str) -> None:
        media_type = media_type or "image/png"
        size = _size(data)
        if self.image is not None:
            self.lines.append(f"[{where}: {media_type}, {size} bytes, not shown: a tool result carries one image]")
            return
        if size > IMAGE_MAX_BYTES:
            self.lines.append(f"[{where}: {media_type}, {size} bytes, not shown: larger than {IMAGE_MAX_BYTES} bytes]")
            return
        decoded = _decode(data)
        if decoded is None:
            self.lines.append(f"[{where}: {media_type}, not shown: its data is not valid base64]")
            return
        self.image, self.image_type = decoded, media_type

    def add_block(self, block: Any) -> None:
        kind = getattr(block, "type", None)
        if kind == "text":
            self.texts.append(block.text)
        elif kind == "image":
            self.add_image(block.data, block.mime_type, "image")
        elif kind == "audio":
            self.lines.append(f"[audio: {block.mime_type}, {_size(block.data)} bytes, not shown]")
        elif kind == "resource":
            self.add_resource(block.resource)
        elif kind == "resource_link":
            parts = [f"[resource link: {block.name} <{block.uri}>"]
            if block.mime_type:
                parts.append(f" ({block.mime_type})")
            if block.description:
                parts.append(f": {block.description}")
            self.lines.append("".join(parts) + "]")
        else:
            self.lines.append(f"[{kind or 'unknown'} content, not shown]")

    def add_resource(self, resource: Any) -> None:
        uri, media_type = resource.uri, getattr(resource, "mime_type", None)
        text = getattr(resource, "text", None)
        if text is not None:
            head = f"[resource <{uri}>" + (f" ({media_type})" if media_type else "") + "]"
            self.texts.append(f"{head}\n{text}")
            return
        blob = getattr(resource, "blob", "") or ""
        if media_type and media_type.startswith("image/"):
            self.add_image(blob, media_type, f"resource <{uri}>")
            return
        self.lines.append(f"[resource <{uri}>: {media_type or 'binary'}, {_size(blob)} bytes, not shown]")


def to_tool_output(result: Any, *, server: str, tool: str) -> ToolOutput:
    """``result`` (an ``mcp_types.CallToolResult``) as what ra's tool pipeline takes."""
    built = _Builder()
    for block in result.content or ():
        built.add_block(block)
    structured = getattr(result, "structured_content", None)
    texts = built.texts
    if not texts and structured is not None:
        texts = [json.dumps(structured, ensure_ascii=False, indent=2, default=str)]
    content = "\n\n".join([*texts, *(["\n".join(built.lines)] if built.lines else [])])
    if not content and built.image is not None:
        content = f"Image from MCP tool {tool} ({built.image_type}, {len(built.image)} bytes)."
    elif not content:
        content = "(the tool returned no content)"
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
    if structured is not None:
        metadata["structured_content"] = structured
    return ToolOutput(
        content,
        is_error=bool(getattr(result, "is_error", False)),
        image_data=built.image,
        image_media_type=built.image_type,
        metadata=metadata,
    )

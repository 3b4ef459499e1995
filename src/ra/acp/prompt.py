"""An ACP prompt (content blocks) as ra's input: text, and images beside it.

Text blocks are the message. Embedded resources (what an editor attaches with ``@file``: the
buffer's text) are appended as tagged context blocks naming their URI, so the model sees what the
user saw; an embedded image is an image. Resource links are named, not fetched: the model can
read them with its tools. Audio is refused (``initialize`` does not offer it).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ra.llm.types import ImageData

__all__ = ["PromptError", "prompt_input"]

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class PromptError(ValueError):
    """A prompt ra cannot take (the request is answered with invalid params)."""


def _image(data: str, mime_type: str | None, where: str) -> ImageData:
    if mime_type not in _IMAGE_TYPES:
        raise PromptError(f"{where}: image type {mime_type!r} is not one of {', '.join(_IMAGE_TYPES)}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise PromptError(f"{where}: the image data is not base64") from None
    return ImageData(data=raw, media_type=mime_type)


def prompt_input(blocks: list[Any]) -> tuple[str, tuple[ImageData, ...]]:
    """``(text, images)`` for ``Session.submit``; PromptError for content ra cannot take."""
    texts: list[str] = []
    context: list[str] = []
    images: list[ImageData] = []
    for index, block in enumerate(blocks):
        kind = getattr(block, "type", None)
        where = f"prompt block {index}"
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            images.append(_image(block.data, block.mime_type, where))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                context.append(f'<context uri="{resource.uri}">\n{text}\n</context>')
            elif (resource.mime_type or "").startswith("image/"):
                images.append(_image(resource.blob, resource.mime_type, where))
            else:
                what = resource.mime_type or "unknown type"
                context.append(f'<context uri="{resource.uri}">(binary content, {what}, not included)</context>')
        elif kind == "resource_link":
            title = block.title or block.name
            context.append(f'<context uri="{block.uri}">{title} (not attached: read it with your tools)</context>')
        else:
            raise PromptError(f"{where}: {kind!r} content is not supported (text, images and resources are)")
    text = "".join(texts)
    if context:
        text = "\n\n".join([text, *context]) if text else "\n\n".join(context)
    if not text.strip() and not images:
        raise PromptError("the prompt is empty")
    return text, tuple(images)

"""Turning image/audio/document references into bytes the providers accept inline.

The spec lets callers put a local path in ``ImageData.url``; adapters call :func:`resolve_media`
and send the file inline, so a screenshot path "just works" with every provider.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path

__all__ = ["data_uri", "is_local_path", "resolve_media", "to_base64"]


def is_local_path(url: str) -> bool:
    return url.startswith(("/", "./", "../", "~")) or url.startswith("file://")


def resolve_media(
    url: str | None, data: bytes | None, media_type: str | None
) -> tuple[str | None, bytes | None, str | None]:
    """Return ``(remote_url, inline_bytes, media_type)`` with local paths read into bytes."""
    if data is not None:
        return None, data, media_type or "application/octet-stream"
    if url is None:
        raise ValueError("media needs a url or data")
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        mime = header[5:].split(";")[0] or media_type
        raw = base64.b64decode(payload) if ";base64" in header else payload.encode()
        return None, raw, mime or "application/octet-stream"
    if is_local_path(url):
        path = Path(url.removeprefix("file://")).expanduser()
        guessed = mimetypes.guess_type(path.name)[0]
        return None, path.read_bytes(), media_type or guessed or "application/octet-stream"
    return url, None, media_type


def to_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_uri(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{to_base64(data)}"

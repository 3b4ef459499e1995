"""File tools: read_file, write_file, edit_file (coding-agent-loop-spec 3.3).

All I/O goes through ``ctx.env``, so the same tools work on a local directory, a container or a
remote machine. Paths may be absolute or relative to the environment's working directory; error
messages name the absolute path so the model can correct itself.
"""

from __future__ import annotations

import difflib
import posixpath
from typing import Any

from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from ._common import define, display_path, error, integer, optional_int, os_error_message, parent_and_name

__all__ = ["IMAGE_MAX_BYTES", "edit_file_tool", "read_file_tool", "sniff_image_type", "write_file_tool"]

#: Largest image handed to the model (the strictest provider limit on one inline image is 5 MB).
IMAGE_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_READ_LIMIT = 2000

_IMAGE_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def sniff_image_type(data: bytes) -> str | None:
    """The media type of PNG, JPEG, GIF or WebP data by its magic bytes, else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


# ---------------------------------------------------------------------------------------------
# read_file


def read_file_tool(*, default_limit: int = DEFAULT_READ_LIMIT) -> RegisteredTool:
    """``read_file(file_path, offset?, limit?)``: numbered lines ("NNN | text"), or an image."""
    definition = define(
        "read_file",
        "Read a file and return its lines numbered as 'NNN | text'. Reads up to "
        f"{default_limit} lines unless limit says otherwise; use offset and limit to page through "
        "long files. PNG, JPEG, GIF and WebP images are returned as images you can see.",
        {
            "file_path": {
                "type": "string",
                "description": "Path of the file; absolute, or relative to the working directory.",
            },
            "offset": integer("Line number to start at (1 = first line).", minimum=1),
            "limit": integer(f"Maximum number of lines to return (default {default_limit}).", minimum=1),
        },
        ["file_path"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        return await _read(arguments, ctx, default_limit)

    return RegisteredTool(definition, execute, effect=ToolEffect.READ)


async def _read(arguments: dict[str, Any], ctx: ToolContext, default_limit: int) -> ToolOutput | str:
    path = arguments["file_path"]
    offset = optional_int(arguments, "offset") or 1
    limit = optional_int(arguments, "limit") or default_limit
    env = ctx.env
    shown = display_path(ctx, path)
    if posixpath.splitext(path)[1].lower() in _IMAGE_EXTENSIONS:
        image = await _read_image(ctx, path, shown)
        if image is not None:
            return image
    try:
        text = await env.read_file(path, offset, limit)
    except FileNotFoundError:
        return error(await _not_found_message(ctx, path, shown))
    except IsADirectoryError:
        return error(f"{shown} is a directory, not a file. List its contents instead of reading it.")
    except OSError as exc:
        return error(os_error_message(exc, shown))
    except ValueError as exc:
        # The protocol's ValueError means "binary" or a bad offset; the path may contain any word.
        if "binary" in str(exc).replace(shown, "").replace(path, ""):
            image = await _read_image(ctx, path, shown, sniffed_binary=True)
            if image is not None:
                return image
            return error(
                f"{shown} is a binary file; read_file shows text files and PNG, JPEG, GIF or WebP "
                "images only. Inspect it with a shell command (e.g. `file`, `xxd | head`) instead."
            )
        return error(str(exc))
    if not text:
        return f"[{shown} is empty]"
    last = _last_line_number(text)
    if last is not None and last - offset + 1 >= limit:
        try:
            more = bool(await env.read_file(path, last + 1, 1))
        except (OSError, ValueError):
            more = False
        if more:
            text += f"\n[The file continues after line {last}: call read_file with offset={last + 1} to read on.]"
    return text


def _last_line_number(text: str) -> int | None:
    tail = text[text.rfind("\n") + 1 :]
    number, sep, _ = tail.partition(" | ")
    return int(number) if sep and number.strip().isdigit() else None


async def _read_image(ctx: ToolContext, path: str, shown: str, *, sniffed_binary: bool = False) -> ToolOutput | None:
    """The file as image content, or None when it is not an image after all (read it as text).

    A file the environment called binary is only read whole when it is small enough to be an image
    the model may receive, so a large binary is never pulled into memory to look at four bytes.
    """
    size = await _file_size(ctx, path)
    if size is not None and size > IMAGE_MAX_BYTES:
        if sniffed_binary:
            return None
        return error(
            f"{shown} is an image of {size} bytes, larger than the {IMAGE_MAX_BYTES} bytes that can be "
            "sent to the model. Scale it down first (e.g. with a shell command) and read the smaller copy."
        )
    try:
        data = await ctx.env.read_bytes(path)
    except FileNotFoundError:
        return error(await _not_found_message(ctx, path, shown))
    except OSError as exc:
        return error(os_error_message(exc, shown))
    media_type = sniff_image_type(data[:16])
    if media_type is None:
        return None
    if len(data) > IMAGE_MAX_BYTES:
        return error(f"{shown} is an image of {len(data)} bytes, larger than the {IMAGE_MAX_BYTES} bytes allowed.")
    kind = media_type.split("/")[1].upper()
    return ToolOutput(
        f"Image file {shown} ({kind}, {len(data)} bytes).",
        image_data=data,
        image_media_type=media_type,
        metadata={"path": shown, "media_type": media_type, "bytes": len(data)},
    )


async def _file_size(ctx: ToolContext, path: str) -> int | None:
    """The file's size from a listing of its directory (the environment has no stat call)."""
    parent, name = parent_and_name(ctx.env.resolve(path))
    try:
        entries = await ctx.env.list_directory(parent, 1)
    except (OSError, ValueError):
        return None
    for entry in entries:
        if entry.name == name:
            return entry.size
    return None


async def _not_found_message(ctx: ToolContext, path: str, shown: str) -> str:
    """'File not found', plus the closest names in its directory when there are any."""
    parent, name = parent_and_name(shown)
    try:
        entries = await ctx.env.list_directory(parent, 1)
    except (OSError, ValueError):
        return f"File not found: {shown} (its directory {parent} does not exist either)."
    names = [e.name + ("/" if e.is_dir else "") for e in entries]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if not close:
        lowered = {n.lower(): n for n in names}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    if close:
        listed = ", ".join(posixpath.join(parent, c) for c in close)
        return f"File not found: {shown}. Did you mean: {listed}?"
    return f"File not found: {shown}"


# ---------------------------------------------------------------------------------------------
# write_file


def write_file_tool() -> RegisteredTool:
    """``write_file(file_path, content)``: create or replace a file, creating parent directories."""
    definition = define(
        "write_file",
        "Write the full content of a file, replacing it if it exists. Parent directories are "
        "created as needed. Prefer editing tools for changes to existing files.",
        {
            "file_path": {
                "type": "string",
                "description": "Path of the file; absolute, or relative to the working directory.",
            },
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        ["file_path", "content"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        from ra.tools.file_diff import change_record, unknown_change_record

        path, content = arguments["file_path"], arguments["content"]
        shown = display_path(ctx, path)
        env = ctx.env
        try:
            existed = await env.file_exists(path)
            before = await _previous_text(ctx, path) if existed else None
            await env.write_file(path, content)
        except OSError as exc:
            return error(os_error_message(exc, shown))
        size = len(content.encode("utf-8"))
        what = "replaced" if existed else "created"
        # For the host's diff; a replaced file whose old text is unknown (binary) gets no diff.
        unknown = existed and before is None
        diff = unknown_change_record(shown) if unknown else change_record(shown, before, content)
        return ToolOutput(
            f"Wrote {size} bytes to {shown} ({what}).",
            metadata={"path": shown, "bytes": size, "created": not existed, "diff": diff},
        )

    return RegisteredTool(definition, execute, effect=ToolEffect.EDIT)


async def _previous_text(ctx: ToolContext, path: str) -> str | None:
    """The text ``write_file`` is about to replace (for the host's diff), or None when it is binary,
    larger than :data:`~ra.tools.file_size.MAX_EDIT_BYTES` or cannot be read (the write itself then
    decides whether that is an error)."""
    from ra.tools.file_size import MAX_EDIT_BYTES, file_size
    from ra.tools.fuzzy import DecodedText

    size = await file_size(ctx.env, path)
    if size is not None and size > MAX_EDIT_BYTES:
        return None  # too large to read for a diff: the change is recorded as unknown
    try:
        data = await ctx.env.read_bytes(path)
    except (OSError, ValueError):
        return None
    if b"\0" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # binary (UTF-16 with a BOM has NULs too, and decodes)
    return DecodedText.decode(data).text


# ---------------------------------------------------------------------------------------------
# edit_file


def edit_file_tool() -> RegisteredTool:
    """``edit_file(file_path, old_string, new_string, replace_all?)`` via :mod:`ra.tools.edit`."""
    definition = define(
        "edit_file",
        "Replace an exact piece of text in a file with new text. old_string must match the file "
        "exactly (including indentation) and occur once, unless replace_all is true; include "
        "enough surrounding lines to make it unique. An empty old_string creates a new file.",
        {
            "file_path": {
                "type": "string",
                "description": "Path of the file; absolute, or relative to the working directory.",
            },
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of exactly one (default false).",
            },
        },
        ["file_path", "old_string", "new_string"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from ra.tools.edit import EditError, edit_file
        from ra.tools.file_diff import change_record

        path = arguments["file_path"]
        shown = display_path(ctx, path)
        try:
            result = await edit_file(
                ctx.env,
                path,
                arguments["old_string"],
                arguments["new_string"],
                bool(arguments.get("replace_all", False)),
            )
        except EditError as exc:
            return error(exc.message, code=exc.code, path=shown)
        except OSError as exc:
            return error(os_error_message(exc, shown))
        return ToolOutput(
            result.message,
            metadata={
                "path": shown,
                "replacements": result.replacements,
                "first_line": result.first_line,
                "created": result.created,
                "fuzzy": result.fuzzy,
                "diff": change_record(shown, result.before, result.after),
            },
        )

    return RegisteredTool(definition, execute, effect=ToolEffect.EDIT)

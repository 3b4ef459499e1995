"""read_many_files (gemini-cli): several files in one call, each under its own header.

``paths`` may name files, directories (read recursively) or glob patterns; ``include`` adds more
patterns, ``exclude`` removes matches, and unless ``useDefaultExcludes`` is false, dependency,
build and cache directories and binary-looking files are left out. Files are read in path order
until a character budget is spent; the file that crosses it is cut with a marker, and the files
after it are named but not read, so the model knows exactly what it has not seen.
"""

from __future__ import annotations

import posixpath
from typing import Any

from ra.tools.file_size import file_size
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from ._common import define, error
from .files import sniff_image_type

__all__ = ["DEFAULT_EXCLUDES", "read_many_files_tool"]

DEFAULT_BUDGET = 50_000
#: Files expanded from one call, at most (a pattern like '**/*' in a big tree is cut here).
MAX_FILES = 500
#: A file larger than this is not read (it would be read whole to show the budget's worth of it):
#: named in a note instead, with read_file (which pages) as the way to read it.
MAX_FILE_BYTES = 4 * 1024 * 1024
#: Names of skipped files listed individually before they are summarised as a count.
_LIST_SKIPPED = 20

DEFAULT_EXCLUDES: tuple[str, ...] = (
    "**/node_modules/**",
    "**/.git/**",
    "**/.venv/**",
    "**/venv/**",
    "**/__pycache__/**",
    "**/dist/**",
    "**/build/**",
    "**/target/**",
    "**/coverage/**",
    "**/*.pyc",
    "**/*.so",
    "**/*.dylib",
    "**/*.dll",
    "**/*.exe",
    "**/*.o",
    "**/*.a",
    "**/*.class",
    "**/*.jar",
    "**/*.zip",
    "**/*.tar",
    "**/*.gz",
    "**/*.bz2",
    "**/*.xz",
    "**/*.7z",
    "**/*.pdf",
    "**/*.png",
    "**/*.jpg",
    "**/*.jpeg",
    "**/*.gif",
    "**/*.webp",
    "**/*.ico",
    "**/*.mp3",
    "**/*.mp4",
    "**/*.mov",
    "**/*.wav",
    "**/*.min.js",
    "**/*.lock",
    "**/.DS_Store",
)

_MAGIC = frozenset("*?[{")


def read_many_files_tool(*, budget: int = DEFAULT_BUDGET) -> RegisteredTool:
    """``read_many_files(paths, include?, exclude?, useDefaultExcludes?)``."""
    string_list = {"type": "array", "items": {"type": "string"}}
    definition = define(
        "read_many_files",
        "Read several text files at once: give file paths, directories (read recursively) or "
        "glob patterns such as 'src/**/*.py'. Each file is returned under a '--- path ---' "
        f"header. About {budget} characters are returned per call; files beyond that are listed "
        "but not read. Use read_file for images and for paging through one long file.",
        {
            "paths": {
                **string_list,
                "minItems": 1,
                "description": "Files, directories or glob patterns, relative to the working directory.",
            },
            "include": {**string_list, "description": "More glob patterns to read, added to paths."},
            "exclude": {**string_list, "description": "Glob patterns of files to leave out, e.g. '**/*.test.ts'."},
            "useDefaultExcludes": {
                "type": "boolean",
                "description": "Leave out dependency/build directories and binary file types (default true).",
            },
        },
        ["paths"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        return await _read_many(arguments, ctx, budget)

    return RegisteredTool(
        definition, execute, output_limit=budget + 10_000, truncation_mode="head_tail", effect=ToolEffect.READ
    )


async def _read_many(arguments: dict[str, Any], ctx: ToolContext, budget: int) -> ToolOutput | str:
    from ra.env.search import translate_glob

    env = ctx.env
    root = env.working_directory()
    patterns = [p for p in [*arguments["paths"], *(arguments.get("include") or [])] if p.strip()]
    if not patterns:
        return error("paths is empty; name at least one file, directory or glob pattern.")
    excludes = list(arguments.get("exclude") or [])
    if arguments.get("useDefaultExcludes", True):
        excludes.extend(DEFAULT_EXCLUDES)
    try:
        matchers = [(translate_glob(p.lstrip("/"), dot_special=False), "/" in p.rstrip("/")) for p in excludes]
    except ValueError as exc:
        return error(f"Invalid exclude pattern: {exc}")

    def excluded(full: str) -> bool:
        rel = posixpath.relpath(full, root) if full.startswith(root.rstrip("/") + "/") else full.lstrip("/")
        name = posixpath.basename(full)
        return any(regex.match(rel if anchored else name) or regex.match(rel) for regex, anchored in matchers)

    found: list[str] = []
    problems: list[str] = []
    for pattern in patterns:
        try:
            found.extend(await _expand(env, pattern))
        except (OSError, ValueError) as exc:
            problems.append(f"{pattern}: {exc}")
    files = sorted({f for f in found if not excluded(f)})
    if not files:
        lines = ["No files to read: nothing matched the paths and patterns (after exclusions)."]
        lines.extend(f"- {p}" for p in problems)
        return error("\n".join(lines))
    over = files[MAX_FILES:]
    files = files[:MAX_FILES]

    blocks: list[str] = []
    used = 0
    read: list[str] = []
    skipped_binary: list[str] = []
    too_large: list[str] = []
    unread: list[str] = []
    for index, path in enumerate(files):
        if used >= budget:
            unread = files[index:]
            break
        size = await file_size(env, path)
        if size is not None and size > MAX_FILE_BYTES:
            too_large.append(f"{path} ({size:,} bytes)")
            continue
        try:
            data = await env.read_bytes(path)
        except OSError as exc:
            problems.append(f"{path}: {exc}")
            continue
        if b"\0" in data[:8192] or sniff_image_type(data[:16]) is not None:
            skipped_binary.append(path)
            continue
        text = data.decode("utf-8", errors="replace")
        room = budget - used
        if len(text) > room:
            text = text[:room] + f"\n[... cut here: the rest of the file was not read; use read_file on {path}.]"
        blocks.append(f"--- {path} ---\n{text.rstrip(chr(10))}\n")
        used += len(text)
        read.append(path)
    unread.extend(over)

    out = "\n".join(blocks)
    notes: list[str] = []
    if unread:
        listed = ", ".join(unread[:_LIST_SKIPPED])
        rest = f" and {len(unread) - _LIST_SKIPPED} more" if len(unread) > _LIST_SKIPPED else ""
        notes.append(f"Not read (over the {budget}-character budget): {listed}{rest}. Ask for them in another call.")
    if too_large:
        limit = MAX_FILE_BYTES // (1024 * 1024)
        notes.append(
            f"Not read (larger than {limit} MiB; page through it with read_file offset/limit): "
            + ", ".join(too_large[:_LIST_SKIPPED])
        )
    if skipped_binary:
        notes.append("Skipped binary files (read images with read_file): " + ", ".join(skipped_binary[:_LIST_SKIPPED]))
    if problems:
        notes.append("Problems: " + "; ".join(problems[:_LIST_SKIPPED]))
    if notes:
        out += "\n--- End of content ---\n" + "\n".join(f"[{n}]" for n in notes)
    else:
        out += "\n--- End of content ---"
    return ToolOutput(
        out,
        metadata={
            "read": read,
            "unread": len(unread),
            "skipped_binary": skipped_binary,
            "too_large": len(too_large),
            "problems": len(problems),
        },
    )


async def _expand(env: Any, pattern: str) -> list[str]:
    """Absolute file paths for one entry of ``paths``: a glob, a directory, or a file."""
    if any(ch in _MAGIC for ch in pattern):
        return await env.glob(pattern)
    if await env.is_directory(pattern):
        return await env.glob("**/*", pattern)
    if await env.file_exists(pattern):
        return [env.resolve(pattern)]
    raise FileNotFoundError(f"not found ({env.resolve(pattern)})")

"""Search tools: ``grep`` and ``glob`` (coding-agent-loop-spec 3.3), ``grep_files`` (codex, ra-spec).

Searching is the environment's job (``env.grep`` with ripgrep or its Python twin, ``env.glob``);
these tools shape the arguments the model sends and the text it gets back, and keep that text
bounded: every result list has a cap and says when it was reached, so the model narrows the
search instead of reading a truncated middle.

``grep_tool(output_modes=True)`` is the Claude Code flavour: ``output_mode`` (content,
files_with_matches, count; files_with_matches by default, as Claude Code does) and the ``-A``,
``-B``, ``-C`` context-line parameters.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from ._common import define, display_path, error, integer, optional_int, os_error_message

__all__ = ["glob_tool", "grep_files_tool", "grep_tool"]

DEFAULT_MAX_RESULTS = 100
GLOB_MAX_RESULTS = 200
GREP_FILES_MAX_LIMIT = 2000
#: How many candidate files ``grep_files`` orders by modification time in one shell call.
_MTIME_SORT_MAX_CHARS = 100_000


def _grep_options(**kwargs: Any) -> Any:
    from ra.env.base import GrepOptions

    return GrepOptions(**kwargs)


# ---------------------------------------------------------------------------------------------
# grep


def grep_tool(output_modes: bool = False, *, name: str = "grep") -> RegisteredTool:
    """``grep(pattern, path?, glob_filter?, case_insensitive?, max_results?)``; with
    ``output_modes`` also ``output_mode`` and ``-A`` / ``-B`` / ``-C``."""
    properties: dict[str, Any] = {
        "pattern": {"type": "string", "description": "Regular expression to search for (ripgrep/Rust syntax)."},
        "path": {
            "type": "string",
            "description": "File or directory to search (default: the working directory).",
        },
        "glob_filter": {
            "type": "string",
            "description": "Only search files whose names match this glob, e.g. '*.py' or 'src/**/*.ts'.",
        },
        "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
        "max_results": integer(
            f"Stop after this many matches (files, in the files/count modes); default {DEFAULT_MAX_RESULTS}.",
            minimum=1,
        ),
    }
    if output_modes:
        properties["output_mode"] = {
            "type": "string",
            "enum": ["content", "files_with_matches", "count"],
            "description": "'files_with_matches' (default): paths of matching files; 'content': matching "
            "lines as path:line:text; 'count': path:number of matching lines.",
        }
        properties["-A"] = integer("Lines of context after each match (content mode).", minimum=0)
        properties["-B"] = integer("Lines of context before each match (content mode).", minimum=0)
        properties["-C"] = integer("Lines of context before and after each match (content mode).", minimum=0)
        summary = (
            "Search file contents with a regular expression (ripgrep). Lists matching files by default; "
            "output_mode 'content' shows the matching lines (with -A/-B/-C context), 'count' counts them."
        )
    else:
        summary = (
            "Search file contents with a regular expression (ripgrep). Returns matching lines as "
            "path:line:text. Hidden and git-ignored files are skipped."
        )
    definition = define(name, summary, properties, ["pattern"])

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        mode = arguments.get("output_mode", "files_with_matches") if output_modes else "content"
        after = before = 0
        if output_modes and mode == "content":
            both = optional_int(arguments, "-C") or 0
            after = optional_int(arguments, "-A")
            before = optional_int(arguments, "-B")
            after = both if after is None else after
            before = both if before is None else before
        options = _grep_options(
            glob_filter=arguments.get("glob_filter") or None,
            case_insensitive=bool(arguments.get("case_insensitive", False)),
            max_results=optional_int(arguments, "max_results") or DEFAULT_MAX_RESULTS,
            output_mode=mode,
            context_lines=max(after, before),
        )
        outcome = await _grep(ctx, arguments["pattern"], arguments.get("path"), options)
        if isinstance(outcome, ToolOutput):
            return outcome
        if after != before:
            outcome = trim_context(outcome, before=before, after=after)
        return outcome

    return RegisteredTool(definition, execute, effect=ToolEffect.READ)


async def _grep(ctx: ToolContext, pattern: str, path: str | None, options: Any) -> ToolOutput | str:
    where = display_path(ctx, path or ".")
    try:
        text = await ctx.env.grep(pattern, path or None, options)
    except FileNotFoundError:
        return error(f"Path not found: {where}")
    except ValueError as exc:
        return error(str(exc))
    except OSError as exc:
        return error(os_error_message(exc, where))
    if not text.strip():
        return f"No matches for /{pattern}/ in {where}."
    return text


_RECORD = re.compile(r"([:-])(\d+)\1")


def trim_context(text: str, *, before: int, after: int) -> str:
    """Cut grep's symmetric context down to ``before`` lines before and ``after`` after each match.

    The environment's grep has one context width; ``-A`` and ``-B`` differ, so it is asked for the
    wider one and the extra lines are dropped here. Groups are separated by ``--``; within a group
    every record is ``path:N:text`` (match) or ``path-N-text`` (context) for consecutive ``N``, so
    the path is the prefix that makes the numbers run on. A group that cannot be read that way is
    kept as it is.
    """
    body, note = text, ""
    marker = text.find("\n[Results truncated")
    if marker != -1:
        body, note = text[:marker], text[marker:]
    groups: list[list[str]] = [[]]
    for line in body.split("\n"):
        if line == "--":
            groups.append([])
        else:
            groups[-1].append(line)
    out: list[list[str]] = []
    for group in groups:
        if group:
            out.extend(_trim_group(group, before, after))
    return "\n--\n".join("\n".join(run) for run in out) + note


def _trim_group(lines: list[str], before: int, after: int) -> list[list[str]]:
    parsed = _parse_group(lines)
    if parsed is None:
        return [lines]
    matches = [i for i, is_match in enumerate(parsed) if is_match]
    keep = [False] * len(lines)
    for m in matches:
        for i in range(max(0, m - before), min(len(lines), m + after + 1)):
            keep[i] = True
    runs: list[list[str]] = []
    current: list[str] = []
    for line, kept in zip(lines, keep, strict=True):
        if kept:
            current.append(line)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _parse_group(lines: list[str]) -> list[bool] | None:
    """Whether each record of a group is a match, or None if the group does not parse."""
    first = lines[0]
    for index, char in enumerate(first):
        found = _RECORD.match(first, index) if char in ":-" else None
        if found is None:
            continue
        prefix = first[:index]
        start = int(found.group(2))
        flags: list[bool] = []
        for offset, line in enumerate(lines):
            if not line.startswith(prefix):
                break
            rest = line[len(prefix) :]
            sep = rest[:1]
            if sep not in (":", "-") or not rest[1:].startswith(f"{start + offset}{sep}"):
                break
            flags.append(sep == ":")
        else:
            if any(flags):  # every group holds a match; a reading without one is the wrong split
                return flags
    return None


# ---------------------------------------------------------------------------------------------
# grep_files


def grep_files_tool(*, name: str = "grep_files") -> RegisteredTool:
    """``grep_files(pattern, path?, include?, limit?)``: files whose contents match, newest first."""
    definition = define(
        name,
        "Find files whose contents match a regular expression. Returns their paths, most recently modified first.",
        {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {
                "type": "string",
                "description": "Directory or file to search (default: the working directory).",
            },
            "include": {
                "type": "string",
                "description": "Only search files matching this glob, e.g. '*.rs' or '*.{ts,tsx}'.",
            },
            "limit": integer(
                f"Maximum number of paths to return (default {DEFAULT_MAX_RESULTS}, at most {GREP_FILES_MAX_LIMIT}).",
                minimum=1,
                maximum=GREP_FILES_MAX_LIMIT,
            ),
        },
        ["pattern"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        limit = optional_int(arguments, "limit") or DEFAULT_MAX_RESULTS
        pattern = arguments["pattern"]
        if not pattern:
            return error("pattern must not be empty.")
        path = arguments.get("path") or None
        options = _grep_options(
            glob_filter=arguments.get("include") or None,
            max_results=GREP_FILES_MAX_LIMIT,
            output_mode="files_with_matches",
        )
        outcome = await _grep(ctx, pattern, path, options)
        if isinstance(outcome, ToolOutput):
            return outcome
        if outcome.startswith("No matches"):
            return "No matches found."
        files = [line for line in outcome.split("\n") if line and not line.startswith("[Results truncated")]
        capped = "[Results truncated" in outcome
        files = await _newest_first(ctx, files)
        shown = files[:limit]
        text = "\n".join(shown)
        if len(files) > limit or capped:
            more = f"{len(files) - limit}" if not capped else "more"
            text += f"\n[{more} matching files not shown; narrow the pattern, path or include, or raise limit.]"
        return ToolOutput(text, metadata={"files": len(files), "shown": len(shown)})

    return RegisteredTool(definition, execute, effect=ToolEffect.READ)


async def _newest_first(ctx: ToolContext, files: list[str]) -> list[str]:
    """``files`` ordered by modification time, newest first (codex's order for grep_files).

    The environment has no stat call, so one ``ls -t`` in the environment orders them; when that
    is not possible (no shell, too many files for one command line) the path order is kept.
    """
    if len(files) < 2:
        return files
    command = "ls -1td -- " + " ".join(shlex.quote(f) for f in files)
    if len(command) > _MTIME_SORT_MAX_CHARS:
        return files
    try:
        result = await ctx.env.exec_command(command, timeout_ms=10_000)
    except Exception:  # ordering is a nicety; the matches are what matter
        return files
    if result.exit_code != 0 or result.timed_out:
        return files
    wanted = set(files)
    ordered: list[str] = []
    for line in result.stdout.split("\n"):
        if line in wanted:
            ordered.append(line)
            wanted.discard(line)
    ordered.extend(f for f in files if f in wanted)
    return ordered


# ---------------------------------------------------------------------------------------------
# glob


def glob_tool(*, max_results: int = GLOB_MAX_RESULTS, name: str = "glob") -> RegisteredTool:
    """``glob(pattern, path?)``: matching files, newest modification first, at most ``max_results``."""
    definition = define(
        name,
        "Find files by name with a glob pattern such as '**/*.py' or 'src/*.{ts,tsx}'. Returns "
        f"matching file paths, most recently modified first (at most {max_results}).",
        {
            "pattern": {"type": "string", "description": "Glob pattern, relative to path."},
            "path": {
                "type": "string",
                "description": "Directory to search from (default: the working directory).",
            },
        },
        ["pattern"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        pattern = arguments["pattern"]
        path = arguments.get("path") or None
        where = display_path(ctx, path or ".")
        try:
            found = await ctx.env.glob(pattern, path)
        except (FileNotFoundError, NotADirectoryError):
            return error(f"Directory not found: {where}")
        except ValueError as exc:
            return error(str(exc))
        except OSError as exc:
            return error(os_error_message(exc, where))
        if not found:
            return f"No files match {pattern!r} in {where}."
        text = "\n".join(found[:max_results])
        if len(found) > max_results:
            text += (
                f"\n[{len(found) - max_results} more files match (the oldest were left out); "
                "use a narrower pattern or path.]"
            )
        return ToolOutput(text, metadata={"files": len(found), "shown": min(len(found), max_results)})

    return RegisteredTool(definition, execute, effect=ToolEffect.READ)

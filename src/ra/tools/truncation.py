"""Tool output truncation (coding-agent-loop-spec 5.1-5.3).

The model sees a bounded version of every tool output; the host sees the full one in the
TOOL_CALL_END event. Two passes, always in this order:

1. **Characters** (:func:`truncate_output`): the primary guard. It bounds the size whatever the
   shape of the text, including a 10 MB output with no newline at all.
2. **Lines** (:func:`truncate_lines`): a readability pass for tools whose output is many short
   lines (shell, grep, glob). It runs on the already bounded text, so it is cheap.

Both passes keep the head and the tail and put an explicit marker where text was removed, so the
model knows it is looking at a partial view and can ask for a narrower one.

Limits resolve, most specific first: the session's ``tool_output_limits`` / ``tool_line_limits``
maps, then the limits a tool declares for itself (a profile can give its own ``shell_command`` the
shell limits), then this module's default tables, then :data:`FALLBACK_CHAR_LIMIT` for tools the
tables do not name.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "DEFAULT_LINE_LIMITS",
    "DEFAULT_TOOL_LIMITS",
    "DEFAULT_TRUNCATION_MODES",
    "FALLBACK_CHAR_LIMIT",
    "FALLBACK_TRUNCATION_MODE",
    "TRUNCATION_MODES",
    "resolve_limits",
    "truncate_lines",
    "truncate_output",
    "truncate_tool_output",
]

#: Spec 5.2: default character limit per tool.
DEFAULT_TOOL_LIMITS: dict[str, int] = {
    "read_file": 50_000,
    "shell": 30_000,
    "grep": 20_000,
    "glob": 20_000,
    "edit_file": 10_000,
    "apply_patch": 10_000,
    "write_file": 1_000,
    "spawn_agent": 20_000,
}

#: Spec 5.2: which part of an over-long output survives.
DEFAULT_TRUNCATION_MODES: dict[str, str] = {
    "read_file": "head_tail",
    "shell": "head_tail",
    "grep": "tail",
    "glob": "tail",
    "edit_file": "tail",
    "apply_patch": "tail",
    "write_file": "tail",
    "spawn_agent": "head_tail",
}

#: Spec 5.3: default line limit per tool; tools not named here have none.
DEFAULT_LINE_LIMITS: dict[str, int] = {
    "shell": 256,
    "grep": 200,
    "glob": 500,
}

#: For tools the tables do not name (custom tools, other profiles' names): as generous as shell.
FALLBACK_CHAR_LIMIT = 30_000
FALLBACK_TRUNCATION_MODE = "head_tail"

TRUNCATION_MODES = ("head_tail", "tail")


def truncate_output(output: str, max_chars: int, mode: str = "head_tail") -> str:
    """Spec 5.1: bound ``output`` to ``max_chars`` characters of original text plus a marker.

    ``head_tail`` keeps the first and last halves (an odd limit gives the extra character to the
    tail, so exactly ``max_chars`` characters survive and the reported count is exact); ``tail``
    keeps the last ``max_chars`` characters.
    """
    length = len(output)
    if length <= max_chars:
        return output
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    removed = length - max_chars
    if mode == "head_tail":
        head = max_chars // 2
        tail = max_chars - head
        return (
            output[:head]
            + "\n\n[WARNING: Tool output was truncated. "
            + str(removed)
            + " characters were removed from the middle. "
            + "The full output is available in the event stream. "
            + "If you need to see specific parts, re-run the tool with more targeted parameters.]\n\n"
            + (output[length - tail :] if tail else "")
        )
    if mode == "tail":
        return (
            "[WARNING: Tool output was truncated. First "
            + str(removed)
            + " characters were removed. "
            + "The full output is available in the event stream.]\n\n"
            + (output[length - max_chars :] if max_chars else "")
        )
    raise ValueError(f"unknown truncation mode {mode!r}; use one of {', '.join(TRUNCATION_MODES)}")


def truncate_lines(output: str, max_lines: int) -> str:
    """Spec 5.3: keep the first ``max_lines // 2`` and the remaining last lines, with a marker."""
    if max_lines < 1:
        raise ValueError(f"max_lines must be >= 1, got {max_lines}")
    # Counting newlines is far cheaper than splitting, and most outputs are short.
    if output.count("\n") + 1 <= max_lines:
        return output
    lines = output.split("\n")
    head_count = max_lines // 2
    tail_count = max_lines - head_count
    omitted = len(lines) - head_count - tail_count
    return (
        "\n".join(lines[:head_count])
        + "\n[... "
        + str(omitted)
        + " lines omitted ...]\n"
        + "\n".join(lines[len(lines) - tail_count :])
    )


def resolve_limits(
    tool_name: str,
    *,
    char_limits: Mapping[str, int] | None = None,
    line_limits: Mapping[str, int | None] | None = None,
    tool_char_limit: int | None = None,
    tool_mode: str | None = None,
    tool_line_limit: int | None = None,
) -> tuple[int, str, int | None]:
    """(character limit, mode, line limit or None) for ``tool_name``.

    In ``line_limits`` a value of ``None`` or ``0`` switches line truncation off for that tool;
    a tool's own ``tool_line_limit`` of ``0`` does the same (``None`` there means "no opinion").
    """
    if char_limits and tool_name in char_limits:
        max_chars = char_limits[tool_name]
    elif tool_char_limit is not None:
        max_chars = tool_char_limit
    else:
        max_chars = DEFAULT_TOOL_LIMITS.get(tool_name, FALLBACK_CHAR_LIMIT)
    mode = tool_mode or DEFAULT_TRUNCATION_MODES.get(tool_name, FALLBACK_TRUNCATION_MODE)
    max_lines: int | None
    if line_limits and tool_name in line_limits:
        max_lines = line_limits[tool_name] or None
    elif tool_line_limit is not None:
        max_lines = tool_line_limit or None
    else:
        max_lines = DEFAULT_LINE_LIMITS.get(tool_name)
    return max_chars, mode, max_lines


def truncate_tool_output(
    output: str,
    tool_name: str,
    *,
    char_limits: Mapping[str, int] | None = None,
    line_limits: Mapping[str, int | None] | None = None,
    tool_char_limit: int | None = None,
    tool_mode: str | None = None,
    tool_line_limit: int | None = None,
) -> str:
    """Spec 5.3: the character pass, then the line pass where a line limit applies."""
    max_chars, mode, max_lines = resolve_limits(
        tool_name,
        char_limits=char_limits,
        line_limits=line_limits,
        tool_char_limit=tool_char_limit,
        tool_mode=tool_mode,
        tool_line_limit=tool_line_limit,
    )
    result = truncate_output(output, max_chars, mode)
    if max_lines is not None:
        result = truncate_lines(result, max_lines)
    return result

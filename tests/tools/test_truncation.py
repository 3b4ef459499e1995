"""Tool output truncation (spec 5.1-5.3, 9.5)."""

from __future__ import annotations

import pytest

from ra.tools.truncation import (
    DEFAULT_LINE_LIMITS,
    DEFAULT_TOOL_LIMITS,
    DEFAULT_TRUNCATION_MODES,
    FALLBACK_CHAR_LIMIT,
    resolve_limits,
    truncate_lines,
    truncate_output,
    truncate_tool_output,
)

HEAD_TAIL_MARKER = (
    "\n\n[WARNING: Tool output was truncated. {n} characters were removed from the middle. "
    "The full output is available in the event stream. "
    "If you need to see specific parts, re-run the tool with more targeted parameters.]\n\n"
)
TAIL_MARKER = (
    "[WARNING: Tool output was truncated. First {n} characters were removed. "
    "The full output is available in the event stream.]\n\n"
)


def test_default_tables_match_the_spec() -> None:
    assert DEFAULT_TOOL_LIMITS == {
        "read_file": 50_000,
        "shell": 30_000,
        "grep": 20_000,
        "glob": 20_000,
        "edit_file": 10_000,
        "apply_patch": 10_000,
        "write_file": 1_000,
        "spawn_agent": 20_000,
    }
    assert DEFAULT_TRUNCATION_MODES["read_file"] == "head_tail"
    assert DEFAULT_TRUNCATION_MODES["shell"] == "head_tail"
    assert DEFAULT_TRUNCATION_MODES["spawn_agent"] == "head_tail"
    for tail in ("grep", "glob", "edit_file", "apply_patch", "write_file"):
        assert DEFAULT_TRUNCATION_MODES[tail] == "tail"
    assert DEFAULT_LINE_LIMITS == {"shell": 256, "grep": 200, "glob": 500}
    assert resolve_limits("read_file")[2] is None and resolve_limits("edit_file")[2] is None


def test_short_output_untouched() -> None:
    text = "x" * 100
    assert truncate_output(text, 100) is text
    assert truncate_lines("a\nb", 2) == "a\nb"


def test_head_tail_exact_text() -> None:
    text = "A" * 60 + "B" * 40
    out = truncate_output(text, 20, "head_tail")
    assert out == "A" * 10 + HEAD_TAIL_MARKER.format(n=80) + "B" * 10


def test_head_tail_odd_limit_keeps_exactly_max_chars() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(101))
    out = truncate_output(text, 11, "head_tail")
    head, tail = out.split(HEAD_TAIL_MARKER.format(n=90))
    assert head == text[:5] and tail == text[-6:]


def test_tail_exact_text() -> None:
    text = "0123456789" * 5
    assert truncate_output(text, 10, "tail") == TAIL_MARKER.format(n=40) + "0123456789"
    assert truncate_output(text, 0, "tail") == TAIL_MARKER.format(n=50)


def test_unknown_mode_and_bad_limits() -> None:
    with pytest.raises(ValueError, match="unknown truncation mode"):
        truncate_output("x" * 10, 5, "middle")
    with pytest.raises(ValueError):
        truncate_lines("a\nb", 0)


def test_lines_head_tail() -> None:
    text = "\n".join(f"l{i}" for i in range(10))
    assert truncate_lines(text, 4) == "l0\nl1\n[... 6 lines omitted ...]\nl8\nl9"
    assert truncate_lines(text, 3) == "l0\n[... 7 lines omitted ...]\nl8\nl9"


def test_character_pass_runs_first_on_a_huge_single_line() -> None:
    huge = "x" * 10_000_000  # one 10 MB line: the line pass alone would let it through
    out = truncate_tool_output(huge, "shell")
    assert len(out) < 30_000 + 400
    assert "9970000 characters were removed from the middle" in out


def test_two_huge_lines_csv() -> None:
    row = "a," * 2_500_000
    out = truncate_tool_output(row + "\n" + row, "read_file")
    assert len(out) < 50_000 + 400 and "[WARNING: Tool output was truncated." in out


def test_line_pass_after_characters_for_shell() -> None:
    text = "\n".join(f"line {i}" for i in range(1000))  # short lines, under 30k chars
    assert len(text) < 30_000
    out = truncate_tool_output(text, "shell")
    lines = out.split("\n")
    assert lines[0] == "line 0" and lines[127] == "line 127"
    assert lines[128] == "[... 744 lines omitted ...]"
    assert lines[-1] == "line 999" and len(lines) == 257


def test_both_passes_apply_in_order() -> None:
    text = "\n".join("y" * 100 for _ in range(2000))  # 202k chars, 2000 lines
    out = truncate_tool_output(text, "grep")
    # tail mode keeps the last 20k chars (~198 lines) plus the marker lines, then the line pass (200)
    chars_first = truncate_lines(truncate_output(text, 20_000, "tail"), 200)
    lines_first = truncate_output(truncate_lines(text, 200), 20_000, "tail")
    assert out == chars_first != lines_first
    assert out.startswith("[WARNING: Tool output was truncated. First 181999 characters were removed.")
    assert "lines omitted ...]" in out and out.count("\n") == 200


def test_overrides_from_config_maps() -> None:
    text = "z" * 500
    assert "removed" in truncate_tool_output(text, "shell", char_limits={"shell": 100})
    assert truncate_tool_output(text, "shell", char_limits={"shell": 1000}) == text
    many = "\n".join("l" for _ in range(300))
    assert truncate_tool_output(many, "shell", line_limits={"shell": None}) == many
    assert truncate_tool_output(many, "shell", line_limits={"shell": 0}) == many
    assert "omitted" in truncate_tool_output(many, "read_file", line_limits={"read_file": 10})


def test_tool_declared_limits_and_fallback() -> None:
    assert resolve_limits("my_tool") == (FALLBACK_CHAR_LIMIT, "head_tail", None)
    assert resolve_limits("shell_command", tool_char_limit=30_000, tool_line_limit=256) == (30_000, "head_tail", 256)
    # The session's maps beat what the tool declares.
    assert resolve_limits("x", char_limits={"x": 5}, tool_char_limit=50)[0] == 5
    assert resolve_limits("shell", tool_line_limit=0)[2] is None
    assert resolve_limits("x", tool_mode="tail")[1] == "tail"

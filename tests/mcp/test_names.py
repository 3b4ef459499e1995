"""Model-facing names of MCP tools (ra.mcp.names)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ra.llm.types import ToolDefinition
from ra.mcp.names import assign_names, mcp_tool_name


def test_plain_names_read_like_claude_code_and_codex() -> None:
    assert mcp_tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert mcp_tool_name("my-server", "get-time") == "mcp__my-server__get-time"


def test_a_hyphenated_name_is_a_valid_tool_definition() -> None:
    # Claude Code keeps hyphens (mcp__my-server__tool): rules users already wrote must match ra's names.
    definition = ToolDefinition(mcp_tool_name("my-server", "get-time"), "t")
    assert definition.name == "mcp__my-server__get-time"


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("a.b", "c d", "mcp__a_b__c_d"),
        ("srv", "files/read", "mcp__srv__files_read"),
        ("ünï", "tool:x", "mcp___n___tool_x"),
    ],
)
def test_characters_outside_the_provider_set_become_underscores(server: str, tool: str, expected: str) -> None:
    name = mcp_tool_name(server, tool)
    assert name == expected
    ToolDefinition(name, "t")


def test_long_names_are_cut_to_64_with_a_stable_hash() -> None:
    tool = "x" * 80
    name = mcp_tool_name("server", tool)
    assert len(name) == 64
    assert name.startswith("mcp__server__xxxx")
    ToolDefinition(name, "t")
    other = mcp_tool_name("server", "x" * 79 + "y")  # same first 64 characters
    assert other != name and len(other) == 64


def test_the_hash_is_the_same_in_another_process() -> None:
    code = "from ra.mcp.names import mcp_tool_name; print(mcp_tool_name('server', 'x' * 80))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == mcp_tool_name("server", "x" * 80)


def test_two_tools_that_sanitise_alike_both_stay_callable() -> None:
    names = assign_names([("s", "a.b"), ("s", "a_b"), ("s", "a b")])
    assert names[("s", "a_b")] == "mcp__s__a_b"  # needed no change: keeps its name
    assert names[("s", "a.b")] != names[("s", "a b")]
    assert names[("s", "a.b")].startswith("mcp__s__a_b_") and len(set(names.values())) == 3


def test_collisions_across_servers_are_resolved_whatever_the_order() -> None:
    pairs = [("a__b", "c"), ("a", "b__c"), ("x.y", "t"), ("x_y", "t")]
    first = assign_names(pairs)
    assert first == assign_names(list(reversed(pairs)))
    assert len(set(first.values())) == 4
    assert first[("x_y", "t")] == "mcp__x_y__t"
    # Neither of the two plain "mcp__a__b__c" may keep the name: both get a suffix.
    assert first[("a__b", "c")] != "mcp__a__b__c" and first[("a", "b__c")] != "mcp__a__b__c"
    for name in first.values():
        ToolDefinition(name, "t")

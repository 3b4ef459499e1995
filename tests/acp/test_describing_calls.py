"""How a tool call is shown to an editor (kind, title, locations) and how a prompt's content
becomes ra's input: pure functions, checked without a process."""

from __future__ import annotations

import base64

import pytest
from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

from ra.acp.prompt import PromptError, prompt_input
from ra.acp.tools import tool_kind, tool_locations, tool_title


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("read_file", {"file_path": "a.py"}, "read"),
        ("grep_files", {"pattern": "x"}, "search"),
        ("list_dir", {"dir_path": "."}, "search"),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n*** End Patch"}, "edit"),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: a.py\n*** End Patch"}, "delete"),
        ("edit_file", {"file_path": "a.py"}, "edit"),
        ("shell_command", {"command": "ls"}, "execute"),
        ("web_fetch", {"url": "https://example.com"}, "fetch"),
        ("spawn_agent", {"task": "x"}, "think"),
        ("update_plan", {"plan": []}, "think"),
        ("mcp__notes__touch", {}, "other"),
        ("apply_patch", {"patch": "not a patch"}, "edit"),
    ],
)
def test_kinds(name: str, arguments: dict, kind: str) -> None:
    assert tool_kind(name, arguments) == kind


def test_titles_and_locations() -> None:
    assert tool_title("shell_command", {"command": "npm   test\n--watch"}) == "npm test --watch"
    assert tool_title("read_file", {"file_path": "src/a.py"}) == "Read src/a.py"
    assert tool_title("mcp__x__y", {}) == "mcp__x__y"
    assert tool_title("update_plan", {"plan": [], "query": "x"}) == "Update the plan"
    assert tool_title("shell_command", {"command": "x" * 200}).endswith("…")
    assert tool_locations("read_file", {"file_path": "src/a.py", "offset": 40}, "/w") == [
        {"path": "/w/src/a.py", "line": 40}
    ]
    patch = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert [loc["path"] for loc in tool_locations("apply_patch", {"patch": patch}, "/w")] == ["/w/a.py"]
    assert tool_locations("shell_command", {"command": "ls"}, "/w") == []


def test_prompt_content() -> None:
    png = base64.b64encode(b"\x89PNG....").decode()
    text, images = prompt_input(
        [
            TextContentBlock(type="text", text="fix "),
            TextContentBlock(type="text", text="this"),
            ResourceContentBlock(type="resource_link", uri="file:///w/a.py", name="a.py"),
            ImageContentBlock(type="image", data=png, mime_type="image/png"),
            EmbeddedResourceContentBlock(
                type="resource", resource=BlobResourceContents(uri="file:///w/i.png", blob=png, mime_type="image/png")
            ),
        ]
    )
    assert text.startswith("fix this\n\n")
    assert '<context uri="file:///w/a.py">a.py (not attached' in text
    assert [i.media_type for i in images] == ["image/png", "image/png"]


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ([], "empty"),
        ([TextContentBlock(type="text", text="  ")], "empty"),
        ([AudioContentBlock(type="audio", data="AAAA", mime_type="audio/wav")], "not supported"),
        ([ImageContentBlock(type="image", data="AAAA", mime_type="image/tiff")], "not one of"),
        ([ImageContentBlock(type="image", data="@@@", mime_type="image/png")], "not base64"),
    ],
)
def test_prompts_ra_cannot_take(blocks: list, message: str) -> None:
    with pytest.raises(PromptError, match=message):
        prompt_input(blocks)


def test_replayed_plan_calls_become_plans_or_the_calls_they_were() -> None:
    """session/load's replay without a process: a successful plan call is its plan, a failed one,
    one whose arguments were no JSON, and one the record has no result for are shown as calls."""
    from ra.acp.updates import history_updates
    from ra.agent.history import AssistantTurn, History, ToolResultsTurn, UserTurn
    from ra.llm.types import ToolCall, ToolResult

    plan = [{"step": "a", "status": "completed"}, {"step": "b", "status": "in_progress"}]
    history = History()
    history.append(UserTurn("go"))
    history.append(
        AssistantTurn(
            "",
            [
                ToolCall("p1", "update_plan", {"plan": plan}),
                ToolCall("p2", "update_plan", {}, "{not json", arguments_error="not JSON"),
                ToolCall("p3", "update_plan", {"plan": [{"step": "", "status": "pending"}]}),
            ],
        )
    )
    history.append(
        ToolResultsTurn(
            [ToolResult("p1", "Plan updated", False), ToolResult("p2", "bad", True), ToolResult("p3", "bad", True)]
        )
    )
    history.append(AssistantTurn("", [ToolCall("p4", "update_plan", {"plan": plan})]))
    got = [(u.session_update, getattr(u, "tool_call_id", None)) for u in history_updates(history, "/w")]
    assert got == [
        ("user_message_chunk", None),
        ("plan", None),
        ("tool_call", "p2"),
        ("tool_call_update", "p2"),
        ("tool_call", "p3"),
        ("tool_call_update", "p3"),
        ("tool_call", "p4"),
    ]
    (first,) = [u for u in history_updates(history, "/w") if u.session_update == "plan"]
    assert [(e.content, e.status, e.priority) for e in first.entries] == [
        ("a", "completed", "medium"),
        ("b", "in_progress", "medium"),
    ]

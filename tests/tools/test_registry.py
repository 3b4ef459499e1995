"""ToolRegistry and argument validation (spec 3.7, 3.8)."""

from __future__ import annotations

import pytest

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolRegistry

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "edits": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
                "required": ["old", "new"],
            },
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


def tool(name: str = "read_file", schema: dict | None = None, result: str = "ok") -> RegisteredTool:
    return RegisteredTool(ToolDefinition(name, f"{name} tool", schema or SCHEMA), lambda a, c: result)


def test_register_get_names_definitions() -> None:
    reg = ToolRegistry()
    reg.register(tool("read_file"))
    reg.register(tool("grep"))
    assert reg.names() == ["read_file", "grep"]
    assert [d.name for d in reg.definitions()] == ["read_file", "grep"]
    assert reg.get("grep") is not None and reg.get("nope") is None
    assert "grep" in reg and len(reg) == 2
    assert [t.name for t in reg] == ["read_file", "grep"]


def test_latest_registration_wins() -> None:
    reg = ToolRegistry([tool("shell", result="profile")])
    defs_before = reg.definitions()
    reg.register(tool("shell", result="custom"))
    assert len(reg) == 1
    assert reg.get("shell").executor({}, None) == "custom"  # type: ignore[union-attr, arg-type]
    assert reg.definitions() is not defs_before  # cache invalidated


def test_unregister() -> None:
    reg = ToolRegistry([tool("a"), tool("b")])
    assert reg.unregister("a") is True and reg.unregister("a") is False
    assert reg.names() == ["b"] and [d.name for d in reg.definitions()] == ["b"]


def test_a_reason_given_at_unregister_is_kept_until_the_name_returns() -> None:
    reg = ToolRegistry([tool("a"), tool("b")])
    assert reg.unregister("a", reason="server x is disabled") is True
    assert reg.unregister("b") is True
    assert (reg.withdrawn("a"), reg.withdrawn("b"), reg.withdrawn("c")) == ("server x is disabled", None, None)
    assert reg.copy().withdrawn("a") == "server x is disabled"  # a subagent's copy knows it too
    reg.register(tool("a"))
    assert reg.withdrawn("a") is None


def test_copy_is_independent() -> None:
    reg = ToolRegistry([tool("a")])
    clone = reg.copy()
    clone.register(tool("b"))
    assert reg.names() == ["a"] and clone.names() == ["a", "b"]


def test_bad_schema_fails_at_registration() -> None:
    bad = {"type": "object", "properties": {"n": {"type": "integr"}}}
    with pytest.raises(ValueError, match="invalid parameters schema at properties/n/type"):
        ToolRegistry().register(tool("x", bad))


def test_bad_registrations() -> None:
    with pytest.raises(TypeError):
        ToolRegistry().register("not a tool")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RegisteredTool(ToolDefinition("x", "d"), "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="truncation_mode"):
        RegisteredTool(ToolDefinition("x", "d"), print, truncation_mode="middle")
    with pytest.raises(ValueError):
        RegisteredTool(ToolDefinition("x", "d"), print, output_limit=-1)


def test_validation_accepts_good_arguments() -> None:
    t = tool()
    assert t.validate({"path": "a.py"}) is None
    assert t.validate({"path": "a.py", "limit": 3, "edits": [{"old": "a", "new": "b"}]}) is None


def test_validation_names_each_bad_field() -> None:
    t = tool()
    message = t.validate({"limit": "ten", "edits": [{"old": "a"}], "colour": "red"})
    assert message is not None
    assert message.startswith("Invalid arguments for tool read_file:")
    assert "- missing required field 'path'" in message
    assert "- field 'limit': 'ten' is not of type 'integer'" in message
    assert "- missing required field 'edits[0].new'" in message
    assert "- unexpected field 'colour'" in message
    assert "minimum" in (t.validate({"path": "p", "limit": 0}) or "")


def test_validator_is_compiled_once() -> None:
    t = tool()
    ToolRegistry([t])
    first = t.validator
    t.validate({"path": "x"})
    assert t.validator is first


def test_add_shorthand() -> None:
    reg = ToolRegistry()
    added = reg.add("ping", "Ping.", None, lambda a, c: "pong", output_limit=10)
    assert added.definition.parameters == {"type": "object", "properties": {}}
    assert added.output_limit == 10 and reg.get("ping") is added

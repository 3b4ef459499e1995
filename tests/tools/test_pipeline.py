"""The tool pipeline (spec 3.8): LOOKUP -> VALIDATE -> EXECUTE -> TRUNCATE -> EMIT -> RETURN."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from ra.llm.types import ToolCall, ToolCallData
from ra.tools.pipeline import ToolCallOutcome, ToolPipeline
from ra.tools.registry import AbortState, ToolContext, ToolError, ToolOutput, ToolRegistry

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@dataclass
class Sink:
    log: list[tuple[str, Any]] = field(default_factory=list)

    def tool_start(self, call: ToolCall) -> None:
        self.log.append(("start", call.id))

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None:
        self.log.append(("delta", (stream, chunk)))

    def tool_end(self, outcome: ToolCallOutcome) -> None:
        self.log.append(("end", outcome))


@dataclass
class Limits:
    tool_output_limits: dict = field(default_factory=dict)
    tool_line_limits: dict = field(default_factory=dict)


def make(registry: ToolRegistry, config: Any = None, abort: AbortState | None = None) -> tuple[ToolPipeline, Sink]:
    sink = Sink()
    return ToolPipeline(registry, "ENV", sink, config=config, abort=abort), sink  # type: ignore[arg-type]


async def test_happy_path_sync_and_async() -> None:
    reg = ToolRegistry()
    reg.add("double", "", SCHEMA, lambda a, c: str(a["n"] * 2))

    async def later(a: dict, c: ToolContext) -> str:
        await asyncio.sleep(0)
        return f"{c.env}:{c.call_id}:{c.tool_name}"

    reg.add("later", "", None, later)
    pipe, sink = make(reg)
    out = await pipe.run(ToolCall("1", "double", {"n": 21}))
    assert (out.content, out.is_error, out.full_output) == ("42", False, "42")
    out = await pipe.run(ToolCall("2", "later", {}))
    assert out.content == "ENV:2:later"
    assert [k for k, _ in sink.log] == ["start", "end", "start", "end"]
    assert sink.log[1][1] is not None and sink.log[1][1].duration_ms >= 0


async def test_unknown_tool() -> None:
    pipe, sink = make(ToolRegistry())
    out = await pipe.run(ToolCall("1", "ghost", {}))
    assert out.is_error and out.content == "Unknown tool: ghost. Available tools: none."
    assert [k for k, _ in sink.log] == ["start", "end"]


async def test_a_withdrawn_tool_is_refused_with_the_reason() -> None:
    reg = ToolRegistry()
    reg.add("ghost", "", None, lambda a, c: "ran")
    reg.unregister("ghost", reason="MCP server spooky is disabled")
    pipe, _ = make(reg)
    out = await pipe.run(ToolCall("1", "ghost", {}))
    assert out.is_error and out.content == "Tool ghost is not available: MCP server spooky is disabled."


async def test_unparseable_arguments() -> None:
    reg = ToolRegistry()
    ran: list[int] = []
    reg.add("double", "", SCHEMA, lambda a, c: ran.append(1) or "x")
    pipe, _ = make(reg)
    out = await pipe.run(ToolCall.from_data(ToolCallData("1", "double", "{n: 1")))
    assert out.is_error and "arguments are not valid JSON" in out.content
    assert ran == []


async def test_schema_validation_before_execution() -> None:
    reg = ToolRegistry()
    ran: list[int] = []
    reg.add("double", "", SCHEMA, lambda a, c: ran.append(1) or "x")
    pipe, _ = make(reg)
    out = await pipe.run(ToolCall("1", "double", {"n": "two"}))
    assert out.is_error and "field 'n': 'two' is not of type 'integer'" in out.content
    assert ran == []


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (RuntimeError("kaput"), "Tool error (bad): kaput"),
        (ToolError("old_string not found"), "Tool error (bad): old_string not found"),
        (FileNotFoundError(2, "No such file or directory", "a.txt"), "Tool error (bad): [Errno 2] No such file"),
        (KeyError("path"), "Tool error (bad): missing key 'path'"),
        (ValueError(), "Tool error (bad): ValueError"),
    ],
)
async def test_executor_exceptions_become_error_results(exc: Exception, message: str) -> None:
    reg = ToolRegistry()

    def bad(a: dict, c: ToolContext) -> str:
        raise exc

    reg.add("bad", "", None, bad)
    pipe, sink = make(reg)
    out = await pipe.run(ToolCall("1", "bad", {}))
    assert out.is_error and out.content.startswith(message)
    assert sink.log[-1][1].is_error


async def test_tool_output_object_and_structured_results() -> None:
    reg = ToolRegistry()
    reg.add("rich", "", None, lambda a, c: ToolOutput("exit 1", is_error=True, metadata={"exit_code": 1}))
    reg.add("img", "", None, lambda a, c: ToolOutput("an image", image_data=b"\x89PNG", image_media_type="image/png"))
    reg.add("data", "", None, lambda a, c: {"files": ["a", "b"], "count": 2})
    reg.add("none", "", None, lambda a, c: None)
    pipe, _ = make(reg)
    rich = await pipe.run(ToolCall("1", "rich", {}))
    assert rich.is_error and rich.metadata == {"exit_code": 1}
    img = await pipe.run(ToolCall("2", "img", {}))
    message = img.to_message()
    assert message.content[0].tool_result.image_data == b"\x89PNG"  # type: ignore[union-attr]
    assert message.name == "img" and message.tool_call_id == "2"
    data = await pipe.run(ToolCall("3", "data", {}))
    assert data.content == '{"files": ["a", "b"], "count": 2}'
    assert (await pipe.run(ToolCall("4", "none", {}))).content == ""


async def test_truncation_uses_config_then_tool_then_defaults() -> None:
    reg = ToolRegistry()
    reg.add("shell", "", None, lambda a, c: "x" * 40_000)
    reg.add("mine", "", None, lambda a, c: "y" * 500, output_limit=100, truncation_mode="tail")
    pipe, sink = make(reg, config=Limits())
    shell = await pipe.run(ToolCall("1", "shell", {}))
    assert shell.full_output == "x" * 40_000 and len(shell.content) < 30_400 and shell.truncated
    assert sink.log[1][1].full_output == "x" * 40_000  # EMIT carries the full output
    mine = await pipe.run(ToolCall("2", "mine", {}))
    assert mine.content.startswith("[WARNING: Tool output was truncated. First 400 characters")
    pipe.config = Limits(tool_output_limits={"mine": 1000})  # changed mid-session: applies at once
    assert not (await pipe.run(ToolCall("3", "mine", {}))).truncated


async def test_output_deltas_reach_the_sink() -> None:
    reg = ToolRegistry()

    def chatty(a: dict, c: ToolContext) -> str:
        c.emit_output("one")
        c.emit_output("")  # ignored
        assert c.on_output is not None
        c.on_output("stderr", "two")
        return "done"

    reg.add("chatty", "", None, chatty)
    pipe, sink = make(reg)
    await pipe.run(ToolCall("1", "chatty", {}))
    assert [v for k, v in sink.log if k == "delta"] == [("stdout", "one"), ("stderr", "two")]


async def test_blocking_tool_runs_in_a_thread() -> None:
    import threading

    reg = ToolRegistry()
    reg.add("where", "", None, lambda a, c: threading.current_thread().name, blocking=True)
    pipe, _ = make(reg)
    out = await pipe.run(ToolCall("1", "where", {}))
    assert out.content != threading.current_thread().name


async def test_cancellation_emits_end_and_propagates() -> None:
    reg = ToolRegistry()

    async def forever(a: dict, c: ToolContext) -> str:
        await asyncio.sleep(60)
        return "never"

    reg.add("forever", "", None, forever)
    pipe, sink = make(reg)
    task = asyncio.create_task(pipe.run(ToolCall("1", "forever", {})))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [k for k, _ in sink.log] == ["start", "end"]
    assert "cancelled" in sink.log[-1][1].content


async def test_aborted_pipeline_runs_nothing() -> None:
    reg = ToolRegistry()
    ran: list[int] = []
    reg.add("t", "", None, lambda a, c: ran.append(1) or "x")
    abort = AbortState()
    pipe, _ = make(reg, abort=abort)
    abort.set()
    out = await pipe.run(ToolCall("1", "t", {}))
    assert out.skipped and out.is_error and "aborted" in out.content and ran == []
    await asyncio.wait_for(abort.wait(), 1)


async def test_skip_answers_without_running() -> None:
    pipe, sink = make(ToolRegistry())
    out = pipe.skip(ToolCall("1", "anything", {}), "Skipped: reasons.")
    assert out.skipped and out.to_result().content == "Skipped: reasons." and out.to_result().is_error
    assert [k for k, _ in sink.log] == ["start", "end"]

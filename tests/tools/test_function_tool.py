"""@ra.tool at run time: arguments checked and converted, results and exceptions turned into what
the model reads, injection, sync functions in a thread, and the whole thing through a real Session
with the scripted model."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import os
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypedDict

import ra
from ra.agent.events import EventKind
from ra.agent.session import Session
from ra.agent.state import RunState
from ra.env.base import ExecutionEnvironment
from ra.env.local import LocalExecutionEnvironment
from ra.llm.testing import calls, reply
from ra.tools import ToolContext, ToolError, ToolOutput, ToolRegistry
from ra.tools.function import FunctionTool

from ..agent.support import FakeEnv, Recorder, make_session

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


@dataclass
class Point:
    x: float
    y: float = 0.0


@dataclass
class Shape:
    name: str
    points: list[Point] = field(default_factory=list)
    mode: Mode = Mode.SAFE


@dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


class Options(TypedDict, total=False):
    depth: int
    where: Point


class Span(NamedTuple):
    start: int
    end: int


def ctx_for(env: Any = None, **kwargs: Any) -> ToolContext:
    return ToolContext(env=env if env is not None else FakeEnv(), call_id="c1", tool_name="t", **kwargs)


async def run(tool: FunctionTool, arguments: dict[str, Any], ctx: ToolContext | None = None) -> Any:
    """Call the executor as the pipeline does (a worker thread for blocking tools)."""
    ctx = ctx or ctx_for()
    if tool.blocking:
        value = await asyncio.to_thread(tool.executor, arguments, ctx)
    else:
        value = tool.executor(arguments, ctx)
    if asyncio.iscoroutine(value):
        value = await value
    return value


# -- conversion ----------------------------------------------------------------------------------
async def test_arguments_become_the_types_the_hints_promise() -> None:
    seen: dict[str, Any] = {}

    @ra.tool
    def draw(
        shape: Shape,
        mode: Mode,
        scale: float,
        count: int,
        corner: tuple[int, int],
        labels: set[str],
        frozen: frozenset[int],
        opts: Options,
        span: Span,
        path: Path,
        when: datetime.datetime,
        day: datetime.date,
        ident: uuid.UUID,
        choice: Literal[Mode.FAST, "other"],
        maybe: Point | None = None,
        either: int | str = 0,
    ) -> str:
        seen.update(locals())
        return "ok"

    result = await run(
        draw,
        {
            "shape": {"name": "tri", "points": [{"x": 1}, {"x": 2, "y": 3}], "mode": "fast"},
            "mode": "safe",
            "scale": 2,
            "count": 3.0,
            "corner": [1, 2],
            "labels": ["a", "b"],
            "frozen": [1],
            "opts": {"where": {"x": 1.5}},
            "span": {"start": 1, "end": 4},
            "path": "src/a.py",
            "when": "2024-05-06T07:08:09",
            "day": "2024-05-06",
            "ident": "12345678-1234-5678-1234-567812345678",
            "choice": "fast",
            "maybe": {"x": 0},
            "either": "text",
        },
    )
    assert result == "ok"
    assert seen["shape"] == Shape("tri", [Point(1.0, 0.0), Point(2.0, 3.0)], Mode.FAST)
    assert type(seen["shape"].points[0].x) is float
    assert seen["mode"] is Mode.SAFE
    assert seen["scale"] == 2.0 and type(seen["scale"]) is float
    assert seen["count"] == 3 and type(seen["count"]) is int
    assert seen["corner"] == (1, 2)
    assert seen["labels"] == {"a", "b"}
    assert seen["frozen"] == frozenset({1})
    assert seen["opts"] == {"where": Point(1.5)}
    assert seen["span"] == Span(1, 4) and isinstance(seen["span"], Span)
    assert seen["path"] == Path("src/a.py")
    assert seen["when"] == datetime.datetime(2024, 5, 6, 7, 8, 9)
    assert seen["day"] == datetime.date(2024, 5, 6)
    assert seen["ident"] == uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert seen["choice"] is Mode.FAST
    assert seen["maybe"] == Point(0.0)
    assert seen["either"] == "text"


async def test_missing_optional_arguments_keep_the_functions_defaults() -> None:
    @ra.tool
    def f(a: int, /, b: int = 5, *, c: list[int] | None = None) -> str:
        return f"{a} {b} {c}"

    assert await run(f, {"a": 1}) == "1 5 None"
    assert await run(f, {"a": 1, "c": [2], "b": 3}) == "1 3 [2]"
    # null is not "use the default" unless the default is None: the schema says so, the call is refused
    assert f.definition.parameters["properties"]["b"] == {"type": "integer", "default": 5}
    refused = await run(f, {"a": 1, "b": None})
    assert (
        refused.is_error
        and refused.content == "Invalid arguments for tool f:\n- parameter 'b': expected an integer, got null"
    )


async def test_invalid_arguments_name_the_parameter_what_was_expected_and_what_came() -> None:
    @ra.tool
    def f(shape: Shape, mode: Mode, n: int, tags: list[str], point: Point | None = None) -> str:
        return "ran"

    result = await run(
        f,
        {"shape": {"name": 3, "extra": 1}, "mode": "turbo", "tags": ["a", 2], "point": {"y": 1}, "ctx": "x"},
    )
    assert isinstance(result, ToolOutput) and result.is_error
    assert result.content == (
        "Invalid arguments for tool f:\n"
        "- missing required parameter 'n' (an integer)\n"
        "- unknown parameter 'ctx'; the known ones are: shape, mode, n, tags, point\n"
        '- parameter \'mode\': expected one of "fast", "safe", got "turbo"\n'
        "- missing required parameter 'point.x' (a number)\n"
        "- unknown parameter 'extra' in 'shape'; the known ones are: name, points, mode\n"
        "- parameter 'shape.name': expected a string, got 3\n"
        "- parameter 'tags[1]': expected a string, got 2"
    )


async def test_no_lax_coercion_a_value_of_the_wrong_type_is_refused() -> None:
    @ra.tool
    def f(n: int = 0, mode: Mode = Mode.SAFE, flag: bool = False) -> str:
        return f"ran {n!r} {mode} {flag!r}"

    for arguments, line in [
        ({"n": True}, "parameter 'n': expected an integer, got true"),
        ({"n": "3"}, "parameter 'n': expected an integer, got \"3\""),
        ({"n": 1.5}, "parameter 'n': expected an integer, got 1.5"),
        ({"mode": "FAST"}, 'parameter \'mode\': expected one of "fast", "safe", got "FAST"'),
        ({"flag": 1}, "parameter 'flag': expected true or false, got 1"),
    ]:
        result = await run(f, arguments)
        assert isinstance(result, ToolOutput) and result.is_error, arguments
        assert result.content == f"Invalid arguments for tool f:\n- {line}"
    assert await run(f, {"n": 2.0}) == "ran 2 Mode.SAFE False"


async def test_a_types_own_checks_and_unparsable_strings_are_argument_errors() -> None:
    @ra.tool
    def f(p: Positive, day: datetime.date | None = None) -> str:
        return "ran"

    bad = await run(f, {"p": {"n": -1}})
    assert bad.is_error and bad.content == (
        "Invalid arguments for tool f:\n- parameter 'p': could not make a Positive: n must be positive"
    )
    bad = await run(f, {"p": {"n": 1}, "day": "next tuesday"})
    assert bad.is_error and bad.content.startswith(
        "Invalid arguments for tool f:\n- parameter 'day': expected an ISO 8601 date (YYYY-MM-DD), got \"next tuesday\""
    )
    assert await run(f, {"p": {"n": 1}, "day": None}) == "ran"


async def test_deeply_nested_arguments_are_an_error_not_a_crash() -> None:
    @dataclass
    class Node:
        child: Node | None = None

    @ra.tool
    def f(node: Node) -> str:
        return "ran"

    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"child": deep}
    result = await run(f, {"node": deep})
    assert result.is_error and "nested too deeply" in result.content


# -- results -------------------------------------------------------------------------------------
async def test_return_values() -> None:
    @ra.tool
    def value(kind: str) -> Any:
        return {
            "str": "plain",
            "none": None,
            "dataclass": Shape("sq", [Point(1, 2)]),
            "set": {"b", "a"},
            "tuple": Span(1, 2),
            "png": PNG,
            "text-bytes": "héllo".encode(),
            "binary": b"\xff\xfe\x00",
            "output": ToolOutput("custom", metadata={"k": 1}),
        }[kind]

    assert await run(value, {"kind": "str"}) == "plain"
    assert await run(value, {"kind": "none"}) == "null"
    assert json.loads(await run(value, {"kind": "dataclass"})) == {
        "name": "sq",
        "points": [{"x": 1, "y": 2}],
        "mode": "safe",
    }
    assert await run(value, {"kind": "set"}) == '["a", "b"]'
    assert await run(value, {"kind": "tuple"}) == '{"start": 1, "end": 2}'
    image = await run(value, {"kind": "png"})
    assert image.image_data == PNG and image.image_media_type == "image/png" and not image.is_error
    assert await run(value, {"kind": "text-bytes"}) == "héllo"
    binary = await run(value, {"kind": "binary"})
    assert binary.is_error and "3 bytes of binary data" in binary.content
    loop: dict[str, Any] = {}
    loop["self"] = loop

    @ra.tool
    def cyclic() -> dict[str, Any]:
        return loop

    circular = await run(cyclic, {})
    assert circular.is_error and circular.content.startswith("cyclic failed with RecursionError")
    output = await run(value, {"kind": "output"})
    assert output.content == "custom" and output.metadata == {"k": 1}


# -- exceptions ----------------------------------------------------------------------------------
async def test_tool_error_is_its_message_and_other_errors_name_their_type() -> None:
    secret_path = "/home/someone/.config/tokens"

    @ra.tool
    def fails(kind: str) -> str:
        if kind == "tool":
            raise ToolError("The file is locked; try again later.")
        if kind == "key":
            raise KeyError("name")
        if kind == "exit":
            sys.exit(3)
        raise RuntimeError(f"could not open {secret_path}")

    tool_error = await run(fails, {"kind": "tool"})
    assert tool_error.is_error and tool_error.content == "The file is locked; try again later."
    key = await run(fails, {"kind": "key"})
    assert key.content == "fails failed with KeyError: missing key 'name'"
    exit_ = await run(fails, {"kind": "exit"})
    assert exit_.is_error and exit_.content == "fails failed with SystemExit: 3"
    runtime = await run(fails, {"kind": "runtime"})
    assert runtime.content == f"fails failed with RuntimeError: could not open {secret_path}"
    # The traceback (with this file's path) is for the host, never in what the model reads.
    assert "Traceback" not in runtime.content and __file__ not in runtime.content
    error = runtime.metadata["error"]
    assert error["type"] == "builtins.RuntimeError"
    assert __file__ in error["traceback"] and "Traceback" in error["traceback"]

    quiet = ra.tool(name="quiet", show_errors=False)(fails.fn)
    hidden = await run(quiet, {"kind": "runtime"})
    assert hidden.content == "quiet failed with RuntimeError." and secret_path not in hidden.content
    assert secret_path in hidden.metadata["error"]["message"]


async def test_async_function_errors_and_a_sync_callable_returning_a_coroutine() -> None:
    @ra.tool
    async def later(n: int) -> int:
        await asyncio.sleep(0)
        if n < 0:
            raise ValueError("negative")
        return n * 2

    assert await run(later, {"n": 2}) == "4"
    assert (await run(later, {"n": -1})).content == "later failed with ValueError: negative"

    def hands_back(n: int) -> Any:
        return later.fn(n)

    wrapped = ra.tool(hands_back)
    assert await run(wrapped, {"n": 3}) == "6"
    assert (await run(wrapped, {"n": -3})).content == "hands_back failed with ValueError: negative"


# -- sync and async ------------------------------------------------------------------------------
async def test_sync_functions_run_in_a_worker_thread_async_on_the_loop() -> None:
    threads: dict[str, int] = {}

    @ra.tool
    def sync_fn() -> str:
        threads["sync"] = threading.get_ident()
        return "s"

    @ra.tool(blocking=False)
    def inline_fn() -> str:
        threads["inline"] = threading.get_ident()
        return "i"

    @ra.tool
    async def async_fn() -> str:
        threads["async"] = threading.get_ident()
        return "a"

    assert (sync_fn.blocking, inline_fn.blocking, async_fn.blocking) == (True, False, False)
    session, _ = make_session([calls(("sync_fn", {}), ("inline_fn", {}), ("async_fn", {})), reply("done")])
    for t in (sync_fn, inline_fn, async_fn):
        session.profile.tool_registry.register(t)
    await session.submit("go")
    await session.close()
    loop_thread = threading.get_ident()
    assert threads["inline"] == loop_thread and threads["async"] == loop_thread
    assert threads["sync"] != loop_thread


async def test_a_slow_sync_tool_does_not_stall_the_loop() -> None:
    started = threading.Event()

    @ra.tool
    def slow() -> str:
        started.wait(2)
        return "slow done"

    @ra.tool
    async def quick() -> str:
        started.set()  # runs while `slow` is waiting: the loop is free
        return "quick done"

    session, model = make_session([calls(("slow", {}), ("quick", {})), reply("ok")], parallel=True)
    for t in (slow, quick):
        session.profile.tool_registry.register(t)
    await asyncio.wait_for(session.submit("go"), 5)
    await session.close()
    tool_texts = [m.content[0].tool_result.content for m in model.requests[1].messages if m.role == "tool"]
    assert tool_texts == ["slow done", "quick done"]


# -- injection -----------------------------------------------------------------------------------
async def test_injection_of_context_env_run_state_and_session() -> None:
    got: dict[str, Any] = {}

    @ra.tool
    def inspect_all(ctx: ToolContext, env: ExecutionEnvironment, text: str, state: RunState, session: Session) -> str:
        got.update(ctx=ctx, env=env, state=state, session=session)
        ctx.emit_output(f"working on {text}")
        return f"{text} at turn {state.turn_count}"

    env = LocalExecutionEnvironment(working_dir=os.getcwd())
    session, model = make_session([calls(("inspect_all", {"text": "x"})), reply("ok")], env=env)
    session.profile.tool_registry.register(inspect_all)
    recorder = Recorder(session)
    await session.submit("go")
    await session.close()
    assert got["session"] is session and got["env"] is env and got["ctx"].env is env
    assert got["state"].session_id == session.id
    assert [e["delta"] for e in recorder.of(EventKind.TOOL_CALL_OUTPUT_DELTA)] == ["working on x"]
    tool_texts = [m.content[0].tool_result.content for m in model.requests[1].messages if m.role == "tool"]
    assert tool_texts == ["x at turn 1"]


async def test_any_executor_reads_the_run_state_from_its_context() -> None:
    seen: list[Any] = []

    def raw(arguments: dict[str, Any], ctx: ToolContext) -> str:
        seen.extend([ctx.run_state, ctx.run_state.turn_count])
        return "ok"

    session, _ = make_session([calls(("raw", {})), reply("done")])
    session.profile.tool_registry.add("raw", "Read the run state.", None, raw)
    await session.submit("go")
    await session.close()
    assert isinstance(seen[0], RunState) and seen[0].session_id == session.id and seen[1] == 1


async def test_injection_that_cannot_be_satisfied_is_an_error_result() -> None:
    @ra.tool
    def needs_local(env: LocalExecutionEnvironment) -> str:
        return "ran"

    @ra.tool
    def needs_state(state: RunState) -> str:
        return "ran"

    @ra.tool
    def maybe_state(state: RunState | None) -> str:
        return f"state={state}"

    @ra.tool
    def any_env(env: ExecutionEnvironment) -> str:
        return type(env).__name__

    assert await run(any_env, {}, ctx_for(FakeEnv())) == "FakeEnv"  # the protocol: whatever env the session has
    wrong_env = await run(needs_local, {}, ctx_for(FakeEnv()))
    assert wrong_env.is_error and wrong_env.content == (
        "Tool needs_local cannot run here: parameter 'env' needs a LocalExecutionEnvironment, "
        "and this session has a FakeEnv."
    )
    no_state = await run(needs_state, {}, ctx_for())
    assert no_state.is_error and "it needs a run state (parameter 'state') and none is available" in no_state.content
    assert await run(maybe_state, {}, ctx_for()) == "state=None"


async def test_the_model_cannot_fill_an_injected_parameter() -> None:
    @ra.tool
    def f(ctx: ToolContext, text: str) -> str:
        return f"{type(ctx).__name__} {text}"

    result = await run(f, {"text": "a", "ctx": {"env": "mine"}})
    assert result.is_error and "unknown parameter 'ctx'" in result.content
    assert await run(f, {"text": "a"}) == "ToolContext a"


# -- through a session ---------------------------------------------------------------------------
async def test_through_a_session_results_errors_and_the_host_detail() -> None:
    @ra.tool
    def area(shape: Shape, unit: Literal["cm", "m"] = "m") -> dict[str, Any]:
        """The area of a polygon."""
        if len(shape.points) < 3:
            raise ValueError(f"{shape.name} has {len(shape.points)} points; a polygon needs 3")
        return {"name": shape.name, "unit": unit, "mode": shape.mode}

    registry = ToolRegistry()
    registry.register(area)
    script = [
        calls(("area", {"shape": {"name": "tri", "points": [{"x": 0}, {"x": 1}, {"x": 0, "y": 1}]}})),
        calls(("area", {"shape": {"name": "line", "points": [{"x": 0}]}, "unit": "km"})),
        calls(("area", {"shape": {"name": "line", "points": [{"x": 0}]}})),
        reply("done"),
    ]
    session, model = make_session(script, tools=registry)
    recorder = Recorder(session)
    result = await session.submit("measure")
    await session.close()
    assert result.text == "done"
    (definition,) = model.requests[0].tools
    assert definition.name == "area" and definition.description == "The area of a polygon."

    def tool_text(request: Any) -> str:
        return next(m for m in reversed(request.messages) if m.role == "tool").content[0].tool_result.content

    assert json.loads(tool_text(model.requests[1])) == {"name": "tri", "unit": "m", "mode": "safe"}
    assert tool_text(model.requests[2]) == (
        'Invalid arguments for tool area:\n- parameter \'unit\': expected one of "cm", "m", got "km"'
    )
    assert tool_text(model.requests[3]) == "area failed with ValueError: line has 1 points; a polygon needs 3"
    ends = recorder.of(EventKind.TOOL_CALL_END)
    assert "Traceback" in ends[2]["metadata"]["error"]["traceback"]


# -- still a function ----------------------------------------------------------------------------
async def test_the_decorated_function_stays_callable() -> None:
    @ra.tool
    def add(a: int, b: int = 0) -> int:
        """Add two numbers."""
        return a + b

    @ra.tool
    async def add_later(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5 and add(a=1) == 1
    assert await add_later(2, 3) == 5
    assert add.__name__ == "add" and add.__doc__ == "Add two numbers." and add.__wrapped__ is add.fn
    assert {add: 1}[add] == 1  # hashable, like a function
    assert isinstance(add, ra.RegisteredTool)
    assert ra.tool is ra.tools.tool and ra.FunctionTool is FunctionTool


async def test_a_renamed_copy_runs_as_itself() -> None:
    import dataclasses

    from ra.llm.types import ToolDefinition

    @ra.tool
    def add(a: int, b: int = 0) -> int:
        return a + b

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    renamed = dataclasses.replace(add, definition=ToolDefinition("plus", "Add.", schema))
    assert renamed.name == "plus" and add.name == "add"
    assert await run(renamed, {"a": 2}) == "2"
    refused = await run(renamed, {"a": 2, "b": 3})  # its own (narrower) schema, its own name
    assert refused.content == "Invalid arguments for tool plus:\n- unknown parameter 'b'; the known ones are: a"
    assert await run(add, {"a": 2, "b": 3}) == "5"


def test_import_ra_does_not_import_the_function_tool_modules() -> None:
    code = (
        "import sys, ra, ra.tools; ra.ToolRegistry;"
        "print(sorted(m for m in sys.modules if m.startswith('ra.tools.f') or m == 'ra.tools.docstrings'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"

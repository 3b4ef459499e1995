"""coding-agent-loop-spec 9.13: the integration smoke test, for each profile, without API keys.

The spec's seven steps run in ONE session per profile (OpenAI, Anthropic, Gemini) with the real
profile, tools, LocalExecutionEnvironment and adapter. The model is scripted and answers over
HTTP in the provider's own streaming format (every profile streams), re-chunked at random byte
offsets so the adapters' SSE reassembly is exercised too. Where the spec says "verify the agent
adjusts" or "handles it gracefully", the scripted model's next move is checked against what the
provider request actually carried (the steering message, the timeout result).

Deviation kept on purpose: step 7 uses a 500 ms session ``default_command_timeout_ms`` instead of
10 s, and the Anthropic profile is built with ``shell_timeout_ms=None`` so that its shell tool
follows the session default (its own default is Claude Code's 120 s).
"""

from __future__ import annotations

from typing import Any

from ra.agent import SessionConfig
from ra.agent.config import SessionState
from ra.agent.events import EventKind, SessionEvent
from tests.parity.support import (
    Agent,
    Harness,
    agent_id_of,
    assert_failed,
    assert_ok,
    edit,
    output_lines,
    steer_on_first_tool_call,
)
from tests.support.wire import Wire, WireRequest, say, tool, use

E = EventKind

SUBAGENT_TASK = (
    "Write pytest tests for hello.py in test_hello.py: run it with subprocess and check both lines "
    "it prints. Reply with what the tests check."
)
FLASK_APP = """from flask import Flask

app = Flask(__name__)


@app.route("/")
def index():
    return "home"


@app.route("/users")
def users():
    return []
"""
HEALTH_APP = """from flask import Flask

app = Flask(__name__)


@app.route("/health")
def health():
    return {"status": "ok"}
"""
CHILD_TEST = """import subprocess
import sys


def test_prints_both_lines():
    out = subprocess.run([sys.executable, "hello.py"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["Hello World", "Goodbye"]
"""


def since(agent: Agent, mark: int, kind: EventKind, tool_name: str | None = None) -> list[SessionEvent]:
    return [e for e in agent.events[mark:] if e.kind is kind and (tool_name is None or e.get("tool_name") == tool_name)]


async def test_integration_smoke(harness: Harness, wire: Wire) -> None:
    harness.model.chunking = "random:9"
    agent = harness.start(SessionConfig(default_command_timeout_ms=500), shell_timeout_ms=None)
    env, model = agent.env, harness.model

    # -- 1. Simple file creation ------------------------------------------------------------------
    model.then(
        use(tool("write_file", file_path="hello.py", content="print('Hello World')\n")),
        say("Created hello.py."),
    )
    await agent.submit("Create a file called hello.py that prints 'Hello World'")
    assert await env.file_exists("hello.py")
    assert "Hello" in await env.read_file("hello.py")

    # -- 2. Read and edit -------------------------------------------------------------------------
    def add_goodbye(request: WireRequest) -> Any:
        [view] = request.new_results
        [line] = [text for text in output_lines(view) if "Hello" in text]
        return use(edit(wire, "hello.py", line, f"{line}\nprint('Goodbye')"))

    model.then(use(tool("read_file", file_path="hello.py")), add_goodbye, say("Added a Goodbye line."))
    await agent.submit("Read hello.py and add a second print statement that says 'Goodbye'")
    content = await env.read_file("hello.py")
    assert "Hello" in content and "Goodbye" in content

    # -- 3. Shell execution -----------------------------------------------------------------------
    def show_output(request: WireRequest) -> Any:
        [view] = request.new_results
        assert_ok(view)
        assert "Hello World\nGoodbye" in view.output
        return say("It prints:\nHello World\nGoodbye")

    model.then(use(tool("shell", command="python3 hello.py")), show_output)
    mark = len(agent.events)
    await agent.submit("Run hello.py and show the output")
    [run] = since(agent, mark, E.TOOL_CALL_END, "shell")
    assert not run["is_error"] and "Hello World\nGoodbye" in run["output"]

    # -- 4. Truncation verification ---------------------------------------------------------------
    await env.write_file("big.txt", "x" * 100_000)

    def describe_big(request: WireRequest) -> Any:
        [view] = request.new_results
        assert "[WARNING: Tool output was truncated." in view.output
        assert view.output.count("x") <= 50_000
        return say("big.txt is one line of 100,000 'x' characters.")

    model.then(use(tool("read_file", file_path="big.txt")), describe_big)
    mark = len(agent.events)
    await agent.submit("Read big.txt")
    [read] = since(agent, mark, E.TOOL_CALL_END, "read_file")
    assert "x" * 100_000 in read["output"] and "WARNING" not in read["output"]
    assert read["truncated"]

    # -- 5. Steering ------------------------------------------------------------------------------
    steering = "Actually, just create a single /health endpoint for now"
    steer_on_first_tool_call(agent, steering)

    def adjust(request: WireRequest) -> Any:
        assert request.new_user_texts == [steering]
        return use(tool("write_file", file_path="app.py", content=HEALTH_APP))

    model.then(use(tool("write_file", file_path="app.py", content=FLASK_APP)), adjust, say("app.py has /health only."))
    await agent.submit("Create a Flask web application with multiple routes")
    app = (agent.root / "app.py").read_text()
    assert '"/health"' in app and '"/users"' not in app
    assert [e["content"] for e in agent.of(E.STEERING_INJECTED)] == [steering]

    # -- 6. Subagent ------------------------------------------------------------------------------
    def child_writes_tests(request: WireRequest) -> Any:
        [view] = request.new_results
        assert "print('Goodbye')" in view.output  # the child reads the same filesystem
        return use(tool("write_file", file_path="test_hello.py", content=CHILD_TEST))

    child = model.lane(
        "child",
        lambda r: r.first_user_text == SUBAGENT_TASK,
        use(tool("read_file", file_path="hello.py")),
        child_writes_tests,
        say("test_hello.py runs hello.py and checks it prints Hello World then Goodbye."),
    )

    def wait_for_child(request: WireRequest) -> Any:
        [view] = request.new_results
        return use(tool("wait", agent_id=agent_id_of(view)))

    def review(request: WireRequest) -> Any:
        [view] = request.new_results
        assert "checks it prints Hello World then Goodbye" in view.output
        return use(tool("read_file", file_path="test_hello.py"))

    def approve(request: WireRequest) -> Any:
        [view] = request.new_results
        assert "Hello World" in view.output and "Goodbye" in view.output
        return say("The subagent's test covers both lines; it looks right.")

    model.then(use(tool("spawn_agent", task=SUBAGENT_TASK)), wait_for_child, review, approve)
    mark = len(agent.events)
    await agent.submit("Spawn a subagent to write tests for hello.py, then review its output")
    assert (agent.root / "test_hello.py").read_text() == CHILD_TEST
    child_calls = [
        e["event"]["tool_name"] for e in since(agent, mark, E.SUBAGENT_EVENT) if e["kind"] == E.TOOL_CALL_END
    ]
    assert child_calls == ["read_file", "write_file"]
    assert len(child.requests) == 3 and all(r.stream for r in child.requests)

    # -- 7. Timeout handling ----------------------------------------------------------------------
    def graceful(request: WireRequest) -> Any:
        [view] = request.new_results
        assert_failed(wire, view, "Command timed out after 500ms")
        return say("`sleep 30` was stopped at the 500 ms default timeout; nothing else is affected.")

    model.then(use(tool("shell", command="sleep 30")), graceful)
    mark = len(agent.events)
    await agent.submit("Run 'sleep 30' with the default timeout")
    [slept] = since(agent, mark, E.TOOL_CALL_END, "shell")
    assert slept["is_error"] and slept["metadata"]["timed_out"] and slept["metadata"]["timeout_ms"] == 500

    # -- the session as a whole -------------------------------------------------------------------
    assert agent.session.state is SessionState.IDLE
    assert all(r.stream for r in model.requests)  # the profile streams, so every call did
    assert len(agent.of(E.PROCESSING_END)) == 7
    await agent.session.close()
    assert agent.events[-1].kind is E.SESSION_END

"""coding-agent-loop-spec 9.12: the cross-provider parity matrix, one test per row, each run for
the OpenAI, Anthropic and Gemini profiles (the ``wire`` fixture).

Every cell drives a real Session with the real profile, tools and LocalExecutionEnvironment (real
files in tmp_path, real processes) through the real provider adapter over HTTP to 127.0.0.1. The
"model" is scripted (tests/support/wire.py) and answers in that provider's wire format; where its
next move depends on what it was sent (a tool result, a steering message), the script step reads
the request. Each cell asserts on the files and events and on the provider-shaped requests the
server received (``function_call_output`` items, ``tool_result`` blocks, ``functionResponse``
parts). docs/parity.md maps each cell to its test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ra.agent import SessionConfig
from ra.agent.events import EventKind, SessionEvent
from tests.parity.support import (
    Harness,
    agent_id_of,
    assert_failed,
    assert_ok,
    edit,
    edit_tool,
    output_lines,
    results_by_call,
    steer_on_first_tool_call,
)
from tests.support.wire import Wire, WireRequest, say, tool, use

E = EventKind


# --------------------------------------------------------------------------------------------------
# 1. Simple file creation
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
async def test_simple_file_creation(harness: Harness, wire: Wire, stream: bool) -> None:
    agent = harness.start(SessionConfig(stream=stream))
    harness.model.then(
        use(tool("write_file", file_path="hello.py", content="print('Hello World')\n")),
        say("Created hello.py."),
    )
    result = await agent.submit("Create a file called hello.py that prints 'Hello World'")

    assert result.stop_reason == "completed" and result.text == "Created hello.py."
    assert (agent.root / "hello.py").read_text() == "print('Hello World')\n"
    first, second = harness.model.requests
    assert [first.stream, second.stream] == [stream, stream]
    assert first.new_user_texts == ["Create a file called hello.py that prints 'Hello World'"]
    assert "write_file" in first.tool_names and first.system
    [(name, view)] = results_by_call(second)
    assert name == "write_file"
    assert_ok(view)
    [end] = agent.tool_ends("write_file")
    assert not end["is_error"]
    assert bool(agent.of(E.ASSISTANT_TEXT_DELTA)) == stream  # text streamed only when streaming


# --------------------------------------------------------------------------------------------------
# 2. Read a file, then edit it
# --------------------------------------------------------------------------------------------------


async def test_read_file_then_edit_it(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    (agent.root / "greet.py").write_text('def greet(name):\n    return "Hello, " + name\n')

    def after_read(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "read_file"
        assert_ok(view)
        assert output_lines(view) == ["def greet(name):", '    return "Hello, " + name']
        return use(edit(wire, "greet.py", '    return "Hello, " + name', '    return f"Hello, {name}!"'))

    harness.model.then(use(tool("read_file", file_path="greet.py")), after_read, say("greet() now uses an f-string."))
    result = await agent.submit("Read greet.py and make greet() use an f-string")

    assert result.stop_reason == "completed"
    assert (agent.root / "greet.py").read_text() == 'def greet(name):\n    return f"Hello, {name}!"\n'
    [(name, view)] = results_by_call(harness.model.requests[-1])
    assert name == edit_tool(wire)
    assert_ok(view)


# --------------------------------------------------------------------------------------------------
# 3. Multi-file edit in one session
# --------------------------------------------------------------------------------------------------


async def test_multi_file_edit_in_one_session(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    for name in ("a.py", "b.py", "c.py"):
        (agent.root / name).write_text(f"NAME = {name!r}\nVERSION = 1\n")

    if wire.name == "openai":  # codex edits several files with one patch
        patch = "\n".join(
            [
                "*** Begin Patch",
                "*** Update File: a.py",
                "@@",
                "-VERSION = 1",
                "+VERSION = 2",
                "*** Update File: b.py",
                "@@",
                "-VERSION = 1",
                "+VERSION = 2",
                "*** End Patch",
                "",
            ]
        )
        first_round = use(tool("apply_patch", patch=patch))
    else:
        first_round = use(
            edit(wire, "a.py", "VERSION = 1", "VERSION = 2"), edit(wire, "b.py", "VERSION = 1", "VERSION = 2")
        )
    harness.model.then(
        first_round,
        say("a.py and b.py are at version 2."),
        use(edit(wire, "c.py", "VERSION = 1", "VERSION = 2")),
        say("c.py too."),
    )
    first = await agent.submit("Bump VERSION to 2 in a.py and b.py")
    second = await agent.submit("Now do the same in c.py")

    assert first.stop_reason == second.stop_reason == "completed"
    for name in ("a.py", "b.py", "c.py"):
        assert (agent.root / name).read_text() == f"NAME = {name!r}\nVERSION = 2\n"
    requests = harness.model.requests
    assert len(requests) == 4
    for name, view in results_by_call(requests[1]):
        assert name == edit_tool(wire)
        assert_ok(view)
    # One session: the second input's request carries the first input's whole exchange.
    assert requests[2].user_texts == ["Bump VERSION to 2 in a.py and b.py", "Now do the same in c.py"]
    assert len(requests[2].tool_calls) == len(first_round.calls)
    assert len(agent.of(E.PROCESSING_END)) == 2


# --------------------------------------------------------------------------------------------------
# 4. Shell command execution
# --------------------------------------------------------------------------------------------------


async def test_shell_command_execution(harness: Harness, wire: Wire) -> None:
    agent = harness.start()

    def after_shell(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "shell"
        assert_ok(view)
        assert "Exit code: 0" in view.output
        assert "42" in view.output and "to-stdout" in view.output and "to-stderr" in view.output
        return say("It printed 42.")

    harness.model.then(
        use(tool("shell", command="echo to-stdout; echo to-stderr >&2; python3 -c 'print(6 * 7)'")), after_shell
    )
    result = await agent.submit("Compute 6*7 with python")

    assert result.text == "It printed 42."
    [end] = agent.tool_ends("shell")
    assert not end["is_error"] and end["metadata"]["exit_code"] == 0
    streamed = "".join(e["delta"] for e in agent.of(E.TOOL_CALL_OUTPUT_DELTA))
    assert "42" in streamed


# --------------------------------------------------------------------------------------------------
# 5. Shell command timeout handling
# --------------------------------------------------------------------------------------------------


async def test_shell_command_timeout_handling(harness: Harness, wire: Wire) -> None:
    agent = harness.start()

    def after_timeout(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "shell"
        assert_failed(wire, view, "Exit code:", "Command timed out after 300ms", "timeout_ms")
        return use(tool("shell", command="echo finished-quickly", timeout_ms=5000))

    def after_retry(request: WireRequest) -> Any:
        [(_, view)] = results_by_call(request)
        assert_ok(view)
        assert "finished-quickly" in view.output
        return say("The slow command timed out; the quick one ran.")

    harness.model.then(use(tool("shell", command="sleep 5", timeout_ms=300)), after_timeout, after_retry)
    result = await agent.submit("Run the slow job, but do not wait long")

    assert result.stop_reason == "completed"
    first, second = agent.tool_ends("shell")
    assert first["is_error"] and first["metadata"]["timed_out"] and first["metadata"]["timeout_ms"] == 300
    assert not second["is_error"]


# --------------------------------------------------------------------------------------------------
# 6. Grep + glob to find files
# --------------------------------------------------------------------------------------------------


async def test_grep_and_glob_find_files(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    files = {
        "src/app.py": "def main():\n    pass  # TODO: handle errors\n",
        "src/util.py": "def helper():\n    return 1\n",
        "tests/test_app.py": "def test_main():\n    assert True\n",
        "docs/notes.md": "TODO: write the docs\n",
    }
    for path, text in files.items():
        (agent.root / path).parent.mkdir(parents=True, exist_ok=True)
        (agent.root / path).write_text(text)

    def after_glob(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "glob"
        assert_ok(view)
        for path in ("src/app.py", "src/util.py", "tests/test_app.py"):
            assert path in view.output
        assert "notes.md" not in view.output
        return use(tool("grep", pattern="TODO", path="src"))

    def after_grep(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "grep"
        assert_ok(view)
        assert "app.py" in view.output
        assert "util.py" not in view.output and "notes.md" not in view.output
        return say("The TODO is in src/app.py.")

    harness.model.then(use(tool("glob", pattern="**/*.py")), after_glob, after_grep)
    result = await agent.submit("Which Python source file under src has a TODO?")

    assert result.text == "The TODO is in src/app.py."
    assert [e["tool_name"] for e in agent.tool_ends()] == ["glob", "grep"]


# --------------------------------------------------------------------------------------------------
# 7. Multi-step task (read -> analyze -> edit)
# --------------------------------------------------------------------------------------------------


async def test_multi_step_read_analyze_edit(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    (agent.root / "stats.py").write_text(
        '"""Small statistics helpers."""\n\n\ndef mean(values):\n    return sum(values) / (len(values) - 1)\n'
    )

    def analyze(request: WireRequest) -> Any:
        # The "model" finds the bug in what it was sent, and fixes exactly that line.
        [(_, view)] = results_by_call(request)
        [buggy] = [line for line in output_lines(view) if "len(values) - 1" in line]
        return use(edit(wire, "stats.py", buggy, buggy.replace("(len(values) - 1)", "len(values)")))

    def verify(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == edit_tool(wire)
        assert_ok(view)
        return use(tool("shell", command="python3 -c 'from stats import mean; print(mean([1, 2, 3]))'"))

    def conclude(request: WireRequest) -> Any:
        [(_, view)] = results_by_call(request)
        assert "2.0" in view.output
        return say("mean() divided by n - 1; it now divides by n and mean([1, 2, 3]) is 2.0.")

    harness.model.then(use(tool("read_file", file_path="stats.py")), analyze, verify, conclude)
    result = await agent.submit("mean([1, 2, 3]) gives the wrong answer; find and fix the bug")

    assert result.stop_reason == "completed"
    assert "return sum(values) / len(values)\n" in (agent.root / "stats.py").read_text()
    assert [e["tool_name"] for e in agent.tool_ends()] == ["read_file", edit_tool(wire), "shell"]


# --------------------------------------------------------------------------------------------------
# 8. Tool output truncation (large file)
# --------------------------------------------------------------------------------------------------


async def test_tool_output_truncation_large_file(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    lines = [f"row {i:04d}: " + "abcdefgh" * 7 for i in range(1, 2001)]
    (agent.root / "data.txt").write_text("\n".join(lines) + "\n")

    def after_read(request: WireRequest) -> Any:
        [(_, view)] = results_by_call(request)
        assert "[WARNING: Tool output was truncated." in view.output
        assert len(view.output) < 51_000
        assert "row 0001:" in view.output and "row 2000:" in view.output  # head and tail kept
        assert "row 1000:" not in view.output
        return say("The file is large; I saw its beginning and end.")

    harness.model.then(use(tool("read_file", file_path="data.txt")), after_read)
    await agent.submit("Read data.txt")

    [end] = agent.tool_ends("read_file")
    full = end["output"]
    assert "WARNING: Tool output was truncated" not in full
    assert len(full) > 100_000 and "row 1000:" in full and end["truncated"]
    assert full.count("\n") == 1999  # every line, untruncated, in the event


# --------------------------------------------------------------------------------------------------
# 9. Parallel tool calls
# --------------------------------------------------------------------------------------------------


async def test_parallel_tool_calls(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    assert agent.session.profile.supports_parallel_tool_calls
    (agent.root / "notes.txt").write_text("parallel\n")
    # The first command only sees the flag if the second runs while it waits: sequential execution
    # would print "no-flag" after ~3 s.
    waiter = (
        "for i in $(seq 1 150); do [ -f flag ] && break; sleep 0.02; done; [ -f flag ] && echo saw-flag || echo no-flag"
    )

    def after_round(request: WireRequest) -> Any:
        pairs = results_by_call(request)
        assert [name for name, _ in pairs] == ["shell", "shell", "read_file"]
        (_, wait_view), (_, touch_view), (_, read_view) = pairs
        assert "saw-flag" in wait_view.output
        assert "touched" in touch_view.output
        assert "parallel" in read_view.output
        for _, view in pairs:
            assert_ok(view)
        return say("All three ran together.")

    harness.model.then(
        use(
            tool("shell", command=waiter, timeout_ms=10_000),
            tool("shell", command="touch flag && echo touched"),
            tool("read_file", file_path="notes.txt"),
        ),
        after_round,
    )
    await agent.submit("Do the three things at once")

    requests = harness.model.requests
    assert len(requests) == 2  # all three results in one continuation request
    assert len(requests[1].new_results) == 3
    if wire.name == "anthropic":  # one user message holding the three tool_result blocks
        last = requests[1].body["messages"][-1]
        assert last["role"] == "user" and [b["type"] for b in last["content"]] == ["tool_result"] * 3
    elif wire.name == "gemini":
        last = requests[1].body["contents"][-1]
        assert last["role"] == "user" and all("functionResponse" in p for p in last["parts"])
    else:
        kinds = [item["type"] for item in requests[1].body["input"][-3:]]
        assert kinds == ["function_call_output"] * 3
    [turn_end] = [e for e in agent.of(E.TURN_END) if e["tool_calls"]]
    assert turn_end["tool_calls"] == 3


# --------------------------------------------------------------------------------------------------
# 10. Steering mid-task
# --------------------------------------------------------------------------------------------------


async def test_steering_mid_task(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    steering = "Actually, just create a single /health endpoint for now"
    steer_on_first_tool_call(agent, steering)
    routes = "ROUTES = ['/', '/users', '/items']\n"

    def adjust(request: WireRequest) -> Any:
        assert request.new_user_texts == [steering]
        # The steering message follows the tool result of the round it interrupted.
        kinds = [e.kind for e in request.entries[-2:]]
        assert kinds == ["result", "user"]
        return use(tool("write_file", file_path="app.py", content="ROUTES = ['/health']\n"))

    harness.model.then(
        use(tool("write_file", file_path="app.py", content=routes)),
        adjust,
        say("Only /health is left."),
    )
    result = await agent.submit("Create a web app with multiple routes")

    assert result.stop_reason == "completed"
    assert (agent.root / "app.py").read_text() == "ROUTES = ['/health']\n"
    assert [e["content"] for e in agent.of(E.STEERING_INJECTED)] == [steering]
    assert steering not in harness.model.requests[0].user_texts


# --------------------------------------------------------------------------------------------------
# 11. Reasoning effort change
# --------------------------------------------------------------------------------------------------

EFFORT_ON_THE_WIRE = {
    "openai": ("low", "high"),
    "anthropic": (2048, 24576),
    "gemini": ({"thinkingLevel": "LOW"}, {"thinkingLevel": "HIGH"}),
}


def reasoning_sent_back(wire: Wire, request: WireRequest) -> bool:
    """The previous turn's reasoning went back in the provider's own form."""
    body = request.body
    if wire.name == "openai":
        return any(i.get("type") == "reasoning" and i.get("encrypted_content") for i in body["input"])
    if wire.name == "anthropic":
        return any(
            b.get("type") == "thinking" and b.get("signature")
            for m in body["messages"]
            if m["role"] == "assistant"
            for b in m["content"]
        )
    parts = [p for c in body["contents"] if c["role"] == "model" for p in c["parts"]]
    return any(p.get("thought") for p in parts) and any(p.get("thoughtSignature") for p in parts)


async def test_reasoning_effort_change(harness: Harness, wire: Wire) -> None:
    agent = harness.start(SessionConfig(reasoning_effort="low"))
    (agent.root / "x.txt").write_text("x\n")

    def raise_effort(event: SessionEvent) -> None:
        if event.kind is E.TOOL_CALL_END:
            agent.session.config.reasoning_effort = "high"  # mid-input: applies to the next call

    agent.session.add_listener(raise_effort, replay=False)
    harness.model.then(
        use(tool("read_file", file_path="x.txt"), reasoning="I should look at the file first."),
        say("It holds x.", reasoning="The file has one line."),
        say("Done with default effort."),
    )
    await agent.submit("What is in x.txt?")
    agent.session.config.reasoning_effort = None
    await agent.submit("Thanks")

    low, high = EFFORT_ON_THE_WIRE[wire.name]
    first, second, third = harness.model.requests
    assert [first.reasoning, second.reasoning, third.reasoning] == [low, high, None]
    if wire.name == "anthropic":
        assert first.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert first.body["max_tokens"] > 2048
    assert reasoning_sent_back(wire, second)
    assert "".join(e["delta"] for e in agent.of(E.ASSISTANT_REASONING_DELTA)).startswith("I should look")


# --------------------------------------------------------------------------------------------------
# 12. Subagent spawn and wait
# --------------------------------------------------------------------------------------------------

CHILD_TASK = "Write a pytest test for greet() in greet.py into test_greet.py. Answer with the file name."


async def test_subagent_spawn_and_wait(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    (agent.root / "greet.py").write_text("def greet(name):\n    return f'Hello, {name}!'\n")
    child_test = "from greet import greet\n\n\ndef test_greet():\n    assert greet('Ada') == 'Hello, Ada!'\n"

    child = harness.model.lane(
        "child",
        lambda r: r.first_user_text == CHILD_TASK,
        use(tool("write_file", file_path="test_greet.py", content=child_test)),
        say("test_greet.py"),
    )

    def wait_for_it(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "spawn_agent"
        assert_ok(view)
        return use(tool("wait", agent_id=agent_id_of(view)))

    def review(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "wait"
        assert_ok(view)
        report = json.loads(view.output)
        assert report["status"] == "completed" and report["success"] is True
        assert report["output"] == "test_greet.py"
        return say("The subagent wrote test_greet.py.")

    harness.model.then(use(tool("spawn_agent", task=CHILD_TASK)), wait_for_it, review)
    result = await agent.submit("Have a subagent write tests for greet.py")

    assert result.text == "The subagent wrote test_greet.py."
    assert (agent.root / "test_greet.py").read_text() == child_test
    # The child talked to the same server with its own conversation and no subagent tools (depth 1).
    assert len(child.requests) == 2
    assert child.requests[0].user_texts == [CHILD_TASK] and child.requests[0].system
    assert "write_file" in child.requests[0].tool_names and "spawn_agent" not in child.requests[0].tool_names
    assert "spawn_agent" in harness.model.requests[0].tool_names
    assert all(CHILD_TASK not in r.user_texts for r in harness.model.main.requests)
    child_ends = agent.child_events(E.TOOL_CALL_END)
    assert [e["tool_name"] for e in child_ends] == ["write_file"]
    assert {e["tool_name"] for e in agent.tool_ends()} == {"spawn_agent", "wait"}


# --------------------------------------------------------------------------------------------------
# 13. Loop detection triggers a warning
# --------------------------------------------------------------------------------------------------


async def test_loop_detection_triggers_warning(harness: Harness, wire: Wire) -> None:
    agent = harness.start(SessionConfig(loop_detection_window=10))
    (agent.root / "status.txt").write_text("pending\n")

    def break_out(request: WireRequest) -> Any:
        [warning] = request.new_user_texts
        assert warning.startswith("Loop detected: the last 10 tool calls follow a repeating pattern")
        return say("I was repeating myself; the status is pending.")

    harness.model.then(*[use(tool("read_file", file_path="status.txt"))] * 10, break_out)
    result = await agent.submit("Wait until status.txt says done")

    assert result.stop_reason == "completed"
    requests = harness.model.requests
    assert len(requests) == 11
    assert all(not r.new_user_texts for r in requests[1:10])  # no warning before the 10th call
    [event] = agent.of(E.LOOP_DETECTION)
    assert event["window"] == 10


# --------------------------------------------------------------------------------------------------
# 14. Error recovery (tool fails, model retries)
# --------------------------------------------------------------------------------------------------


async def test_error_recovery_tool_fails_model_retries(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    original = "TIMEOUT = 30\nRETRIES = 3\n"
    (agent.root / "config.py").write_text(original)

    def after_missing(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == "read_file"
        assert_failed(wire, view, "confg.py", "config.py")  # not found, and the close name offered
        return use(tool("read_file", file_path="config.py"))

    def after_read(request: WireRequest) -> Any:
        [(_, view)] = results_by_call(request)
        assert_ok(view)
        return use(edit(wire, "config.py", "TIMEOUT = 45", "TIMEOUT = 60"))  # stale text: no match

    def after_bad_edit(request: WireRequest) -> Any:
        [(name, view)] = results_by_call(request)
        assert name == edit_tool(wire)
        assert_failed(wire, view, "no files were changed" if wire.name == "openai" else "old_string was not found")
        assert (agent.root / "config.py").read_text() == original  # a failed edit writes nothing
        return use(edit(wire, "config.py", "TIMEOUT = 30", "TIMEOUT = 60"))

    def after_good_edit(request: WireRequest) -> Any:
        [(_, view)] = results_by_call(request)
        assert_ok(view)
        return say("TIMEOUT is 60 now.")

    harness.model.then(
        use(tool("read_file", file_path="confg.py")), after_missing, after_read, after_bad_edit, after_good_edit
    )
    result = await agent.submit("Set TIMEOUT to 60 in config.py")

    assert result.stop_reason == "completed"
    assert (agent.root / "config.py").read_text() == "TIMEOUT = 60\nRETRIES = 3\n"
    assert [e["is_error"] for e in agent.tool_ends()] == [True, False, True, False]


# --------------------------------------------------------------------------------------------------
# 15. Provider-specific editing format works
# --------------------------------------------------------------------------------------------------

V4A_PATCH = """*** Begin Patch
*** Add File: pkg/helpers.py
+def greet(name):
+    return f"Hello, {name}!"
*** Update File: pkg/config.py
@@ DEFAULT_TIMEOUT = 30
-DEFAULT_TIMEOUT = 30
+DEFAULT_TIMEOUT = 60
@@ def load_config():
     config = {}
-    config["debug"] = False
+    config["debug"] = True
     return config
*** Delete File: pkg/old_module.py
*** Update File: pkg/old_name.py
*** Move to: pkg/new_name.py
@@
 import sys
-import old_dep
+import new_dep
*** End Patch
"""

CONFIG = (
    'DEFAULT_TIMEOUT = 30\n\n\ndef load_config():\n    config = {}\n    config["debug"] = False\n    return config\n'
)


def declared_parameters(wire: Wire, request: WireRequest, name: str) -> set[str]:
    body = request.body
    if wire.name == "openai":
        [spec] = [t["parameters"] for t in body["tools"] if t.get("name") == name]
    elif wire.name == "anthropic":
        [spec] = [t["input_schema"] for t in body["tools"] if t.get("name") == name]
    else:
        [spec] = [
            d["parameters"] for g in body["tools"] for d in g.get("functionDeclarations", []) if d["name"] == name
        ]
    return set(spec["properties"])


async def test_provider_specific_editing_format(harness: Harness, wire: Wire) -> None:
    agent = harness.start()
    pkg = agent.root / "pkg"
    pkg.mkdir()

    if wire.name == "openai":
        (pkg / "config.py").write_text(CONFIG)
        (pkg / "old_module.py").write_text("OLD = True\n")
        (pkg / "old_name.py").write_text("import sys\nimport old_dep\n")

        def check(request: WireRequest) -> Any:
            [(name, view)] = results_by_call(request)
            assert name == "apply_patch"
            assert_ok(view)
            for line in ("A pkg/helpers.py", "M pkg/config.py", "D pkg/old_module.py", "M pkg/new_name.py"):
                assert line in view.output, view.output
            return say("Patched.")

        harness.model.then(use(tool("apply_patch", patch=V4A_PATCH)), check)
    else:
        (pkg / "names.py").write_text("old_name = 1\nprint(old_name)\nold_name += 1\n")
        (pkg / "config.py").write_text(CONFIG)

        def ambiguous(request: WireRequest) -> Any:
            [(_, view)] = results_by_call(request)
            assert_failed(wire, view, "occurs 3 times")  # ambiguous without replace_all
            return use(
                tool(
                    "edit_file",
                    file_path="pkg/names.py",
                    old_string="old_name",
                    new_string="new_name",
                    replace_all=True,
                ),
                tool(
                    "edit_file",
                    file_path="pkg/config.py",
                    old_string='    config = {}\n    config["debug"] = False',
                    new_string='    config = {}\n    config["debug"] = True',
                ),
            )

        def check(request: WireRequest) -> Any:
            pairs = results_by_call(request)
            assert [name for name, _ in pairs] == ["edit_file", "edit_file"]
            for _, view in pairs:
                assert_ok(view)
            return say("Edited.")

        harness.model.then(
            use(tool("edit_file", file_path="pkg/names.py", old_string="old_name", new_string="new_name")),
            ambiguous,
            check,
        )
    await agent.submit("Apply the planned edits")

    first = harness.model.requests[0]
    if wire.name == "openai":
        assert "apply_patch" in first.tool_names and "edit_file" not in first.tool_names
        assert "patch" in declared_parameters(wire, first, "apply_patch")
        assert (pkg / "helpers.py").read_text() == 'def greet(name):\n    return f"Hello, {name}!"\n'
        assert (pkg / "config.py").read_text() == CONFIG.replace("= 30", "= 60").replace("False", "True")
        assert not (pkg / "old_module.py").exists() and not (pkg / "old_name.py").exists()
        assert (pkg / "new_name.py").read_text() == "import sys\nimport new_dep\n"
    else:
        assert "edit_file" in first.tool_names and "apply_patch" not in first.tool_names
        assert {"file_path", "old_string", "new_string", "replace_all"} <= declared_parameters(wire, first, "edit_file")
        assert (pkg / "names.py").read_text() == "new_name = 1\nprint(new_name)\nnew_name += 1\n"
        assert (pkg / "config.py").read_text() == CONFIG.replace("False", "True")

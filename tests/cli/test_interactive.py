"""Interactive ``ra`` (no TASK) through a pseudo-terminal: multi-turn, Ctrl-C, input history."""

from __future__ import annotations

import re
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, ra_command, tool_messages
from tests.support.replay import ReplayServer

PROMPT = "ra> "
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(params=["plain", "live"])
def spawn(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """Start interactive ``ra`` in a pty, with plain (NO_COLOR) or live (rich) output."""
    children: list[pexpect.spawn] = []

    def start(server: ReplayServer, *args: str) -> pexpect.spawn:
        extra = {"TERM": "xterm", "RA_HISTORY_FILE": str(tmp_path / "history")}
        if request.param == "plain":
            extra["NO_COLOR"] = "1"
        command = ra_command()
        child = pexpect.spawn(
            command[0],
            [*command[1:], "--base-url", f"{server.base_url}/v1", "--model", "m", *args],
            env=clean_env(tmp_path, **extra),
            cwd=str(tmp_path),
            encoding="utf-8",
            dimensions=(40, 120),
            timeout=20,
        )
        children.append(child)
        return child

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)


def _last_user(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def test_multi_turn_conversation_and_ctrl_d(spawn, replay_server: ReplayServer) -> None:
    enqueue_text(replay_server, "Hello, I am ra.")
    enqueue_text(replay_server, "You said hello before.")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("hello there")
    child.expect("Hello, I am ra.")
    child.expect_exact(PROMPT)
    child.sendline("what did I say?")
    child.expect("You said hello before.")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    first, second = chat_requests(replay_server)
    assert _last_user(first) == "hello there"
    roles = [(m["role"], m.get("content")) for m in second["messages"][1:]]
    assert roles == [
        ("user", "hello there"),
        ("assistant", "Hello, I am ra."),
        ("user", "what did I say?"),
    ]


def test_ctrl_c_interrupts_the_turn_and_keeps_the_session(spawn, replay_server: ReplayServer, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": f"touch {marker}; sleep 30", "timeout_ms": 60000}))
    enqueue_text(replay_server, "Continuing after the interruption.")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("run the slow thing")
    deadline = time.monotonic() + 15
    while not marker.exists():  # the command is running
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    child.sendintr()
    child.expect("interrupted; the conversation is kept")
    child.expect_exact(PROMPT)
    child.sendline("never mind, go on")
    child.expect("Continuing after the interruption.")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    bodies = chat_requests(replay_server)
    assert len(bodies) == 2
    (result,) = tool_messages(bodies[1])
    # The command was stopped (SIGTERM) and its result says so, or the call was cut short and
    # answered as interrupted: either way the conversation stays valid for the next turn.
    assert result["tool_call_id"] == "c1"
    assert "the user" in result["content"] and "aborted" not in result["content"]
    assert _last_user(bodies[1]) == "never mind, go on"
    assert bodies[1]["messages"][1]["content"] == "run the slow thing"


def test_ctrl_c_at_the_prompt_clears_the_line(spawn, replay_server: ReplayServer) -> None:
    enqueue_text(replay_server, "only once")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.send("half typed")
    child.sendintr()
    child.expect_exact(PROMPT)
    child.sendline("real question")
    child.expect("only once")
    child.expect_exact(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    (body,) = chat_requests(replay_server)
    assert _last_user(body) == "real question"


def test_ctrl_c_is_a_key_at_the_prompt_and_a_signal_during_a_turn(
    spawn, replay_server: ReplayServer, tmp_path: Path
) -> None:
    """At the prompt the terminal sends Ctrl-C to readline as a key: as a signal it also discards
    typed-ahead input, and readline then waited for a byte that never came (the prompt hung when
    Ctrl-C followed typing closely). While a turn runs, Ctrl-C is SIGINT again."""
    marker = tmp_path / "started"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": f"touch {marker}; sleep 30", "timeout_ms": 60000}))
    enqueue_text(replay_server, "after")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    assert termios.tcgetattr(child.child_fd)[6][termios.VINTR] == b"\x00"
    # Typed text and Ctrl-C in one write, the race that hung: the line is cleared, a prompt follows.
    for _ in range(5):
        child.send("half typed\x03")
        child.expect_exact(PROMPT)
    child.sendline("run the slow thing")
    deadline = time.monotonic() + 15
    while not marker.exists():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    assert termios.tcgetattr(child.child_fd)[6][termios.VINTR] == b"\x03"
    child.sendintr()
    child.expect("interrupted; the conversation is kept")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    (first, *_rest) = chat_requests(replay_server)
    assert _last_user(first) == "run the slow thing"


def test_input_history_is_recalled_with_the_up_arrow(spawn, replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "first answer")
    enqueue_text(replay_server, "second answer")
    enqueue_text(replay_server, "third answer")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("remember this line")
    child.expect("first answer")
    child.expect_exact(PROMPT)
    child.send("\x1b[A")  # up arrow: the previous input
    child.sendline("")
    child.expect("second answer")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    bodies = chat_requests(replay_server)
    assert [_last_user(b) for b in bodies] == ["remember this line", "remember this line"]
    assert "remember this line" in (tmp_path / "history").read_text()
    # A new session reads the history file: the up arrow reaches the last session's input.
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.send("\x1b[A")
    child.sendline("")
    child.expect("third answer")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    bodies = chat_requests(replay_server)
    assert len(bodies) == 3
    assert _last_user(bodies[-1]) == "remember this line"


def test_an_error_in_a_turn_keeps_the_conversation(spawn, replay_server: ReplayServer) -> None:
    enqueue_text(replay_server, "first reply")
    replay_server.enqueue(400, {"error": {"message": "bad request: something odd", "type": "invalid_request_error"}})
    enqueue_text(replay_server, "back again")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("one")
    child.expect("first reply")
    child.expect_exact(PROMPT)
    child.sendline("two")
    child.expect("ra: error: ")
    child.expect_exact(PROMPT)
    child.sendline("three")
    child.expect("back again")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    third = chat_requests(replay_server)[2]
    users = [m["content"] for m in third["messages"] if m["role"] == "user"]
    assert users == ["one", "two", "three"]
    assert "first reply" in [m.get("content") for m in third["messages"] if m["role"] == "assistant"]


def test_new_starts_a_fresh_conversation(spawn, replay_server: ReplayServer) -> None:
    enqueue_text(replay_server, "first")
    enqueue_text(replay_server, "fresh")
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("one")
    child.expect("first")
    child.expect_exact(PROMPT)
    child.sendline("/new")
    child.expect("new conversation")
    child.expect_exact(PROMPT)
    child.sendline("two")
    child.expect("fresh")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    second = chat_requests(replay_server)[1]
    assert [m["role"] for m in second["messages"]] == ["system", "user"]
    assert second["messages"][1]["content"] == "two"


def test_session_commands_model_cost_tools_clear(spawn, replay_server: ReplayServer, tmp_path: Path) -> None:
    config = tmp_path / ".config" / "ra" / "config.toml"  # the user config file under clean_env's HOME
    config.parent.mkdir(parents=True)
    config.write_text('[prices."m"]\ninput = 1.0\noutput = 2.0\n[prices."m2"]\ninput = 10.0\noutput = 20.0\n')
    enqueue_text(replay_server, "first answer", prompt_tokens=200_000, completion_tokens=50_000)
    enqueue_text(replay_server, "second answer", prompt_tokens=10_000, completion_tokens=1_000)
    enqueue_text(replay_server, "third answer", prompt_tokens=100, completion_tokens=10)
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("/model")
    child.expect("model: m via openai-compatible at http://127.0.0.1")
    child.expect_exact(PROMPT)
    child.sendline("hello")
    child.expect("first answer")
    child.expect_exact(PROMPT)
    child.sendline("/cost")
    child.expect(r"this conversation: \$0\.3000 · tokens 200,000 in / 50,000 out")
    child.expect_exact(PROMPT)
    child.sendline("/model m2")
    child.expect("model: m2 from the next call on")
    child.expect_exact(PROMPT)
    child.sendline("/tools")
    child.expect(r"(\d+) tools · permission mode: (\w+)")
    child.expect(r"read_file\s+read\s")
    child.expect_exact(PROMPT)
    child.sendline("/bogus")
    child.expect("unknown command /bogus: /help lists them")
    child.expect_exact(PROMPT)
    child.sendline("/tmp is full, why?")  # a path, not a command: it goes to the model
    child.expect("second answer")
    child.expect_exact(PROMPT)
    child.sendline("/clear")
    child.expect("new conversation")
    child.expect_exact(PROMPT)
    child.sendline("again")
    child.expect("third answer")
    child.expect_exact(PROMPT)
    child.sendline("/cost")
    # 0.3 + (10k * 10 + 1k * 20) / 1M = 0.42, then the third conversation's 0.0012.
    child.expect(r"this conversation: \$0\.0012")
    child.expect(r"whole session: \$0\.4212 · tokens 210,100 in / 51,010 out")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    first, second, third = chat_requests(replay_server)
    assert (first["model"], second["model"], third["model"]) == ("m", "m2", "m2")  # /model outlives /clear
    assert _last_user(second) == "/tmp is full, why?"
    assert [m["role"] for m in third["messages"]] == ["system", "user"]


def test_sigterm_during_a_turn_stops_its_command_and_ends_the_session(
    spawn, replay_server: ReplayServer, tmp_path: Path
) -> None:
    """SIGTERM is not Ctrl-C: the running command is stopped as Ctrl-C would stop it, and then
    the session ends (exit 143) instead of prompting again."""
    import os
    import signal

    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 60"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": command, "timeout_ms": 120000}))
    child = spawn(replay_server)
    child.expect_exact(PROMPT)
    child.sendline("run it")
    deadline = time.monotonic() + 15
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    sleeper = int(pid_file.read_text())
    child.kill(signal.SIGTERM)
    child.expect("terminated by SIGTERM")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 143
    try:
        os.kill(sleeper, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    if alive:
        os.kill(sleeper, signal.SIGKILL)
    assert not alive, "the command outlived ra"

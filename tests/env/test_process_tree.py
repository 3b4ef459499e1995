"""No orphans: every way a command's children can leave its process group, on every stop path.

Each trial starts one command that leaves behind, in the background, children of every kind that
escapes a plain ``killpg``: ``setsid``, ``nohup``, a double fork, ``disown``, a ``setsid``
child that ignores SIGTERM, and a SIGTERM-ignoring child in the group. Each child sleeps for a
duration unique to the trial, so the check reads ``/proc/*/cmdline`` for exactly these processes.
Then the command is stopped - by its timeout, by ``terminate_all``, by cancelling the call, by
``Session.abort()``, ``Session.interrupt()``, the session's ``time_limit_s`` and the ``ra``
command's ``--time-limit`` - and not one of them may be left alive. ``bench/bench_orphans.py``
runs the same trials a hundred times per path.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.agent import Session, SessionConfig, StopReason
from ra.env import ExecResult
from ra.env.local import LocalExecutionEnvironment
from ra.env.proctree import COOKIE_VAR, find_by_cookie
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.profiles import create_anthropic_profile
from tests.cli.support import chat_requests, clean_env, enqueue_tools, run_ra
from tests.support.replay import ReplayServer

from .procs import is_alive, kill_quietly, needs_proc

#: Real process trees with waits: the slow lane (``pytest -m slow``, which CI runs).
pytestmark = [needs_proc, pytest.mark.slow]

TRIALS = 3
_counter = itertools.count(random.randrange(10_000, 90_000) * 100)


def escaping_command(tag: int) -> str:
    """A command whose children leave its group in every common way; each sleeps ``tag``+k s."""
    return "\n".join(
        [
            f"setsid sleep {tag}1 &",
            f"nohup sleep {tag}2 >/dev/null 2>&1 &",
            f"( (sleep {tag}3 &) & )",
            f"sleep {tag}4 & disown",
            f"setsid bash -c 'trap \"\" TERM; sleep {tag}5' &",
            f"bash -c 'trap \"\" TERM; sleep {tag}6' &",
            "sleep 0.3",  # let every child start before the stop can come
            "echo started",
            "sleep 60",
        ]
    )


def survivors(tag: int) -> list[int]:
    """Live processes of trial ``tag`` (a sleep whose argument starts with the tag)."""
    found = []
    needle = str(tag).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if any(arg.startswith(needle) and len(arg) == len(needle) + 1 for arg in argv) and is_alive(int(name)):
            found.append(int(name))
    return found


@pytest.fixture
def tags() -> Iterator[list[int]]:
    """Trial tags; whatever a failing test leaves behind is killed afterwards."""
    used: list[int] = []
    yield used
    for tag in used:
        for pid in survivors(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def new_tag(used: list[int]) -> int:
    tag = next(_counter)
    used.append(tag)
    return tag


def wait_started(tag: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(survivors(tag)) >= 6:
            return
        time.sleep(0.02)
    raise AssertionError(f"the children of trial {tag} did not all start: {survivors(tag)}")


def assert_none_left(tag: int) -> None:
    # Killed processes may take a moment to leave the table; give them half a second.
    deadline = time.monotonic() + 0.5
    while survivors(tag) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert survivors(tag) == [], f"orphans of trial {tag}: {survivors(tag)}"


def env_for(tmp_path: Path, grace_ms: int = 300) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(tmp_path, kill_grace_ms=grace_ms)


async def test_timeout_stops_every_escaped_child(tmp_path: Path, tags: list[int]) -> None:
    env = env_for(tmp_path)
    for _ in range(TRIALS):
        tag = new_tag(tags)
        result = await env.exec_command(escaping_command(tag), timeout_ms=1500)
        assert result.timed_out and "started" in result.stdout
        assert_none_left(tag)


async def test_terminate_all_stops_every_escaped_child(tmp_path: Path, tags: list[int]) -> None:
    env = env_for(tmp_path)
    for _ in range(TRIALS):
        tag = new_tag(tags)
        task = asyncio.create_task(env.exec_command(escaping_command(tag), timeout_ms=60_000))
        await asyncio.to_thread(wait_started, tag)
        await env.terminate_all()
        result = await asyncio.wait_for(task, 10)
        assert result.aborted
        assert_none_left(tag)


async def test_cancelling_the_call_stops_every_escaped_child(tmp_path: Path, tags: list[int]) -> None:
    env = env_for(tmp_path)
    for _ in range(TRIALS):
        tag = new_tag(tags)
        task = asyncio.create_task(env.exec_command(escaping_command(tag), timeout_ms=60_000))
        await asyncio.to_thread(wait_started, tag)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert_none_left(tag)


async def test_a_normal_exit_leaves_a_redirected_server_but_stops_pipe_holders(tmp_path: Path, tags: list[int]) -> None:
    """The documented exception: a child that redirected its output survives a normal exit (a dev
    server started on purpose); one that still holds the command's output is stopped."""
    env = env_for(tmp_path)
    tag = new_tag(tags)
    result = await env.exec_command(f"setsid sleep {tag}1 > /dev/null 2>&1 < /dev/null & echo done", timeout_ms=5000)
    assert result.exit_code == 0 and "done" in result.stdout
    # Left running on purpose. The command may return before the child has exec'd sleep (it is
    # still a forked bash, or setsid, in /proc): wait, bounded, for it to show up.
    deadline = time.monotonic() + 5
    while len(survivors(tag)) < 1 and time.monotonic() < deadline:  # noqa: ASYNC110 - polling /proc
        await asyncio.sleep(0.02)
    assert len(survivors(tag)) == 1
    tag2 = new_tag(tags)
    result = await env.exec_command(f"setsid sleep {tag2}1 & echo done", timeout_ms=5000)
    assert "done" in result.stdout
    assert_none_left(tag2)


def _session(tmp_path: Path, command: str, config: SessionConfig | None = None) -> Session:
    model = ScriptedAdapter([call("shell", command=command, timeout_ms=60_000), reply("done")])
    config = config or SessionConfig()
    config.prices["m"] = ModelPrice.free()
    return Session(
        create_anthropic_profile(model="m"), env_for(tmp_path), Client(providers={"anthropic": model}), config
    )


async def test_session_abort_stops_every_escaped_child(tmp_path: Path, tags: list[int]) -> None:
    for _ in range(TRIALS):
        tag = new_tag(tags)
        session = _session(tmp_path, escaping_command(tag))
        task = asyncio.create_task(session.submit("go"))
        await asyncio.to_thread(wait_started, tag)
        session.abort()
        result = await asyncio.wait_for(task, 10)
        assert result.stop_reason is StopReason.ABORTED
        assert_none_left(tag)


async def test_session_interrupt_stops_every_escaped_child(tmp_path: Path, tags: list[int]) -> None:
    for _ in range(TRIALS):
        tag = new_tag(tags)
        session = _session(tmp_path, escaping_command(tag))
        task = asyncio.create_task(session.submit("go"))
        await asyncio.to_thread(wait_started, tag)
        assert session.interrupt()
        result = await asyncio.wait_for(task, 10)
        assert result.stop_reason is StopReason.INTERRUPTED
        assert_none_left(tag)
        await session.close()


async def test_session_time_limit_stops_every_escaped_child(tmp_path: Path, tags: list[int]) -> None:
    tag = new_tag(tags)
    session = _session(tmp_path, escaping_command(tag), SessionConfig(time_limit_s=1.0))
    result = await asyncio.wait_for(session.submit("go"), 10)
    assert result.stop_reason is StopReason.TIME_LIMIT
    assert_none_left(tag)
    await session.close()


def test_cli_time_limit_stops_every_escaped_child(replay_server: ReplayServer, tmp_path: Path, tags: list[int]) -> None:
    tag = new_tag(tags)
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": escaping_command(tag), "timeout_ms": 60000}))
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "test-model", "--time-limit", "1.5", "go"]
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path, timeout=30)
    assert result.returncode == 1, result.stderr
    assert "time limit reached" in result.stderr
    assert len(chat_requests(replay_server)) == 1
    assert_none_left(tag)


async def test_the_cookie_marks_the_tree_and_nothing_else(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    result = await env.exec_command(f'echo "${COOKIE_VAR}"')
    cookie = result.stdout.strip()
    assert len(cookie) == 24 and cookie != (await env.exec_command(f'echo "${COOKIE_VAR}"')).stdout.strip()
    assert COOKIE_VAR not in os.environ  # ra's own process never carries one
    assert find_by_cookie(cookie) == set()  # the command is over: nothing carries it any more


async def test_a_sigterm_trapping_child_gets_the_full_grace_then_sigkill(tmp_path: Path, tags: list[int]) -> None:
    """The 2 s grace is real: a child that traps SIGTERM is still alive well into it, and dead after."""
    env = LocalExecutionEnvironment(tmp_path)  # the default grace (2000 ms)
    tag = new_tag(tags)
    command = f"setsid bash -c 'trap \"\" TERM; sleep {tag}1' & sleep 0.2; echo started; sleep 60"
    task = asyncio.create_task(env.exec_command(command, timeout_ms=60_000))
    deadline = time.monotonic() + 5
    while len(survivors(tag)) < 1 and time.monotonic() < deadline:  # noqa: ASYNC110 - polling /proc
        await asyncio.sleep(0.02)
    stopping = asyncio.create_task(env.terminate_all())
    await asyncio.sleep(1.2)
    assert len(survivors(tag)) == 1, "the SIGTERM-ignoring child was killed before the grace ran out"
    await asyncio.wait_for(stopping, 5)
    await asyncio.wait_for(task, 5)
    assert_none_left(tag)


def _hold_the_loop(seconds: float) -> None:
    """Keep the event loop's thread busy, as a loaded machine does: the command's process runs
    on while asyncio has not yet finished setting up its pipes (subprocess_exec has not returned)."""
    time.sleep(seconds)


def _shell_started(tag: int) -> bool:
    needle = f"setsid sleep {tag}1 &".encode()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if needle in fh.read():
                        return True
            except OSError:
                continue
    return False


async def _spawned_but_not_started(env: LocalExecutionEnvironment, tag: int) -> asyncio.Task[object]:
    task = asyncio.create_task(env.exec_command(escaping_command(tag), timeout_ms=60_000))
    # Let the loop run step by step until the shell is forked: asyncio is then still connecting
    # its pipes (that takes a few more steps).
    for _ in range(50):
        await asyncio.sleep(0)
        if _shell_started(tag):
            break
    else:
        raise AssertionError("the command's shell was never forked")
    _hold_the_loop(0.8)  # meanwhile the command starts all its children
    if len(survivors(tag)) < 6:
        task.cancel()
        await _ended_within(task, tag, 5)
        raise AssertionError(f"the command's children did not start: {survivors(tag)}")
    return task


async def _ended_within(task: asyncio.Task[object], tag: int, seconds: float) -> bool:
    """Whether ``task`` ended within ``seconds``; if not, the trial's processes are killed so that
    it can end (a failing run must not hang the test session)."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        for pid in survivors(tag):
            kill_quietly(pid)
        await asyncio.wait({task}, timeout=10)
    return bool(done)


async def test_cancelling_the_call_while_its_process_starts_stops_every_child(tmp_path: Path, tags: list[int]) -> None:
    """A cancel that lands while asyncio is still connecting the pipes: asyncio alone would kill
    only the shell and then wait, for as long as they live, for its children to close the pipes."""
    env = env_for(tmp_path)
    tag = new_tag(tags)
    task = await _spawned_but_not_started(env, tag)
    task.cancel()
    in_time = await _ended_within(task, tag, 5)
    assert in_time and task.cancelled()
    assert_none_left(tag)


async def test_terminate_all_while_a_process_starts_stops_it(tmp_path: Path, tags: list[int]) -> None:
    """terminate_all() also reaches a command whose process is still being set up."""
    env = env_for(tmp_path)
    tag = new_tag(tags)
    task = await _spawned_but_not_started(env, tag)
    await asyncio.wait_for(env.terminate_all(), 10)
    left = survivors(tag)
    assert await _ended_within(task, tag, 5)
    assert left == []
    result = task.result()
    assert isinstance(result, ExecResult) and result.aborted and not result.timed_out

"""One MCP server over stdio (ra.mcp.connection): the kit server, written with the ``mcp`` package."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from ra.mcp import McpServers, StdioServer
from ra.mcp.connection import McpConnection
from tests.mcp.support import kit, leftovers, wait_gone

#: Real servers started per test: the slow lane (`pytest -m slow`), which CI runs.
pytestmark = pytest.mark.slow


async def started(spec: StdioServer, **options: object) -> McpConnection:
    connection = McpConnection("kit", spec, **options)  # type: ignore[arg-type]
    await connection.start()
    return connection


async def test_start_lists_tools_and_calls_them() -> None:
    connection = await started(kit())
    try:
        assert connection.state == "connected", connection.error
        assert connection.server == "kit 1.2.3"
        assert "echo" in {t.name for t in connection.tools}
        result = await connection.call("echo", {"text": "hello"})
        assert result.content == "hello" and not result.is_error
        failed = await connection.call("fail", {})
        assert failed.is_error and failed.content == "it broke"
        unknown = await connection.call("no_such_tool", {})
        assert unknown.is_error
    finally:
        await connection.close()
    assert connection.state == "closed"


async def test_env_is_added_to_the_default_environment_and_nothing_else_leaks(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    connection = await started(kit(env={"KIT_VALUE": "given"}))
    try:
        assert (await connection.call("env", {"name": "KIT_VALUE"})).content == "given"
        assert (await connection.call("env", {"name": "PATH"})).content == os.environ["PATH"]
        # ra's own keys are not handed to every server.
        assert (await connection.call("env", {"name": "OPENAI_API_KEY"})).content == "<unset>"
    finally:
        await connection.close()


async def test_cwd_defaults_to_the_session_cwd_and_a_relative_one_is_under_it(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    connection = await started(kit(), cwd=str(tmp_path))
    other = await started(kit(cwd="sub"), cwd=str(tmp_path))
    try:
        assert (await connection.call("cwd", {})).content == str(tmp_path)
        assert (await other.call("cwd", {})).content == str(tmp_path / "sub")
    finally:
        await connection.close()
        await other.close()


async def test_many_tools_over_many_pages_are_all_listed() -> None:
    connection = await started(kit("--tools", "250", "--page-size", "7"))
    try:
        names = [t.name for t in connection.tools]
        assert len(names) == 18 + 250 and len(set(names)) == len(names)
        assert (await connection.call("t0249", {})).content == "ran t0249"
    finally:
        await connection.close()


async def test_a_server_that_exits_at_start_fails_with_its_reason() -> None:
    started_at = time.monotonic()
    connection = await started(kit("--exit-at-start"))
    assert time.monotonic() - started_at < 10
    assert connection.state == "failed"
    assert "exited with code 2" in connection.error
    assert "refusing to start" in connection.error  # the last stderr line says why
    result = await connection.call("echo", {"text": "x"})
    assert result.is_error and "failed" in result.content
    await connection.close()


async def test_a_command_that_does_not_exist_fails_clearly() -> None:
    connection = await started(StdioServer("/nonexistent/mcp-server"))
    assert connection.state == "failed"
    assert "No such file or directory" in connection.error
    await connection.close()


async def test_a_slow_start_beyond_the_timeout_fails_and_leaves_no_process() -> None:
    started_at = time.monotonic()
    connection = await started(kit("--start-delay", "30"), startup_timeout=1.0)
    elapsed = time.monotonic() - started_at
    assert connection.state == "failed"
    assert "1s" in connection.error and "startup_timeout" in connection.error
    assert elapsed < 6, elapsed
    assert connection.process is not None and not leftovers(connection.process.cookie)
    await connection.close()


async def test_a_crash_mid_call_answers_that_call_and_the_server_restarts_once() -> None:
    connection = await started(kit(), tool_timeout=20)
    try:
        first_pid = int((await connection.call("pid", {})).content)
        started_at = time.monotonic()
        crashed = await connection.call("crash", {})
        assert crashed.is_error and "closed the connection" in crashed.content
        assert time.monotonic() - started_at < 5  # not the 20 s timeout: the crash is seen at once
        # The next call waits out the restart and reaches a new process.
        again = await connection.call("pid", {})
        assert not again.is_error, again.content
        assert int(again.content) != first_pid
        assert connection.restarts == 1
        # A second crash: no second restart; the tools answer with a clear error.
        await connection.call("crash", {})
        for _ in range(100):
            if connection.state == "failed":
                break
            await asyncio.sleep(0.05)
        assert connection.state == "failed"
        assert "after a restart" in connection.error and "exited with code 3" in connection.error
        assert connection.tools == ()
        dead = await connection.call("echo", {"text": "x"})
        assert dead.is_error and "failed" in dead.content and "unavailable" in dead.content
    finally:
        await connection.close()


async def test_a_hung_server_gives_the_call_an_error_in_time_and_is_restarted(monkeypatch) -> None:
    monkeypatch.setattr("ra.mcp.connection.PING_TIMEOUT", 0.5)
    connection = await started(kit())
    try:
        first_pid = int((await connection.call("pid", {})).content)
        started_at = time.monotonic()
        result = await connection.call("hang", {}, timeout=1.0)
        elapsed = time.monotonic() - started_at
        assert result.is_error and "no answer within 1s" in result.content
        assert elapsed < 2.0, elapsed
        again = await connection.call("pid", {}, timeout=15)
        assert not again.is_error, again.content
        assert int(again.content) != first_pid and connection.restarts == 1
        assert wait_gone(first_pid)  # the hung process was stopped
    finally:
        await connection.close()


async def test_a_slow_call_that_times_out_does_not_restart_a_live_server(monkeypatch) -> None:
    monkeypatch.setattr("ra.mcp.connection.PING_TIMEOUT", 0.5)
    connection = await started(kit())
    try:
        pid = (await connection.call("pid", {})).content
        result = await connection.call("slow", {"seconds": 30}, timeout=0.5)
        assert result.is_error and "no answer within 0.5s" in result.content
        await asyncio.sleep(1.0)  # the ping was answered
        assert connection.state == "connected" and connection.restarts == 0
        assert (await connection.call("pid", {})).content == pid
    finally:
        await connection.close()


async def test_a_cancelled_caller_does_not_tear_the_session_down() -> None:
    connection = await started(kit())
    try:
        task = asyncio.create_task(connection.call("slow", {"seconds": 30}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert connection.state == "connected"
        assert (await connection.call("echo", {"text": "still here"})).content == "still here"
    finally:
        await connection.close()


async def test_tools_list_changed_refreshes_the_list() -> None:
    changes: list[int] = []
    connection = McpConnection("kit", kit(), on_change=lambda: changes.append(1))
    await connection.start()
    try:
        version = connection.version
        assert (await connection.call("add_tool", {})).content == "added"
        for _ in range(100):
            if connection.version > version:
                break
            await asyncio.sleep(0.02)
        assert "extra" in {t.name for t in connection.tools}
        assert changes
    finally:
        await connection.close()


async def test_close_leaves_no_process_even_one_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    connection = await started(kit("--spawn-child", str(pidfile), "--ignore-term"))
    assert connection.state == "connected", connection.error
    child = int(pidfile.read_text())
    server_pid = connection.process.pid
    cookie = connection.process.cookie
    assert leftovers(cookie) >= {child, server_pid}
    started_at = time.monotonic()
    await connection.close()
    assert time.monotonic() - started_at < 8
    assert wait_gone(child, 2) and wait_gone(server_pid, 2)
    assert not leftovers(cookie)


async def test_a_child_that_left_the_process_group_is_stopped_too(tmp_path: Path) -> None:
    # A server that starts a helper in a session of its own (setsid): killpg alone would miss it; the
    # cookie does not.
    script = tmp_path / "setsid_server.py"
    script.write_text(
        "import os, subprocess, sys\n"
        f"sleeper = [{sys.executable!r}, '-c', 'import time; time.sleep(600)']\n"
        "child = subprocess.Popen(sleeper, start_new_session=True)\n"
        f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(child.pid))\n"
        f"sys.argv = ['kit']\n"
        f"exec(open({str(Path(__file__).parent / 'servers' / 'kit.py')!r}).read())\n"
    )
    connection = await started(StdioServer(sys.executable, (str(script),)))
    try:
        assert connection.state == "connected", connection.error
        child = int((tmp_path / "child.pid").read_text())
        assert os.getpgid(child) != connection.process.pid
    finally:
        await connection.close()
    assert wait_gone(child, 3)


async def test_servers_close_from_async_with_and_start_concurrently() -> None:
    started_at = time.monotonic()
    async with McpServers({"a": kit("--start-delay", "4"), "b": kit("--start-delay", "4")}) as servers:
        elapsed = time.monotonic() - started_at
        assert [s.state for s in servers.statuses()] == ["connected", "connected"]
        cookies = [c.process.cookie for c in servers.connections.values()]
    assert elapsed < 7.0, elapsed  # side by side: one after the other would take 8 s and more
    assert not any(leftovers(c) for c in cookies)


async def test_a_secret_given_in_env_never_shows_in_the_status() -> None:
    # A server that prints its token to stderr and exits: the last stderr line goes into the
    # status, with the configured values blanked out.
    code = "import os, sys; sys.stderr.write('bad token ' + os.environ['API_TOKEN'] + '\\n'); sys.exit(1)"
    connection = await started(StdioServer(sys.executable, ("-c", code), env={"API_TOKEN": "sk-live-123456789"}))
    assert connection.state == "failed"
    assert "bad token ***" in connection.error
    assert "sk-live" not in connection.error and "sk-live" not in str(connection.status())
    await connection.close()


async def test_many_calls_at_once_each_get_their_own_answer() -> None:
    connection = await started(kit())
    try:
        results = await asyncio.gather(*(connection.call("echo", {"text": f"n{i}"}) for i in range(30)))
        assert [r.content for r in results] == [f"n{i}" for i in range(30)]
    finally:
        await connection.close()

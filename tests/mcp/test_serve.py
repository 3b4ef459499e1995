"""ra's tools served over MCP (ra.mcp.serving), driven by real clients: the mcp package's own client
in-process, over stdio (a ``python`` process running tests/mcp/servers/ra_tools.py) and over
streamable HTTP on 127.0.0.1, raw JSON-RPC over a pipe (to see exactly what is sent and to hang up
mid-call), and the MCP Inspector's CLI from npm, a client ra's authors did not write."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import ra
from ra.llm.redaction import MASK
from ra.llm.types import ToolDefinition
from ra.mcp.serving import create_server, is_builtin_tool, serve_async, tool_annotations
from ra.tools.registry import RegisteredTool, ToolEffect, ToolOutput, ToolRegistry

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

#: Real servers started per test: the slow lane (`pytest -m slow`), which CI runs.
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "ra_tools.py"
SRC = Path(ra.__file__).resolve().parents[1]
SECRET = "sk-test-0123456789abcdefSECRET"
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _tool(name: str, executor: Any, parameters: dict[str, Any] | None = None, **options: Any) -> RegisteredTool:
    return RegisteredTool(ToolDefinition(name, f"The {name} tool.", parameters or _object()), executor, **options)


def _texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def server_env(marks: Path, workdir: Path) -> dict[str, str]:
    """What the served script gets: this tree on the path, a secret-looking variable (which the
    commands its tools run must not see, and no result may repeat) and a plain one (which they do)."""
    return {
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "RA_TEST_MARKS": str(marks),
        "RA_TEST_CWD": str(workdir),
        "RA_TEST_API_KEY": SECRET,
        "RA_TEST_PLAIN": "plain-value",
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(workdir),
    }


def stdio_params(marks: Path, workdir: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"], env=server_env(marks, workdir))


# -- in-process: what is listed, what is refused -----------------------------------------------------


def test_import_ra_mcp_does_not_import_mcp() -> None:
    code = (
        "import sys, ra, ra.mcp\n"
        "assert callable(ra.mcp.serve) and callable(ra.mcp.create_server) and callable(ra.mcp.serve_async)\n"
        "import ra.mcp.serving\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_is_the_function_whatever_was_imported_first() -> None:
    # The module is ra.mcp.serving, not ra.mcp.serve: importing a submodule named like the
    # function would replace ra.mcp.serve with the module.
    code = "import ra.mcp\nra.mcp.create_server\nimport ra.mcp.serving\nprint(type(ra.mcp.serve).__name__)\n"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "function", done.stderr


@pytest.mark.parametrize(
    ("effect", "expected"),
    [
        (ToolEffect.NONE, {"readOnlyHint": True, "openWorldHint": False}),
        (ToolEffect.READ, {"readOnlyHint": True, "openWorldHint": False}),
        (ToolEffect.NETWORK, {"readOnlyHint": True, "openWorldHint": True}),
        (ToolEffect.EDIT, {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}),
        (ToolEffect.EXECUTE, {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True}),
        (None, None),
    ],
)
def test_annotations_follow_the_effect(effect: ToolEffect | None, expected: dict[str, bool] | None) -> None:
    assert tool_annotations(effect) == expected


async def test_tools_list_carries_definitions_and_annotations(workdir: Path) -> None:
    schema = _object(path={"type": "string", "description": "Where."})
    tools = [
        RegisteredTool(ToolDefinition("look", "Looks at a path.", schema), lambda a, c: "", effect="read"),
        _tool("change", lambda a, c: "", effect="edit"),
        _tool("anything", lambda a, c: ""),
    ]
    async with Client(create_server(*tools, name="mine", version="1.2", cwd=workdir)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert list(listed) == ["look", "change", "anything"]
    assert listed["look"].description == "Looks at a path."
    assert listed["look"].input_schema == schema
    assert listed["look"].annotations.read_only_hint is True
    assert listed["change"].annotations.destructive_hint is True
    assert listed["change"].annotations.read_only_hint is False
    assert listed["anything"].annotations is None


async def test_a_whole_registry_is_served_in_its_order(workdir: Path) -> None:
    registry = ToolRegistry([_tool("one", lambda a, c: "1"), _tool("two", lambda a, c: "2")])
    async with Client(create_server(registry, _tool("three", lambda a, c: "3"), cwd=workdir)) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["one", "two", "three"]
        assert _texts(await client.call_tool("two", {})) == ["2"]


def test_builtin_tools_are_refused_without_the_opt_in(workdir: Path) -> None:
    from ra.profiles import create_anthropic_profile
    from ra.tools.builtin import read_file_tool, shell_tool

    with pytest.raises(PermissionError, match=r"'shell'.*allow_builtin_tools=True"):
        create_server(shell_tool(), cwd=workdir)
    profile = create_anthropic_profile("claude-test")
    with pytest.raises(PermissionError, match="'read_file', 'write_file', 'edit_file', 'shell'"):
        create_server(profile.tool_registry, cwd=workdir)
    # One built-in among the user's own tools is enough to refuse the lot.
    with pytest.raises(PermissionError, match="'read_file'"):
        create_server(_tool("mine", lambda a, c: ""), read_file_tool(), cwd=workdir)


def test_a_builtin_in_disguise_is_still_refused(workdir: Path) -> None:
    from ra.tools.builtin import shell_tool

    shell = shell_tool()
    renamed = RegisteredTool(ToolDefinition("harmless", "Says hello.", shell.definition.parameters), shell.executor)
    wrapped = _tool("wrapped", functools.partial(shell.executor))
    for tool in (renamed, wrapped):
        assert is_builtin_tool(tool)
        with pytest.raises(PermissionError):
            create_server(tool, cwd=workdir)


def test_the_users_own_tool_may_have_a_builtin_name(workdir: Path) -> None:
    mine = _tool("shell", lambda a, c: "not really a shell")
    assert not is_builtin_tool(mine)
    create_server(mine, cwd=workdir)


async def test_builtin_tools_are_served_with_the_opt_in(workdir: Path) -> None:
    from ra.tools.builtin import read_file_tool

    (workdir / "notes.txt").write_text("first line\n")
    async with Client(create_server(read_file_tool(), cwd=workdir, allow_builtin_tools=True)) as client:
        result = await client.call_tool("read_file", {"file_path": "notes.txt"})
    assert not result.is_error
    assert "first line" in _texts(result)[0]


async def test_function_tools_are_served() -> None:
    tool = getattr(ra, "tool", None) if "tool" in dir(ra) else None
    if tool is None:
        pytest.skip("ra.tool (@ra.tool function tools) is not in this tree yet")

    @tool
    async def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    assert not is_builtin_tool(multiply)
    async with Client(create_server(multiply)) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["multiply"]
        assert _texts(await client.call_tool("multiply", {"a": 6, "b": 7})) == ["42"]


def test_what_cannot_be_served_is_refused_clearly(workdir: Path) -> None:
    def plain(a: int) -> int:
        return a

    with pytest.raises(TypeError, match=r"'plain'.*@ra.tool"):
        create_server(plain, cwd=workdir)
    with pytest.raises(ValueError, match="nothing to serve"):
        create_server(cwd=workdir)
    with pytest.raises(ValueError, match="two different tools are named 'x'"):
        create_server(_tool("x", lambda a, c: "1"), _tool("x", lambda a, c: "2"), cwd=workdir)
    same = _tool("same", lambda a, c: "")
    create_server(same, ToolRegistry([same]), cwd=workdir)  # one tool given twice is one tool
    with pytest.raises(NotADirectoryError):
        create_server(same, cwd=workdir / "missing")
    with pytest.raises(ValueError, match="invalid parameters schema"):
        create_server(_tool("bad", lambda a, c: "", {"type": "object", "properties": {"a": {"type": "nope"}}}))


async def test_http_on_a_non_loopback_address_needs_the_opt_in(workdir: Path) -> None:
    tool = _tool("t", lambda a, c: "")
    for host in ("0.0.0.0", "192.168.1.10", "::"):
        with pytest.raises(PermissionError, match="allow_remote=True"):
            await serve_async(tool, transport="http", host=host, port=_free_port(), cwd=workdir)
    # With the opt-in the host passes the check (the bad port is what is refused next).
    with pytest.raises(ValueError, match="port must be"):
        await serve_async(tool, transport="http", host="0.0.0.0", port=70000, allow_remote=True, cwd=workdir)
    with pytest.raises(ValueError, match="transport must be"):
        await serve_async(tool, transport="sse", cwd=workdir)


async def test_a_served_call_runs_in_a_real_environment_at_cwd(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RA_TEST_API_KEY", SECRET)

    async def run(args: dict[str, Any], ctx: Any) -> str:
        result = await ctx.env.exec_command('printf "%s|%s" "$PWD" "${RA_TEST_API_KEY:-unset}"')
        return f"{ctx.tool_name}:{result.stdout}"

    async with Client(create_server(_tool("run", run, effect="execute"), cwd=workdir)) as client:
        assert _texts(await client.call_tool("run", {})) == [f"run:{workdir}|unset"]


# -- the mcp package's client over stdio ------------------------------------------------------------


async def test_stdio_list_and_call(marks: Path, workdir: Path) -> None:
    async with Client(stdio_params(marks, workdir)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) >= {"add", "wait", "nap", "explode", "refuse", "picture", "environment"}
        assert listed["add"].annotations.read_only_hint is True
        assert listed["environment"].annotations.destructive_hint is True
        assert listed["refuse"].annotations.open_world_hint is True
        assert listed["explode"].annotations is None

        added = await client.call_tool("add", {"a": 2, "b": 40})
        assert (added.is_error, _texts(added)) == (False, ["42"])

        bad = await client.call_tool("add", {"a": 2, "b": "forty"})
        assert bad.is_error
        assert _texts(bad) == ["Invalid arguments for tool add:\n- field 'b': 'forty' is not of type 'integer'"]
        missing = await client.call_tool("add", {"a": 2})
        assert missing.is_error and _texts(missing) == ["Invalid arguments for tool add:\n- missing required field 'b'"]

        exploded = await client.call_tool("explode", {})
        assert exploded.is_error
        assert _texts(exploded)[0].startswith("Tool error (explode): the disk is on fire (key ")
        assert SECRET not in _texts(exploded)[0]

        refused = await client.call_tool("refuse", {})
        assert (refused.is_error, _texts(refused)) == (True, ["no such ticket: 42"])
        failed = await client.call_tool("fail", {"message": "cannot write there"})
        assert (failed.is_error, _texts(failed)) == (True, ["Tool error (fail): cannot write there"])

        picture = await client.call_tool("picture", {})
        assert not picture.is_error
        image = [block for block in picture.content if block.type == "image"]
        assert _texts(picture) == ["a red dot"]
        assert base64.b64decode(image[0].data) == PNG and image[0].mime_type == "image/png"

        environment = await client.call_tool("environment", {})
        assert _texts(environment) == [f"{workdir}|unset|plain-value"]

        # A tool's print() goes to stderr, not into the protocol: the connection still works.
        assert _texts(await client.call_tool("chatty", {})) == ["said it"]
        assert _texts(await client.call_tool("add", {"a": 1, "b": 2})) == ["3"]


async def test_stdio_unknown_tool_is_a_protocol_error(marks: Path, workdir: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async with Client(stdio_params(marks, workdir)) as client:
        with pytest.raises(MCPError, match=r"Unknown tool: nope\. Available tools: add, wait"):
            await client.call_tool("nope", {})


async def test_stdio_concurrent_calls_run_together(marks: Path, workdir: Path) -> None:
    async with Client(stdio_params(marks, workdir)) as client:
        started = time.monotonic()
        results = await asyncio.gather(
            client.call_tool("wait", {"seconds": 2.0, "tag": "a"}),
            client.call_tool("wait", {"seconds": 2.0, "tag": "b"}),
            client.call_tool("nap", {"seconds": 2.0}),
            client.call_tool("nap", {"seconds": 2.0}),
            client.call_tool("add", {"a": 1, "b": 1}),
        )
        elapsed = time.monotonic() - started
    assert [_texts(r) for r in results] == [["waited a"], ["waited b"], ["rested"], ["rested"], ["2"]]
    assert elapsed < 5.5, f"four calls of 2 s took {elapsed:.1f} s: they ran one after another"


# -- raw JSON-RPC over a pipe: exactly what is sent, and hanging up mid-call ----------------------


class RawStdio:
    """The server as a child process spoken to line by line, as any stdio client does."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._ids = 0

    async def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self._ids += 1
            message["id"] = self._ids
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()
        return self._ids

    async def answer(self, request_id: int, timeout: float = 20.0) -> tuple[dict[str, Any], str]:
        """The response to ``request_id`` and its raw line (notifications before it are skipped)."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = (await self.process.stdout.readline()).decode()
                assert line, "the server closed stdout"
                message = json.loads(line)
                if message.get("id") == request_id:
                    return message, line

    async def initialize(self) -> None:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        reply, _ = await self.answer(await self.send("initialize", params))
        assert reply["result"]["serverInfo"]["name"] == "ra-test"
        await self.send("notifications/initialized", notify=True)


@contextlib.asynccontextmanager
async def raw_server(marks: Path, workdir: Path) -> AsyncIterator[RawStdio]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER),
        "stdio",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=server_env(marks, workdir),
    )
    try:
        yield RawStdio(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_results_carry_no_metadata_and_no_secret(marks: Path, workdir: Path) -> None:
    async with raw_server(marks, workdir) as server:
        await server.initialize()
        lines = []
        for name in ("refuse", "picture", "explode"):
            _, line = await server.answer(await server.send("tools/call", {"name": name, "arguments": {}}))
            lines.append(line)
    wire = "".join(lines)
    assert "do-not-send" not in wire and "host-only" not in wire and "metadata" not in wire
    assert SECRET not in wire
    assert f"(key {MASK})" in wire  # the exception's text repeated the key: it is masked


async def _exits_after_hangup(server: RawStdio, timeout: float = 15.0) -> tuple[float, str]:
    assert server.process.stdin is not None
    server.process.stdin.close()
    started = time.monotonic()
    async with asyncio.timeout(timeout):
        _, stderr = await server.process.communicate()
    return time.monotonic() - started, stderr.decode()


async def _gone(pid: int, timeout: float = 10.0) -> None:
    """Returns once process ``pid`` no longer exists; fails the test after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            await asyncio.sleep(0.05)


async def _mark(path: Path, timeout: float = 20.0) -> str:
    """What the server's tool wrote to ``path``, once it has (another process writes it: poll)."""

    def read() -> str:
        return path.read_text().strip() if path.exists() else ""

    async with asyncio.timeout(timeout):
        while not (text := read()):  # noqa: ASYNC110 - polling a file another process writes
            await asyncio.sleep(0.05)
    return text


async def test_client_hanging_up_mid_call_stops_the_server_and_its_command(marks: Path, workdir: Path) -> None:
    async with raw_server(marks, workdir) as server:
        await server.initialize()
        await server.send("tools/call", {"name": "long_command", "arguments": {}})
        pid = int(await _mark(marks / "command.pid"))
        os.kill(pid, 0)  # the command runs
        took, stderr = await _exits_after_hangup(server)
        assert server.process.returncode == 0, stderr
    assert took < 10, f"the server took {took:.1f} s to exit after its client left"
    assert "Traceback" not in stderr
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # no orphan: the command the call started is gone with it


async def test_client_hanging_up_mid_async_call_ends_the_server(marks: Path, workdir: Path) -> None:
    async with raw_server(marks, workdir) as server:
        await server.initialize()
        await server.send("tools/call", {"name": "wait", "arguments": {"seconds": 60, "tag": "hang"}})
        await _mark(marks / "wait-hang.started")
        took, stderr = await _exits_after_hangup(server)
        assert server.process.returncode == 0, stderr
    assert took < 10
    assert "Traceback" not in stderr


# -- the mcp package's client over streamable HTTP ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_server(marks: Path, workdir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=server_env(marks, workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            assert time.monotonic() < deadline, "the HTTP server did not start listening within 20 s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr:
            process.stderr.close()


async def test_http_list_call_image_and_concurrency(marks: Path, workdir: Path) -> None:
    with http_server(marks, workdir) as (url, process):
        async with Client(url) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names[:2] == ["add", "wait"]
            assert _texts(await client.call_tool("add", {"a": 20, "b": 22})) == ["42"]
            bad = await client.call_tool("add", {"a": "x", "b": 1})
            assert bad.is_error and "field 'a'" in _texts(bad)[0]
            picture = await client.call_tool("picture", {})
            assert [block.type for block in picture.content] == ["text", "image"]
            started = time.monotonic()
            results = await asyncio.gather(
                *(client.call_tool("wait", {"seconds": 2.0, "tag": str(i)}) for i in range(4))
            )
            assert time.monotonic() - started < 5.5  # one after another: 8 s
            assert [_texts(r) for r in results] == [[f"waited {i}"] for i in range(4)]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == -signal.SIGTERM  # a clean stop, then the signal's own exit


async def test_http_refuses_a_foreign_host_header(marks: Path, workdir: Path) -> None:
    # DNS rebinding: a web page the user opens resolves its own name to 127.0.0.1 and posts to the
    # server; its requests carry the page's Host and Origin, which a loopback server refuses.
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    with http_server(marks, workdir) as (url, _):
        async with httpx.AsyncClient(timeout=10) as http:
            for extra in ({"host": "evil.example:80"}, {"origin": "http://evil.example"}):
                response = await http.post(url, json=body, headers={**headers, **extra})
                assert response.status_code in (400, 403, 421), (extra, response.status_code)
                assert "add" not in response.text


# -- the MCP Inspector's CLI (npm) ---------------------------------------------------------------------


def inspector_command() -> list[str]:
    """The Inspector from ``npm install --prefix $RA_TEST_NPM_DIR @modelcontextprotocol/inspector@...``
    when there is one, else through npx (which downloads it once)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the MCP Inspector CLI needs it")
    npm_dir = os.environ.get("RA_TEST_NPM_DIR")
    if npm_dir:
        installed = Path(npm_dir) / "node_modules" / ".bin" / "mcp-inspector"
        if installed.exists():
            return [str(installed), "--cli"]
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed and RA_TEST_NPM_DIR has no MCP Inspector")
    return [npx, "-y", INSPECTOR, "--cli"]


def run_inspector(target: list[str], *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [*inspector_command(), *target, *args], capture_output=True, text=True, env=env, timeout=150, cwd=home
    )


def stdio_target(marks: Path, workdir: Path) -> list[str]:
    env = server_env(marks, workdir)
    pairs = [arg for key in ("PYTHONPATH", "RA_TEST_CWD", "RA_TEST_API_KEY") for arg in ("-e", f"{key}={env[key]}")]
    return [*pairs, sys.executable, str(SERVER), "stdio"]


@pytest.mark.timeout(600)
def test_inspector_over_stdio(marks: Path, workdir: Path, tmp_path: Path) -> None:
    target = stdio_target(marks, workdir)
    listed = run_inspector(target, "--method", "tools/list", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    tools = {tool["name"]: tool for tool in json.loads(listed.stdout)["tools"]}
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert tools["add"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert tools["environment"]["annotations"]["destructiveHint"] is True

    called = run_inspector(
        target, "--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "b=3", home=tmp_path
    )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"content": [{"type": "text", "text": "5"}], "isError": False}

    picture = run_inspector(target, "--method", "tools/call", "--tool-name", "picture", home=tmp_path)
    assert picture.returncode == 0, picture.stderr
    image = json.loads(picture.stdout)["content"][1]
    assert image["type"] == "image" and base64.b64decode(image["data"]) == PNG

    # An error result: the Inspector prints it and exits non-zero (it says isError).
    exploded = run_inspector(target, "--method", "tools/call", "--tool-name", "explode", home=tmp_path)
    assert exploded.returncode != 0
    result = _first_json(exploded.stdout)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Tool error (explode): the disk is on fire")
    assert SECRET not in exploded.stdout + exploded.stderr

    invalid = run_inspector(
        target, "--method", "tools/call", "--tool-name", "fail", "--tool-arg", "message=1", "extra=2", home=tmp_path
    )
    assert invalid.returncode != 0
    text = _first_json(invalid.stdout)["content"][0]["text"]
    assert text.startswith("Invalid arguments for tool fail:")


@pytest.mark.timeout(600)
def test_inspector_over_http(marks: Path, workdir: Path, tmp_path: Path) -> None:
    with http_server(marks, workdir) as (url, _):
        listed = run_inspector([url, "--transport", "http"], "--method", "tools/list", home=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]][:3] == ["add", "wait", "nap"]
        called = run_inspector(
            [url, "--transport", "http"],
            *("--method", "tools/call", "--tool-name", "environment"),
            home=tmp_path,
        )
        assert called.returncode == 0, called.stderr
        assert json.loads(called.stdout)["content"][0]["text"] == f"{workdir}|unset|plain-value"


def _first_json(text: str) -> dict[str, Any]:
    """The first JSON document the Inspector printed (an error summary line may follow it)."""
    value, _ = json.JSONDecoder().raw_decode(text.lstrip())
    return value


def test_output_of_a_served_tool_is_what_a_model_would_read(workdir: Path) -> None:
    """A tool that cuts its own output for the model (``for_model``) serves the cut version, and
    the size limits are the tool's own: one result never floods the caller's context."""

    async def main() -> tuple[list[str], list[str]]:
        long = _tool("long", lambda a, c: "x" * 100_000, output_limit=1_000)
        cut = _tool("cut", lambda a, c: ToolOutput("everything " * 100, for_model="the short version"))
        async with Client(create_server(long, cut, cwd=workdir)) as client:
            return _texts(await client.call_tool("long", {})), _texts(await client.call_tool("cut", {}))

    long_text, cut_text = asyncio.run(main())
    assert len(long_text[0]) < 2_000 and "characters" in long_text[0]
    assert cut_text == ["the short version"]


async def test_http_server_stopped_mid_call_leaves_no_command_behind(marks: Path, workdir: Path) -> None:
    """SIGTERM while a call runs a command: calls in flight get a few seconds, then the server
    cancels them, stops the command's whole tree and exits (uvicorn then ends the process with
    the signal it was sent, as a terminated program does)."""

    async def call(url: str) -> None:
        with contextlib.suppress(Exception):  # the connection drops under the call: expected
            async with Client(url) as client:
                await client.call_tool("long_command", {})

    with http_server(marks, workdir) as (url, process):
        caller = asyncio.ensure_future(call(url))
        try:
            pid = int(await _mark(marks / "command.pid"))
            os.kill(pid, 0)  # the command runs
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            returncode = await asyncio.to_thread(process.wait, 20)
            took = time.monotonic() - started
        finally:
            async with asyncio.timeout(10):
                await caller
    assert returncode == -signal.SIGTERM
    assert took < 10, f"the server took {took:.1f} s to stop"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_cancelled_call_stops_its_command_and_the_server_goes_on(marks: Path, workdir: Path) -> None:
    async with raw_server(marks, workdir) as server:
        await server.initialize()
        request = await server.send("tools/call", {"name": "long_command", "arguments": {}})
        pid = int(await _mark(marks / "command.pid"))
        await server.send("notifications/cancelled", {"requestId": request, "reason": "user"}, notify=True)
        await _gone(pid)
        reply, _ = await server.answer(await server.send("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}))
        assert reply["result"]["content"] == [{"type": "text", "text": "2"}]


async def test_http_client_leaving_mid_call_stops_its_command(marks: Path, workdir: Path) -> None:
    with http_server(marks, workdir) as (url, process):
        async with Client(url) as client:
            call = asyncio.ensure_future(client.call_tool("long_command", {}))
            pid = int(await _mark(marks / "command.pid"))
            call.cancel()  # the client gives up on the call and then closes its session
            with contextlib.suppress(asyncio.CancelledError):
                await call
        await _gone(pid)
        assert process.poll() is None  # the server serves on, for the next client
        async with Client(url) as client:
            assert _texts(await client.call_tool("add", {"a": 1, "b": 2})) == ["3"]


async def test_the_server_cleans_up_its_own_environment_but_not_the_hosts(workdir: Path) -> None:
    from ra.env.local import LocalExecutionEnvironment

    class Recording(LocalExecutionEnvironment):
        def __init__(self, root: Path) -> None:
            super().__init__(root)
            self.calls: list[str] = []

        async def initialize(self) -> None:
            self.calls.append("initialize")
            await super().initialize()

        async def cleanup(self) -> None:
            self.calls.append("cleanup")
            await super().cleanup()

    async def where(args: dict[str, Any], ctx: Any) -> str:
        return ctx.env.working_directory()

    hosts = Recording(workdir)
    async with Client(create_server(_tool("where", where), environment=hosts)) as client:
        assert _texts(await client.call_tool("where", {})) == [str(workdir)]
    assert hosts.calls == ["initialize"]  # the host's to clean up

    server = create_server(_tool("where", where), cwd=workdir)
    owned = server.lifespan  # the server's own environment: cleaned up when its last run ends
    async with owned(server) as state, owned(server) as again:
        assert state["env"] is again["env"]
        env = state["env"]
        running = asyncio.ensure_future(env.exec_command("sleep 30", timeout_ms=60_000))
        await asyncio.sleep(0.3)
    async with asyncio.timeout(10):
        result = await running
    assert result.aborted  # the command was stopped when the server stopped
    with pytest.raises(ValueError, match="cwd or environment"):
        create_server(_tool("where", where), cwd=workdir, environment=hosts)

"""An editor for tests: the ``agent-client-protocol`` package's own client side, driving the real
``ra acp`` process pointed at the scripted Chat Completions server."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

import acp
from tests.cli.support import chat_requests, clean_env, ra_command, tool_messages
from tests.support.replay import ReplayServer

#: Every await in these tests is bounded by this (seconds).
WAIT = 30.0


async def bounded(awaitable: Any, seconds: float = WAIT) -> Any:
    return await asyncio.wait_for(awaitable, seconds)


class Editor:
    """The client side: records updates, answers permission questions from a script, and (when
    it offers the file system) serves files from an in-memory buffer over the disk."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.questions: list[dict[str, Any]] = []
        #: Answers to permission questions, in order: an option id, "cancelled", or a callable
        #: taking the question and returning one of those (awaited when it is a coroutine).
        self.answers: deque[Any] = deque()
        #: Unsaved buffers: path -> text (reads see these first).
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.asked = asyncio.Event()

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kw: Any) -> Any:
        self.questions.append({"options": options, "tool_call": tool_call, "session_id": session_id})
        self.asked.set()
        answer = self.answers.popleft() if self.answers else "reject_once"
        if callable(answer):
            answer = answer(self.questions[-1])
            if asyncio.iscoroutine(answer):
                answer = await answer
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def read_text_file(
        self, path: str, session_id: str, line: int | None = None, limit: int | None = None, **kw: Any
    ) -> Any:
        self.reads.append(path)
        if path in self.buffers:
            text = self.buffers[path]
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")  # noqa: ASYNC240 - a test's small file
            except OSError:
                raise acp.RequestError.resource_not_found(path) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(lines[start : start + limit] if limit else lines[start:])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, content: str, path: str, session_id: str, **kw: Any) -> Any:
        self.writes.append((path, content))
        self.buffers[path] = content
        Path(path).write_text(content, encoding="utf-8")  # noqa: ASYNC240 - a test's small file
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))


class TerminalEditor(Editor):
    """An editor with terminals: each runs its command as a subprocess and keeps its output."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[tuple[str, list[str], str | None]] = []
        self.created: list[str] = []
        self.released: list[str] = []
        self._procs: dict[str, tuple[Any, list[bytes], asyncio.Task[None]]] = {}

    async def create_terminal(
        self, command: str, session_id: str, args: list[str] | None = None, cwd: str | None = None, **kw: Any
    ) -> Any:
        self.commands.append((command, list(args or []), cwd))
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        chunks: list[bytes] = []

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(4096):
                chunks.append(chunk)

        terminal_id = f"t{len(self.created)}"
        self.created.append(terminal_id)
        self._procs[terminal_id] = (proc, chunks, asyncio.ensure_future(pump()))
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        proc, chunks, _ = self._procs[terminal_id]
        status = None
        if proc.returncode is not None:
            status = TerminalExitStatus(exit_code=proc.returncode)
        return TerminalOutputResponse(output=b"".join(chunks).decode(), truncated=False, exit_status=status)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        proc, _, pump = self._procs[terminal_id]
        await asyncio.wait_for(proc.wait(), WAIT)
        await asyncio.wait_for(pump, WAIT)
        return WaitForTerminalExitResponse(exit_code=proc.returncode)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        proc, _, _ = self._procs[terminal_id]
        if proc.returncode is None:
            proc.kill()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        await self.kill_terminal(session_id, terminal_id)
        self.released.append(terminal_id)
        return ReleaseTerminalResponse()


class Agent:
    """A running ``ra acp`` and its connection."""

    def __init__(self, conn: Any, process: Any, editor: Editor, cwd: Path) -> None:
        self.conn = conn
        self.process = process
        self.editor = editor
        self.cwd = cwd

    async def new_session(self, **kw: Any) -> str:
        response = await bounded(self.conn.new_session(cwd=str(self.cwd), mcp_servers=[], **kw))
        return response.session_id

    async def prompt(self, session_id: str, text: str) -> Any:
        return await bounded(self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]))


@contextlib.asynccontextmanager
async def running_agent(
    tmp_path: Path,
    server: ReplayServer,
    *,
    editor: Editor | None = None,
    fs: bool = False,
    terminal: bool = False,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[Agent]:
    editor = editor or Editor()
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    environ = env or clean_env(tmp_path, RA_SESSIONS_DIR=str(tmp_path / "sessions"))
    command = [*ra_command(), "acp", "--base-url", f"{server.base_url}/v1", "--model", "m", *args]
    async with acp.spawn_agent_process(editor, command[0], *command[1:], env=environ, cwd=str(project)) as (
        conn,
        process,
    ):
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=terminal
        )
        agent = Agent(conn, process, editor, project)
        agent.init = await bounded(
            conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities)
        )
        try:
            yield agent
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(process.wait(), 10)
            if process.returncode is None:
                process.kill()


PATCH = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"


def patch_call(call_id: str = "c1") -> tuple[str, str, dict[str, str]]:
    return (call_id, "apply_patch", {"patch": PATCH})


def last_tool_result(server: ReplayServer) -> str:
    return tool_messages(chat_requests(server)[-1])[-1]["content"]


def option_ids(question: dict[str, Any]) -> list[str]:
    return [o.option_id for o in question["options"]]


Answer = str | Callable[[dict[str, Any]], Any]

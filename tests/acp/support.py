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
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

import acp
from tests.cli.support import clean_env, ra_command
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
            fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False
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


def option_ids(question: dict[str, Any]) -> list[str]:
    return [o.option_id for o in question["options"]]


Answer = str | Callable[[dict[str, Any]], Any]

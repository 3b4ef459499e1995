"""An execution environment over the ACP connection: the editor's buffers and terminal.

When the client offers ``fs.readTextFile`` / ``fs.writeTextFile``, file reads and writes go
through the editor, so the model reads what the user sees (unsaved changes included) and the
editor learns of every write as it happens. With ``terminal``, commands run in the editor's
terminals (the user watches them there) - the commands of the model's tool calls, that is; ra's
own (the git snapshot in the context) run locally. Everything the protocol has no method for - listing,
search, delete, move, binary files - and everything the client does not offer is done by the
local environment underneath, on the same machine and working directory.

Differences from the local environment, by necessity: a command in the editor's terminal has its
output as one stream (it is returned as stdout), its environment is the editor's (ra's secret
filtering applies only to commands ra starts itself), and ``terminate_all`` kills the terminals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from acp.schema import EnvVariable

from acp import RequestError
from ra.env.base import ExecResult, ExecutionEnvironment, OutputCallback
from ra.env.wrappers import DelegatingExecutionEnvironment

__all__ = ["AcpEnvironment"]

#: Lines ``read_file`` returns when no limit is given (the local environment's default).
DEFAULT_READ_LIMIT = 2000
#: How long one file request to the editor may take.
FS_TIMEOUT_S = 30.0
#: A command's output kept by the editor's terminal.
OUTPUT_BYTE_LIMIT = 1024 * 1024
#: How often a running command's output is polled for ``on_output``.
POLL_S = 0.2
#: How long killing and releasing a terminal may take.
CLEANUP_TIMEOUT_S = 5.0


def _numbered(text: str, first: int) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return ""
    width = len(str(first + len(lines) - 1))
    out = []
    for i, line in enumerate(lines):
        if line.endswith("\r"):
            line = line[:-1]
        out.append(f"{first + i:>{width}} | {line}")
    return "\n".join(out)


def _exit_code(code: int | None, sig: str | None) -> int:
    if code is not None:
        return code
    if sig:
        name = sig if sig.startswith("SIG") else f"SIG{sig}"
        number = getattr(signal, name, None)
        return 128 + int(number) if number is not None else -1
    return -1


class AcpEnvironment(DelegatingExecutionEnvironment):
    """File reads and writes through the editor, commands in its terminal (when offered); the
    rest (search, listing, lifecycle, metadata) is the local environment's, as delegated."""

    def __init__(
        self,
        local: ExecutionEnvironment,
        conn: Any,
        session_id: str,
        *,
        read: bool = True,
        write: bool = True,
        terminal: bool = False,
    ) -> None:
        super().__init__(local)
        self.local = local
        self.conn = conn
        self.session_id = session_id
        self.read = read
        self.write = write
        self.terminal = terminal
        self._terminals: set[str] = set()
        #: Command tool calls running now (:meth:`begin_tool`): only their commands go to the
        #: editor's terminal; ra's own (the git snapshot of the context) run locally, unseen.
        self._tool_calls: set[str] = set()
        #: Told ``(call_id, terminal_id)`` when a tool call's command starts in a terminal, so the
        #: call's update can embed it (the editor shows the live terminal in the call).
        self.on_terminal: Callable[[str, str], None] | None = None

    def begin_tool(self, call_id: str) -> None:
        self._tool_calls.add(call_id)

    def end_tool(self, call_id: str) -> None:
        self._tool_calls.discard(call_id)

    # -- files ---------------------------------------------------------------------------------
    async def _editor_text(self, full: str, line: int | None = None, limit: int | None = None) -> str | None:
        """The editor's text of ``full``, or None when it has none (it answered with an error, or
        the connection is gone: the local file system answers then)."""
        try:
            response = await asyncio.wait_for(
                self.conn.read_text_file(session_id=self.session_id, path=full, line=line, limit=limit), FS_TIMEOUT_S
            )
        except (RequestError, ConnectionError):
            return None
        return response.content

    async def _regular(self, full: str) -> bool:
        """Whether ``full`` is a regular file on disk (False: it does not exist). A directory or a
        special file (a FIFO the editor would block on) raises the local environment's error,
        before the editor is asked anything."""
        size = getattr(self.local, "file_size", None)
        if size is None:
            if await self.local.is_directory(full):
                raise IsADirectoryError(f"Is a directory, not a file: {full}")
            return await self.local.file_exists(full)
        try:
            await size(full)
        except FileNotFoundError:
            return False
        return True

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        if not self.read:
            return await self.local.read_file(path, offset, limit)
        full = self.local.resolve(path)
        if offset is not None and offset < 1:
            raise ValueError(f"offset is a 1-based line number, got {offset}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if not await self._regular(full):
            return await self.local.read_file(path, offset, limit)  # FileNotFoundError, as locally
        text = await self._editor_text(full, offset, limit or DEFAULT_READ_LIMIT)
        if text is None:
            return await self.local.read_file(path, offset, limit)  # FileNotFoundError, or the disk's
        if "\x00" in text:
            raise ValueError(f"{full} is a binary file")
        if not text and offset not in (None, 1):
            raise ValueError(f"offset {offset} is past the end of {full}")
        return _numbered(text, offset or 1)

    async def read_bytes(self, path: str) -> bytes:
        if not self.read:
            return await self.local.read_bytes(path)
        full = self.local.resolve(path)
        try:
            disk: bytes | None = await self.local.read_bytes(full)
        except FileNotFoundError:
            disk = None
        if disk is not None:
            try:
                disk_text = disk.decode("utf-8")
            except UnicodeDecodeError:
                return disk  # binary: the editor's text view of it is not the file
        text = await self._editor_text(full)
        if text is None:
            if disk is None:
                raise FileNotFoundError(f"no such file: {full}")
            return disk
        if disk is not None and text.replace("\r\n", "\n") == disk_text.replace("\r\n", "\n"):
            return disk  # the same text: keep the file's own line endings and encoding
        return text.encode("utf-8")

    async def write_file(self, path: str, content: str | bytes) -> None:
        full = self.local.resolve(path)
        text: str | None
        if isinstance(content, str):
            text = content
        else:
            try:
                text = bytes(content).decode("utf-8")
            except (UnicodeDecodeError, TypeError):
                text = None
        if not self.write or text is None:
            await self.local.write_file(path, content)
            return
        await self._regular(full)  # a directory or a FIFO: the local environment's error
        os.makedirs(os.path.dirname(full), exist_ok=True)
        try:
            await asyncio.wait_for(
                self.conn.write_text_file(session_id=self.session_id, path=full, content=text), FS_TIMEOUT_S
            )
        except RequestError as exc:
            raise OSError(f"the editor did not write {full}: {exc} {exc.data or ''}".strip()) from None
        except ConnectionError:
            await self.local.write_file(path, content)  # the editor is gone: the disk is what is left

    # -- commands ------------------------------------------------------------------------------
    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        if not self.terminal or not self._tool_calls:
            return await self.local.exec_command(command, timeout_ms, working_dir, env_vars, on_output)
        if not isinstance(command, str) or not command.strip():
            raise ValueError("command must be a non-empty string")
        effective = getattr(self.local, "effective_timeout_ms", None)
        timeout = effective(timeout_ms) if callable(effective) else (timeout_ms or 120_000)
        cwd = self.local.working_directory() if working_dir is None else self.local.resolve(working_dir)
        if not await self.local.is_directory(cwd):
            raise FileNotFoundError(f"working_dir {cwd} is not a directory")
        env = [EnvVariable(name=k, value=v) for k, v in (env_vars or {}).items()]
        started = time.monotonic()
        created = await asyncio.wait_for(
            self.conn.create_terminal(
                session_id=self.session_id,
                command="bash",
                args=["-c", command],
                env=env or None,
                cwd=cwd,
                output_byte_limit=OUTPUT_BYTE_LIMIT,
            ),
            FS_TIMEOUT_S,
        )
        terminal_id = created.terminal_id
        self._terminals.add(terminal_id)
        if self.on_terminal is not None and len(self._tool_calls) == 1:
            (call_id,) = self._tool_calls
            self.on_terminal(call_id, terminal_id)
        timed_out = False
        try:
            waiting = asyncio.ensure_future(
                self.conn.wait_for_terminal_exit(session_id=self.session_id, terminal_id=terminal_id)
            )
            seen = 0
            deadline = started + timeout / 1000
            try:
                while not waiting.done():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        timed_out = True
                        break
                    await asyncio.wait([waiting], timeout=min(POLL_S, left))
                    if on_output is not None and not waiting.done():
                        seen = await self._stream(terminal_id, seen, on_output)
            finally:
                if not waiting.done():
                    waiting.cancel()
            if timed_out:
                await self._kill(terminal_id)
                exit_code, sig = -1, None
            else:
                status = waiting.result()
                exit_code, sig = status.exit_code, status.signal
            output = await asyncio.wait_for(
                self.conn.terminal_output(session_id=self.session_id, terminal_id=terminal_id), FS_TIMEOUT_S
            )
            if on_output is not None and len(output.output) > seen:
                on_output("stdout", output.output[seen:])
        except BaseException:
            await asyncio.shield(self._kill(terminal_id))
            raise
        finally:
            await asyncio.shield(self._release(terminal_id))
        text = output.output
        return ExecResult(
            stdout=text,
            stderr="",
            exit_code=-1 if timed_out else _exit_code(exit_code, sig),
            timed_out=timed_out,
            duration_ms=int((time.monotonic() - started) * 1000),
            total_bytes=len(text.encode("utf-8")),
        )

    async def _stream(self, terminal_id: str, seen: int, on_output: OutputCallback) -> int:
        try:
            now = await asyncio.wait_for(
                self.conn.terminal_output(session_id=self.session_id, terminal_id=terminal_id), FS_TIMEOUT_S
            )
        except (RequestError, TimeoutError):
            return seen
        text = now.output
        if len(text) > seen:
            on_output("stdout", text[seen:])
            return len(text)
        return seen

    async def _kill(self, terminal_id: str) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self.conn.kill_terminal(session_id=self.session_id, terminal_id=terminal_id), CLEANUP_TIMEOUT_S
            )

    async def _release(self, terminal_id: str) -> None:
        self._terminals.discard(terminal_id)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self.conn.release_terminal(session_id=self.session_id, terminal_id=terminal_id), CLEANUP_TIMEOUT_S
            )

    async def terminate_all(self) -> None:
        for terminal_id in list(self._terminals):
            await self._kill(terminal_id)
        await self.local.terminate_all()

    def __getattr__(self, name: str) -> Any:
        # Optional extras of the local environment (``file_size``, ``effective_timeout_ms``, ...).
        return getattr(self.local, name)

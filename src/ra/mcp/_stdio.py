"""The stdio transport: an MCP server as a child process, newline-delimited JSON-RPC on its pipes.

ra starts the process itself rather than through ``mcp.client.stdio`` because it needs what that
one keeps to itself: the process id and a :mod:`ra.env.proctree` cookie (so that closing stops
every process the server started, also one that left its process group), the tail of its stderr
(for a message that says why a server did not start), and the moment its output ends (a crash
between calls is noticed at once, not at the next call).

Shutdown follows the MCP lifecycle: stdin is closed, the server gets a short grace period to
exit, then its process group and every process carrying its cookie are stopped
(:func:`ra.env.proctree.stop_tree`: SIGTERM, then SIGKILL). Every wait is bounded and the
shutdown runs shielded, so a cancelled caller cannot leave a server behind.

Only imported when a stdio server starts (it imports the ``mcp`` package).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ra.env import proctree

__all__ = ["ProcessInfo", "open_stdio"]

#: Seconds a server gets to exit on its own once its stdin is closed.
EXIT_GRACE = 1.0
#: Seconds between SIGTERM and SIGKILL for what is left.
TERM_GRACE = 1.0
_STDERR_TAIL = 4096
_POLL = 0.01


@dataclass(slots=True)
class ProcessInfo:
    """What ra knows about one server process (filled in as it runs)."""

    pid: int | None = None
    cookie: str = field(default_factory=proctree.new_cookie)
    returncode: int | None = None
    stderr: bytearray = field(default_factory=bytearray)

    def stderr_tail(self, limit: int = 300) -> str:
        """The last non-empty stderr line, cut to ``limit`` characters."""
        lines = [line.strip() for line in self.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][-limit:] if lines else ""


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # not JSON-RPC: a server printing to stdout; the session ignores it
        return exc


async def _wait_exit(process: anyio.abc.Process, seconds: float) -> bool:
    """Whether the process exited within ``seconds``. Polls ``returncode``: ``wait()`` would also
    wait for its pipes to close, which a child that inherited them keeps open."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - see the docstring
            await anyio.sleep(_POLL)
        return True
    return False


async def _stop(process: anyio.abc.Process, info: ProcessInfo) -> None:
    """Close stdin, give the server :data:`EXIT_GRACE`, then stop its whole tree (bounded)."""
    with contextlib.suppress(Exception):
        await process.stdin.aclose()  # type: ignore[union-attr]
    await _wait_exit(process, EXIT_GRACE)
    # Even a server that exited may have left children in its group or under its cookie.
    await proctree.stop_tree(process.pid, info.cookie, TERM_GRACE)
    await _wait_exit(process, TERM_GRACE)
    info.returncode = process.returncode


@contextlib.asynccontextmanager
async def open_stdio(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    info: ProcessInfo,
    on_end: Callable[[], None],
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream, anyio.abc.ObjectSendStream]]:
    """Start the server and yield the (read, write) message streams ``ClientSession`` takes.

    ``on_end`` is called once when the server's output ends (it exited or closed stdout).
    Raises ``OSError`` when the command cannot be started.
    """
    environment = get_default_environment() | dict(env) | {proctree.COOKIE_VAR: info.cookie}
    process = await anyio.open_process(
        [command, *args],
        env=environment,
        cwd=cwd,
        start_new_session=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    info.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end]).strip()
                        del buffer[: end + 1]
                        if line:
                            await read_writer.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            on_end()

    async def read_stderr() -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in process.stderr:
                info.stderr += chunk
                if len(info.stderr) > _STDERR_TAIL:
                    del info.stderr[: len(info.stderr) - _STDERR_TAIL]

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end, not a request hanging

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(read_stderr)
            tg.start_soon(write_stdin)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    write_stream.close()
                    read_stream.close()
                    await _stop(process, info)
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    with contextlib.suppress(Exception):
                        await stream.aclose()
            with anyio.move_on_after(TERM_GRACE), contextlib.suppress(Exception):
                await process.wait()
            info.returncode = process.returncode
            _close_transport(process)


def _close_transport(process: anyio.abc.Process) -> None:
    """Close asyncio's subprocess transport now (it would warn when collected otherwise)."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


def default_cwd(configured: str | None, session_cwd: str | None) -> str | None:
    """The server's working directory: its own (relative to the session's), else the session's."""
    base = session_cwd
    if configured is None:
        return base
    return os.path.join(base or os.getcwd(), os.path.expanduser(configured))

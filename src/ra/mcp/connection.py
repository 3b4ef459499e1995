"""One MCP server: start it, list its tools, call them, restart it once when it dies, close it.

Each connection lives in one long-lived asyncio task of its own (the *supervisor*). The ``mcp``
package runs its streams in anyio task groups, which belong to the task that entered them; so
the transport and the ``ClientSession`` are entered, and left, only by that task. Callers of
:meth:`McpConnection.call` merely send a request through the session and wait for its answer:
cancelling a caller (an aborted tool call) cancels that request and nothing else.

What can go wrong, and what happens:

* the server does not start, or does not answer ``initialize`` / ``tools/list`` within
  ``startup_timeout``: the connection is ``failed`` with a message that says why (for a stdio
  server, with its exit code and last stderr line);
* the server crashes, or its connection drops, during a call or between calls: the call in
  flight gets an error result at once, and the server is restarted (once);
* a call gets no answer within its timeout: that call gets an error result when the timeout
  runs out (the server is sent a cancellation), and the server is pinged; a server that does not
  answer the ping either is hung, and is restarted (once);
* the server dies again after its restart: the connection is ``failed`` and its tools answer
  with an error that says so;
* ``notifications/tools/list_changed``: the list is fetched again (by the supervisor, between
  calls), and :attr:`McpConnection.version` goes up when it differs.

Every wait is bounded: startup by ``startup_timeout``, a call by its timeout, close by a few
seconds (after which the process tree is killed outright).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from ra.mcp.results import to_tool_output
from ra.mcp.spec import HttpServer, McpServerSpec, StdioServer
from ra.tools.registry import ToolOutput
from ra.tools.sources import ToolSourceStatus

if TYPE_CHECKING:
    from ra.mcp._stdio import ProcessInfo

__all__ = ["McpConnection"]

_log = logging.getLogger("ra.mcp")

#: Seconds a server that did not answer a call gets to answer a ping before it counts as hung.
PING_TIMEOUT = 5.0
#: Seconds close() waits for a connection to wind down on its own before cutting it.
CLOSE_GRACE = 3.0
#: At most this many pages of tools/list (a server whose cursor never ends cannot hang a start).
PAGE_CAP = 1000
#: Seconds to wind down a connection that was lost (a stdio server's process is stopped anyway).
LOST_GRACE = 1.0
#: How many times a server that died is started again.
RESTARTS = 1


def _client_info() -> Any:
    import mcp_types as types

    from ra import __version__

    return types.Implementation(name="ra", version=__version__)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaves(inner))
        return out
    return [exc]


def _describe(exc: BaseException) -> str:
    """One line for an exception (the first meaningful leaf of a group)."""
    leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)] or _leaves(exc)
    first = leaves[0]
    text = str(first).strip() or type(first).__name__
    if isinstance(first, OSError) and first.strerror:
        text = first.strerror + (f": {first.filename}" if first.filename else "")
    name = type(first).__name__
    return text if name in ("MCPError", "StartProblem") else f"{name}: {text}"


def _progress(on_progress: Callable[[str], None] | None) -> Any:
    if on_progress is None:
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        on_progress(f"[progress {done}{': ' + message if message else ''}]\n")

    return report


class StartProblem(Exception):
    """A reason not to start a server that needs no traceback (a missing token variable)."""


class McpConnection:
    """One configured server (see the module docstring for its life)."""

    def __init__(
        self,
        name: str,
        spec: McpServerSpec,
        *,
        cwd: str | None = None,
        startup_timeout: float = 30.0,
        tool_timeout: float = 300.0,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.spec = spec
        self.transport = spec.transport
        self.startup_timeout = spec.startup_timeout or startup_timeout
        self.tool_timeout = spec.tool_timeout or tool_timeout
        self._cwd = cwd
        self._on_change = on_change
        #: "pending", "connected", "failed" or "closed".
        self.state = "pending"
        self.error: str | None = None
        #: The server's own name and version from ``initialize``.
        self.server: str | None = None
        #: The server's tools (``mcp_types.Tool``), as last listed.
        self.tools: tuple[Any, ...] = ()
        #: Goes up every time :attr:`tools` changes (also when the server fails: no tools then).
        self.version = 0
        self.restarts = 0
        #: The stdio server's process (pid, cookie, stderr) of the current or last attempt.
        self.process: ProcessInfo | None = None
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._scope: Any = None
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self._stopping = False
        self._lost: str | None = None
        self._refresh = False
        self._background: set[asyncio.Task[None]] = set()
        self._attempt_id: object = None
        self._up = False
        self._checking = False

    # -- status ------------------------------------------------------------------------------
    def status(self) -> ToolSourceStatus:
        return ToolSourceStatus(
            name=self.name,
            transport=self.transport,
            state=self.state,
            tools=len(self.tools),
            error=self.error,
            server=self.server,
        )

    def _set_state(self, state: str, error: str | None = None) -> None:
        self.state = state
        if error is not None or state in ("connected", "closed"):
            self.error = error
        self._notify()

    def _notify(self) -> None:
        """Wake everyone waiting for the connection to settle (they look again)."""
        settled, self._settled = self._settled, asyncio.Event()
        settled.set()

    def _set_tools(self, tools: Iterable[Any]) -> None:
        tools = tuple(tools)
        if [t.model_dump() for t in tools] == [t.model_dump() for t in self.tools]:
            return
        self.tools = tools
        self.version += 1
        if self._on_change is not None:
            self._on_change()

    def _redact(self, text: str) -> str:
        secrets: list[str] = []
        if isinstance(self.spec, StdioServer):
            secrets.extend(self.spec.env.values())
        else:
            secrets.extend(self.spec.headers.values())
            var = self.spec.bearer_token_env_var
            if var and os.environ.get(var):
                secrets.append(os.environ[var])
        for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    # -- life --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the server and wait until it is connected or failed (bounded; never raises)."""
        if self._task is None and not self._stopping:
            self._task = asyncio.create_task(self._supervise(), name=f"ra.mcp:{self.name}")
        if self.state != "pending":
            return
        settled = self._settled
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(settled.wait(), self.startup_timeout + CLOSE_GRACE + 5.0)
        if self.state == "pending":  # the supervisor's own bound did not hold: give up on it
            await self.close()
            self._set_state("failed", f"did not start within {self.startup_timeout:g}s")

    async def _supervise(self) -> None:
        try:
            while not self._stopping:
                reason, was_up = await self._attempt()
                if self._stopping:
                    break
                reason = self._redact(reason or "the connection ended")
                if not was_up:
                    verb = "start" if self.restarts == 0 else "restart"
                    self._fail(f"could not {verb}: {reason}")
                    break
                if self.restarts >= RESTARTS:
                    self._fail(f"stopped again after a restart: {reason}")
                    break
                self.restarts += 1
                _log.warning("MCP server %s stopped (%s); restarting it", self.name, reason)
                self._set_state("pending", f"restarting: {reason}")
        except Exception as exc:  # a bug here must not leave callers waiting
            _log.exception("MCP server %s: supervisor failed", self.name)
            self._fail(self._redact(_describe(exc)))
        finally:
            self._session = None
            if self._stopping:
                self._set_state("closed")

    def _fail(self, message: str) -> None:
        _log.warning("MCP server %s failed: %s", self.name, message)
        self._set_tools(())
        self._set_state("failed", message)

    async def _attempt(self) -> tuple[str | None, bool]:
        """One run of the server: connect, serve until stopped or lost. ``(why it ended, was up)``."""
        import anyio

        self._lost = None
        self._refresh = False
        self._up = False
        self._wake.clear()
        up = False
        reason: str | None = None
        scope = anyio.CancelScope(deadline=anyio.current_time() + self.startup_timeout)
        self._scope = scope
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    reason = await self._serve(stack, scope)
                    up = True
        except Exception as exc:
            reason = _describe(exc)
        finally:
            self._session = None
            self._scope = None
        if not up and scope.cancelled_caught and not self._stopping:
            reason = f"no answer within {self.startup_timeout:g}s (startup_timeout)"
        up = up or self._up
        process = self.process
        if isinstance(self.spec, StdioServer) and process is not None and not self._stopping:
            code = process.returncode
            if code is not None:
                how = f"exited with code {code}" if code >= 0 else f"was ended by signal {-code}"
                reason = f"{reason}; the server {how}"
            tail = process.stderr_tail()
            if tail:
                reason = f"{reason} (stderr: {tail})"
        return reason, up

    async def _serve(self, stack: AsyncExitStack, scope: Any) -> str | None:
        import anyio
        from mcp.client.session import ClientSession

        attempt = object()
        self._attempt_id = attempt

        def ended() -> None:
            if self._attempt_id is attempt and self._lost is None:
                self._lost = "the server closed its output (it exited or crashed)"
                self._wake.set()

        read, write = await stack.enter_async_context(self._open(ended))
        session = await stack.enter_async_context(
            ClientSession(read, write, message_handler=self._on_message, client_info=_client_info())
        )
        init = await session.initialize()
        tools = await self._list(session)
        scope.deadline = math.inf
        info = init.server_info
        self.server = f"{info.name} {info.version}".strip() if info is not None else None
        self._session = session
        self._up = True
        self._set_tools(tools)
        self._set_state("connected")
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return None
            if self._lost is not None:
                # Winding down a dead or hung server gets a short bound: the streamable HTTP client
                # would otherwise wait out its own timeout to say goodbye (DELETE) to it.
                scope.deadline = anyio.current_time() + LOST_GRACE
                return self._lost
            if self._refresh:
                self._refresh = False
                tools = await self._refresh_list(session)
                if isinstance(tools, str):
                    return tools
                if tools is not None:
                    self._set_tools(tools)

    async def _refresh_list(self, session: Any) -> list[Any] | str | None:
        """The new list; None to keep the old one (the server refused); a str: the connection is lost."""
        import anyio
        from mcp.shared.exceptions import MCPError

        try:
            with anyio.fail_after(self.startup_timeout):
                return await self._list(session)
        except TimeoutError:
            return f"tools/list got no answer within {self.startup_timeout:g}s"
        except (MCPError, ValueError) as exc:  # refused, or a list that does not parse: keep the old one
            _log.warning("MCP server %s: tools/list failed: %s", self.name, self._redact(str(exc)))
            return None

    async def _list(self, session: Any) -> list[Any]:
        import mcp_types as types

        tools: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(PAGE_CAP):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        return tools

    def _open(self, ended: Callable[[], None]) -> Any:
        spec = self.spec
        if isinstance(spec, StdioServer):
            from ra.mcp._stdio import ProcessInfo, default_cwd, open_stdio

            self.process = ProcessInfo()
            return open_stdio(spec.command, spec.args, spec.env, default_cwd(spec.cwd, self._cwd), self.process, ended)
        return self._open_http(spec)

    @contextlib.asynccontextmanager
    async def _open_http(self, spec: HttpServer) -> Any:
        import httpx2

        headers = dict(spec.headers)
        if spec.bearer_token_env_var:
            token = os.environ.get(spec.bearer_token_env_var)
            if not token:
                raise StartProblem(
                    f"environment variable {spec.bearer_token_env_var} (bearer_token_env_var) is not set"
                )
            headers["Authorization"] = f"Bearer {token}"
        read_timeout = max(300.0, self.tool_timeout + 30.0)
        if spec.transport == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(
                spec.url, headers=headers, timeout=self.startup_timeout, sse_read_timeout=read_timeout
            ) as streams:
                yield streams
            return
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(self.startup_timeout, read=read_timeout)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
            streamable_http_client(spec.url, http_client=client) as streams,
        ):
            yield streams

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._refresh = True
            self._wake.set()

    def _mark_lost(self, session: Any, reason: str) -> None:
        if session is self._session and self._lost is None and not self._stopping:
            self._lost = reason
            self._wake.set()

    # -- calls -------------------------------------------------------------------------------
    async def _ready(self, deadline: float) -> Any:
        """The live session, or a message saying why there is none (waits out a restart)."""
        loop = asyncio.get_running_loop()
        while True:
            if self.state == "connected" and self._session is not None and self._lost is None and not self._checking:
                return self._session
            if self.state == "failed":
                return f"MCP server {self.name} failed ({self.error}); its tools are unavailable"
            if self.state == "closed" or self._stopping:
                return f"MCP server {self.name} is closed"
            if self._task is None:
                return f"MCP server {self.name} was not started"
            remaining = deadline - loop.time()
            if remaining <= 0:
                what = "was being checked (a call got no answer)" if self._checking else "was restarting"
                return f"MCP server {self.name} {what} and was not ready in time"
            settled = self._settled
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(settled.wait(), remaining)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None,
        *,
        timeout: float | None = None,
        on_progress: Callable[[str], None] | None = None,
    ) -> ToolOutput:
        """Call ``tool`` (its name on the server) and map the answer; never raises but on cancellation.

        ``on_progress`` gets one line per progress notification the server sends for the call."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        limit = timeout if timeout is not None else self.tool_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        session = await self._ready(deadline)
        if isinstance(session, str):
            return ToolOutput(session, is_error=True)
        remaining = max(deadline - loop.time(), 0.001)
        timed_out = f"MCP tool {tool} (server {self.name}) got no answer within {limit:g}s; the call was cancelled"
        request = session.call_tool(tool, arguments or {}, progress_callback=_progress(on_progress))
        try:
            answered, result = await self._within(request, remaining)
            if not answered:
                self._check_alive(session)
                return ToolOutput(timed_out, is_error=True)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                self._check_alive(session)
                return ToolOutput(timed_out, is_error=True)
            if exc.code == CONNECTION_CLOSED or "session terminated" in exc.message.lower():
                why = self._lost if session is self._session and self._lost else "it exited or crashed"
                self._mark_lost(session, "the connection closed during a call")
                return ToolOutput(
                    f"MCP server {self.name} closed the connection during the call to {tool} ({why}); "
                    "ra restarts it once",
                    is_error=True,
                )
            message = self._redact(exc.message)
            return ToolOutput(f"MCP server {self.name} refused the call to {tool}: {message}", is_error=True)
        except (RuntimeError, ValueError) as exc:  # an answer the client could not accept (bad shape)
            return ToolOutput(f"MCP tool {tool} (server {self.name}): {self._redact(str(exc))}", is_error=True)
        except Exception as exc:  # the transport failed (HTTP connection refused, ...)
            self._mark_lost(session, _describe(exc))
            return ToolOutput(
                f"MCP server {self.name} could not be reached for {tool}: {self._redact(_describe(exc))}",
                is_error=True,
            )
        return to_tool_output(result, server=self.name, tool=tool)

    async def _within(self, request: Any, seconds: float) -> tuple[bool, Any]:
        """``(True, answer)``, or ``(False, None)`` when ``seconds`` pass first.

        The request runs in a task of its own, so that giving up on it is immediate: cancelling
        it makes the ``mcp`` client send the server a cancellation, which may wait up to 5 s for a
        transport that is stuck (a hung HTTP server), and that wait is the task's, not the
        caller's. A cancelled caller cancels the request too. Raises what the request raised.
        """
        task = asyncio.ensure_future(request)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()
            return False, None
        if task.cancelled():  # close() cancelled it
            raise ConnectionError("the connection was closed")
        return True, task.result()

    def _check_alive(self, session: Any) -> None:
        """After a call timed out: ping the server; one that does not answer is hung (restart it)."""

        if self._checking or session is not self._session:
            return

        async def ping() -> None:
            try:
                answered, _ = await self._within(session.send_ping(), PING_TIMEOUT)
            except Exception:
                answered = False
            try:
                if not answered:
                    self._mark_lost(session, f"it answered neither a call nor, within {PING_TIMEOUT:g}s, a ping")
            finally:
                self._checking = False
                self._notify()

        # Until the ping is answered, new calls wait rather than go to a server that may be hung.
        self._checking = True

        task = asyncio.create_task(ping(), name=f"ra.mcp:{self.name}:ping")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- close -------------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the server (bounded; idempotent); no process of a stdio server is left."""
        self._stopping = True
        self._wake.set()
        for task in list(self._background):
            task.cancel()
        task = self._task
        if task is not None and not task.done():
            if self.state == "pending" and self._scope is not None:
                self._scope.cancel()  # still starting: nothing to wind down politely
            done, _ = await asyncio.wait({task}, timeout=CLOSE_GRACE)
            if not done and self._scope is not None:
                self._scope.cancel()
                done, _ = await asyncio.wait({task}, timeout=CLOSE_GRACE)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        process = self.process
        if process is not None and process.pid is not None:
            from ra.env import proctree

            await asyncio.to_thread(proctree.kill_now, process.pid, process.cookie)
        if self.state != "closed":
            self._set_state("closed")

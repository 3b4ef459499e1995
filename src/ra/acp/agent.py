"""The ACP agent: ``initialize``, sessions (new, load, list, fork, resume, close), modes, prompts.

:class:`RaAcpAgent` implements the agent side of ``agent-client-protocol``; :func:`serve` runs it
on stdio. Sessions are ra Sessions recorded to the store ``ra`` uses, so an editor can list and
load what was done earlier (from the editor or from the ``ra`` command). Capabilities are the ones
ra has: image and embedded-context prompts, MCP over stdio, HTTP and SSE, session loading and
listing when a store is configured.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acp.schema import (
    AgentCapabilities,
    ForkSessionResponse,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionModeResponse,
    SseMcpServer,
    Usage,
)

from acp import PROTOCOL_VERSION, RequestError, run_agent

from .prompt import PromptError, prompt_input
from .session import AcpSession, mode_of, mode_state
from .updates import history_updates

if TYPE_CHECKING:
    from ra.agent.session import Session

    from .setup import AcpSetup

__all__ = ["RaAcpAgent", "serve"]

_log = logging.getLogger("ra.acp")

#: Sessions per ``session/list`` page.
PAGE_SIZE = 50


def _invalid(message: str) -> RequestError:
    return RequestError.invalid_params({"message": message})


def mcp_specs(servers: list[Any] | None) -> dict[str, Any]:
    """The editor's MCP servers as ``ra.mcp`` specs by name (ACP's own ``acp`` transport is not
    supported: such a server is left out, with a log line)."""
    from ra.mcp.spec import HttpServer, StdioServer

    specs: dict[str, Any] = {}
    for server in servers or ():
        if isinstance(server, McpServerStdio):
            env = {e.name: e.value for e in server.env}
            specs[server.name] = StdioServer(command=server.command, args=tuple(server.args), env=env)
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            headers = {h.name: h.value for h in server.headers}
            transport = "sse" if isinstance(server, SseMcpServer) else "http"
            specs[server.name] = HttpServer(url=server.url, headers=headers, transport=transport)
        else:
            _log.warning("MCP server %r: transport %r is not supported", getattr(server, "name", "?"), server.type)
    return specs


def _check_cwd(cwd: str) -> str:
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise _invalid(f"cwd must be an absolute path, got {cwd!r}")
    if not os.path.isdir(cwd):
        raise _invalid(f"cwd {cwd!r} is not a directory")
    return os.path.normpath(cwd)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class RaAcpAgent:
    """ra's sessions behind the ACP agent interface (one instance per connection)."""

    def __init__(self, setup: AcpSetup) -> None:
        self.setup = setup
        self.conn: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self._fs_read = self._fs_write = self._terminal = False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # -- handshake ------------------------------------------------------------------------------
    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        from ra import __version__

        if client_capabilities is not None:
            fs = client_capabilities.fs
            self._fs_read = bool(fs and fs.read_text_file)
            self._fs_write = bool(fs and fs.write_text_file)
            self._terminal = bool(client_capabilities.terminal)
        stored = self.setup.store is not None
        capabilities = AgentCapabilities(
            load_session=stored,
            prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=True),
            mcp_capabilities=McpCapabilities(http=True, sse=True),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities() if stored else None,
                fork=SessionForkCapabilities() if stored else None,
                resume=SessionResumeCapabilities() if stored else None,
                close=SessionCloseCapabilities(),
            ),
        )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=capabilities,
            auth_methods=[],
            agent_info=Implementation(name="ra", title="ra", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        # Keys come from ra's config and environment; there is nothing to authenticate here.
        raise _invalid(f"ra offers no authentication methods (got {method_id!r}); keys come from its configuration")

    # -- sessions -------------------------------------------------------------------------------
    def _environment(self, cwd: str, session_id: str) -> Any:
        local = self.setup.make_env(cwd)
        if not self.setup.editor_io or not (self._fs_read or self._fs_write or self._terminal):
            return local
        from .environment import AcpEnvironment

        return AcpEnvironment(
            local, self.conn, session_id, read=self._fs_read, write=self._fs_write, terminal=self._terminal
        )

    def _kwargs(self, holder: AcpSession, mcp_servers: list[Any] | None) -> dict[str, Any]:
        servers = {**self.setup.mcp_servers, **mcp_specs(mcp_servers)}
        return {
            "hooks": self.setup.hooks,
            "can_use_tool": holder.can_use_tool,
            "controls": [holder.snapshots],
            "mcp_servers": servers or None,
        }

    def _config(self) -> Any:
        config = self.setup.session_config()
        if config.permission_mode is None:
            config.permission_mode = self.setup.default_mode
        return config

    async def _open(
        self,
        cwd: str,
        mcp_servers: list[Any] | None,
        *,
        resume: str | None = None,
        fork: bool = False,
        history: Any = None,
        session_id: str | None = None,
    ) -> AcpSession:
        cwd = _check_cwd(cwd)
        setup = self.setup
        new_id = session_id or (str(uuid.uuid4()) if resume is None or fork else resume)
        holder = AcpSession(self.conn, new_id, cwd, setup.profile.context_window_size)
        holder.mcp_servers = mcp_servers
        env = self._environment(cwd, new_id)
        kwargs = self._kwargs(holder, mcp_servers)
        session: Session
        if resume is None:
            from ra.agent.session import Session

            session = Session(
                setup.profile,
                env,
                llm_client=setup.client,
                config=self._config(),
                session_id=new_id,
                history=history,
                store=setup.store,
                **kwargs,
            )
            await session.start()
        else:
            from ra.agent.session import Session
            from ra.agent.store.base import SessionError

            try:
                session = await Session.open(
                    setup.profile,
                    env,
                    setup.client,
                    self._config(),
                    store=setup.store,
                    resume=resume,
                    fork_session=fork,
                    session_id=new_id if fork else None,
                    **kwargs,
                )
            except (SessionError, ValueError) as exc:  # unknown, in use, or not a session id at all
                raise _invalid(str(exc)) from None
        holder.attach(session)
        self.sessions[session.id] = holder
        return holder

    def _stored(self, what: str) -> None:
        if self.setup.store is None:
            raise _invalid(f"{what}: sessions are not recorded (ra acp --no-session-persistence)")

    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: list[Any] | None = None, **kw: Any
    ) -> NewSessionResponse:
        holder = await self._open(cwd, mcp_servers)
        assert holder.session is not None
        return NewSessionResponse(session_id=holder.id, modes=mode_state(holder.session))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kw: Any,
    ) -> LoadSessionResponse:
        self._stored("session/load")
        holder = self.sessions.get(session_id)
        if holder is None:
            holder = await self._open(cwd, mcp_servers, resume=session_id)
        session = holder.session
        assert session is not None
        for update in history_updates(session.history, holder.cwd):
            await holder.send(update)
        await holder.send_notices()  # after the history: the last thing the user reads before going on
        return LoadSessionResponse(modes=mode_state(session))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kw: Any,
    ) -> ResumeSessionResponse:
        self._stored("session/resume")
        holder = self.sessions.get(session_id) or await self._open(cwd, mcp_servers, resume=session_id)
        assert holder.session is not None
        await holder.send_notices()
        return ResumeSessionResponse(modes=mode_state(holder.session))

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kw: Any,
    ) -> ForkSessionResponse:
        self._stored("session/fork")
        live = self.sessions.get(session_id)
        if live is not None and live.session is not None and live.turn is not None:
            raise _invalid("session/fork: the session is running a prompt; fork it when the prompt has answered")
        # Its notices wait for its first prompt: the editor learns the new id from this answer.
        holder = await self._open(cwd, mcp_servers, resume=session_id, fork=True)
        assert holder.session is not None
        return ForkSessionResponse(session_id=holder.id, modes=mode_state(holder.session))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kw: Any) -> ListSessionsResponse:
        self._stored("session/list")
        store = self.setup.store
        assert store is not None
        if cwd is not None:
            cwd = _check_cwd(cwd)
        start = 0
        if cursor:
            if not cursor.isdigit():
                raise _invalid(f"cursor {cursor!r} is not one this agent gave")
            start = int(cursor)
        found = [info for info in await store.list(cwd) if info.agent_id is None]
        found.sort(key=lambda info: info.updated, reverse=True)
        page = found[start : start + PAGE_SIZE]
        sessions = [
            SessionInfo(session_id=i.id, cwd=i.cwd, title=i.title or None, updated_at=_iso(i.updated)) for i in page
        ]
        more = start + PAGE_SIZE < len(found)
        return ListSessionsResponse(sessions=sessions, next_cursor=str(start + PAGE_SIZE) if more else None)

    async def close_session(self, session_id: str, **kw: Any) -> None:
        holder = self.sessions.pop(session_id, None)
        if holder is not None:
            await holder.close()

    def _holder(self, session_id: str) -> AcpSession:
        holder = self.sessions.get(session_id)
        if holder is None or holder.session is None:
            raise _invalid(f"unknown session {session_id!r}: create it with session/new or session/load first")
        return holder

    async def set_session_mode(self, session_id: str, mode_id: str, **kw: Any) -> SetSessionModeResponse:
        holder = self._holder(session_id)
        try:
            mode = mode_of(mode_id)
        except ValueError as exc:
            raise _invalid(str(exc)) from None
        assert holder.session is not None
        holder.session.set_permission_mode(mode)
        from acp.helpers import update_current_mode

        await holder.send(update_current_mode(mode_id))
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: Any, **kw: Any) -> None:
        raise _invalid(f"ra offers no session config options (got {config_id!r})")

    # -- prompts --------------------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[Any], **kw: Any) -> PromptResponse:
        holder = self._holder(session_id)
        if holder.turn is not None:
            raise _invalid("this session is already answering a prompt; cancel it or wait for its response")
        try:
            text, images = prompt_input(prompt)
        except PromptError as exc:
            raise _invalid(str(exc)) from None
        if holder.session is not None and holder.session.closing:
            holder = await self._reopen(holder)
        stop, result, note = await holder.prompt(text, images)
        if note:
            from acp.helpers import update_agent_message_text

            await holder.send(update_agent_message_text(f"\n\n{note}"))
        if stop == "error":
            error = result.error
            message = (
                f"{type(error).__name__}: {error}" if error is not None else f"the turn ended: {result.stop_reason}"
            )
            raise RequestError.internal_error({"message": message})
        u = result.usage
        usage = Usage(
            total_tokens=u.total_tokens,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            thought_tokens=u.reasoning_tokens,
            cached_read_tokens=u.cache_read_tokens,
            cached_write_tokens=u.cache_write_tokens,
        )
        return PromptResponse(stop_reason=stop, usage=usage)  # type: ignore[arg-type]

    async def _reopen(self, old: AcpSession) -> AcpSession:
        """A session that an error closed (a rejected key, a provider gone) goes on in a new ra
        Session under the same id: its record resumed, or its history carried over."""
        await old.close()
        self.sessions.pop(old.id, None)
        assert old.session is not None
        if self.setup.store is not None and await self.setup.store.load(old.id) is not None:
            new = await self._open(old.cwd, old.mcp_servers, resume=old.id)
        else:
            new = await self._open(old.cwd, old.mcp_servers, history=old.session.history, session_id=old.id)
        assert new.session is not None
        new.session.set_permission_mode(old.session.permission_mode)  # the mode the editor chose
        return new

    async def cancel(self, session_id: str, **kw: Any) -> None:
        holder = self.sessions.get(session_id)
        if holder is not None:
            holder.cancel()

    async def close(self) -> None:
        holders = list(self.sessions.values())
        self.sessions.clear()
        for holder in holders:
            try:
                await holder.close()
            except Exception:
                _log.exception("closing session %s", holder.id)


class _FlowControl(asyncio.streams.FlowControlMixin):
    """The write side's flow control (``StreamWriter.drain`` waits while the pipe is full)."""


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams on the process's stdin and stdout; fd 1 then points at stderr, so nothing else
    (a stray print, a command's output) can write into the protocol."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    protocol = _FlowControl()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(setup: AcpSetup) -> None:
    """Run the agent on stdio until the client closes the connection."""
    agent = RaAcpAgent(setup)
    reader, writer = await _stdio()
    try:
        await run_agent(agent, writer, reader, use_unstable_protocol=True)
    finally:
        await agent.close()

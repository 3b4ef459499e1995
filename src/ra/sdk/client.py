"""``ra.query()`` and ``ra.AgentClient``: the Claude Agent SDK's way in, on ra's Session.

One-way::

    async for message in ra.query("Fix the failing test", options=ra.QueryOptions(model="claude-sonnet-4-5",
                                                                                  provider="anthropic")):
        print(message)

Two-way (the SDK's ``ClaudeSDKClient``)::

    async with ra.AgentClient(options) as client:
        await client.query("Find where the config is parsed")
        async for message in client.receive_response():
            ...
        client.set_permission_mode("accept_edits")
        await client.query("Now add validation")
        ...

Both are a projection of one :class:`~ra.agent.session.Session` and its events
(:class:`~ra.sdk.messages.MessageStream`), so every control of the session - limits, budget,
hooks, permissions, fallback models, named agents - applies, and ``client.session`` is there for
anything the options do not cover.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ra.agent.config import SessionConfig
from ra.agent.errors import SessionBusyError

from .debug import DebugLog
from .limits import QueryLimits
from .messages import Message, MessageStream, ResultMessage
from .shaping import shape_profile

if TYPE_CHECKING:
    from ra.agent.hooks import Hooks
    from ra.agent.permissions import CanUseTool
    from ra.agent.profile import ProviderProfile
    from ra.agent.session import Session
    from ra.agent.store import SessionStore
    from ra.agent.subagents.definitions import AgentDefinition
    from ra.agent.tracing import Tracing
    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client
    from ra.tools.registry import RegisteredTool
    from ra.tools.sources import ToolSource

__all__ = ["AgentClient", "QueryOptions", "query"]

_PROFILE_FOR_PROVIDER = {"anthropic": "anthropic", "openai": "openai", "gemini": "gemini"}


@dataclass(slots=True)
class QueryOptions:
    """What a query runs with. Unset fields keep the defaults of ra's Session and profiles."""

    #: The model; None: the profile's default.
    model: str | None = None
    #: The adapter name in the client ("anthropic", "openai", "gemini", "openai-compatible", ...).
    provider: str | None = None
    #: "anthropic", "openai", "gemini" or "ra", or a profile object; None: from the provider.
    profile: str | ProviderProfile | None = None
    #: The working directory (a LocalExecutionEnvironment there) unless ``env`` is given.
    cwd: str | Path | None = None
    env: ExecutionEnvironment | None = None
    #: Run that local environment's commands under bubblewrap: a mode ("read-only",
    #: "workspace-write", "danger-full-access") or a ``ra.env.sandbox.SandboxPolicy``. Not with
    #: ``env``. "workspace-write" makes ``additional_directories`` writable too.
    sandbox: Any = None
    #: The model client; None: ``ra.llm``'s default client (keys from the environment).
    client: Client | None = None
    #: A base config; the fields below override it when set.
    config: SessionConfig | None = None
    #: Model calls per query (each ``query()`` / ``client.query()`` counts afresh); None: no limit.
    max_turns: int | None = None
    #: USD per query, subagents included; None: no limit.
    max_budget_usd: float | None = None
    permission_mode: str | None = None
    #: The tools the model is offered: names (ra's or Claude Code's: ``Read``, ``Bash``) choose
    #: among the profile's tools (none named: all of them), and tool objects (``@ra.tool``
    #: functions, any ``RegisteredTool``) are added. None: the profile's. Not a permission:
    #: ``allowed_tools`` says which calls run without asking.
    tools: Iterable[str | RegisteredTool] | None = None
    #: MCP servers: ``{name: {"type": "stdio", "command", "args", "env"} | {"type": "http" | "sse",
    #: "url", "headers"}}`` (the Claude SDK's shape; ``.mcp.json``'s ``{"mcpServers": ...}`` too), a
    #: path to an ``.mcp.json`` file (or that file's JSON text), or a ToolSource the host owns.
    #: Started before the first query (the ``init`` message lists them), closed with the client.
    mcp_servers: Mapping[str, Any] | str | Path | ToolSource | None = None
    allowed_tools: Iterable[str] | None = None
    disallowed_tools: Iterable[str] | None = None
    fallback_models: Iterable[str] | None = None
    agents: Mapping[str, AgentDefinition] | None = None
    #: Run the main conversation as this agent of ``agents`` (or of ``config.agents``): its prompt
    #: joins the system prompt, its tools, model and permission mode apply unless set here.
    agent_name: str | None = None
    #: The whole system prompt, replacing the profile's (project docs included); None: the profile's.
    system_prompt: str | None = None
    #: Instructions added to the profile's system prompt (the SDK's ``append_system_prompt``).
    append_system_prompt: str | None = None
    #: Extended-thinking budget in tokens (profiles with Anthropic thinking); 0 turns thinking off.
    max_thinking_tokens: int | None = None
    #: Directories beyond ``cwd`` the agent works in: they must exist, and the system prompt names
    #: them. ra's file tools are not confined to ``cwd``, so nothing else changes.
    additional_directories: Iterable[str | Path] | None = None
    #: A file the session's events (and ra's log records) are appended to, one JSON line each.
    debug_file: str | Path | None = None
    #: OpenTelemetry spans for the session (``ra.agent.tracing.Tracing``; docs/tracing.md).
    tracing: Tracing | None = None
    hooks: Hooks | None = None
    can_use_tool: CanUseTool | None = None
    controls: list[Any] = field(default_factory=list)
    #: Also yield ``StreamEvent`` messages with the text as it streams.
    include_partial_messages: bool = False
    #: The new session's id (a fresh session, or the fork made with ``fork_session``); an id the
    #: store already holds is refused. None: a new UUID.
    session_id: str | None = None
    #: Continue the recorded session with this id: its history, usage, spend and turn counts come
    #: from the record, and the new turns are appended to it (docs/sessions.md).
    resume: str | None = None
    #: Continue the newest session recorded for this working directory (a new one when none is).
    continue_conversation: bool = False
    #: With ``resume`` / ``continue_conversation``: go on in a new session (a new record naming
    #: its parent) and leave the resumed record as it is.
    fork_session: bool = False
    #: With ``resume``: start from this entry of the record instead of its last one (a branch in
    #: the same record, or with ``fork_session`` the fork point). The Claude SDK's name.
    resume_session_at: str | None = None
    #: Where sessions are recorded and resumed from; None: ``ra.agent.store.default_store()``
    #: (``$RA_SESSIONS_DIR``, else the platform's state directory).
    session_store: SessionStore | None = None
    #: False: record nothing (the Claude SDK's ``persistSession``; ``--no-session-persistence``).
    persist_session: bool = True

    def build_config(self, profile: ProviderProfile | None = None) -> SessionConfig:
        """The session's config: ``config`` as given (the host's choice, whole), else the
        profile's session defaults (the ra profile prunes on overflow and has no round limit);
        then the fields set here."""
        base = self.config
        changes: dict[str, Any] = {}
        mode = self.permission_mode
        if mode is None and self.agent_name is not None:
            mode = self.agent_definition().permission_mode
        if mode is not None:
            changes["permission_mode"] = mode
        if self.allowed_tools is not None:
            changes["allowed_tools"] = tuple(self.allowed_tools)
        if self.disallowed_tools is not None:
            changes["disallowed_tools"] = tuple(self.disallowed_tools)
        if self.fallback_models is not None:
            changes["fallback_models"] = tuple(self.fallback_models)
        if self.agents is not None:
            changes["agents"] = dict(self.agents)
        if base is None:
            defaults = dict(profile.session_defaults) if profile is not None else {}
            return SessionConfig(**{**defaults, **changes})
        return dataclasses.replace(base, **changes) if changes else base

    def agent_definition(self) -> AgentDefinition:
        """The definition ``agent_name`` names; ValueError naming the agents there are."""
        agents = dict(self.config.agents) if self.config is not None else {}
        agents.update(self.agents or {})
        definition = agents.get(self.agent_name or "")
        if definition is None:
            known = ", ".join(sorted(agents)) or "none are defined (QueryOptions.agents)"
            raise ValueError(f"unknown agent_name {self.agent_name!r}; the agents are: {known}")
        return definition

    def build_profile(self) -> ProviderProfile:
        """The profile, then ``agent_name``, ``tools``, ``system_prompt``, ``additional_directories``
        and ``max_thinking_tokens`` applied to it (each refused with a ValueError it cannot take)."""
        definition = self.agent_definition() if self.agent_name is not None else None
        model = self.model
        if model is None and definition is not None and not definition.inherits_model:
            model = definition.model
        profile = self.profile
        if profile is not None and not isinstance(profile, str):
            built = profile
        else:
            name = profile or _PROFILE_FOR_PROVIDER.get(self.provider or "", "ra")
            import ra.profiles as profiles

            factory = getattr(profiles, f"create_{name}_profile", None)
            if factory is None:
                raise ValueError(f"unknown profile {name!r}; expected anthropic, openai, gemini or ra")
            options: dict[str, Any] = {}
            if self.provider is not None:
                options["provider"] = self.provider
            if self.append_system_prompt and name != "ra":
                options["user_instructions"] = self.append_system_prompt
            built = factory(model, **options) if model else factory(**options)
            if self.append_system_prompt and name == "ra":
                built.user_instructions = self.append_system_prompt
        names = self.tool_names()
        return shape_profile(
            built,
            agent=(self.agent_name or "", definition) if definition is not None else None,
            tools=names,
            system_prompt=self.system_prompt,
            directories=self.directories(),
            max_thinking_tokens=self.max_thinking_tokens,
        )

    def tool_names(self) -> tuple[str, ...] | None:
        """The names in ``tools`` (None when it names none: the profile's tools stay)."""
        if self.tools is None:
            return None
        if isinstance(self.tools, str):
            raise TypeError(f"tools is a list of tool names and tools, got a single string {self.tools!r}")
        from ra.tools.registry import RegisteredTool

        items = list(self.tools)
        names = tuple(t for t in items if isinstance(t, str))
        if not names and items and all(isinstance(t, RegisteredTool) for t in items):
            return None
        return names

    def extra_tools(self) -> list[RegisteredTool]:
        """The tool objects in ``tools`` (added to the profile's); TypeError for anything else."""
        if self.tools is None or isinstance(self.tools, str):
            return []
        from ra.tools.registry import RegisteredTool

        out: list[RegisteredTool] = []
        for item in self.tools:
            if isinstance(item, RegisteredTool):
                out.append(item)
            elif not isinstance(item, str):
                raise TypeError(
                    f"tools holds tool names and tools (RegisteredTool, @ra.tool functions), got {type(item).__name__}"
                )
        return out

    def build_mcp_servers(self) -> Mapping[str, Any] | ToolSource | None:
        """``mcp_servers`` as the Session takes it: servers by name (parsed with
        ``ra.mcp.parse_mcp_servers``; an entry that cannot be used becomes a failed server), or
        the ToolSource as given. Raises ``ra.mcp.McpConfigError`` (a ValueError) for a file or
        JSON text that cannot be read or is not in the shape."""
        servers = self.mcp_servers
        if servers is None:
            return None
        from ra.tools.sources import ToolSource

        if isinstance(servers, ToolSource):
            return servers
        if isinstance(servers, str) and servers.lstrip().startswith("{"):
            import json

            from ra.mcp.spec import McpConfigError, parse_mcp_servers

            try:
                data = json.loads(servers)
            except json.JSONDecodeError as exc:
                raise McpConfigError(f"mcp_servers: not valid JSON ({exc.msg}, line {exc.lineno})") from None
            return parse_mcp_servers(data, source="mcp_servers")
        if isinstance(servers, str | Path):
            from ra.mcp.spec import load_mcp_config

            return load_mcp_config(Path(servers).expanduser())
        if isinstance(servers, Mapping):
            from ra.mcp.spec import parse_mcp_servers

            if all(not isinstance(v, Mapping) for v in servers.values()) and "mcpServers" not in servers:
                return dict(servers)  # already ra.mcp specs
            return parse_mcp_servers(dict(servers), source="mcp_servers")
        raise TypeError(
            "mcp_servers takes {name: server} (the Claude SDK's shape), a path to an .mcp.json file or a "
            f"ToolSource, got {type(servers).__name__}"
        )

    def directories(self) -> tuple[str, ...]:
        """``additional_directories``, absolute (relative ones from ``cwd``); each must exist."""
        if self.additional_directories is None:
            return ()
        if isinstance(self.additional_directories, (str, Path)):
            raise TypeError("additional_directories is a list of paths, got a single path")
        base = Path(self.cwd if self.cwd is not None else os.getcwd())
        out: list[str] = []
        for entry in self.additional_directories:
            path = (base / Path(entry).expanduser()).resolve()
            if not path.is_dir():
                raise ValueError(f"additional_directories: {entry} is not a directory ({path})")
            out.append(str(path))
        return tuple(out)

    def resuming(self) -> bool:
        """Whether the options continue a recorded session (``resume`` or ``continue_conversation``)."""
        return self.resume is not None or self.continue_conversation

    def session_options_set(self) -> bool:
        """Whether any option about which session to run (or where to record it) is set."""
        return (
            self.resuming()
            or self.fork_session
            or self.resume_session_at is not None
            or self.session_id is not None
            or self.session_store is not None
            or not self.persist_session
        )

    def build_store(self) -> SessionStore | None:
        """The store the session is recorded to: ``session_store``, else the default store; None
        with ``persist_session=False`` (refused with a ValueError together with a store or a resume,
        which both need a record)."""
        if not self.persist_session:
            if self.session_store is not None:
                raise ValueError("persist_session=False records nothing: it cannot be combined with session_store")
            if self.resuming():
                raise ValueError(
                    "persist_session=False records nothing: it cannot be combined with resume or "
                    "continue_conversation (they read a record and record what follows)"
                )
            return None
        if self.session_store is not None:
            return self.session_store
        from ra.agent.store import default_store

        return default_store()

    def build_env(self) -> ExecutionEnvironment:
        if self.env is not None:
            if self.sandbox is not None:
                raise ValueError("sandbox applies to the local environment of cwd; wrap your own env instead")
            return self.env
        from ra.env.local import LocalExecutionEnvironment

        local = LocalExecutionEnvironment(self.cwd if self.cwd is not None else os.getcwd())
        if self.sandbox is None:
            return local
        from ra.env.sandbox import SandboxedExecutionEnvironment, SandboxPolicy

        policy = self.sandbox
        if policy == "workspace-write" and self.additional_directories is not None:
            # The directories the agent works in besides cwd are writable, as cwd is.
            policy = SandboxPolicy(policy, writable_roots=self.directories())
        return SandboxedExecutionEnvironment(local, policy)


class AgentClient:
    """A two-way conversation: send prompts, read messages, steer, interrupt, change settings."""

    def __init__(self, options: QueryOptions | None = None, *, session: Session | None = None) -> None:
        self.options = options or QueryOptions()
        self._session = session
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._stream: MessageStream | None = None
        self._task: asyncio.Task[Any] | None = None
        self._detach: Any = None
        self._limits: QueryLimits | None = None
        self._debug: DebugLog | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("the client is not connected; use 'async with AgentClient(...)' or await connect()")
        return self._session

    async def connect(self) -> AgentClient:
        if self._stream is not None:
            return self
        options = self.options
        max_turns = options.max_turns
        if max_turns is None and options.agent_name is not None:
            max_turns = options.agent_definition().max_turns
        limits = QueryLimits(max_turns, options.max_budget_usd)
        if self._session is None:
            from ra.agent.session import Session

            profile = options.build_profile()
            config = options.build_config(profile)
            env = options.build_env()
            self._session = await Session.open(
                profile,
                env,
                options.client,
                config,
                store=options.build_store(),
                resume=options.resume,
                continue_conversation=options.continue_conversation,
                fork_session=options.fork_session,
                resume_at=options.resume_session_at,
                session_id=options.session_id,
                controls=[*options.controls, limits],
                hooks=options.hooks,
                can_use_tool=options.can_use_tool,
                tools=options.extra_tools(),
                mcp_servers=options.build_mcp_servers(),
                tracing=options.tracing,
            )
        elif options.mcp_servers is not None or options.extra_tools():
            raise ValueError(
                "AgentClient(session=...) uses that session as it is: give mcp_servers and tool objects "
                "to the Session (Session(..., tools=..., mcp_servers=...))"
            )
        elif options.session_options_set():
            raise ValueError(
                "AgentClient(session=...) uses that session as it is: resume, continue_conversation, "
                "fork_session, resume_session_at, session_id, session_store and persist_session are for "
                "the session the client builds (see Session.open)"
            )
        else:
            if limits.max_turns is not None or limits.max_budget_usd is not None:
                self._session.controls.add(limits)
            if options.tracing is not None and options.tracing is not self._session.tracing:
                options.tracing.attach(self._session)  # SessionError if it is traced already
        self._limits = limits
        if options.debug_file is not None:
            # Opened last: nothing above can fail and leave the file open.
            self._debug = DebugLog(options.debug_file)
            self._debug.attach(self._session)
        self._stream = MessageStream(
            self._session, self._queue.put_nowait, include_partial=options.include_partial_messages
        )
        self._detach = self._session.add_listener(self._stream, replay=False)
        return self

    async def __aenter__(self) -> AgentClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()

    async def query(self, prompt: str) -> None:
        """Send ``prompt``: it starts processing at once, or - while an earlier prompt is still
        being worked on - runs right after it (a follow-up; one result covers both)."""
        await self.connect()
        session = self.session
        assert self._stream is not None
        if self._task is not None and not self._task.done():
            if self._stream.open:
                session.follow_up(prompt)
                return
            # The earlier prompt's result is out (it goes out before submit() returns): its input
            # has taken its last follow-up, so this prompt needs a submit of its own.
            await self._task
        if self._limits is not None:
            self._limits.begin(session.turn_count, session.total_cost_usd, session.unpriced_calls)
        self._stream.start()
        self._task = asyncio.get_running_loop().create_task(self._submit(prompt))

    async def _submit(self, prompt: str) -> None:
        assert self._stream is not None
        try:
            await self.session.submit(prompt)
        except SessionBusyError:
            self.session.follow_up(prompt)
        except Exception as exc:
            if self._stream.open:
                result = self._stream.result("error", "")  # type: ignore[arg-type]
                result.errors.append(f"{type(exc).__name__}: {exc}")
                self._queue.put_nowait(result)

    async def receive_messages(self) -> AsyncIterator[Message]:
        """Every message, as it comes, until :meth:`disconnect`."""
        while True:
            message = await self._queue.get()
            if message is None:
                return
            yield message

    async def receive_response(self) -> AsyncIterator[Message]:
        """Messages up to and including the next :class:`ResultMessage`."""
        async for message in self.receive_messages():
            yield message
            if isinstance(message, ResultMessage):
                return

    def interrupt(self) -> bool:
        """Stop the prompt being worked on (the conversation stays); see ``Session.interrupt``."""
        return self.session.interrupt()

    def set_model(self, model: str) -> None:
        """Use ``model`` from the next model call on."""
        self.session.set_model(model)

    def set_permission_mode(self, mode: str) -> None:
        """Switch the permission mode from the next model call on."""
        self.session.set_permission_mode(mode)

    def set_max_thinking_tokens(self, tokens: int | None) -> None:
        """The extended-thinking budget from the next model call on (see
        ``Session.set_max_thinking_tokens``)."""
        self.session.set_max_thinking_tokens(tokens)

    async def disconnect(self) -> None:
        """Close the session (stopping any work) and end :meth:`receive_messages`."""
        if self._session is not None:
            await self._session.close()
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=5)
        if self._detach is not None:
            self._detach()
            self._detach = None
        if self._debug is not None:
            self._debug.close()
            self._debug = None
        self._queue.put_nowait(None)


async def query(prompt: str | AsyncIterable[str], *, options: QueryOptions | None = None) -> AsyncIterator[Message]:
    """Run ``prompt`` (or each prompt of an async iterable, one after another, in one
    conversation) and yield the messages: ``init``, assistant and user messages, a ``result`` per
    prompt. The session is closed when the iteration ends."""
    async with AgentClient(options) as client:
        if isinstance(prompt, str):
            await client.query(prompt)
            async for message in client.receive_response():
                yield message
            return
        async for text in prompt:
            await client.query(text)
            async for message in client.receive_response():
                yield message

"""The Session (coding-agent-loop-spec 2.1, 2.3, 2.6, Appendix B): state, API and lifecycle.

The loop itself is in :mod:`ra.agent.loop`; this module holds what the loop works on and the
operations a host calls:

* ``await submit(text)`` - process one input (and queued follow-ups) to completion;
* ``steer(text)`` / ``follow_up(text)`` - queue messages, from any thread or task;
* ``abort()`` - from any thread or task: cancel the model call, kill running commands, close
  subagents, emit SESSION_END, state CLOSED; ``await close()`` does the same and waits;
* ``interrupt()`` - from any thread or task: stop the current input only (the model call is
  cancelled, running commands are stopped, tool calls left without a result are answered as
  interrupted); the session stays usable for the next ``submit()``;
* ``events()`` - an async iterator of SessionEvents (several consumers may iterate).

Threading: the session runs on the event loop of the task that calls ``submit()``. ``steer()``
and ``follow_up()`` append to deques (atomic under the GIL), so they are safe from any thread and
the message is queued before they return. ``abort()`` hops onto the session's loop with
``call_soon_threadsafe`` when called from another thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ra.llm.types import ToolCall, Usage
from ra.tools.pipeline import ToolCallOutcome, ToolPipeline
from ra.tools.registry import AbortState, RegisteredTool
from ra.tools.sources import ToolSource, ToolSourceStatus

from .aio import maybe_await
from .config import SessionConfig, SessionState, StopReason
from .controls.budget import Budget, call_models
from .controls.chain import Control, Controls
from .controls.limits import Limits
from .cost import CostMeter
from .errors import SessionBusyError, SessionClosedError, SessionError
from .event_hub import EventHub, EventSubscription, Listener
from .events import (
    ErrorEvent,
    EventData,
    ProcessingEnd,
    SessionEnd,
    SessionEvent,
    SessionStart,
    ToolCallEnd,
    ToolCallOutputDelta,
    ToolCallStart,
    WarningEvent,
)
from .history import AssistantTurn, CompactionTurn, History
from .hooks.control import HooksControl
from .hooks.registry import Hooks
from .loop import Prompt, process_input
from .permissions.check import CanUseTool, PermissionDenial, Permissions
from .permissions.rules import PermissionMode, effective_mode, normalize_mode, refuse_file_rules_elsewhere
from .result import SubmitResult
from .state import RunState

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client
    from ra.llm.types import ImageData

    from .context_usage import ContextUsage
    from .profile import ProviderProfile
    from .store.base import SessionStore
    from .store.recorder import Recorder
    from .tool_sources import SourceTools
    from .tracing import Tracing

__all__ = ["Session", "builtin_controls"]

_log = logging.getLogger("ra.agent")

_INTERRUPTED_RESULT = "Interrupted: the user stopped this input before the tool call finished; it may not have run."

#: How long close/abort waits for the processing task to unwind after cancelling it.
_UNWIND_TIMEOUT_S = 5.0


def builtin_controls(hooks: Hooks, can_use_tool: CanUseTool | None) -> list[Control]:
    """The controls every session starts with, in order: limits, budget, the permission check (with
    the PreToolUse hooks) and the other hooks. A subagent's session builds its own from its parent's
    hooks and callback, so these are never inherited as they are."""
    return [Limits(), Budget(), Permissions(hooks, can_use_tool), HooksControl(hooks)]


class Session:
    def __init__(
        self,
        profile: ProviderProfile,
        execution_env: ExecutionEnvironment,
        llm_client: Client | None = None,
        config: SessionConfig | None = None,
        *,
        controls: Iterable[Control] = (),
        hooks: Hooks | None = None,
        can_use_tool: CanUseTool | None = None,
        history: History | None = None,
        session_id: str | None = None,
        depth: int = 0,
        parent: Session | None = None,
        agent_id: str | None = None,
        agent_type: str | None = None,
        spawn_call_id: str | None = None,
        store: SessionStore | None = None,
        tools: Iterable[RegisteredTool] = (),
        mcp_servers: Mapping[str, Any] | ToolSource | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``controls`` join the session's decision seam after its limits, budget, permissions and
        hooks and the profile's own. ``hooks`` (:class:`~ra.agent.hooks.Hooks`) and
        ``can_use_tool`` (:mod:`ra.agent.permissions`) govern tool calls and the session's moments.
        ``history`` continues an earlier conversation: tool calls it left unanswered get an
        "interrupted" result, and the turn count and usage start from what it holds. ``parent``
        is the session a subagent works for: its spend rolls up into the parent's (``agent_id``,
        ``agent_type`` and ``spawn_call_id``, the parent's tool call that spawned it, go into a
        recorded subagent's header). With ``store``
        (:mod:`ra.agent.store`) the session is recorded as it runs; without one nothing is
        written. ``await Session.open(...)`` resumes or forks a recorded session.

        ``tools`` adds tools (``@ra.tool`` functions, any ``RegisteredTool``) to the profile's, and
        ``mcp_servers`` plugs in tool sources (:mod:`ra.agent.tool_sources`): MCP servers by name
        (``ra.mcp`` specs, or entries in the ``.mcp.json`` shape), started and closed by the
        session, or a :class:`~ra.tools.sources.ToolSource` the host owns (started if it is not,
        never closed). Either gives the session its own copy of the profile's registry, and
        ``session.profile`` is a clone holding it, so two sessions on one profile never see each
        other's tools. With sources, SESSION_START waits for ``await session.start()`` (which
        ``submit()``, ``Session.open()`` and ``async with`` call).

        ``tracing`` (:class:`ra.agent.tracing.Tracing`) turns on OpenTelemetry spans for the
        session's inputs, model calls and tool calls (docs/tracing.md); without it nothing of
        OpenTelemetry is loaded. Subagents are traced with their parent's."""
        config = config if config is not None else SessionConfig(**profile.session_defaults)
        config.validate()
        if parent is None:  # a subagent's rules are its parent's, checked there on the whole tool list
            refuse_file_rules_elsewhere(config, execution_env, profile.tool_registry)
        sources = _sources_of(mcp_servers, execution_env)
        extra = _extra_tools(tools, profile)
        source_tools: SourceTools | None = None
        if extra or sources:
            from .profile import clone_profile
            from .tool_sources import SourceTools, reserved_names

            registry = profile.tool_registry.copy()
            for tool in extra:
                registry.register(tool)
            profile = clone_profile(profile, tool_registry=registry)
            if sources:
                source_tools = SourceTools(registry, sources, reserved=reserved_names(registry))
        #: The control that keeps the registry in step with the sources (None without sources).
        self._source_tools = source_tools
        self.id = session_id or str(uuid.uuid4())
        self.execution_env = execution_env
        self._llm_client = llm_client
        #: Nesting level: 0 for a top-level session, 1 for its subagents, ...
        self.depth = depth
        self.state = SessionState.IDLE
        #: Active child agents by id. Anything with a ``close()`` (sync or async) may be registered;
        #: all are closed when this session closes.
        self.subagents: dict[str, Any] = {}
        #: Decides how this session's subagents are made (their id, client, extra controls), or
        #: refuses them: see :class:`ra.agent.subagents.SpawnSetup`. None: the defaults. Subagents
        #: inherit it. ``ra.agent.replay`` sets one so that a replayed subagent answers from its record.
        self.spawn_hook: Callable[[Session, str | None, str], Any] | None = None

        self._hub = EventHub(self.id, config.event_backlog_limit)
        abort = AbortState()
        self.hooks = hooks if hooks is not None else Hooks()
        self.can_use_tool = can_use_tool
        #: The session's limits, budget, permissions and hooks come first, then the profile's
        #: rules, then the host's controls.
        builtin = builtin_controls(self.hooks, can_use_tool)
        self._builtin_types = tuple(type(c) for c in builtin)
        #: Where the session is recorded (None: it is not).
        self._store = store
        recorder = [] if store is None else [_new_recorder(store, self.id, parent, agent_id, agent_type, spawn_call_id)]
        #: The control that records the session (its lease on the record is let go at close).
        self._recorder: Recorder | None = recorder[0] if recorder else None
        sourced = [source_tools] if source_tools is not None else []
        chain = Controls([*builtin, *sourced, *profile.controls(), *controls, *recorder])
        pipeline = ToolPipeline(
            profile.tool_registry,
            execution_env,
            _ToolEvents(self),
            config=config,
            abort=abort,
            session=self,
            stopping=self._stopping,
        )
        if history is None:
            history = History()
        else:
            history.answer_open_calls(_INTERRUPTED_RESULT)
        self._run = RunState(
            session_id=self.id,
            profile=profile,
            env=execution_env,
            config=config,
            history=history,
            emit=self._hub.emit,
            client=lambda: self.llm_client,
            pipeline=pipeline,
            abort=abort,
            request_stop=self._request_stop,
            meter=CostMeter(config, self._hub.emit, parent._run.meter if parent is not None else None),
            depth=depth,
            permission_mode=effective_mode(config, can_ask=can_use_tool is not None),
            agent_id=agent_id,
            agent_type=agent_type,
        )
        self._controls = chain
        pipeline.gate = chain.gate(self._run)
        # Prices from genai-prices load in a worker thread from here, off the first call's path.
        self._run.meter.prefetch((model, provider) for _, model, provider in call_models(self._run))
        if len(history):
            turns = [t for t in history if isinstance(t, AssistantTurn)]
            self._run.turn_count = self._run.step_count = len(turns)
            self._run.usage = sum((t.usage for t in turns), Usage())
        self._started = False
        self._compacting = False
        #: SESSION_START was emitted; the task that starts the sources first.
        self._announced = False
        self._starting: asyncio.Task[None] | None = None

        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._task: asyncio.Task[SubmitResult] | None = None
        self._closing: asyncio.Task[None] | None = None

        #: OpenTelemetry spans (``ra.agent.tracing``), or None: the one place tracing plugs in.
        self.tracing: Tracing | None = None
        if tracing is not None:
            tracing.attach(self)
        if source_tools is None:
            self._announce(())

    def _announce(self, statuses: tuple[ToolSourceStatus, ...]) -> None:
        self._announced = True
        profile = self._run.profile
        self._hub.emit(SessionStart(profile.id, profile.model, self.depth, self.state, statuses))

    async def start(self) -> None:
        """Start the session's tool sources (together, bounded), register their tools, then emit
        SESSION_START with their statuses. A source that fails is a WARNING and the session goes
        on without it. Idempotent; ``submit()``, ``Session.open()`` and ``async with`` call it, so
        a host calls it only to have the tools (``session.profile``) before the first input."""
        if self._announced:
            return
        if self.closing:
            raise SessionClosedError(f"session {self.id} is closed")
        self._bind_loop()
        assert self._loop is not None
        starting = self._starting
        if starting is None:
            starting = self._starting = self._loop.create_task(self._start_sources())
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if starting.cancelled() and (current is None or not current.cancelling()):
                raise SessionClosedError(f"session {self.id} was closed while its tool sources started") from None
            raise

    async def _start_sources(self) -> None:
        sources = self._source_tools
        assert sources is not None
        statuses = await sources.start(self._hub.emit)
        if not self._announced and not self.closing:
            self._announce(statuses)

    @property
    def source_tools(self) -> SourceTools | None:
        """The control that keeps the registry in step with the tool sources (None without any)."""
        return self._source_tools

    def follow_sources(self, control: SourceTools) -> None:
        """Use another session's sources through ``control`` (a subagent's, from
        :meth:`SourceTools.follower`): their tools are registered at this session's own model
        calls; the sources stay the other session's to close."""
        if self._source_tools is not None:
            raise SessionError(f"session {self.id} has tool sources of its own")
        self._source_tools = control
        self._controls.add(control)

    @property
    def mcp_servers(self) -> tuple[ToolSourceStatus, ...]:
        """How each MCP server (or other tool source) of the session stands now: name, transport,
        state ("connected", "failed", ...), tool count, error. Empty without sources."""
        sources = self._source_tools
        return () if sources is None else sources.statuses()

    async def reconnect_mcp_server(self, name: str) -> None:
        """Restart MCP server ``name`` (a new process or connection); returns once it is connected.
        Its tools are read again at the next model call. ``ra.tools.sources.UnknownServer`` for a
        name no source has; ValueError naming the server when it is disabled or does not come up."""
        from ra.tools.sources import control_server

        await control_server(self._source_list(), name, "restart")

    async def toggle_mcp_server(self, name: str, enabled: bool) -> None:
        """Turn MCP server ``name`` off (closed; its tools leave the next model call's list and
        calls to them are refused, in subagents too) or on again (started). Errors as
        :meth:`reconnect_mcp_server`."""
        from ra.tools.sources import control_server

        await control_server(self._source_list(), name, "set_enabled", bool(enabled))

    def _source_list(self) -> list[ToolSource]:
        sources = self._source_tools
        return [] if sources is None else [source for source, _ in sources.sources]

    async def context_usage(self) -> ContextUsage:
        """How full the context of the next model call is, by part (:mod:`ra.agent.context_usage`):
        estimates from what the session holds, anchored on the provider's count of the last call.
        Before the first input the system prompt is built for it (each input builds it anew)."""
        from .context_usage import measure
        from .loop import prepare_system_prompt

        if self._run.system_message is None:
            await prepare_system_prompt(self._run)
        return measure(self._run)

    @classmethod
    async def open(
        cls,
        profile: ProviderProfile,
        execution_env: ExecutionEnvironment,
        llm_client: Client | None = None,
        config: SessionConfig | None = None,
        *,
        store: SessionStore | None = None,
        resume: str | None = None,
        continue_conversation: bool = False,
        fork_session: bool = False,
        resume_at: str | None = None,
        session_id: str | None = None,
        **session_kwargs: Any,
    ) -> Session:
        """A new session, or one that continues a recorded one (the Claude Agent SDK's names).

        ``resume=ID`` continues that session's record (appending to it); ``continue_conversation``
        the newest session of the environment's working directory (a new session when there is
        none); ``fork_session=True`` makes the resumed session a new one (``session_id`` or a new
        id) whose record names its parent and starts with a copy of the shared history;
        ``resume_at=ENTRY_ID`` starts from that entry (without a fork, the next entries start a
        branch in the same record). History, usage, spend and turn counts come from the record,
        limits from ``config``. ``session_kwargs`` go to the constructor. Raises
        SessionNotFoundError for an unknown session or entry (docs/sessions.md).
        """
        from .store.resume import open_session

        session = await open_session(
            cls,
            profile,
            execution_env,
            llm_client,
            config,
            store=store,
            resume=resume,
            continue_conversation=continue_conversation,
            fork_session=fork_session,
            resume_at=resume_at,
            session_id=session_id,
            session_kwargs=session_kwargs,
        )
        await session.start()
        return session

    def _record_to(self, store: SessionStore, recorder: Recorder, source: str) -> None:
        """Record with ``recorder`` (the last control), a session built from a record by
        :mod:`ra.agent.store.resume`; ``source`` ("resume", "fork") is what SessionStart hooks see."""
        self._store = store
        self._recorder = recorder
        self._controls.add(recorder)
        self._run.start_source = source
        if source == "resume":  # the record exists: its hooks (SessionStart included) see its file
            from .store.recorder import record_path

            self._run.transcript_path = record_path(store, self.id)

    # -- labels and custom entries ------------------------------------------------------------------
    async def label(self, name: str) -> None:
        """Name the current point of the conversation: a ``label`` entry follows the last entry
        (the turn last added when this is called), so ``Session.open(resume_at=name)`` and
        ``SessionRecord.labels`` find it. Between inputs it is written at once; during an input,
        with the turns at the Recorder's next write. Raises SessionError without a store, on a
        closed session, or before anything is recorded (nothing to name yet); ValueError for a
        name that is not one (docs/sessions.md)."""
        from .store.labels import check_label

        recorder = self._recorder_for("label()")
        check_label(name)
        if not recorder.has_entry(self._run):
            raise SessionError("label(): nothing is recorded yet to name; label after the first input")
        recorder.queue(self._run, "label", {"label": name})
        await self._write_queued(recorder)

    async def record_custom(self, key: str, data: Any) -> None:
        """Record a host's own ``data`` (JSON) under ``key`` in a ``custom`` entry: never sent to the
        model, redacted like every entry, read back as ``SessionRecord.custom``. Raises SessionError
        without a store or on a closed session, TypeError/ValueError for a bad key or data that is not
        JSON (nothing is queued then)."""
        from .store.labels import check_custom

        recorder = self._recorder_for("record_custom()")
        check_custom(key, data)
        recorder.queue(self._run, "custom", {"key": key, "data": data})
        await self._write_queued(recorder)

    def _recorder_for(self, what: str) -> Recorder:
        if self._recorder is None:
            raise SessionError(f"{what} writes to the session's record, and this session has none: pass store=")
        if self.state is SessionState.CLOSED or self.closing:
            raise SessionClosedError(f"{what}: the session is closed; open it again with Session.open(resume=...)")
        return self._recorder

    async def _write_queued(self, recorder: Recorder) -> None:
        task = self._task
        if task is None or task.done():  # between inputs: nothing else writes now
            await recorder.flush(self._run)

    # -- properties ---------------------------------------------------------------------------------
    @property
    def store(self) -> SessionStore | None:
        """Where the session is recorded, or None (:mod:`ra.agent.store`)."""
        return self._store

    @property
    def llm_client(self) -> Client:
        """The client given at creation, else ``ra.llm``'s default client (from the environment)."""
        if self._llm_client is None:
            from ra.llm.client import get_default_client

            self._llm_client = get_default_client()
        return self._llm_client

    @property
    def profile(self) -> ProviderProfile:
        return self._run.profile

    @property
    def config(self) -> SessionConfig:
        """The session's settings; fields may be changed between (or during) inputs."""
        return self._run.config

    @property
    def history(self) -> History:
        return self._run.history

    @property
    def turn_count(self) -> int:
        """Model calls over the session's life (what ``max_turns`` counts)."""
        return self._run.turn_count

    @property
    def step_count(self) -> int:
        return self._run.step_count

    @property
    def usage(self) -> Usage:
        """Tokens used over the session's life."""
        return self._run.usage

    @property
    def total_cost_usd(self) -> float:
        """USD spent so far by this session and its subagents (unknown prices count as $0)."""
        return self._run.meter.total_cost_usd

    @property
    def cost_meter(self) -> CostMeter:
        """The session's spend, its holds for calls in flight, and its place in the tree of
        budgets (``parent``): what the budget control reads (:mod:`ra.agent.cost`)."""
        return self._run.meter

    @property
    def unpriced_calls(self) -> int:
        """Model calls (this session's and its subagents') whose price is unknown; while it is
        not 0, ``total_cost_usd`` is a lower bound."""
        return self._run.meter.unpriced_calls

    @property
    def total_usage(self) -> Usage:
        """Tokens used so far by this session and its subagents."""
        return self._run.meter.total_usage

    @property
    def model(self) -> str:
        """The model the next call uses."""
        return self._run.model

    def set_model(self, model: str) -> None:
        """Use ``model`` (same provider and profile) from the next model call on; a call in
        flight finishes on the model it started with."""
        if not isinstance(model, str) or not model.strip():
            raise ValueError("set_model() takes a non-empty model name")
        self._run.model_override = None if model == self._run.profile.model else model

    def set_max_thinking_tokens(self, tokens: int | None) -> None:
        """The extended-thinking budget from the next model call on (0: thinking off; None: the
        profile's own setting). For a profile with Anthropic's extended thinking; others take
        ``SessionConfig.reasoning_effort``, and get a ValueError that says so."""
        change = getattr(type(self._run.profile), "with_thinking_budget", None)
        if change is None:
            raise ValueError(
                f"set_max_thinking_tokens() needs a profile with Anthropic extended thinking, not "
                f"{type(self._run.profile).__name__}; for other models set SessionConfig.reasoning_effort"
            )
        self._run.profile = change(self._run.profile, tokens)

    @property
    def api_seconds(self) -> float:
        """Seconds spent waiting for model calls so far (retries included)."""
        return self._run.api_seconds

    @property
    def permission_mode(self) -> PermissionMode:
        """The permission mode in force (a change waits for the next model call)."""
        return self._run.permission_mode

    def set_permission_mode(self, mode: str) -> None:
        """Switch the permission mode (``ra.agent.permissions``) from the next model call on:
        calls of a round already being checked keep the mode they started under."""
        self._run.pending_permission_mode = normalize_mode(mode)
        if self.state is not SessionState.PROCESSING:
            self._run.permission_mode = self._run.pending_permission_mode
            self._run.pending_permission_mode = None

    @property
    def permission_denials(self) -> list[PermissionDenial]:
        """Every tool call denied so far (by a hook, a rule, the mode or the host)."""
        return list(self._run.permission_denials)

    def inherited_controls(self) -> list[Control]:
        """The host's controls that declare ``inherit = True``: a subagent gets them too."""
        built_in = self._builtin_types
        return [c for c in self._controls if getattr(c, "inherit", False) and not isinstance(c, built_in)]

    async def notify_subagent_start(self, agent_id: str, agent_type: str | None, task: str) -> None:
        """Tell the controls (SubagentStart hooks) that a subagent of this session starts."""
        await self._controls.subagent_start(self._run, agent_id, agent_type, task)

    @property
    def controls(self) -> Controls:
        """The decision seam (:mod:`ra.agent.controls`): ``session.controls.add(control)``."""
        return self._controls

    @property
    def system_prompt(self) -> str:
        """The system prompt of the current (or last) input."""
        return self._run.system_prompt

    @property
    def aborted(self) -> bool:
        return self._run.abort.aborted

    @property
    def closing(self) -> bool:
        """Closed, or shutting down (no new input, no new subagents)."""
        return self.state is SessionState.CLOSED or self._closing is not None

    @property
    def pending_steering(self) -> int:
        return len(self._run.steering)

    @property
    def pending_follow_ups(self) -> int:
        return len(self._run.follow_ups)

    # -- input ----------------------------------------------------------------------------------------
    async def submit(self, text: str, *, images: Sequence[ImageData] = ()) -> SubmitResult:
        """Process ``text`` and any follow-ups queued meanwhile; return when done.

        ``images`` go with ``text`` in the same user message (``ImageData`` by URL, bytes or a
        local path, which the adapters inline); the model must accept images.

        Raises SessionBusyError while another input is processing and SessionClosedError once the
        session is closed. Model and tool failures do not raise: see ``SubmitResult.stop_reason``
        and ``.error`` (and the ERROR event). Cancelling the awaiting task aborts the session.
        """
        if not isinstance(text, str):
            raise TypeError(f"submit() takes a str, got {type(text).__name__}")
        self.config.validate()  # fields may have been changed since construction
        if self.closing:
            raise SessionClosedError(f"session {self.id} is closed")
        if self._compacting:
            raise SessionBusyError(f"session {self.id} is compacting; submit() once compact() has returned")
        if self.state is SessionState.PROCESSING:
            raise SessionBusyError(
                f"session {self.id} is already processing an input; use steer() to redirect it, "
                "follow_up() to queue the next input, or wait for submit() to return"
            )
        self._bind_loop()
        if not self._announced:
            await self.start()
            if self.closing:
                raise SessionClosedError(f"session {self.id} was closed while its tool sources started")
            if self.state is SessionState.PROCESSING:
                raise SessionBusyError(f"session {self.id} is already processing an input")
        self.state = SessionState.PROCESSING
        self._run.stop_requested = None
        assert self._loop is not None
        task = self._task = self._loop.create_task(self._process(Prompt(text, tuple(images))))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._begin_close("cancelled", cancel_processing=True)
            raise
        if self._closing is not None:
            await asyncio.shield(self._closing)
        result.state = self.state
        return result

    process_input = submit

    async def compact(self, instructions: str | None = None) -> CompactionTurn | None:
        """Compact the conversation now: summarise the older turns (``instructions`` tell the
        summary what to take care of) and keep the newest ones, the user's own messages and the
        system prompt, as ``context_overflow="compact"`` does when the window fills up
        (``config.compaction`` applies; docs/agent.md, "Compaction").

        Returns the :class:`~ra.agent.history.CompactionTurn` added to the history, or None when
        there is nothing to summarise yet or a ``before_compact`` control (a PreCompact hook)
        cancelled it. Only between inputs: raises SessionBusyError while an input is processing
        and SessionClosedError once the session is closed. Model errors of the summary call raise.
        """
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError(f"compact() takes instructions as a str or None, got {type(instructions).__name__}")
        if self.closing:
            raise SessionClosedError(f"session {self.id} is closed")
        if self.state is SessionState.PROCESSING or self._compacting:
            raise SessionBusyError(
                f"session {self.id} is busy (processing an input or compacting); compact() runs between "
                "inputs: call it once submit() has returned"
            )
        from .compaction.compactor import compact_now

        self._bind_loop()
        assert self._loop is not None
        self._compacting = True
        self._run.phase = "model"
        task = self._loop.create_task(compact_now(self._run, self._controls, instructions or None))
        self._task = task  # type: ignore[assignment]  # abort() cancels it like a model call
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._begin_close("cancelled", cancel_processing=True)
            elif self.closing:
                raise SessionClosedError(f"session {self.id} was closed while compacting") from None
            raise
        finally:
            self._compacting = False
            self._run.phase = None

    def steer(self, text: str) -> None:
        """Queue a message to inject after the current tool round (or at the next submit when idle)."""
        self._check_message(text, "steer")
        self._run.steering.append(text)

    def follow_up(self, text: str) -> None:
        """Queue an input to process after the current one completes (or after the next submit)."""
        self._check_message(text, "follow_up")
        self._run.follow_ups.append(text)

    def _check_message(self, text: str, what: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"{what}() takes a str, got {type(text).__name__}")
        if self.state is SessionState.CLOSED:
            raise SessionClosedError(f"session {self.id} is closed")

    # -- events -------------------------------------------------------------------------------------
    def events(self) -> EventSubscription:
        """An async iterator over events; ends after SESSION_END. The first consumer also gets
        every event emitted before it subscribed."""
        try:
            self._bind_loop()  # so that abort() from another thread reaches this loop
        except RuntimeError:
            pass  # no running loop (yet): iterating will need one
        return self._hub.subscribe()

    def add_listener(self, listener: Listener, *, replay: bool = True) -> Callable[[], None]:
        """Call ``listener(event)`` synchronously on every event; returns a function to remove it.
        As the first consumer it also receives the events so far (``replay=False`` skips them)."""
        return self._hub.add_listener(listener, replay=replay)

    def emit(self, payload: EventData) -> SessionEvent | None:
        """Publish an event on this session's stream (for controls, subagents and extensions).
        Returns None, emitting nothing, once SESSION_END was emitted: nothing may follow it."""
        if self._hub.ended:
            return None
        return self._hub.emit(payload)

    # -- abort, interrupt and close ----------------------------------------------------------------------
    def abort(self) -> None:
        """Stop now, from any thread: cancel the model call and tools, kill running commands, close
        subagents, emit SESSION_END; the state becomes CLOSED. Returns at once; ``await
        wait_closed()`` (or the pending ``submit()``) to know when it is done."""
        self._request_close("aborted")

    def interrupt(self) -> bool:
        """Stop the input being processed, from any thread, and keep the session.

        The model call in flight is cancelled (closing its stream); running commands get the
        environment's graceful stop (SIGTERM, then SIGKILL) before running tools are cancelled;
        tool calls left without a result are answered with an "interrupted" error result so the
        conversation stays valid. ``submit()`` then returns with stop_reason INTERRUPTED,
        PROCESSING_END is emitted and the state goes back to IDLE. Queued steering and follow-ups
        are kept. Returns False when nothing was processing.
        """
        return self._request_stop(StopReason.INTERRUPTED)

    def _request_stop(self, reason: StopReason) -> bool:
        """interrupt() with a stop reason (a time limit stops the input with TIME_LIMIT)."""
        if self.state is not SessionState.PROCESSING or self._closing is not None:
            return False
        if self._run.stop_requested is not None:
            return True  # already stopping; the first reason stands
        self._run.stop_requested = reason
        loop = self._loop
        if loop is None or loop.is_closed():
            return True
        if threading.get_ident() == self._loop_thread:
            self._begin_interrupt()
        else:
            loop.call_soon_threadsafe(self._begin_interrupt)
        return True

    def _stopping(self) -> str | None:
        """Why the input is being stopped, for tools that report a cut-short command."""
        reason = self._run.stop_requested
        return None if reason is None else reason.value

    def _begin_interrupt(self) -> None:
        task = self._task
        if task is None or task.done() or self._closing is not None:
            return
        if self._run.phase == "tools":
            # Let commands stop gracefully first (as abort does), then cancel what still runs.
            assert self._loop is not None
            self._loop.create_task(self._interrupt_tools(task))
        else:
            task.cancel("interrupt")

    async def _interrupt_tools(self, task: asyncio.Task[Any]) -> None:
        await self._terminate_commands()
        if not task.done() and self._run.phase == "tools":
            task.cancel("interrupt")

    async def _terminate_commands(self) -> None:
        try:
            await self.execution_env.terminate_all()
        except Exception as exc:
            self._hub.emit(WarningEvent("terminate_failed", f"terminate_all failed: {exc}"))

    def _finish_interrupt(self) -> SubmitResult:
        """After the processing task was cancelled by a stop request: repair the history, report."""
        run = self._run
        reason = run.stop_requested or StopReason.INTERRUPTED
        run.history.answer_open_calls(_INTERRUPTED_RESULT)
        run.stop_requested = None
        self.state = SessionState.IDLE
        self._hub.emit(ProcessingEnd(self.state, reason, "", 1))
        return SubmitResult.ended(reason, SessionState.IDLE, run.tally, inputs=1)

    async def close(self) -> None:
        """Close the session (aborting any processing) and wait until SESSION_END was emitted."""
        if self.state is SessionState.CLOSED and self._closing is None:
            return
        self._bind_loop()
        self._begin_close("closed", cancel_processing=True)
        await self.wait_closed()

    async def wait_closed(self) -> None:
        if self._closing is not None:
            await asyncio.shield(self._closing)

    async def __aenter__(self) -> Session:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _request_close(self, reason: str) -> None:
        if self.closing:
            return
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            # No loop ever ran this session (or it is gone): nothing of ours can be running.
            self._run.abort.set(reason)
            self._finish_close(reason, None)
            return
        if threading.get_ident() == self._loop_thread:
            self._begin_close(reason, cancel_processing=True)
        else:
            loop.call_soon_threadsafe(self._begin_close, reason, True)

    def _begin_close(self, reason: str, cancel_processing: bool, error: BaseException | None = None) -> None:
        """Start the shutdown sequence once (on the session's loop)."""
        if self.closing:
            return
        assert self._loop is not None
        self._run.abort.set(reason)
        task = self._task
        if task is not None and task.done():
            task = None
        if cancel_processing and task is not None and self._run.phase != "tools":
            # 1. cancel the in-flight model call (closes its stream). Also when abort() comes
            # from inside the processing task (a listener of its events, a control): the task
            # is then cancelled at its next await, the stream's next read, rather than left to
            # run the model call to its end while the shutdown waits for it.
            task.cancel()
        self._closing = self._loop.create_task(self._shutdown(reason, error, task if cancel_processing else None))

    async def _shutdown(self, reason: str, error: BaseException | None, task: asyncio.Task[Any] | None) -> None:
        """Appendix B: model call, processes, tools, subagents, flush, SESSION_END, CLOSED."""
        # 2-4. SIGTERM every process group, SIGKILL after 2 s (the environment's job). Running
        # tools are cancelled only after this, so their commands get the graceful stop.
        await self._terminate_commands()
        if task is not None and not task.done():
            task.cancel()
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            done, _ = await asyncio.wait([task], timeout=_UNWIND_TIMEOUT_S)
            if not done:
                self._hub.emit(WarningEvent("unwind_timeout", "processing did not stop in time"))
        # 7. Subagents, then the tool sources the session owns (after the subagents, which use them).
        await self._close_subagents()
        await self._close_sources()
        # 5. Flush: run callbacks already scheduled from other threads (e.g. output deltas).
        await asyncio.sleep(0)
        if self._started:
            await self._controls.session_end(self._run, reason)  # CONTROL: session_end
        self._finish_close(reason, error)

    async def _close_sources(self) -> None:
        sources = self._source_tools
        if sources is None:
            return
        starting = self._starting
        if starting is not None and not starting.done():
            starting.cancel()
            await asyncio.wait([starting], timeout=_UNWIND_TIMEOUT_S)
        await sources.close(self._hub.emit)

    def _finish_close(self, reason: str, error: BaseException | None) -> None:
        if not self._announced:  # closed before its sources started: the stream still opens with it
            self._announce(self.mcp_servers)
        self.state = SessionState.CLOSED
        if self._recorder is not None:
            self._recorder.release_lease()  # also when the session never started
        self._hub.emit(SessionEnd(self.state, reason, error, self.turn_count, self.usage))

    async def _close_subagents(self) -> None:
        agents = list(self.subagents.items())
        self.subagents.clear()
        for agent_id, agent in agents:
            close = getattr(agent, "close", None)
            if close is None:
                continue
            try:
                await maybe_await(close())
            except Exception as exc:
                self._hub.emit(WarningEvent("subagent_close_failed", f"closing subagent {agent_id}: {exc}"))

    def register_subagent(self, agent_id: str, agent: Any) -> None:
        """Track a child agent so that closing this session closes it too."""
        if agent_id in self.subagents:
            raise ValueError(f"subagent {agent_id!r} is already registered")
        self.subagents[agent_id] = agent

    # -- the processing task ------------------------------------------------------------------------------
    async def _process(self, prompt: Prompt) -> SubmitResult:
        run = self._run
        result = await self._process_once(prompt)
        run.last_stop_reason = result.stop_reason
        return result

    async def _process_once(self, prompt: Prompt) -> SubmitResult:
        run = self._run
        try:
            if not self._started:
                self._started = True
                await self._controls.session_start(run)  # CONTROL: session_start
            result = await process_input(run, self._controls, prompt)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if run.stop_requested is not None and not run.abort.aborted and current is not None:
                current.uncancel()
                return self._finish_interrupt()
            if not run.abort.aborted:
                raise
            return SubmitResult.ended(StopReason.ABORTED, SessionState.CLOSED, run.tally, inputs=1)
        except Exception as exc:  # a bug in ra, not in the model's output: still close cleanly
            _log.exception("agent loop failed")
            self._hub.emit(ErrorEvent(f"internal error: {exc}", exc, type(exc).__name__, False, True))
            result = SubmitResult.ended(StopReason.ERROR, SessionState.CLOSED, error=exc)
        if result.state is SessionState.CLOSED:
            # An abort() already began closing; a control's Stop(ABORTED) or a fatal error has not.
            reason = "error" if result.stop_reason is StopReason.ERROR else "aborted"
            self._begin_close(reason, cancel_processing=False, error=result.error)
        else:
            self.state = result.state
            self._hub.emit(ProcessingEnd(result.state, result.stop_reason, result.text, result.inputs))
        return result

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._loop_thread = threading.get_ident()

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, state={self.state.value}, turns={len(self.history)})"


def _extra_tools(tools: Iterable[RegisteredTool], profile: ProviderProfile) -> list[RegisteredTool]:
    """``tools=`` checked: tool objects, none named like a tool of the profile or like another.
    Replacing a profile's tool by name would make its rules and hooks apply to another tool; a
    host that means to do so builds the registry itself."""
    if isinstance(tools, RegisteredTool | str | bytes) or not isinstance(tools, Iterable):
        raise TypeError("tools is a list of tools (RegisteredTool, @ra.tool functions), not a single value")
    out: list[RegisteredTool] = []
    seen: set[str] = set()
    existing = profile.tool_registry
    for tool in tools:
        if not isinstance(tool, RegisteredTool):
            raise TypeError(f"tools takes RegisteredTool objects (@ra.tool functions are), got {type(tool).__name__}")
        if tool.name in existing or tool.name in seen:
            where = "the profile has a tool" if tool.name in existing else "tools holds two tools"
            raise ValueError(
                f"tools: {where} named {tool.name!r}; give the tool another name (rules and hooks written "
                "for that name would apply to both)"
            )
        seen.add(tool.name)
        out.append(tool)
    return out


def _sources_of(
    mcp_servers: Mapping[str, Any] | ToolSource | None, env: ExecutionEnvironment
) -> list[tuple[ToolSource, bool]]:
    """``mcp_servers=`` as ``(source, owned)`` pairs: a ToolSource the host owns, or MCP servers
    by name (``ra.mcp`` specs or ``.mcp.json``-shaped entries) that the session starts and closes."""
    if mcp_servers is None:
        return []
    if isinstance(mcp_servers, ToolSource):
        return [(mcp_servers, False)]
    if not isinstance(mcp_servers, Mapping):
        raise TypeError(
            f"mcp_servers takes MCP servers by name ({{name: spec}}) or a ToolSource, got {type(mcp_servers).__name__}"
        )
    if not mcp_servers:
        return []
    from ra.mcp.spec import parse_mcp_servers

    specs = dict(mcp_servers)
    if "mcpServers" in specs or any(isinstance(v, Mapping) for v in specs.values()):
        specs = parse_mcp_servers(specs, source="mcp_servers")  # raises McpConfigError for a bad shape
    from ra.mcp.servers import McpServers

    return [(McpServers(specs, cwd=str(env.working_directory())), True)]


def _new_recorder(
    store: SessionStore,
    session_id: str,
    parent: Session | None,
    agent_id: str | None,
    agent_type: str | None,
    spawn_call_id: str | None,
) -> Recorder:
    """The control that records a new session (a subagent's header names its agent, its parent and
    the parent's call that spawned it: what a replay finds the record by)."""
    from .store.recorder import Recorder

    extra: dict[str, Any] = {}
    if agent_id is not None:
        extra["agent_id"] = agent_id
        extra["agent_type"] = agent_type
    if spawn_call_id is not None:
        extra["spawn_call_id"] = spawn_call_id
    if parent is not None:
        extra["spawned_by"] = parent.id
    return Recorder(store, session_id, header_extra=extra)


class _ToolEvents:
    """The pipeline's sink: tool progress becomes session events."""

    __slots__ = ("s",)

    def __init__(self, session: Session) -> None:
        self.s = session

    def tool_start(self, call: ToolCall) -> None:
        self.s._hub.emit(ToolCallStart(call.name, call.id, call.arguments))

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None:
        s = self.s
        payload = ToolCallOutputDelta(call.name, call.id, stream, chunk)
        loop = s._loop
        if loop is not None and threading.get_ident() != s._loop_thread and not loop.is_closed():
            loop.call_soon_threadsafe(s._hub.emit, payload)
        else:
            s._hub.emit(payload)

    def tool_end(self, outcome: ToolCallOutcome) -> None:
        self.s._hub.emit(
            ToolCallEnd(
                outcome.call.name,
                outcome.call.id,
                outcome.full_output,
                outcome.is_error,
                outcome.truncated,
                outcome.duration_ms,
                outcome.full_output if outcome.is_error else None,
                outcome.skipped,
                outcome.metadata or None,
                outcome.denied,
            )
        )

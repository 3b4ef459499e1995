"""Subagents (coding-agent-loop-spec 7, 9.9): child sessions a session spawns for scoped tasks.

A subagent is an ordinary :class:`~ra.agent.session.Session` with its own history, started on
its own asyncio task so that it works while its parent goes on (and beside its siblings). What
it shares with the parent, and what it does not:

* **Environment.** The parent's execution environment (same files, same machine), optionally
  confined to ``working_dir`` with a :class:`~ra.env.wrappers.ScopedExecutionEnvironment`. It is
  wrapped in a :class:`~ra.env.wrappers.ChildExecutionEnvironment` whose ``terminate_all`` stops only the child's
  own commands: closing one child must not kill the commands of its parent or its siblings,
  which run in the same environment.
* **Profile.** The parent's profile object, or a clone (:func:`clone_profile`) when the model is
  overridden or when the child is at the depth limit and must not be offered the subagent tools.
* **Tool sources.** The parent's (MCP servers): the child gets their tools, as its agent type
  allows, in a registry of its own that follows their changes at its own model calls
  (:meth:`~ra.agent.tool_sources.SourceTools.follower`); the parent closes them.
* **Client and config.** The parent's ``llm_client``; a copy of its config with ``max_turns``
  set to the child's own budget (default 50 model calls over the child's whole life).
* **Events.** Every child event reaches the parent's stream as a ``SUBAGENT_EVENT`` with data
  ``{"agent_id", "kind", "event"}`` (the child's SessionEvent, untouched). A grandchild's events
  arrive doubly wrapped.
* **Lifetime.** The child is registered in ``parent.subagents``; closing or aborting the parent
  closes it (Session's shutdown sequence, Appendix B step 7).

Depth: a top-level session has depth 0 and its children depth 1. A session may spawn while its
depth is below ``config.max_subagent_depth`` (default 1: only the top level spawns); a child at
the limit gets a profile without the subagent tools.

The tools the model calls (``spawn_agent``, ``send_input``, ``wait``, ``close_agent``) live in
:mod:`ra.agent.subagents.tools`; hosts can drive the same operations through
:class:`SubAgentManager`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from ra.env.wrappers import ChildExecutionEnvironment, ScopedExecutionEnvironment

from ..config import SessionState, StopReason
from ..errors import SessionClosedError, SessionError
from ..events import SessionEvent, SubagentEvent, WarningEvent
from ..profile import clone_profile
from .definitions import RoleProfile, looser

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client
    from ra.tools.registry import RegisteredTool, ToolRegistry

    from ..controls.chain import Control
    from ..profile import ProviderProfile
    from ..result import SubmitResult
    from ..session import Session

__all__ = [
    "DEFAULT_MAX_TURNS",
    "SUBAGENT_TAG",
    "ChildExecutionEnvironment",
    "SpawnHook",
    "SpawnSetup",
    "SubAgentDepthError",
    "SubAgentError",
    "SubAgentHandle",
    "SubAgentManager",
    "SubAgentResult",
    "SubAgentStatus",
    "clone_profile",
    "is_subagent_tool",
]

#: Model calls a child may make when ``spawn_agent`` does not say (spec 7.3).
DEFAULT_MAX_TURNS = 50

#: The tag the subagent tools carry in ``RegisteredTool.tags`` (see :func:`is_subagent_tool`).
SUBAGENT_TAG = "subagent"


class SubAgentError(SessionError):
    """A subagent operation that cannot be done (unknown id, closed agent, bad arguments)."""


class SubAgentDepthError(SubAgentError):
    """Spawning would nest agents deeper than ``max_subagent_depth``."""


class SubAgentStatus(StrEnum):
    RUNNING = "running"  # working on its task or on input sent to it
    COMPLETED = "completed"  # its last input ended with a final answer
    FAILED = "failed"  # its last input ended at a limit, on an error, or was aborted
    CLOSED = "closed"  # close_agent (or the parent's close) ended it; it takes no more input


@dataclass(slots=True)
class SubAgentResult:
    """What a finished run of a subagent produced (spec 7.3, plus why it stopped)."""

    #: The child's last assistant text: its answer on success, the latest text otherwise.
    output: str
    #: True when the run ended with a final answer (natural completion).
    success: bool
    #: Model calls the child has made over its whole life (what ``max_turns`` counts).
    turns_used: int
    #: The child's ``StopReason`` value ("completed", "turn_limit", "error", ...).
    stop_reason: str | None = None
    #: Why the run did not succeed, in words; None on success.
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"output": self.output, "success": self.success, "turns_used": self.turns_used}
        if self.stop_reason is not None:
            data["stop_reason"] = self.stop_reason
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(slots=True)
class SpawnSetup:
    """What a session's ``spawn_hook`` decides for a subagent about to be made. The hook is called
    as ``hook(parent, call_id, task)`` (``call_id``: the parent's ``spawn_agent`` call, None when a
    host spawns) once every other check passed, before the child is made; it returns a
    SpawnSetup (or None: the defaults) or raises :class:`SubAgentError` to refuse the spawn (the
    model reads the message). ``ra.agent.replay`` uses it: a replayed subagent keeps its recorded
    id, answers from its own record and has its results compared."""

    #: The agent's id instead of a new random one (refused when the session already has it).
    agent_id: str | None = None
    #: The client for the agent's model calls instead of the parent's.
    llm_client: Client | None = None
    #: Controls added after the ones the agent inherits.
    controls: tuple[Control, ...] = ()


class SpawnHook(Protocol):
    """A session's ``spawn_hook`` (see :class:`SpawnSetup`)."""

    def __call__(self, parent: Session, call_id: str | None, task: str) -> SpawnSetup | None: ...


# ------------------------------------------------------------------------------------------------
# the handle: one child session and the task that runs it
# ------------------------------------------------------------------------------------------------


class SubAgentHandle:
    """A running (or finished) child agent: its session, its status, its last result.

    Input is processed one submit at a time by the handle's runner task. ``send_input`` decides
    how a message reaches the child from what the child is doing (see :meth:`send_input`).
    """

    def __init__(
        self,
        agent_id: str,
        session: Session,
        parent: Session,
        *,
        task: str,
        working_dir: str | None,
        max_turns: int,
        agent_type: str | None = None,
    ) -> None:
        self.id = agent_id
        self.agent_type = agent_type
        self.session = session
        self.parent = parent
        self.task = task
        self.working_dir = working_dir
        self.max_turns = max_turns
        self.status = SubAgentStatus.RUNNING
        #: The result of the last finished run; None until the first one ends.
        self.result: SubAgentResult | None = None
        self._task: asyncio.Task[None] | None = None
        #: Messages that arrived while a run was ending: each becomes the next input.
        self._inbox: deque[str] = deque()
        #: True while the runner is inside ``session.submit()``.
        self._in_submit = False
        self._closed = False
        self._announced = False
        self._detach: Callable[[], None] | None = None

    # -- properties ---------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return self.session.depth

    @property
    def model(self) -> str:
        return self.session.profile.model

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- operations -----------------------------------------------------------------------------
    def send_input(self, message: str) -> str:
        """Deliver ``message`` to the child; returns how it was delivered:

        * ``"steered"`` - the child is working: the message is injected after its current tool
          round (spec 2.6 steering); the current run continues with it.
        * ``"queued"`` - the child's run is just ending: the message becomes its next input,
          processed at once by the same run (``wait`` covers it).
        * ``"resumed"`` - the child was idle (completed or failed, session still open): the
          message starts a new run with the history so far.

        Raises SubAgentError when the agent was closed or its session has shut down.
        """
        if not isinstance(message, str) or not message.strip():
            raise SubAgentError("message must be a non-empty string")
        if self._closed:
            raise SubAgentError(f"agent {self.id} is closed and takes no more input")
        session = self.session
        if session.state is SessionState.CLOSED:
            detail = f": {self.result.error}" if self.result is not None and self.result.error else ""
            raise SubAgentError(f"agent {self.id} has stopped and its session is closed{detail}")
        if self.running:
            if self._in_submit and session.state is not SessionState.PROCESSING:
                # submit() has returned but the runner has not resumed yet: steering would wait
                # for a submit that may never come, so make it the next input instead.
                self._inbox.append(message)
                return "queued"
            # Working, or about to start: steering queued before submit() is injected right
            # after the task (spec 2.6: "delivered on the next submit()").
            session.steer(message)
            return "steered"
        self._start(message)
        return "resumed"

    async def wait(self, timeout: float | None = None) -> SubAgentResult | None:
        """Wait until the current run (and the input queued to it) is done; return its result.

        Returns None when ``timeout`` seconds pass first. Cancelling the waiter does not affect
        the child (it keeps working).
        """
        task = self._task
        if task is not None and not task.done():
            done, _ = await asyncio.wait([task], timeout=timeout)
            if not done:
                return None
        return self.result

    async def close(self) -> SubAgentResult:
        """Abort the child if it is working, close its session, and return the final result.

        Idempotent; safe to call from the parent's shutdown. The child's commands are stopped,
        its SESSION_END reaches the parent's stream, and no task of it is left running.
        """
        self._closed = True
        self._inbox.clear()
        try:
            await self.session.close()
        finally:
            task = self._task
            if task is not None and not task.done():
                await asyncio.wait([task])
            if self.result is None:
                self.result = SubAgentResult(
                    "",
                    False,
                    self.session.turn_count,
                    StopReason.ABORTED.value,
                    "closed before it finished its first run",
                )
            self.status = SubAgentStatus.CLOSED
            detach, self._detach = self._detach, None
            if detach is not None:
                detach()
        return self.result

    def snapshot(self) -> dict[str, Any]:
        """The agent's state as plain data (what the tools report to the model)."""
        data: dict[str, Any] = {"agent_id": self.id, "status": self.status.value}
        if self.status is SubAgentStatus.RUNNING or self.result is None:
            data.update(output="", success=False, turns_used=self.session.turn_count)
        else:
            data.update(self.result.to_dict())
        if self.session.state is SessionState.AWAITING_INPUT and self.status is SubAgentStatus.COMPLETED:
            data["awaiting_input"] = True  # its answer ends with a question: send_input replies
        return data

    # -- internals --------------------------------------------------------------------------------
    def _start(self, text: str) -> None:
        self.status = SubAgentStatus.RUNNING
        self._task = asyncio.get_running_loop().create_task(self._run(text), name=f"ra-subagent-{self.id}")

    async def _run(self, text: str) -> None:
        session = self.session
        if not self._announced:
            self._announced = True
            await self.parent.notify_subagent_start(self.id, self.agent_type, text)  # SubagentStart hooks
        while True:
            self._in_submit = True
            try:
                outcome = await session.submit(text)
            except asyncio.CancelledError:
                self._finish(_failure(session, StopReason.ABORTED, "the subagent's task was cancelled"))
                raise
            except SessionClosedError:
                self._finish(_failure(session, StopReason.ABORTED, "its session was closed"))
                return
            except Exception as exc:  # submit() raises only for misuse (busy, bad input)
                self._finish(_failure(session, StopReason.ERROR, f"{type(exc).__name__}: {exc}"))
                return
            finally:
                self._in_submit = False
            result = _result_of(session, outcome)
            if self._inbox and not self._closed and session.state is not SessionState.CLOSED:
                self.result = result
                text = self._inbox.popleft()
                continue
            self._finish(result)
            return

    def _finish(self, result: SubAgentResult) -> None:
        self.result = result
        if self._closed:
            self.status = SubAgentStatus.CLOSED
        else:
            self.status = SubAgentStatus.COMPLETED if result.success else SubAgentStatus.FAILED

    def _forward_events(self) -> None:
        """Re-emit every child event on the parent's stream, wrapped and tagged with the id."""
        parent = self.parent
        agent_id = self.id

        def forward(event: SessionEvent) -> None:
            parent.emit(SubagentEvent(agent_id, event.kind, event))  # nothing after the parent's SESSION_END

        self._detach = self.session.add_listener(forward, replay=True)

    def __repr__(self) -> str:
        return f"SubAgentHandle(id={self.id!r}, status={self.status.value}, depth={self.depth})"


def _result_of(session: Session, outcome: SubmitResult) -> SubAgentResult:
    reason = outcome.stop_reason
    success = reason is StopReason.COMPLETED
    error: str | None = None
    if not success:
        if reason is StopReason.TURN_LIMIT:
            error = f"turn limit reached (max_turns={session.config.max_turns})"
        elif reason is StopReason.ROUND_LIMIT:
            error = f"tool round limit reached (max_tool_rounds_per_input={session.config.max_tool_rounds_per_input})"
        elif reason is StopReason.ABORTED:
            error = "aborted"
        elif outcome.error is not None:
            error = f"{type(outcome.error).__name__}: {outcome.error}"
        else:
            error = reason.value
    return SubAgentResult(outcome.text, success, session.turn_count, reason.value, error)


def _failure(session: Session, reason: StopReason, message: str) -> SubAgentResult:
    return SubAgentResult("", False, session.turn_count, reason.value, message)


# ------------------------------------------------------------------------------------------------
# the manager: spawning and looking up a session's children
# ------------------------------------------------------------------------------------------------


class SubAgentManager:
    """The subagent operations of one parent session.

    It keeps no state of its own: the children live in ``parent.subagents`` (every child the
    session spawned, finished ones included, until the session closes), so a manager can be
    created whenever one is needed - by a tool on each call, or by a host.
    """

    __slots__ = ("parent",)

    def __init__(self, parent: Session) -> None:
        self.parent = parent

    @property
    def max_depth(self) -> int:
        return self.parent.config.max_subagent_depth

    @property
    def can_spawn(self) -> bool:
        return self.parent.depth < self.max_depth

    def handles(self) -> list[SubAgentHandle]:
        return [h for h in self.parent.subagents.values() if isinstance(h, SubAgentHandle)]

    def get(self, agent_id: str) -> SubAgentHandle:
        handle = self.parent.subagents.get(agent_id)
        if not isinstance(handle, SubAgentHandle):
            known = ", ".join(h.id for h in self.handles()) or "none"
            raise SubAgentError(f"unknown agent id {agent_id!r}; this session's agents: {known}")
        return handle

    def spawn(
        self,
        task: str,
        *,
        working_dir: str | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        agent_type: str | None = None,
        default_max_turns: int = DEFAULT_MAX_TURNS,
        call_id: str | None = None,
    ) -> SubAgentHandle:
        """Create a child session and start it on ``task``; returns at once (call on the loop).

        ``working_dir`` (relative to the parent's working directory) confines the child's file
        tools and commands to that existing directory. ``model`` overrides the model name (same
        profile, provider and tools). ``max_turns`` bounds the child's model calls (0 = none;
        None = the agent type's, else ``default_max_turns``). ``agent_type`` names one of the
        session's ``config.agents`` (:mod:`ra.agent.subagents.definitions`): its prompt, tools, model,
        turn budget and permission mode. ``call_id``: the parent's tool call that spawns it (in a
        recorded child's header, and given to the parent's ``spawn_hook``).
        """
        parent = self.parent
        definition = None
        if agent_type is not None:
            agents = parent.config.agents
            definition = agents.get(agent_type)
            if definition is None:
                known = ", ".join(agents) or "none are defined in this session"
                raise SubAgentError(f"unknown agent_type {agent_type!r}; the agent types are: {known}")
            if model is None and not definition.inherits_model:
                model = definition.model
        if max_turns is None:
            max_turns = definition.max_turns if definition is not None and definition.max_turns else default_max_turns
        if not isinstance(task, str) or not task.strip():
            raise SubAgentError("task must be a non-empty string")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 0:
            raise SubAgentError(f"max_turns must be an integer >= 0, got {max_turns!r}")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise SubAgentError("model must be a non-empty string when given")
        if parent.closing:
            raise SessionClosedError(f"session {parent.id} is closed; it cannot spawn agents")
        child_depth = parent.depth + 1
        if child_depth > self.max_depth:
            raise SubAgentDepthError(
                f"subagent depth limit reached: this agent is at depth {parent.depth} and "
                f"max_subagent_depth is {self.max_depth}, so it cannot spawn agents. Do the task yourself."
            )
        asyncio.get_running_loop()  # fail before creating anything when there is no loop

        env: ExecutionEnvironment = parent.execution_env
        if working_dir:
            try:
                env = ScopedExecutionEnvironment(env, working_dir)
            except (OSError, ValueError, TypeError) as exc:
                raise SubAgentError(f"working_dir {working_dir!r} cannot be used: {exc}") from exc
            except AttributeError as exc:  # an environment without resolve(): nothing to scope by
                raise SubAgentError(f"this environment cannot confine an agent to working_dir: {exc}") from exc
        child_env = ChildExecutionEnvironment(env)
        allow_spawn = child_depth < self.max_depth
        profile = _child_profile(parent.profile, model=model, allow_spawn=allow_spawn)
        if definition is not None:
            try:
                # Narrowed from the parent's full set (a definition may name the subagent tools even
                # where the depth limit takes them away), then the depth limit applies.
                registry = definition.registry_for(parent.profile.tool_registry)
            except ValueError as exc:
                raise SubAgentError(f"agent type {agent_type!r}: {exc}") from None
            if not allow_spawn:
                registry = _without_subagent_tools(registry)
            profile = RoleProfile(profile, agent_type or "", definition, model=profile.model, registry=registry)  # type: ignore[arg-type]
        follower = None
        sources = parent.source_tools
        if sources is not None:
            # The parent's tool sources (MCP servers): the child gets their tools, as Claude Code's
            # subagents do, minus what its agent type leaves out - now and as their lists change.
            # Its own copy of the registry, kept in step at its own model calls, not the parent's.
            registry = profile.tool_registry.copy()
            profile = clone_profile(profile, tool_registry=registry)
            follower = sources.follower(registry, definition.allows_tool if definition is not None else None)
        if profile.model != parent.profile.model:
            # Another model under a budget must be priced, like the parent's own (refused before
            # anything starts, so the caller can spawn it on the parent's model instead).
            from ..controls.budget import price_refusal

            refusal = price_refusal(parent.cost_meter, "subagent model", profile.model, profile.provider or profile.id)
            if refusal is not None:
                raise SubAgentError(f"{refusal}; or spawn the agent without a model (it then uses {parent.model!r})")
        # Last before anything is made or announced: the spawn is going ahead unless the hook refuses it.
        setup = parent.spawn_hook(parent, call_id, task) if parent.spawn_hook is not None else None
        if setup is not None and setup.agent_id is not None and setup.agent_id in parent.subagents:
            raise SubAgentError(f"agent id {setup.agent_id!r} is already taken in this session")
        mode = definition.permission_mode if definition is not None and definition.permission_mode else None
        if mode is not None and looser(mode, parent.permission_mode):
            # An agent type (an agent file in a cloned repository, say) cannot open up what the
            # parent runs under: a "bypass" child of a "default" parent runs in "default".
            parent.emit(
                WarningEvent(
                    "agent_mode_capped",
                    f"agent type {agent_type!r} asks for permission mode {mode!r}, looser than the parent's "
                    f"{parent.permission_mode!r}: it runs in {parent.permission_mode!r}",
                    {"agent_type": agent_type, "requested": mode, "mode": parent.permission_mode},
                )
            )
            mode = None
        rules: dict[str, Any] = {}
        if working_dir:
            # The child's relative file rules must name the parent's files, not the files
            # relative to the child's own directory.
            from ..permissions.rules import anchor_for_child

            root = parent.execution_env.working_directory()
            rules = {
                "allowed_tools": anchor_for_child(parent.config.allowed_tools, root, allow=True),
                "disallowed_tools": anchor_for_child(parent.config.disallowed_tools, root, allow=False),
                "ask_tools": anchor_for_child(parent.config.ask_tools, root, allow=False),
            }
        config = dataclasses.replace(
            parent.config,
            max_turns=max_turns,
            tool_output_limits=dict(parent.config.tool_output_limits),
            tool_line_limits=dict(parent.config.tool_line_limits),
            prices=dict(parent.config.prices),
            permission_mode=mode or parent.permission_mode,
            **rules,
        )
        from ..session import Session

        agent_id = setup.agent_id if setup is not None and setup.agent_id is not None else self._new_id()
        client = setup.llm_client if setup is not None and setup.llm_client is not None else parent.llm_client
        child = Session(
            profile,  # type: ignore[arg-type]
            child_env,
            client,
            config,
            controls=[*parent.inherited_controls(), *(setup.controls if setup is not None else ())],
            hooks=parent.hooks,
            can_use_tool=parent.can_use_tool,
            depth=child_depth,
            parent=parent,
            agent_id=agent_id,
            agent_type=agent_type,
            spawn_call_id=call_id,
            store=parent.store,  # a recorded parent's subagents are recorded too
            tracing=getattr(parent, "tracing", None),  # traced like the parent, under the spawning call
        )
        child.spawn_hook = parent.spawn_hook
        if follower is not None:
            child.follow_sources(follower)
        handle = SubAgentHandle(
            agent_id,
            child,
            parent,
            task=task,
            working_dir=child_env.working_directory() if working_dir else None,
            max_turns=max_turns,
            agent_type=agent_type,
        )
        parent.register_subagent(agent_id, handle)
        handle._forward_events()
        handle._start(task)
        return handle

    async def wait(self, agent_ids: Iterable[str], timeout: float | None = None) -> tuple[list[SubAgentHandle], bool]:
        """Wait until every listed agent has finished its current run, or ``timeout`` seconds.

        Returns the handles (in the order given, duplicates removed) and whether the timeout
        passed with some still running. Unknown ids raise SubAgentError before any waiting.
        """
        handles: list[SubAgentHandle] = []
        for agent_id in agent_ids:
            handle = self.get(agent_id)
            if handle not in handles:
                handles.append(handle)
        if not handles:
            raise SubAgentError("no agent id given")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        # A run can be followed by another (input queued to it, send_input meanwhile): loop until
        # every listed agent is idle at the same moment.
        while True:
            pending = [h._task for h in handles if h._task is not None and not h._task.done()]
            if not pending:
                return handles, False
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return handles, True
            await asyncio.wait(pending, timeout=remaining)

    async def close(self, agent_id: str) -> SubAgentHandle:
        handle = self.get(agent_id)
        await handle.close()
        return handle

    async def close_all(self) -> None:
        for handle in self.handles():
            await handle.close()

    def _new_id(self) -> str:
        while True:
            agent_id = f"agent-{uuid.uuid4().hex[:8]}"
            if agent_id not in self.parent.subagents:
                return agent_id


# ------------------------------------------------------------------------------------------------
# profiles and tools
# ------------------------------------------------------------------------------------------------


def is_subagent_tool(tool: RegisteredTool) -> bool:
    """Whether ``tool`` is one of the subagent tools (it carries the ``"subagent"`` tag).

    The tag, not the name, identifies them, so a profile may expose them under other names.
    """
    return SUBAGENT_TAG in tool.tags


def _child_profile(profile: ProviderProfile, *, model: str | None, allow_spawn: bool) -> ProviderProfile:
    """The parent's profile, or a clone with the model overridden and/or the subagent tools removed."""
    registry = profile.tool_registry
    drop = not allow_spawn and any(is_subagent_tool(tool) for tool in registry)
    if model == profile.model:
        model = None
    if model is None and not drop:
        return profile
    return clone_profile(profile, model=model, tool_registry=_without_subagent_tools(registry) if drop else None)


def _without_subagent_tools(registry: ToolRegistry) -> ToolRegistry:
    """A copy of ``registry`` without the tools that spawn or manage subagents."""
    narrowed = registry.copy()
    for tool in registry:
        if is_subagent_tool(tool):
            narrowed.unregister(tool.name)
    return narrowed

"""The run state: everything the loop reads and writes, and nothing of the Session's lifecycle.

pi-agent's ``runLoop(context, newMessages, config, signal, emit)`` knows nothing of the ``Agent``
that owns it; here the loop knows nothing of the :class:`~ra.agent.session.Session`. The session
builds one :class:`RunState`, hands it to :func:`ra.agent.loop.process_input` for each input,
and keeps for itself what is about the session's life: its task, event loop, abort and close.

Controls (:mod:`ra.agent.controls`) receive the same object, so a control can read the history,
the config and the counters, emit events, or stop the input (``request_stop``). The run does not
hold the controls: the loop is given both (``process_input(run, controls, ...)``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ra.llm.retrying import RetryPolicy, transient
from ra.llm.types import Message, ToolDefinition, Usage
from ra.tools.registry import AbortState

from .config import StopReason
from .context import ContextMonitor
from .events import EventData, RetryEvent, SessionEvent, UsageEvent
from .history import History
from .loop_detection import LoopDetector
from .result import Tally

#: Retries of a failed model call when the config gives no policy (the Go-port spec: "up to 3").
AGENT_MAX_RETRIES = 3

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client
    from ra.tools.pipeline import ToolPipeline

    from .config import SessionConfig
    from .cost import CostMeter
    from .permissions.rules import PermissionMode
    from .profile import ProviderProfile

__all__ = ["Phase", "RunState"]

#: What the processing task is doing; it decides how an interrupt or abort stops it.
Phase = Literal["model", "tools"]


@dataclass(eq=False, slots=True)
class RunState:
    """What one session's loop works on. Built by the Session; read by the loop and controls."""

    session_id: str
    profile: ProviderProfile
    env: ExecutionEnvironment
    config: SessionConfig
    history: History
    #: ``emit(payload)``: publish an event on the session's stream.
    emit: Callable[[EventData], SessionEvent]
    #: The model client (resolved on first use: the session's, or ``ra.llm``'s default).
    client: Callable[[], Client]
    pipeline: ToolPipeline
    abort: AbortState
    #: ``request_stop(reason)``: stop the input being processed, as ``Session.interrupt()`` does,
    #: with ``reason`` as its stop reason (a time limit uses TIME_LIMIT). False when idle.
    request_stop: Callable[[StopReason], bool]
    #: The session's spend (``Session.total_cost_usd``), in its place in the tree of budgets.
    meter: CostMeter
    depth: int = 0
    steering: deque[str] = field(default_factory=deque)
    follow_ups: deque[str] = field(default_factory=deque)

    # -- counters (the session's public view reads these) ------------------------------------------
    #: Assistant turns so far (what ``max_turns`` counts) and model steps.
    turn_count: int = 0
    step_count: int = 0
    usage: Usage = field(default_factory=Usage)
    #: The submit in progress.
    tally: Tally = field(default_factory=Tally)
    #: The input in progress: tool rounds and model calls so far.
    input_rounds: int = 0
    input_steps: int = 0

    # -- the input in progress ---------------------------------------------------------------------
    #: Why the input is being stopped (set by ``request_stop``), or None.
    stop_requested: StopReason | None = None
    #: Why the last input stopped (None before the first): a SessionEnd hook's ``exit_reason``.
    last_stop_reason: StopReason | None = None
    phase: Phase | None = None
    #: Whether the current model attempt has streamed text yet (reported with RETRY).
    partial_output: bool = False
    #: Seconds spent waiting for model calls over the session's life (retries included).
    api_seconds: float = 0.0

    #: The model of the next call when the host changed it (``Session.set_model``); else the profile's.
    model_override: str | None = None
    #: Models that failed in a way that moved a call to a fallback, with the monotonic time until
    #: which later calls skip them (:mod:`ra.agent.fallback`).
    fallback_cooldowns: dict[str, float] = field(default_factory=dict)
    #: The permission mode in force (:mod:`ra.agent.permissions`), and one the host set that
    #: takes effect at the next model call.
    permission_mode: PermissionMode = "default"
    pending_permission_mode: PermissionMode | None = None
    #: Tool calls denied so far (``Session.permission_denials``).
    permission_denials: list[Any] = field(default_factory=list)
    #: Allow rules added during the session by "always" answers to permission prompts (and, in a
    #: resumed session, the ones its record gave back: :mod:`ra.agent.store.grants`).
    session_rules: list[Any] = field(default_factory=list)
    #: ``(rule text, tool_use_id)`` of each "always" answer of this session, in order: the
    #: Recorder writes each one as a ``permission_rule`` entry (restored rules are not in it).
    granted_rules: list[tuple[str, str]] = field(default_factory=list)
    #: A Stop hook already sent the model on during this input (hooks are told, to avoid loops).
    stop_hook_active: bool = False
    #: For a subagent's session: its id and type (reported to hooks).
    agent_id: str | None = None
    agent_type: str | None = None
    #: How the session started, for SessionStart hooks: "startup", "resume" or "fork".
    start_source: str = "startup"
    #: The file the session is recorded to, once it exists (hooks get it as ``transcript_path``):
    #: set by the Recorder after its first write, and at a resume; None without a file store.
    transcript_path: str | None = None

    # -- context --------------------------------------------------------------------------------
    context: ContextMonitor = field(default_factory=ContextMonitor)
    loop_detector: LoopDetector = field(default_factory=LoopDetector)
    system_prompt: str = ""
    system_message: Message | None = None
    system_chars: int = 0
    #: Compactions in a row that freed less than 5% of the context (:mod:`ra.agent.compaction`).
    compaction_stalls: int = 0
    #: Responses in a row cut at the output token limit (the loop continues them, up to a bound).
    cut_responses: int = 0

    _retry_source: RetryPolicy | None = None
    _retry_policy: RetryPolicy | None = None
    _tools_key: tuple[Any, ...] | None = None
    _tools: list[ToolDefinition] | None = None
    _tools_of: list[ToolDefinition] | None = None
    _plan_source: str | None = None
    _plan_message: Message | None = None

    def __post_init__(self) -> None:
        # Tools may ask for the run state (``ToolContext.run_state``, ``@ra.tool`` parameters
        # annotated RunState); the pipeline is built first, so the run state introduces itself.
        if hasattr(self.pipeline, "run_state"):
            self.pipeline.run_state = self

    # -- helpers the loop uses ------------------------------------------------------------------
    def set_system_prompt(self, prompt: str) -> None:
        if prompt != self.system_prompt or self.system_message is None:
            self.system_prompt = prompt
            self.system_message = Message.system(prompt) if prompt else None
            self.system_chars = len(prompt)

    def request_system_message(self) -> Message | None:
        """The system message of the next request: the prompt, and in plan mode a section that
        says so (cached per prompt, so a step in plan mode pays one comparison)."""
        if self.permission_mode != "plan":
            return self.system_message
        if self._plan_source != self.system_prompt or self._plan_message is None:
            from .permissions.plan import PLAN_MODE_SECTION

            text = f"{self.system_prompt}\n\n{PLAN_MODE_SECTION}" if self.system_prompt else PLAN_MODE_SECTION
            self._plan_source, self._plan_message = self.system_prompt, Message.system(text)
        return self._plan_message

    @property
    def model(self) -> str:
        """The model the next request names."""
        return self.model_override or self.profile.model

    def tool_definitions(self) -> list[ToolDefinition]:
        """The tools the next request offers: the profile's, minus those a bare deny rule names
        and - in plan mode - those that change things, with ``spawn_agent`` listing the session's
        agent types. Recomputed only when one of those changes (a mode switch takes effect at the
        next step), so a step pays a tuple comparison."""
        definitions = self.profile.tools()
        config = self.config
        plan = self.permission_mode == "plan"
        key = (len(definitions), config.disallowed_tools, id(config.agents), len(config.agents), plan)
        # The list itself is kept and compared by identity: a registry that changed (a tool source's
        # list) makes a new one, and an id() alone could be reused by it once the old list is gone.
        if definitions is not self._tools_of or key != self._tools_key or self._tools is None:
            from .permissions.rules import read_only_tools, visible_tools
            from .subagents.definitions import describe_agents

            tools = visible_tools(definitions, config.disallowed_tools)
            if plan:
                registry = self.pipeline.registry

                def effect_of(name: str) -> Any:
                    tool = registry.get(name)
                    return None if tool is None else tool.effect

                tools = read_only_tools(tools, effect_of)
            if config.agents:
                tools = [describe_agents(d, config.agents) if d.name == "spawn_agent" else d for d in tools]
            self._tools_key, self._tools, self._tools_of = key, tools, definitions
        return self._tools

    @property
    def context_chars(self) -> int:
        """Characters the next request carries (system prompt + context)."""
        return self.system_chars + self.history.chars

    def charge(self, usage: Usage, model: str, provider: str | None) -> None:
        """Price a model call's ``usage`` on the session's meter and report it (USAGE): the one
        place a call's spend is counted, for the loop's calls and the summariser's alike."""
        meter = self.meter
        spent = meter.record(model, provider, usage)
        total = meter.total_cost_usd
        self.emit(UsageEvent(usage, self.usage, self.step_count, model, spent.cost_usd, total, spent.source))

    def retry_policy(self) -> RetryPolicy:
        """The configured policy, with ``on_retry`` also emitting a RETRY event (cached)."""
        source = self.config.retry_policy
        if self._retry_policy is None or source is not self._retry_source:
            # The Go-port spec (section 11): 5xx up to 3 times, network timeouts too. A host's
            # own policy keeps its numbers; without its own should_retry, timeouts are in.
            policy = source if source is not None else RetryPolicy(max_retries=AGENT_MAX_RETRIES)
            user_hook = policy.on_retry

            def on_retry(error: BaseException, attempt: int, delay: float) -> None:
                self.emit(RetryEvent(attempt, delay, error, type(error).__name__, str(error), self.partial_output))
                if user_hook is not None:
                    user_hook(error, attempt, delay)

            self._retry_source = source
            self._retry_policy = dataclasses.replace(
                policy, on_retry=on_retry, should_retry=policy.should_retry or transient
            )
        return self._retry_policy

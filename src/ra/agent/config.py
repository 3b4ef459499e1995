"""Session configuration and lifecycle state (coding-agent-loop-spec 2.2, 2.3).

Every field of the spec's SessionConfig is here, plus the settings where ra's seeds disagree
(see docs/architecture.md): what to do on context overflow, how steering interacts with a tool
round, how many tool calls one step may run. The loop reads the config at each use, so changing
a field mid-session (``reasoning_effort`` above all) takes effect on the next model call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, get_args

from .compaction.config import CompactionConfig
from .permissions.rules import normalize_mode, rules_of

if TYPE_CHECKING:
    from ra.llm.pricing import Price
    from ra.llm.retrying import RetryPolicy

    from .permissions.rules import PermissionMode, SdkPermissionMode
    from .subagents.definitions import AgentDefinition

__all__ = [
    "CONTEXT_OVERFLOW_MODES",
    "STEERING_MODES",
    "ContextOverflowMode",
    "SessionConfig",
    "SessionState",
    "SteeringMode",
    "StopReason",
    "is_budget",
]

ContextOverflowMode = Literal["warn", "prune", "compact"]
SteeringMode = Literal["after_round", "between_calls"]
UnknownPrice = Literal["error", "zero"]
CONTEXT_OVERFLOW_MODES: tuple[str, ...] = get_args(ContextOverflowMode)
STEERING_MODES: tuple[str, ...] = get_args(SteeringMode)


def is_budget(value: object) -> bool:
    """Whether ``value`` is a spending limit: a finite number of USD, 0 or more. NaN, infinity, a
    negative number or a bool are no budget - refused wherever a budget is set, never run unbounded."""
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value < math.inf


class SessionState(StrEnum):
    IDLE = "idle"  # waiting for input
    PROCESSING = "processing"  # running the loop
    AWAITING_INPUT = "awaiting_input"  # the model ended its answer with a question for the user
    CLOSED = "closed"  # closed, aborted, or stopped by an unrecoverable error


class StopReason(StrEnum):
    """Why processing of an input stopped (``SubmitResult.stop_reason``, PROCESSING_END)."""

    COMPLETED = "completed"  # natural completion: a text-only answer
    ROUND_LIMIT = "round_limit"  # max_tool_rounds_per_input reached
    TURN_LIMIT = "turn_limit"  # max_turns or max_turns_per_input reached
    TIME_LIMIT = "time_limit"  # time_limit_s passed: the input was stopped, the session stays usable
    BUDGET_LIMIT = "budget_limit"  # max_budget_usd reached (spend includes subagents)
    MAX_TOKENS = "max_tokens"  # the response was cut at the output token limit; its tool calls did not run
    CONTEXT_OVERFLOW = "context_overflow"  # the provider refused the context ("warn" mode)
    ABORTED = "aborted"  # abort() or close() while processing
    INTERRUPTED = "interrupted"  # interrupt(): this input stopped, the session stays usable
    ERROR = "error"  # an error ended the input; the session closes only on fatal ones (closes_session)


@dataclass(slots=True)
class SessionConfig:
    """Limits and behaviour of a Session. All fields have safe defaults."""

    # -- spec 2.2 ---------------------------------------------------------------------------------
    #: Model calls (assistant turns) allowed across the whole session; 0 = unlimited.
    max_turns: int = 0
    #: Model calls allowed per input; 0 = unlimited (the ``ra`` command's ``--max-steps``).
    max_turns_per_input: int = 0
    #: Wall-clock seconds per input; None = no limit. When it passes, the input stops as with
    #: ``interrupt()`` (stop reason ``time_limit``) and the session stays usable.
    time_limit_s: float | None = None
    #: USD the session may spend, subagents included; None = no limit. Checked after each model
    #: response (before its tools run) and before each call: stop reason ``budget_limit``. A
    #: finite number >= 0: 0 makes no model call at all; ``inf`` and NaN are refused.
    max_budget_usd: float | None = None
    #: Prices by model name (``ra.llm.pricing.ModelPrice``), overriding the catalogue; use
    #: ``ModelPrice.free()`` for a model that costs nothing.
    prices: dict[str, Price] = field(default_factory=dict)
    #: A model with no known price while a budget is set: "error" (the default) refuses it before
    #: its first call (``UnknownPriceError``, naming the model); "zero" is the host's explicit
    #: opt-out: its calls count as $0 (with one WARNING per model). Without a budget it only warns.
    unknown_price: UnknownPrice = "error"
    #: Models to try, in order, when a call still fails after its retries with an overloaded,
    #: server or model-not-found error: a name (same provider) or a ``(provider, model)`` pair.
    #: Only that call moves on; the next call starts from the primary model again.
    fallback_models: tuple[str | tuple[str, str], ...] = ()
    #: How tool calls are permitted (``ra.agent.permissions``): "default" (edits and commands are
    #: asked about), "accept_edits", "plan" (read-only: edits and commands are denied), "bypass"
    #: or "dont_ask". What would be asked is denied when the session has no ``can_use_tool``
    #: callback. None (the default): "bypass" - every call runs, deny rules still apply - unless
    #: allow or ask rules are given, which turn checking on with "default" (as the ``ra`` command
    #: does). The SDK's camelCase names are accepted (``validate()`` turns them into ra's).
    #: ``Session.set_permission_mode`` changes it from the next model call on.
    permission_mode: PermissionMode | SdkPermissionMode | None = None
    #: Permission rules, ``Tool`` or ``Tool(spec)``: e.g. ``shell(git diff:*)``, ``edit_file(src/**)``.
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    ask_tools: tuple[str, ...] = ()
    #: Named agent types for ``spawn_agent(agent_type=...)`` (``ra.agent.subagents.definitions.AgentDefinition``).
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    #: Tool rounds allowed per user input; 0 = unlimited (the upstream spec's meaning of 0).
    max_tool_rounds_per_input: int = 200
    default_command_timeout_ms: int = 10_000
    max_command_timeout_ms: int = 600_000
    #: "low" | "medium" | "high" | None (provider default); other strings (e.g. "xhigh") pass through.
    reasoning_effort: str | None = None
    #: Character limit per tool name, overriding the defaults of spec 5.2.
    tool_output_limits: dict[str, int] = field(default_factory=dict)
    #: Line limit per tool name (spec 5.3); ``None`` or 0 switches the line pass off for that tool.
    tool_line_limits: dict[str, int | None] = field(default_factory=dict)
    enable_loop_detection: bool = True
    #: How many of the most recent tool calls are checked for a repeating pattern.
    loop_detection_window: int = 10
    max_subagent_depth: int = 1

    # -- ra's settings ----------------------------------------------------------------------------
    #: "warn": emit WARNING and end the input (the session stays usable; upstream spec).
    #: "prune": drop the oldest context (keeping system messages, the first user message and
    #: tool call/result pairs) and retry (ra-spec). "compact": clear old tool outputs and summarise
    #: older turns before the window is full, and to recover when the provider refuses the
    #: context (``compaction`` below; docs/agent.md, "Compaction").
    context_overflow: ContextOverflowMode = "warn"
    #: How "compact" works: the reserve for the answer, what is kept verbatim, the cheap pass's
    #: thresholds, the summary's model and length (``ra.agent.compaction.CompactionConfig``).
    #: ``Session.compact()`` uses it in every mode.
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    #: Fraction of ``profile.context_window_size`` above which a WARNING event is emitted.
    context_warning_threshold: float = 0.8
    #: "after_round": steering is injected after the whole tool round (spec 2.5).
    #: "between_calls": checked after each tool call; the remaining calls of the round are
    #: answered with "skipped" error results (pi-agent). Implies sequential execution.
    steering_mode: SteeringMode = "after_round"
    #: Tool calls executed per model response; the rest get a "not executed" error result.
    #: None = unlimited (spec); 1 = ra-spec's "one tool call per step".
    max_tool_calls_per_step: int | None = None
    #: The policy for transient model errors; None = 3 retries. Without its own ``should_retry``
    #: a policy also retries network timeouts (``ra.llm.retrying.transient``).
    #: Use ``RetryPolicy(max_retries=0)`` to switch retries off.
    retry_policy: RetryPolicy | None = None
    #: Stream model calls: None = when the profile supports it; False = always ``complete()``.
    stream: bool | None = None
    #: Apply the AWAITING_INPUT rule (docs/agent.md); False = always return to IDLE.
    detect_questions: bool = True
    #: Events kept for the first ``events()`` consumer before it subscribes; None = all.
    event_backlog_limit: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field; called at construction and by the Session."""
        if self.context_overflow not in CONTEXT_OVERFLOW_MODES:
            raise ValueError(
                f"context_overflow must be one of {', '.join(CONTEXT_OVERFLOW_MODES)}, got {self.context_overflow!r}"
            )
        if not isinstance(self.compaction, CompactionConfig):
            raise TypeError(f"compaction must be a CompactionConfig, got {type(self.compaction).__name__}")
        self.compaction.validate()
        if self.steering_mode not in STEERING_MODES:
            raise ValueError(f"steering_mode must be one of {', '.join(STEERING_MODES)}, got {self.steering_mode!r}")
        for name in ("max_turns", "max_turns_per_input", "max_tool_rounds_per_input", "max_subagent_depth"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.default_command_timeout_ms <= 0 or self.max_command_timeout_ms <= 0:
            raise ValueError("command timeouts must be > 0")
        if self.default_command_timeout_ms > self.max_command_timeout_ms:
            raise ValueError(
                f"default_command_timeout_ms ({self.default_command_timeout_ms}) exceeds "
                f"max_command_timeout_ms ({self.max_command_timeout_ms})"
            )
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0 or None, got {self.time_limit_s}")
        budget = self.max_budget_usd
        if budget is not None and not is_budget(budget):
            raise ValueError(f"max_budget_usd must be a finite number of USD >= 0 (None for no limit), got {budget!r}")
        if self.unknown_price not in get_args(UnknownPrice):
            raise ValueError(f"unknown_price must be 'error' or 'zero', got {self.unknown_price!r}")
        for entry in self.fallback_models:
            if not (isinstance(entry, str) and entry.strip()) and not (
                isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(x, str) and x for x in entry)
            ):
                raise ValueError(f"fallback_models entries are model names or (provider, model) pairs, got {entry!r}")
        if self.permission_mode is not None:
            self.permission_mode = normalize_mode(self.permission_mode)
        for name in ("allowed_tools", "disallowed_tools", "ask_tools"):
            rules = getattr(self, name)
            if isinstance(rules, str):
                raise TypeError(f"{name} is a sequence of rules, got a single string {rules!r}")
            setattr(self, name, tuple(rules))
            rules_of(getattr(self, name))  # parsed once (cached): a bad rule fails here
        if self.retry_policy is not None:
            from ra.llm.retrying import RetryPolicy

            if not isinstance(self.retry_policy, RetryPolicy):
                raise TypeError(f"retry_policy must be a RetryPolicy or None, got {type(self.retry_policy).__name__}")
        if self.loop_detection_window < 1:
            raise ValueError(f"loop_detection_window must be >= 1, got {self.loop_detection_window}")
        if not 0 < self.context_warning_threshold <= 1:
            raise ValueError(f"context_warning_threshold must be in (0, 1], got {self.context_warning_threshold}")
        if self.max_tool_calls_per_step is not None and self.max_tool_calls_per_step < 1:
            raise ValueError(f"max_tool_calls_per_step must be >= 1 or None, got {self.max_tool_calls_per_step}")
        if self.event_backlog_limit is not None and self.event_backlog_limit < 1:
            raise ValueError(f"event_backlog_limit must be >= 1 or None, got {self.event_backlog_limit}")
        for name, limit in self.tool_output_limits.items():
            if not isinstance(limit, int) or limit < 0:
                raise ValueError(f"tool_output_limits[{name!r}] must be an int >= 0, got {limit!r}")
        for name, lines in self.tool_line_limits.items():
            if lines is not None and (not isinstance(lines, int) or lines < 0):
                raise ValueError(f"tool_line_limits[{name!r}] must be an int >= 0 or None, got {lines!r}")

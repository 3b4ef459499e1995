"""The tool registry (coding-agent-loop-spec 3.7, 3.8): what a profile offers the model, and how.

A :class:`RegisteredTool` pairs the definition the model sees with the executor that runs it.
Executors are called as ``executor(arguments, ctx)``, where ``ctx`` is a :class:`ToolContext`
(the execution environment, the call id, a way to stream output, the session config, the abort
state). They may be plain functions or coroutine functions, and may return a string or a
:class:`ToolOutput`. Raising is fine: the pipeline turns any exception into an error result the
model can read.

Each tool's JSON Schema is checked once, at registration, and its compiled validator is kept on
the tool, so validating a call costs one ``iter_errors`` pass and nothing more. ``jsonschema`` is
imported on first registration, not when ``ra`` is imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ra.llm.abort import AbortSignal
from ra.llm.types import ToolDefinition

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment

__all__ = [
    "AbortState",
    "RegisteredTool",
    "ToolContext",
    "ToolEffect",
    "ToolError",
    "ToolExecutor",
    "ToolOutput",
    "ToolRegistry",
]


class ToolEffect(StrEnum):
    """What a tool does to the world besides answering: the one fact that scheduling and
    permissions both need (agentic-loop-go-port-spec 6.2).

    * ``NONE`` - nothing outside the session (``submit``, a calculator);
    * ``READ`` - reads the workspace (files, search, listings);
    * ``NETWORK`` - reaches out to the network but changes nothing local (web search, fetch);
    * ``EDIT`` - creates, changes or deletes files;
    * ``EXECUTE`` - runs commands or agents, which may do anything.

    ``EDIT`` and ``EXECUTE`` are *mutating* (what permission modes care about). Scheduling cares
    about one more distinction: ``EDIT`` calls are *exclusive* - within a parallel tool round each
    runs alone, in the model's order, with no other call beside it, because edits read, change and
    write a file, and two of them interleaved lose one change; a read or a command issued after an
    edit sees it. ``EXECUTE`` calls run concurrently with each other and with reads, as the model
    asked (codex does the same: its shell tool runs in parallel, apply_patch exclusively). A tool
    that declares nothing (``effect=None``) keeps the behaviour it always had - it runs
    concurrently - and is treated as ``EXECUTE`` by anything that needs to be careful.
    """

    NONE = "none"
    READ = "read"
    NETWORK = "network"
    EDIT = "edit"
    EXECUTE = "execute"

    @property
    def mutating(self) -> bool:
        """Changes the workspace or may do anything (``EDIT`` / ``EXECUTE``)."""
        return self is ToolEffect.EDIT or self is ToolEffect.EXECUTE


class ToolError(Exception):
    """Raise from an executor to fail the call with a clear message (the model sees it)."""


@dataclass(slots=True)
class ToolOutput:
    """A richer executor result than a plain string.

    ``content`` is what the model reads (after truncation) and what the host gets whole;
    ``for_model``, when set, is a shorter text the model reads instead (a tool that cuts its own
    output - the shell's ``max_output_chars`` - gives the model the cut version while the host
    still gets all of it); ``is_error`` marks a failed call without raising; ``metadata`` travels
    to the host in TOOL_CALL_END and never to the model.
    ``end_input=True`` ends the input after this tool round, with ``content`` as the answer: how
    a ``submit(answer)`` tool finishes a run (ra-spec submit mode).
    """

    content: str
    is_error: bool = False
    image_data: bytes | None = None
    image_media_type: str | None = None
    metadata: dict[str, Any] | None = None
    end_input: bool = False
    for_model: str | None = None


class AbortState(AbortSignal):
    """Whether the session was aborted, readable by tools that want to stop early.

    Tools rarely need it: on abort the loop cancels the task running them and the environment
    kills their processes. It is for executors that loop over many small steps (a subagent, a
    long search) and want to stop between them. It is ``ra.llm``'s :class:`AbortSignal` (one abort
    primitive in ra: thread-safe, awaitable, with listeners) that the session can set.
    """

    __slots__ = ()

    def set(self, reason: str = "aborted") -> None:
        """Abort (the first reason wins); wakes every ``wait()`` and listener."""
        self._abort(reason)


@dataclass(slots=True)
class ToolContext:
    """Everything an executor may use besides its arguments."""

    env: ExecutionEnvironment
    call_id: str
    tool_name: str
    #: The session's SessionConfig (command timeouts, limits); ``None`` outside a session.
    config: Any = None
    #: ``on_output(stream, chunk)``: emit a TOOL_CALL_OUTPUT_DELTA. Same shape as the env's
    #: ``OutputCallback``, so a shell tool can pass it straight to ``exec_command(on_output=...)``.
    on_output: Callable[[str, str], None] | None = None
    abort: AbortState = field(default_factory=AbortState)
    #: The Session running the call (for subagent tools); ``None`` outside a session.
    session: Any = None
    #: ``stopping()``: why the input is being stopped ("interrupted" by the user, "time_limit",
    #: ...), or None while it runs on; for tools that tell the model why a command was cut short.
    stopping: Callable[[], str | None] | None = None
    #: The session's run state (``ra.agent.state.RunState``: history, counters, config) for tools
    #: that need more than the environment; ``None`` outside a session. Typed ``Any`` because it
    #: lives in a layer above this one.
    run_state: Any = None

    def emit_output(self, chunk: str, stream: str = "stdout") -> None:
        """Stream a piece of output to the host while the tool runs."""
        if self.on_output is not None and chunk:
            self.on_output(stream, chunk)

    @property
    def aborted(self) -> bool:
        return self.abort.aborted


ToolExecutor = Callable[[dict[str, Any], ToolContext], "str | ToolOutput | Any | Awaitable[Any]"]


@dataclass(slots=True)
class RegisteredTool:
    """A definition plus its executor, and optional per-tool output limits.

    ``output_limit`` / ``truncation_mode`` / ``line_limit`` let a tool declare its own bounds when
    the spec's default tables do not name it (``line_limit=0`` means no line pass). The session's
    ``tool_output_limits`` / ``tool_line_limits`` still override them. ``blocking=True`` runs a
    plain-function executor in a worker thread so it cannot stall the event loop. ``effect``
    declares what the tool changes (:class:`ToolEffect`; a string such as ``"edit"`` is accepted).
    """

    definition: ToolDefinition
    executor: ToolExecutor
    output_limit: int | None = None
    truncation_mode: str | None = None
    line_limit: int | None = None
    blocking: bool = False
    effect: ToolEffect | None = None
    #: Free-form labels for whoever assembles registries (``"subagent"`` on the subagent tools,
    #: ``"mcp"`` on tools from an MCP server); the loop does not read them.
    tags: frozenset[str] = frozenset()
    _validator: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not callable(self.executor):
            raise TypeError(f"tool {self.definition.name!r}: executor must be callable")
        if self.effect is not None and not isinstance(self.effect, ToolEffect):
            try:
                self.effect = ToolEffect(self.effect)
            except ValueError:
                choices = ", ".join(e.value for e in ToolEffect)
                raise ValueError(
                    f"tool {self.definition.name!r}: effect must be one of {choices} (or None), got {self.effect!r}"
                ) from None
        if self.truncation_mode is not None and self.truncation_mode not in ("head_tail", "tail"):
            raise ValueError(
                f"tool {self.definition.name!r}: truncation_mode must be 'head_tail' or 'tail', "
                f"got {self.truncation_mode!r}"
            )
        if self.output_limit is not None and self.output_limit < 0:
            raise ValueError(f"tool {self.definition.name!r}: output_limit must be >= 0")
        if self.line_limit is not None and self.line_limit < 0:
            raise ValueError(f"tool {self.definition.name!r}: line_limit must be >= 0 (0 = no line limit)")

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def mutating(self) -> bool:
        """``EDIT`` / ``EXECUTE``, or undeclared: what a careful policy must treat as a change."""
        return self.effect is None or self.effect.mutating

    @property
    def exclusive(self) -> bool:
        """Runs alone and in the model's order within a parallel round (``EDIT``)."""
        return self.effect is ToolEffect.EDIT

    @property
    def validator(self) -> Any:
        """The compiled jsonschema validator for the parameters schema (built once)."""
        if self._validator is None:
            self._validator = _compile(self.definition)
        return self._validator

    def validate(self, arguments: Mapping[str, Any]) -> str | None:
        """``None`` when ``arguments`` match the schema, else a message naming each bad field."""
        errors = list(self.validator.iter_errors(arguments))
        if not errors:
            return None
        return _describe(self.definition.name, arguments, errors)


class ToolRegistry:
    """Tools by name. Registering a name again replaces the tool (latest wins, spec 3.7)."""

    def __init__(self, tools: list[RegisteredTool] | None = None) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._definitions: list[ToolDefinition] | None = None
        #: Why a name that was withdrawn is gone (a call to it is told so), until it is registered again.
        self._withdrawn: dict[str, str] = {}
        for tool in tools or ():
            self.register(tool)

    def register(self, tool: RegisteredTool) -> RegisteredTool:
        """Add or replace ``tool``. Its schema is checked now, so a bad schema fails here."""
        if not isinstance(tool, RegisteredTool):
            raise TypeError(f"register() takes a RegisteredTool, got {type(tool).__name__}")
        tool.validator  # noqa: B018 - compile (and check) the schema eagerly
        self._tools[tool.name] = tool
        self._withdrawn.pop(tool.name, None)
        self._definitions = None
        return tool

    def add(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any] | None,
        executor: ToolExecutor,
        **options: Any,
    ) -> RegisteredTool:
        """Shorthand for ``register(RegisteredTool(ToolDefinition(...), executor, **options))``."""
        definition = ToolDefinition(name, description, parameters or {"type": "object", "properties": {}})
        return self.register(RegisteredTool(definition, executor, **options))

    def unregister(self, name: str, *, reason: str | None = None) -> bool:
        """Remove the tool; True when there was one. ``reason``: why it is gone (the server that
        offered it was turned off, failed...), what a later call to the name is told."""
        removed = self._tools.pop(name, None) is not None
        if removed:
            self._definitions = None
            if reason:
                self._withdrawn[name] = reason
        return removed

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def withdrawn(self, name: str) -> str | None:
        """Why ``name`` was unregistered, when a reason was given and it was not registered again."""
        return None if name in self._tools else self._withdrawn.get(name)

    def definitions(self) -> list[ToolDefinition]:
        """The definitions in registration order (a cached list: do not mutate it)."""
        if self._definitions is None:
            self._definitions = [t.definition for t in self._tools.values()]
        return self._definitions

    def names(self) -> list[str]:
        return list(self._tools)

    def copy(self) -> ToolRegistry:
        """A registry with the same tools, to extend without touching this one (e.g. subagents)."""
        clone = ToolRegistry()
        clone._tools = dict(self._tools)
        clone._withdrawn = dict(self._withdrawn)
        return clone

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(list(self._tools.values()))


def _compile(definition: ToolDefinition) -> Any:
    from ra.llm.schema import SchemaProblem, compile_schema

    try:
        return compile_schema(definition.parameters, f"tool {definition.name!r}")
    except SchemaProblem as exc:
        raise ValueError(str(exc).replace("has an invalid JSON schema", "invalid parameters schema")) from None


def _describe(tool_name: str, arguments: Mapping[str, Any], errors: list[Any]) -> str:
    """One line per problem, each naming the field, in a stable order."""
    from ra.llm.schema import schema_error_lines

    lines = schema_error_lines(errors, schema_name="the tool's schema")
    return f"Invalid arguments for tool {tool_name}:\n" + "\n".join(f"- {line}" for line in lines)

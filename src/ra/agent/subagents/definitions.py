"""Named agents (agentic-loop-go-port-spec 3.1 ``AgentName``/``Agents``): subagents by role.

The host registers :class:`AgentDefinition`\\ s under names in ``SessionConfig.agents``;
``spawn_agent`` then takes an ``agent_type``, and its description lists the types with what each
is for, so the model can pick one. A typed subagent gets:

* its own instructions (``prompt``), appended to the profile's system prompt as its role (the
  profile's tool guidance stays; the role says what this agent is for);
* only the tools it names (``tools``; None = the parent's), minus ``disallowed_tools``;
* its ``model`` (None or ``"inherit"``: the parent's), ``max_turns`` and ``permission_mode`` (never
  looser than the parent's: :func:`looser`).

The ``ra`` command reads definitions from its config and from agent files - ``.claude/agents``
and ``.ra/agents`` of the project, ``~/.claude/agents`` of the user: Claude Code's format, YAML
front matter (``name``, ``description``, ``tools``, ``disallowedTools``, ``model``,
``maxTurns``, ``permissionMode``) and the body as the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ra.llm.types import ToolDefinition

from ..aio import maybe_await
from ..permissions.rules import Rule, normalize_mode
from ..permissions.tool_names import names_of

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment
    from ra.tools.registry import ToolRegistry

    from ..profile import ProviderProfile

__all__ = ["AgentDefinition", "RoleProfile", "describe_agents", "load_agent_files", "looser", "parse_agent_file"]

#: Permission modes from the strictest to the loosest: what a child may choose is the parent's or
#: one before it (plan: read-only; dont_ask: only what rules allow; then default, accept_edits,
#: bypass).
_MODE_ORDER = ("plan", "dont_ask", "default", "accept_edits", "bypass")


def looser(mode: str, than: str) -> bool:
    """Whether permission mode ``mode`` lets more run than ``than`` (both in ra's spelling)."""
    order = _MODE_ORDER
    return order.index(normalize_mode(mode)) > order.index(normalize_mode(than))


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """A kind of subagent: what it is for, how it is told to work, and what it may use."""

    description: str
    prompt: str
    #: Tool names the agent gets (None: the parent's tools).
    tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] = ()
    #: None or "inherit": the parent's model.
    model: str | None = None
    #: Model calls over the agent's life (None: spawn_agent's default).
    max_turns: int | None = None
    #: None: the parent's mode at the time it spawns.
    permission_mode: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError("an agent definition needs a description (the model picks agents by it)")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError("an agent definition needs a prompt")
        if self.tools is not None:
            object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "disallowed_tools", tuple(self.disallowed_tools))
        if self.max_turns is not None and (isinstance(self.max_turns, bool) or self.max_turns < 1):
            raise ValueError(f"max_turns must be >= 1 or None, got {self.max_turns!r}")
        if self.permission_mode is not None:
            object.__setattr__(self, "permission_mode", normalize_mode(self.permission_mode))

    @property
    def inherits_model(self) -> bool:
        return self.model in (None, "", "inherit")

    def registry_for(self, registry: ToolRegistry) -> ToolRegistry:
        """``registry`` narrowed to this agent's tools; unknown names are an error.

        Names may be ra's or Claude Code's (``Read``, ``Bash``; :mod:`ra.agent.permissions.tool_names`), so
        agent files written for Claude Code keep working. Names of MCP tools (``mcp__server__tool``,
        ``mcp__server``, ``mcp__server__*``) are not checked: servers connect, and change their
        lists, after the agent is defined (:meth:`allows_tool` decides as tools appear)."""
        if self.tools is None and not self.disallowed_tools:
            return registry
        narrowed = registry.copy()
        if self.tools is not None:
            unknown = [
                n
                for n in self.tools
                if not n.startswith("mcp__") and not any(n in names_of(t) for t in registry.names())
            ]
            if unknown:
                raise ValueError(
                    f"the agent definition names tools the profile does not have: {', '.join(unknown)} "
                    f"(available: {', '.join(registry.names())})"
                )
        for name in registry.names():
            if not self.allows_tool(name):
                narrowed.unregister(name)
        return narrowed

    def allows_tool(self, name: str) -> bool:
        """Whether an agent of this kind gets the tool ``name``: named by ``tools`` (or ``tools`` is
        None) and not by ``disallowed_tools``. An ``mcp__`` entry names tools as a permission rule
        does (a server, a tool, a glob); other entries by ra's or Claude Code's name."""
        return (self.tools is None or _names(self.tools, name)) and not _names(self.disallowed_tools, name)


def _names(entries: tuple[str, ...], name: str) -> bool:
    aliases = names_of(name)
    for entry in entries:
        if entry.startswith("mcp__"):
            if name.startswith("mcp__") and Rule.parse(entry).names_tool(name):
                return True
        elif entry in aliases:
            return True
    return False


class RoleProfile:
    """A profile that adds a named agent's instructions to another profile's system prompt.

    Everything else - tools (narrowed), provider, flags, options, rules - comes from the profile
    it wraps, so a typed subagent speaks to its model exactly as its parent does.
    """

    def __init__(
        self, base: ProviderProfile, name: str, definition: AgentDefinition, *, model: str, registry: ToolRegistry
    ) -> None:
        self._base = base
        self.role_name = name
        self.definition = definition
        self.id = base.id
        self.model = model
        self.tool_registry = registry
        self.provider = base.provider
        self.supports_reasoning = base.supports_reasoning
        self.supports_streaming = base.supports_streaming
        self.supports_parallel_tool_calls = base.supports_parallel_tool_calls
        self.context_window_size = base.context_window_size
        self.max_tool_calls_per_step = base.max_tool_calls_per_step
        self.session_defaults = base.session_defaults
        self.reasoning_effort = base.reasoning_effort

    async def discover_project_docs(self, environment: ExecutionEnvironment) -> str | None:
        return await maybe_await(self._base.discover_project_docs(environment))

    async def build_system_prompt(self, environment: ExecutionEnvironment, project_docs: str | None = None) -> str:
        base = await maybe_await(self._base.build_system_prompt(environment, project_docs))
        role = f"# Your role: {self.role_name}\n\n{self.definition.prompt.strip()}"
        return f"{base}\n\n{role}" if base else role

    def tools(self) -> list[ToolDefinition]:
        return self.tool_registry.definitions()

    def provider_options(self) -> dict[str, Any] | None:
        return self._base.provider_options()

    def controls(self) -> list[Any]:
        return self._base.controls()

    def clone(self, *, model: str | None = None, tool_registry: ToolRegistry | None = None) -> RoleProfile:
        return RoleProfile(
            self._base,
            self.role_name,
            self.definition,
            model=model or self.model,
            registry=tool_registry if tool_registry is not None else self.tool_registry,
        )


def describe_agents(definition: ToolDefinition, agents: Mapping[str, AgentDefinition]) -> ToolDefinition:
    """``spawn_agent``'s definition with the available agent types listed and offered."""
    if not agents:
        return definition
    lines = "\n".join(f"- {name}: {agent.description.strip()}" for name, agent in agents.items())
    parameters = dict(definition.parameters)
    properties = dict(parameters.get("properties", {}))
    properties["agent_type"] = {
        "type": "string",
        "enum": list(agents),
        "description": "The kind of agent to start (see the list in the tool description); omit for a general one.",
    }
    parameters["properties"] = properties
    description = f"{definition.description}\n\nAgent types (agent_type):\n{lines}"
    return ToolDefinition(definition.name, description, parameters)


# -- agent files ----------------------------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)

#: Front-matter keys and the field each sets: Claude Code's spelling, and ra's earlier ones.
_KEYS = {
    "name": "name",
    "description": "description",
    "tools": "tools",
    "disallowedTools": "disallowed_tools",
    "disallowed_tools": "disallowed_tools",
    "disallowed-tools": "disallowed_tools",
    "model": "model",
    "permissionMode": "permission_mode",
    "permission_mode": "permission_mode",
    "maxTurns": "max_turns",
    "max_turns": "max_turns",
}
#: Claude Code's short model names: ra runs such an agent on the parent's model (ra's providers
#: are not only Anthropic's, and "sonnet" names no model there).
_MODEL_ALIASES = ("sonnet", "opus", "haiku")


def parse_agent_file(text: str, *, default_name: str, warnings: list[str] | None = None) -> tuple[str, AgentDefinition]:
    """An agent file - YAML front matter, then the prompt - as ``(name, definition)``.

    The keys are Claude Code's (``name``, ``description``, ``tools``, ``disallowedTools``,
    ``model``, ``permissionMode``, ``maxTurns``; ra's snake_case spellings too). ``tools`` and
    ``disallowedTools`` are a comma-separated string or a YAML list. A key ra does not act on
    (``color``, ``skills``, ``hooks``, ...) is not dropped silently: it is added to ``warnings``
    (when given) with what happens instead. Anything that cannot be read is a ValueError.
    """
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if match is None:
        raise ValueError("an agent file starts with front matter between '---' lines (name, description, ...)")
    import yaml  # only when agent files are read

    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise ValueError(f"the front matter is not valid YAML{line}: {problem}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValueError("the front matter must be 'key: value' lines (a YAML mapping)")
    values: dict[str, Any] = {}
    for key, value in meta.items():
        field_name = _KEYS.get(str(key))
        if field_name is None:
            if warnings is not None:
                warnings.append(f"key {key!r} is not used by ra and is ignored")
            continue
        if field_name in values:
            raise ValueError(f"{field_name} is given twice (as {key!r} too)")
        values[field_name] = value
    name = values.get("name") or default_name
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, got {name!r}")
    model = values.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"model must be a string, got {model!r}")
    if model in _MODEL_ALIASES:
        if warnings is not None:
            warnings.append(f"model {model!r} is Claude Code's alias; ra runs the agent on the parent's model")
        model = None
    max_turns = values.get("max_turns")
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int)):
        raise ValueError(f"maxTurns must be a whole number, got {max_turns!r}")
    mode = values.get("permission_mode")
    if mode is not None and not isinstance(mode, str):
        raise ValueError(f"permissionMode must be a string, got {mode!r}")
    description = values.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"description must be a string, got {description!r}")
    definition = AgentDefinition(
        description=description,
        prompt=match.group(2).strip(),
        tools=_tool_list(values, "tools"),
        disallowed_tools=_tool_list(values, "disallowed_tools") or (),
        model=model or None,
        max_turns=max_turns,
        permission_mode=mode or None,
    )
    return name, definition


def _tool_list(values: dict[str, Any], key: str) -> tuple[str, ...] | None:
    """A tool list: ``Read, Grep`` or a YAML list; absent (or null) is None, ``[]`` is none."""
    raw = values.get(key)
    label = "tools" if key == "tools" else "disallowedTools"
    if raw is None:
        return None
    if isinstance(raw, str):
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        return tuple(p.strip() for p in raw if p.strip())
    raise ValueError(f"{label} must be a comma-separated string or a list of tool names, got {raw!r}")


def load_agent_files(directory: str | Path, *, warnings: list[str] | None = None) -> dict[str, AgentDefinition]:
    """Every ``*.md`` agent file in ``directory`` (none when it does not exist), by name.

    ``warnings`` (when given) collects what a file says that ra does not use, each prefixed
    with the file's path."""
    folder = Path(directory)
    agents: dict[str, AgentDefinition] = {}
    if not folder.is_dir():
        return agents
    for path in sorted(folder.glob("*.md")):
        found: list[str] = []
        try:
            name, definition = parse_agent_file(
                path.read_text(encoding="utf-8"), default_name=path.stem, warnings=found
            )
        except (ValueError, OSError) as exc:
            raise ValueError(f"{path}: {exc}") from None
        if warnings is not None:
            warnings.extend(f"{path}: {w}" for w in found)
        agents[name] = definition
    return agents

"""Named agents (agentic-loop-go-port-spec 3.1 ``AgentName``/``Agents``): subagents by role.

The host registers :class:`AgentDefinition`\\ s under names in ``SessionConfig.agents``;
``spawn_agent`` then takes an ``agent_type``, and its description lists the types with what each
is for, so the model can pick one. A typed subagent gets:

* its own instructions (``prompt``), appended to the profile's system prompt as its role (the
  profile's tool guidance stays; the role says what this agent is for);
* only the tools it names (``tools``; None = the parent's), minus ``disallowed_tools``;
* its ``model`` (None or ``"inherit"``: the parent's), ``max_turns`` and ``permission_mode``.

The ``ra`` command reads definitions from its config and from ``.ra/agents/*.md`` files: front
matter (``name``, ``description``, ``tools``, ``disallowed_tools``, ``model``, ``max_turns``,
``permission_mode``) and the body as the prompt - the shape Claude Code's agent files have.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ra.llm.types import ToolDefinition

from ..permissions.rules import normalize_mode
from ..permissions.tool_names import names_of

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment
    from ra.tools.registry import ToolRegistry

    from ..profile import ProviderProfile

__all__ = ["AgentDefinition", "RoleProfile", "describe_agents", "load_agent_files", "parse_agent_file"]


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
        agent files written for Claude Code keep working."""
        if self.tools is None and not self.disallowed_tools:
            return registry
        narrowed = registry.copy()
        if self.tools is not None:
            wanted = set(self.tools)
            unknown = [n for n in self.tools if not any(n in names_of(t) for t in registry.names())]
            if unknown:
                raise ValueError(
                    f"the agent definition names tools the profile does not have: {', '.join(unknown)} "
                    f"(available: {', '.join(registry.names())})"
                )
            for name in registry.names():
                if wanted.isdisjoint(names_of(name)):
                    narrowed.unregister(name)
        denied = set(self.disallowed_tools)
        for name in registry.names():
            if not denied.isdisjoint(names_of(name)):
                narrowed.unregister(name)
        return narrowed


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
        return await _maybe_await(self._base.discover_project_docs(environment))

    async def build_system_prompt(self, environment: ExecutionEnvironment, project_docs: str | None = None) -> str:
        base = await _maybe_await(self._base.build_system_prompt(environment, project_docs))
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


async def _maybe_await(value: Any) -> Any:
    if hasattr(value, "__await__"):
        return await value
    return value


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

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)(.*)\Z", re.DOTALL)


def parse_agent_file(text: str, *, default_name: str) -> tuple[str, AgentDefinition]:
    """An agent file - front matter, then the prompt - as ``(name, definition)``.

    Front matter is ``key: value`` lines; lists (``tools``, ``disallowed_tools``) are written
    ``a, b`` or ``[a, b]``. Unknown keys are ignored (files written for other tools keep working).
    """
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if match is None:
        raise ValueError("an agent file starts with front matter between '---' lines (name, description, ...)")
    meta: dict[str, str] = {}
    for number, line in enumerate(match.group(1).splitlines(), 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"line {number} of the front matter is not 'key: value': {line!r}")
        meta[key.strip().lower().replace("-", "_")] = value.strip().strip("\"'")
    prompt = match.group(2).strip()
    name = meta.get("name") or default_name

    def names(key: str) -> tuple[str, ...] | None:
        raw = meta.get(key)
        if raw is None or not raw.strip():
            return None
        return tuple(p.strip().strip("\"'") for p in raw.strip("[]").split(",") if p.strip())

    max_turns = meta.get("max_turns")
    if max_turns and not max_turns.isdigit():
        raise ValueError(f"max_turns must be a whole number, got {max_turns!r}")
    definition = AgentDefinition(
        description=meta.get("description", ""),
        prompt=prompt,
        tools=names("tools"),
        disallowed_tools=names("disallowed_tools") or (),
        model=meta.get("model") or None,
        max_turns=int(max_turns) if max_turns else None,
        permission_mode=meta.get("permission_mode") or None,
    )
    return name, definition


def load_agent_files(directory: str | Path) -> dict[str, AgentDefinition]:
    """Every ``*.md`` agent file in ``directory`` (none when it does not exist), by name."""
    folder = Path(directory)
    agents: dict[str, AgentDefinition] = {}
    if not folder.is_dir():
        return agents
    for path in sorted(folder.glob("*.md")):
        try:
            name, definition = parse_agent_file(path.read_text(encoding="utf-8"), default_name=path.stem)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{path}: {exc}") from None
        agents[name] = definition
    return agents

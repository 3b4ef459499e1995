"""The profile a query runs with: the SDK options that change what the model is told and offered.

``agent_name`` (a named agent's prompt, tools and model for the main conversation), ``tools``
(the tools offered), ``system_prompt`` (the whole prompt, replaced), ``additional_directories``
(named in the prompt) and ``max_thinking_tokens`` (the extended-thinking budget). Each either
takes effect or is refused with a ValueError that says why; a profile object the host passed in
is copied first, never changed.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ra.agent.permissions.tool_names import names_of

if TYPE_CHECKING:
    from ra.agent.profile import ProviderProfile
    from ra.agent.subagents.definitions import AgentDefinition
    from ra.env.base import ExecutionEnvironment

__all__ = ["shape_profile"]


def shape_profile(
    profile: ProviderProfile,
    *,
    agent: tuple[str, AgentDefinition] | None = None,
    tools: Sequence[str] | None = None,
    system_prompt: str | None = None,
    directories: Sequence[str] = (),
    max_thinking_tokens: int | None = None,
) -> ProviderProfile:
    """``profile`` with the options applied (itself when none is set)."""
    if agent is None and tools is None and system_prompt is None and not directories and max_thinking_tokens is None:
        return profile
    shaped: Any = copy.copy(profile)
    if agent is not None:
        from ra.agent.subagents.definitions import RoleProfile

        name, definition = agent
        registry = definition.registry_for(shaped.tool_registry)
        shaped = RoleProfile(shaped, name, definition, model=shaped.model, registry=registry)
    if tools is not None:
        shaped.tool_registry = _only(shaped.tool_registry, tools)
    if max_thinking_tokens is not None:
        _set_thinking(shaped, max_thinking_tokens)
    if system_prompt is not None or directories:
        _set_prompt(shaped, system_prompt, tuple(directories))
    return shaped  # type: ignore[no-any-return]


def _only(registry: Any, tools: Sequence[str]) -> Any:
    if isinstance(tools, str):
        raise TypeError(f"tools is a list of tool names, got a single string {tools!r}")
    available = registry.names()
    unknown = [n for n in tools if not any(n in names_of(t) for t in available)]
    if unknown:
        raise ValueError(
            f"tools names tools the profile does not have: {', '.join(unknown)} (available: {', '.join(available)})"
        )
    wanted = set(tools)
    narrowed = registry.copy()
    for name in available:
        if wanted.isdisjoint(names_of(name)):
            narrowed.unregister(name)
    return narrowed


def _set_thinking(profile: Any, tokens: int) -> None:
    from ra.profiles.anthropic import thinking_config

    if not hasattr(profile, "thinking"):
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"max_thinking_tokens must be an integer >= 0, got {tokens!r}")
        raise ValueError(
            "max_thinking_tokens needs a profile with Anthropic extended thinking (profile='anthropic'); "
            "for other models use SessionConfig.reasoning_effort"
        )
    profile.thinking = thinking_config(tokens)


def _set_prompt(profile: Any, replacement: str | None, directories: tuple[str, ...]) -> None:
    if replacement is not None and not isinstance(replacement, str):
        raise TypeError(f"system_prompt must be a str, got {type(replacement).__name__}")
    build = profile.build_system_prompt
    discover = profile.discover_project_docs

    async def no_docs(environment: ExecutionEnvironment) -> str | None:
        return None  # a replaced prompt is the whole prompt: no project docs are read into it

    async def build_system_prompt(environment: ExecutionEnvironment, project_docs: str | None = None) -> str:
        if replacement is not None:
            prompt = replacement
        else:
            prompt = build(environment, project_docs)
            if inspect.isawaitable(prompt):
                prompt = await prompt
            prompt = str(prompt or "")
        if directories:
            listed = "\n".join(f"- {d}" for d in directories)
            section = f"Additional working directories (besides {environment.working_directory()}):\n{listed}"
            prompt = f"{prompt}\n\n{section}" if prompt else section
        return prompt

    profile.build_system_prompt = build_system_prompt
    profile.discover_project_docs = no_docs if replacement is not None else discover

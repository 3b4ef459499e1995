"""Subagents: child sessions a session spawns, the tools the model drives them with, and named
agent types (``AgentDefinition``, agent files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DEFAULT_MAX_TURNS": ".manager",
    "SUBAGENT_TAG": ".manager",
    "ChildExecutionEnvironment": ".manager",
    "SubAgentDepthError": ".manager",
    "SubAgentError": ".manager",
    "SubAgentHandle": ".manager",
    "SubAgentManager": ".manager",
    "SubAgentResult": ".manager",
    "SubAgentStatus": ".manager",
    "SpawnHook": ".manager",
    "SpawnSetup": ".manager",
    "clone_profile": ".manager",
    "is_subagent_tool": ".manager",
    "subagent_tools": ".tools",
    "AgentDefinition": ".definitions",
    "RoleProfile": ".definitions",
    "describe_agents": ".definitions",
    "load_agent_files": ".definitions",
    "parse_agent_file": ".definitions",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from .definitions import AgentDefinition, RoleProfile, describe_agents, load_agent_files, parse_agent_file
    from .manager import (
        DEFAULT_MAX_TURNS,
        SUBAGENT_TAG,
        ChildExecutionEnvironment,
        SpawnHook,
        SpawnSetup,
        SubAgentDepthError,
        SubAgentError,
        SubAgentHandle,
        SubAgentManager,
        SubAgentResult,
        SubAgentStatus,
        clone_profile,
        is_subagent_tool,
    )
    from .tools import subagent_tools

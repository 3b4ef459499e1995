"""ra: build coding agents - a language model, developer tools, and a loop the host controls.

``import ra`` is kept light: the agent, tools and LLM layers load on first attribute access
(PEP 562), so a program that only needs ``ra.llm`` never imports the agent, and nothing imports
httpx until a provider is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        (
            "Session",
            "SessionConfig",
            "SessionState",
            "StopReason",
            "EventKind",
            "SessionEvent",
            "SubmitResult",
            "ProviderProfile",
            "GenericProfile",
            "SubAgentManager",
        ),
        "ra.agent",
    ),
    "ExecutionEnvironment": "ra.env",
    "ExecResult": "ra.env",
    "LocalExecutionEnvironment": "ra.env",
    "ToolRegistry": "ra.tools",
    "RegisteredTool": "ra.tools",
    "ToolContext": "ra.tools",
    "ToolOutput": "ra.tools",
    "ToolError": "ra.tools",
    "FunctionTool": "ra.tools",
    "tool": "ra.tools",
    "create_openai_profile": "ra.profiles",
    "create_anthropic_profile": "ra.profiles",
    "create_gemini_profile": "ra.profiles",
    "create_ra_profile": "ra.profiles",
    "query": "ra.sdk",
    "QueryOptions": "ra.sdk",
    "AgentClient": "ra.sdk",
    "Hooks": "ra.agent.hooks",
    "HookEvent": "ra.agent.hooks",
    "HookResult": "ra.agent.hooks",
    "PermissionAllow": "ra.agent.permissions",
    "PermissionDeny": "ra.agent.permissions",
    "AgentDefinition": "ra.agent.subagents.definitions",
    "ModelPrice": "ra.llm.pricing",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["__version__", *__all__]


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ra.agent import (
        EventKind,
        GenericProfile,
        ProviderProfile,
        Session,
        SessionConfig,
        SessionEvent,
        SessionState,
        StopReason,
        SubAgentManager,
        SubmitResult,
    )
    from ra.agent.hooks import HookEvent, HookResult, Hooks
    from ra.agent.permissions import PermissionAllow, PermissionDeny
    from ra.agent.subagents.definitions import AgentDefinition
    from ra.env import ExecResult, ExecutionEnvironment, LocalExecutionEnvironment
    from ra.llm.pricing import ModelPrice
    from ra.profiles import create_anthropic_profile, create_gemini_profile, create_openai_profile, create_ra_profile
    from ra.sdk import AgentClient, QueryOptions, query
    from ra.tools import FunctionTool, RegisteredTool, ToolContext, ToolError, ToolOutput, ToolRegistry, tool

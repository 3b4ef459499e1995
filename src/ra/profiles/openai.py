"""The OpenAI profile (coding-agent-loop-spec 3.4): codex-aligned tools for GPT-5.x / codex models.

Tools: ``read_file``, ``apply_patch`` (the edit format these models are trained on; it also takes
codex's ``input`` argument name), ``write_file``, ``shell`` (codex's exec, the session's 10 s
default timeout), ``grep``, ``glob``, ``update_plan`` (codex's plan tool: the plan reaches the
host as the call's metadata, an editor through ``ra acp``), and the subagent tools. Project
instructions: AGENTS.md and ``.codex/instructions.md``.

Reasoning effort normally comes from ``SessionConfig.reasoning_effort``, which the session sends on
every request and which can change between calls. ``reasoning_effort`` here is the profile's
default: the loop uses it on calls where the session's setting is None, so an explicit session
setting (and any change to it mid-session) always wins.
"""

from __future__ import annotations

from typing import Any

from ra.tools.registry import ToolRegistry

from .base import AlignedProfile, subagent_tools_or_none

__all__ = ["OpenAIProfile", "create_openai_profile"]

DEFAULT_MODEL = "gpt-5.2-codex"


class OpenAIProfile(AlignedProfile):
    base_prompt = "openai"
    doc_files = (".codex/instructions.md",)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        tool_registry: ToolRegistry | None = None,
        *,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        extra_options: dict[str, Any] | None = None,
        provider: str = "openai",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("supports_streaming", True)
        kwargs.setdefault("supports_parallel_tool_calls", True)
        super().__init__("openai", model, tool_registry or ToolRegistry(), provider=provider, **kwargs)
        #: A fixed effort for every request ("low" | "medium" | "high" | "xhigh" ...), or None.
        self.reasoning_effort = reasoning_effort
        #: The Responses API's reasoning summary ("auto" | "concise" | "detailed"), or None.
        self.reasoning_summary = reasoning_summary
        #: More ``provider_options["openai"]`` keys, passed through as given.
        self.extra_options = dict(extra_options or {})

    def provider_options(self) -> dict[str, Any] | None:
        options: dict[str, Any] = dict(self.extra_options)
        if self.reasoning_summary is not None:
            options["reasoning_summary"] = self.reasoning_summary
        return {self.provider or "openai": options} if options else None


def create_openai_profile(
    model: str = DEFAULT_MODEL,
    *,
    reasoning_effort: str | None = None,
    user_instructions: str | None = None,
    enable_subagents: bool = True,
    enable_plan: bool = True,
    shell_timeout_ms: int | None = None,
    **options: Any,
) -> OpenAIProfile:
    """The codex-aligned profile.

    ``enable_plan=False`` leaves out ``update_plan`` (codex offers it, so it is on by default).

    ``shell_timeout_ms`` gives the shell tool its own default timeout (None: the session's
    ``default_command_timeout_ms``). Other keyword options go to :class:`OpenAIProfile`
    (``reasoning_summary``, ``extra_options``, ``provider``, ``knowledge_cutoff``,
    ``context_window_size``, capability flags).
    """
    from ra.tools.builtin import (
        apply_patch_tool,
        glob_tool,
        grep_tool,
        read_file_tool,
        shell_tool,
        update_plan_tool,
        write_file_tool,
    )

    profile = OpenAIProfile(model, reasoning_effort=reasoning_effort, user_instructions=user_instructions, **options)
    profile._register_all(
        [
            read_file_tool(),
            apply_patch_tool(),
            write_file_tool(),
            shell_tool(default_timeout_ms=shell_timeout_ms),
            grep_tool(),
            glob_tool(),
            update_plan_tool() if enable_plan else None,
        ]
    )
    if enable_subagents:
        profile._register_all(subagent_tools_or_none() or [])
    return profile

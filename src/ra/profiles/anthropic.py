"""The Anthropic profile (coding-agent-loop-spec 3.5): Claude Code-aligned tools for Claude models.

Tools: ``read_file``, ``write_file``, ``edit_file`` (old_string/new_string, the native edit
format; no apply_patch), ``shell`` with Claude Code's 120 s default timeout, ``grep`` with
Claude Code's output modes and ``-A``/``-B``/``-C`` context, ``glob``, and the subagent tools.
Project instructions: AGENTS.md and CLAUDE.md.

Provider options: ``beta_headers`` go out as ``provider_options["anthropic"]["beta_headers"]``,
which the adapter joins into the ``anthropic-beta`` header; ``thinking`` (e.g.
``{"type": "enabled", "budget_tokens": 8000}``) is passed through as is. A ``context-1m-*`` beta
raises ``context_window_size`` to one million tokens unless a size was given.
"""

from __future__ import annotations

import copy
from typing import Any

from ra.tools.registry import ToolRegistry

from .base import AlignedProfile, subagent_tools_or_none

__all__ = ["CLAUDE_CODE_SHELL_TIMEOUT_MS", "AnthropicProfile", "create_anthropic_profile"]

DEFAULT_MODEL = "claude-sonnet-4-5"
#: Claude Code's default Bash timeout (spec 3.5).
CLAUDE_CODE_SHELL_TIMEOUT_MS = 120_000
_ONE_MILLION = 1_000_000


#: Anthropic's smallest extended-thinking budget (a smaller one is refused by the API).
MIN_THINKING_TOKENS = 1024


def thinking_config(tokens: int) -> dict[str, Any]:
    """The ``thinking`` option for a budget of ``tokens`` (0: off); a ValueError for a budget the
    API refuses."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"max_thinking_tokens must be an integer >= 0, got {tokens!r}")
    if 0 < tokens < MIN_THINKING_TOKENS:
        raise ValueError(
            f"max_thinking_tokens must be 0 (thinking off) or at least {MIN_THINKING_TOKENS}, got {tokens}"
        )
    return {"type": "disabled"} if tokens == 0 else {"type": "enabled", "budget_tokens": tokens}


class AnthropicProfile(AlignedProfile):
    base_prompt = "anthropic"
    doc_files = ("CLAUDE.md",)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        tool_registry: ToolRegistry | None = None,
        *,
        beta_headers: list[str] | None = None,
        thinking: dict[str, Any] | None = None,
        extra_options: dict[str, Any] | None = None,
        provider: str = "anthropic",
        **kwargs: Any,
    ) -> None:
        if isinstance(beta_headers, str):
            raise TypeError("beta_headers is a list of header values, e.g. ['context-1m-2025-08-07']")
        #: ``anthropic-beta`` values sent with every request; may be changed between calls.
        self.beta_headers = list(beta_headers or [])
        #: Extended thinking configuration, passed to the adapter as is; None leaves it off.
        self.thinking = thinking
        #: What :meth:`with_thinking_budget` returns to for ``None``.
        self.default_thinking = thinking
        #: More ``provider_options["anthropic"]`` keys, passed through as given.
        self.extra_options = dict(extra_options or {})
        kwargs.setdefault("supports_streaming", True)
        kwargs.setdefault("supports_parallel_tool_calls", True)
        super().__init__("anthropic", model, tool_registry or ToolRegistry(), provider=provider, **kwargs)

    def _catalog_window(self, model: str, info: Any) -> int:
        window = super()._catalog_window(model, info)
        if any(h.startswith("context-1m") for h in self.beta_headers):
            return max(window, _ONE_MILLION)
        return window

    def with_thinking_budget(self, tokens: int | None) -> AnthropicProfile:
        """A copy with an extended-thinking budget of ``tokens`` (0: thinking off; None: this
        profile's own setting); ``Session.set_max_thinking_tokens`` swaps it in between calls."""
        shaped = copy.copy(self)
        shaped.thinking = self.default_thinking if tokens is None else thinking_config(tokens)
        return shaped

    def provider_options(self) -> dict[str, Any] | None:
        options: dict[str, Any] = dict(self.extra_options)
        if self.beta_headers:
            options["beta_headers"] = list(self.beta_headers)
        if self.thinking is not None:
            options["thinking"] = self.thinking
        return {self.provider or "anthropic": options} if options else None


def create_anthropic_profile(
    model: str = DEFAULT_MODEL,
    *,
    beta_headers: list[str] | None = None,
    user_instructions: str | None = None,
    enable_subagents: bool = True,
    shell_timeout_ms: int | None = CLAUDE_CODE_SHELL_TIMEOUT_MS,
    **options: Any,
) -> AnthropicProfile:
    """The Claude Code-aligned profile.

    ``shell_timeout_ms`` is the shell tool's default timeout (Claude Code's 120 s; None uses the
    session's ``default_command_timeout_ms``). Other keyword options go to
    :class:`AnthropicProfile` (``thinking``, ``extra_options``, ``provider``,
    ``knowledge_cutoff``, ``context_window_size``, capability flags).
    """
    from ra.tools.builtin import edit_file_tool, glob_tool, grep_tool, read_file_tool, shell_tool, write_file_tool

    profile = AnthropicProfile(model, beta_headers=beta_headers, user_instructions=user_instructions, **options)
    profile._register_all(
        [
            read_file_tool(),
            write_file_tool(),
            edit_file_tool(),
            shell_tool(default_timeout_ms=shell_timeout_ms),
            grep_tool(output_modes=True),
            glob_tool(),
        ]
    )
    if enable_subagents:
        profile._register_all(subagent_tools_or_none() or [])
    return profile

"""The Gemini profile (coding-agent-loop-spec 3.6): gemini-cli-aligned tools for Gemini models.

Tools: ``read_file``, ``read_many_files`` (batch reading), ``write_file``, ``edit_file``,
``shell`` (the session's 10 s default timeout), ``grep``, ``glob``, ``list_dir``, optionally
``web_search`` and ``web_fetch`` (``enable_web=True``), and the subagent tools. Project
instructions: AGENTS.md and GEMINI.md.

Provider options (``provider_options["gemini"]``): ``safetySettings`` as given, and with
``grounding=True`` Google Search grounding (``tools: [{"googleSearch": {}}]``), which the adapter
appends to the request's function declarations. Grounding is the model's own search, answered
by Google; the ``web_search`` tool is ra's, run by the agent. Not every Gemini model accepts
grounding together with function calling; the API says so when it does not.
"""

from __future__ import annotations

from typing import Any

from ra.tools.registry import ToolRegistry

from .base import AlignedProfile, subagent_tools_or_none

__all__ = ["GeminiProfile", "create_gemini_profile"]

DEFAULT_MODEL = "gemini-3-flash-preview"


class GeminiProfile(AlignedProfile):
    base_prompt = "gemini"
    doc_files = ("GEMINI.md",)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        tool_registry: ToolRegistry | None = None,
        *,
        safety_settings: list[dict[str, Any]] | None = None,
        grounding: bool = False,
        extra_options: dict[str, Any] | None = None,
        provider: str = "gemini",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("supports_streaming", True)
        kwargs.setdefault("supports_parallel_tool_calls", True)
        super().__init__("gemini", model, tool_registry or ToolRegistry(), provider=provider, **kwargs)
        #: Gemini ``safetySettings`` entries ({"category": ..., "threshold": ...}), or None.
        self.safety_settings = safety_settings
        #: Google Search grounding on every request.
        self.grounding = grounding
        #: More ``provider_options["gemini"]`` keys, passed through as given.
        self.extra_options = dict(extra_options or {})

    def provider_options(self) -> dict[str, Any] | None:
        options: dict[str, Any] = dict(self.extra_options)
        if self.safety_settings is not None:
            options["safetySettings"] = list(self.safety_settings)
        if self.grounding:
            tools = list(options.get("tools") or [])
            if not any(isinstance(t, dict) and "googleSearch" in t for t in tools):
                tools.append({"googleSearch": {}})
            options["tools"] = tools
        return {self.provider or "gemini": options} if options else None


def create_gemini_profile(
    model: str = DEFAULT_MODEL,
    *,
    enable_web: bool = False,
    safety_settings: list[dict[str, Any]] | None = None,
    grounding: bool = False,
    user_instructions: str | None = None,
    enable_subagents: bool = True,
    shell_timeout_ms: int | None = None,
    web_search_api_key: str | None = None,
    **options: Any,
) -> GeminiProfile:
    """The gemini-cli-aligned profile.

    ``enable_web`` adds ``web_search`` and ``web_fetch`` (:mod:`ra.tools.web`; the search needs a
    Brave Search key, ``web_search_api_key`` or ``BRAVE_SEARCH_API_KEY``). ``shell_timeout_ms``
    gives the shell its own default (None: the session's). Other keyword options go to
    :class:`GeminiProfile`.
    """
    from ra.tools.builtin import (
        edit_file_tool,
        glob_tool,
        grep_tool,
        list_dir_tool,
        read_file_tool,
        read_many_files_tool,
        shell_tool,
        write_file_tool,
    )

    profile = GeminiProfile(
        model,
        safety_settings=safety_settings,
        grounding=grounding,
        user_instructions=user_instructions,
        **options,
    )
    profile._register_all(
        [
            read_file_tool(),
            read_many_files_tool(),
            write_file_tool(),
            edit_file_tool(),
            shell_tool(default_timeout_ms=shell_timeout_ms),
            grep_tool(),
            glob_tool(),
            list_dir_tool(),
        ]
    )
    if enable_web:
        from ra.tools.web import web_fetch_tool, web_search_tool

        profile._register_all([web_search_tool(web_search_api_key), web_fetch_tool()])
    if enable_subagents:
        profile._register_all(subagent_tools_or_none() or [])
    return profile

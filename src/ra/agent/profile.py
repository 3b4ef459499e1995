"""The ProviderProfile interface (coding-agent-loop-spec 3.2) and a generic, usable profile.

A profile is what makes a session speak to one model family well: the tools it offers, the system
prompt, provider options, and capability flags the loop reads (streaming, parallel tool calls,
context window size). Provider-aligned profiles (OpenAI/codex, Anthropic/Claude Code, Gemini/
gemini-cli, ra) subclass :class:`ProviderProfile`; :class:`GenericProfile` serves custom agents and
tests with a system prompt you give it.

The session calls, per input: ``await discover_project_docs(env)`` then
``build_system_prompt(environment, project_docs)`` (either may be a coroutine); per model call:
``tools()`` and ``provider_options()``.
"""

from __future__ import annotations

import copy
import datetime as _dt
from typing import TYPE_CHECKING, Any

from ra.llm.types import ToolDefinition
from ra.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment

__all__ = ["GenericProfile", "ProviderProfile", "clone_profile"]


class ProviderProfile:
    """Base profile. Subclasses override :meth:`build_system_prompt` (and usually the flags)."""

    #: Profile family: "openai", "anthropic", "gemini", ...
    id: str
    #: Model identifier sent in the request.
    model: str
    tool_registry: ToolRegistry
    #: Name of the provider adapter in the ``ra.llm.Client`` (defaults to ``id``).
    provider: str | None
    supports_reasoning: bool
    supports_streaming: bool
    supports_parallel_tool_calls: bool
    context_window_size: int
    #: A rule of the profile's spec, enforced whatever the session config says: at most this many
    #: tool calls run per model response (the stricter of this and the config's limit applies).
    max_tool_calls_per_step: int | None = None
    #: SessionConfig fields the profile's spec asks for; a Session created without a config
    #: starts from these (a host that passes its own config decides for itself).
    session_defaults: dict[str, Any] = {}
    #: The profile's reasoning effort, used when the session config sets none.
    reasoning_effort: str | None = None

    def __init__(
        self,
        id: str,
        model: str,
        tool_registry: ToolRegistry | None = None,
        *,
        provider: str | None = None,
        supports_reasoning: bool = False,
        supports_streaming: bool = False,
        supports_parallel_tool_calls: bool = False,
        context_window_size: int = 128_000,
        options: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ValueError("a profile needs a model name")
        self.id = id
        self.model = model
        self.tool_registry = tool_registry if tool_registry is not None else ToolRegistry()
        self.provider = provider if provider is not None else id
        self.supports_reasoning = supports_reasoning
        self.supports_streaming = supports_streaming
        self.supports_parallel_tool_calls = supports_parallel_tool_calls
        self.context_window_size = context_window_size
        self._options = options
        self._controls: list[Any] = []

    def build_system_prompt(self, environment: ExecutionEnvironment, project_docs: str | None = None) -> str:
        """The system prompt for the next input. Override in concrete profiles."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_system_prompt()")

    async def discover_project_docs(self, environment: ExecutionEnvironment) -> str | None:
        """Project instructions (AGENTS.md and the provider's own file) to include; None = none."""
        return None

    def tools(self) -> list[ToolDefinition]:
        return self.tool_registry.definitions()

    def provider_options(self) -> dict[str, Any] | None:
        """Provider-specific request options (``Request.provider_options``), keyed by provider."""
        return self._options

    def controls(self) -> list[Any]:
        """Controls (:mod:`ra.agent.controls`) the profile's rules need, installed by every session
        that uses the profile (e.g. the ra profile's submit mode). Add with :meth:`add_control`."""
        return list(self._controls)

    def add_control(self, control: Any) -> None:
        self._controls.append(control)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, model={self.model!r}, tools={self.tool_registry.names()})"


class GenericProfile(ProviderProfile):
    """A profile with the system prompt you give it, followed by a short environment block.

    ``system_prompt`` may be a string or a callable ``(environment, project_docs) -> str`` for full
    control. ``project_docs`` come from ``project_docs`` (a string) or from
    ``discover_project_docs`` when a subclass overrides it.
    """

    def __init__(
        self,
        id: str = "generic",
        model: str = "model",
        tool_registry: ToolRegistry | None = None,
        *,
        system_prompt: Any = "You are a coding agent. Use the tools to inspect and change the project.",
        project_docs: str | None = None,
        include_environment: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(id, model, tool_registry, **kwargs)
        self.system_prompt = system_prompt
        self.project_docs = project_docs
        self.include_environment = include_environment

    async def discover_project_docs(self, environment: ExecutionEnvironment) -> str | None:
        return self.project_docs

    def build_system_prompt(self, environment: ExecutionEnvironment, project_docs: str | None = None) -> str:
        if callable(self.system_prompt):
            return str(self.system_prompt(environment, project_docs))
        sections = [str(self.system_prompt)]
        if self.include_environment:
            sections.append(_environment_block(environment, self.model))
        if project_docs:
            sections.append(project_docs)
        return "\n\n".join(s for s in sections if s)


def _environment_block(environment: ExecutionEnvironment, model: str) -> str:
    def ask(name: str) -> str:
        fn = getattr(environment, name, None)
        try:
            return str(fn()) if callable(fn) else ""
        except Exception:
            return ""

    lines = [
        "<environment>",
        f"Working directory: {ask('working_directory')}",
        f"Platform: {ask('platform')}",
        f"OS version: {ask('os_version')}",
        f"Today's date: {_dt.date.today().isoformat()}",
        f"Model: {model}",
        "</environment>",
    ]
    return "\n".join(lines)


def clone_profile(
    profile: ProviderProfile, *, model: str | None = None, tool_registry: ToolRegistry | None = None
) -> ProviderProfile:
    """A copy of ``profile`` with another model and/or tool registry; ``profile`` is untouched.

    A profile that defines ``clone(*, model=None, tool_registry=None)`` is asked to copy itself
    (do that when the profile caches anything derived from the model: a prompt, a context
    window size). Otherwise the copy is shallow - the same prompt source, options and flags - with
    the two attributes replaced; the system prompt is built per input, so it sees the new model.
    """
    custom = getattr(profile, "clone", None)
    if callable(custom):
        return custom(model=model, tool_registry=tool_registry)
    clone = copy.copy(profile)
    try:
        if model is not None:
            clone.model = model
        if tool_registry is not None:
            clone.tool_registry = tool_registry
    except AttributeError as exc:
        raise TypeError(
            f"{type(profile).__name__} cannot be copied with another model or tool registry ({exc}); "
            "give it a clone(*, model=None, tool_registry=None) method"
        ) from exc
    return clone

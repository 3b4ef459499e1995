"""What the provider-aligned profiles share: prompt assembly, project docs, per-env snapshots.

A session calls, for every input, ``await discover_project_docs(env)`` and then
``await build_system_prompt(env, docs)``. The git snapshot and the date in the environment block
are taken the first time a profile sees an environment and reused after that (spec 6.3, 6.4: "at
session start"), so the system prompt stays byte-for-byte the same across inputs and provider-side
prompt caching keeps working. The model can always run ``git status`` for fresher facts.

Snapshots are kept per environment object: one profile can serve several sessions (a subagent's
scoped environment gets its own), and :meth:`AlignedProfile.clone` starts with none.
"""

from __future__ import annotations

import copy
import datetime as _dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ra.agent.profile import ProviderProfile
from ra.tools.registry import RegisteredTool, ToolRegistry

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment
    from ra.profiles.context import GitSnapshot

__all__ = ["AlignedProfile", "catalog_info", "subagent_tools_or_none"]

#: Used when the catalog does not know the model.
FALLBACK_CONTEXT_WINDOW = 128_000


def catalog_info(model: str) -> Any:
    """The catalog's ModelInfo for ``model``, or None (unknown ids are fine; they are still sent)."""
    from ra.llm.catalog import get_model_info

    return get_model_info(model)


def subagent_tools_or_none() -> list[RegisteredTool] | None:
    """The four subagent tools (``spawn_agent``, ``send_input``, ``wait``, ``close_agent``)."""
    from ra.agent.subagents.tools import subagent_tools

    return subagent_tools()


class _Snapshot:
    __slots__ = ("env", "git", "today")

    def __init__(self, env: Any, git: GitSnapshot, today: _dt.date) -> None:
        self.env = env
        self.git = git
        self.today = today


class AlignedProfile(ProviderProfile):
    """A profile whose system prompt is ra's layered prompt (:mod:`ra.profiles.prompting`).

    Subclasses set ``base_prompt`` (the packaged base instructions' name) and ``doc_files`` (the
    instruction files besides AGENTS.md they load), and build their tool registry.
    """

    base_prompt: str = ""
    doc_files: tuple[str, ...] = ()

    def __init__(
        self,
        id: str,
        model: str,
        tool_registry: ToolRegistry,
        *,
        user_instructions: str | None = None,
        knowledge_cutoff: str | None = None,
        context_window_size: int | None = None,
        supports_reasoning: bool | None = None,
        **kwargs: Any,
    ) -> None:
        info = catalog_info(model)
        #: The caller's context window, kept by clones for other models.
        self._fixed_window = context_window_size
        if context_window_size is None:
            context_window_size = self._catalog_window(model, info)
        if supports_reasoning is None:
            supports_reasoning = bool(info.supports_reasoning) if info else True
        super().__init__(
            id,
            model,
            tool_registry,
            supports_reasoning=supports_reasoning,
            context_window_size=context_window_size,
            **kwargs,
        )
        #: Appended last to the system prompt (spec 6.1 layer 5); may be changed between inputs.
        self.user_instructions = user_instructions
        #: The host's own base instructions (layer 1) in place of the profile's; the environment,
        #: tool, project-doc and user-instruction layers stay. None: the profile's own.
        self.base_instructions: str | None = None
        self.knowledge_cutoff = knowledge_cutoff
        self._snapshots: dict[int, _Snapshot] = {}

    def _catalog_window(self, model: str, info: Any) -> int:
        """The context window for ``model`` when the caller did not give one (subclasses adjust it
        for options that change it, such as Anthropic's 1M-context beta)."""
        return info.context_window if info else FALLBACK_CONTEXT_WINDOW

    # -- registry helpers --------------------------------------------------------------------------
    def _register_all(self, tools: Iterable[RegisteredTool | None]) -> None:
        for tool in tools:
            if tool is not None:
                self.tool_registry.register(tool)

    # -- snapshots ---------------------------------------------------------------------------------
    async def _snapshot(self, env: ExecutionEnvironment) -> _Snapshot:
        cached = self._snapshots.get(id(env))
        if cached is not None and cached.env is env:
            return cached
        from ra.profiles.context import git_snapshot

        snap = _Snapshot(env, await git_snapshot(env), _dt.date.today())
        # Two inputs racing here (two sessions starting together) keep the first snapshot taken.
        cached = self._snapshots.get(id(env))
        if cached is not None and cached.env is env:
            return cached
        self._snapshots[id(env)] = snap
        return snap

    def forget_environment(self, env: ExecutionEnvironment) -> None:
        """Drop the snapshot taken for ``env`` (the next input takes a fresh one)."""
        self._snapshots.pop(id(env), None)

    # -- ProviderProfile ---------------------------------------------------------------------------
    async def discover_project_docs(self, environment: ExecutionEnvironment) -> str:
        """AGENTS.md plus this profile's own instruction files, formatted ("" when there are none)."""
        from ra.profiles.prompting import load_project_docs

        snap = await self._snapshot(environment)
        return await load_project_docs(environment, self.doc_files, git=snap.git)

    async def build_system_prompt(self, environment: ExecutionEnvironment, project_docs: str | None = None) -> str:
        """Base instructions, environment and git, tools, project docs, user instructions.

        ``project_docs`` as returned by :meth:`discover_project_docs`; None discovers them here.
        """
        from ra.profiles.prompting import assemble_system_prompt, load_base_prompt

        snap = await self._snapshot(environment)
        return await assemble_system_prompt(
            base=self.base_instructions if self.base_instructions is not None else load_base_prompt(self.base_prompt),
            env=environment,
            model=self.model,
            tools=self.tools(),
            doc_files=self.doc_files,
            user_instructions=self.user_instructions,
            knowledge_cutoff=self.knowledge_cutoff,
            git=snap.git,
            project_docs=project_docs,
            today=snap.today,
        )

    # -- subagents ---------------------------------------------------------------------------------
    def clone(self, *, model: str | None = None, tool_registry: ToolRegistry | None = None) -> AlignedProfile:
        """A copy for a subagent: another model (context window and reasoning flag re-read from the
        catalog) and/or another registry; no snapshots, so the child takes its own."""
        twin = copy.copy(self)
        twin._snapshots = {}
        if tool_registry is not None:
            twin.tool_registry = tool_registry
        if model is not None and model != self.model:
            twin.model = model
            info = catalog_info(model)
            if self._fixed_window is not None:
                twin.context_window_size = self._fixed_window
            else:
                twin.context_window_size = twin._catalog_window(model, info)
            if info is not None:
                twin.supports_reasoning = bool(info.supports_reasoning)
        return twin

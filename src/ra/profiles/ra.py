"""The ra profile (ra-spec): Chat Completions, one tool call per step, ra-spec's tools, submit mode.

What ra-spec fixes, and where it is done:

* **Tools** — ``shell_command``, ``read_file``, ``list_dir``, ``grep_files``, ``apply_patch``
  (described as a unified diff; v4a is accepted too), plus ``submit`` in submit mode and
  ``web_search`` / ``web_open`` / ``web_find`` only with ``web=True``. Every output is bounded.
* **One tool call per step** — ``supports_parallel_tool_calls=False`` and the profile's
  ``max_tool_calls_per_step = 1``, which the session enforces whatever config the host passes:
  calls after the first get an error result saying they were not executed.
* **Request fields** — ``parallel_tool_calls: false`` goes out in every request, as the provider
  option of each adapter that has one (Chat Completions and Responses ``parallel_tool_calls``,
  Anthropic ``disable_parallel_tool_use``); the loop always sends ``tool_choice: "auto"``.
  Sampling parameters are not set by the profile: a host sets them only when configured.
* **Prompt** — the packaged ``ra`` base prompt (tool-oriented, with the "at most one tool call per
  step" rule and the submit rule when submit is on), the environment block with the working
  directory, the tool list, and AGENTS.md from the working directory and *every* parent directory,
  outermost first.
* **Submit mode** — a text-only reply does not end the run: the profile's :class:`SubmitMode`
  control answers it with :data:`CONTINUE_MESSAGE` and the loop takes another step;
  ``submit(answer)`` ends the input with ``answer`` as the result.
* **Context overflow** — prune and retry: ``context_overflow="prune"`` is in the profile's
  ``session_defaults``, used when a session is created without a config
  (:func:`ra_session_config` builds the same config with overrides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ra.agent.controls import Continue, Control
from ra.tools.registry import ToolRegistry

from .base import AlignedProfile

if TYPE_CHECKING:
    from collections.abc import Callable

    from ra.agent.config import SessionConfig
    from ra.agent.session import Session
    from ra.agent.state import RunState
    from ra.env.base import ExecutionEnvironment

__all__ = [
    "CONTINUE_MESSAGE",
    "RA_PROVIDER_OPTIONS",
    "RaProfile",
    "SubmitMode",
    "continue_in_submit_mode",
    "create_ra_profile",
    "ra_session_config",
]

DEFAULT_PROVIDER = "openai-compatible"

#: The fixed user message sent after a text-only reply in submit mode (ra-spec).
CONTINUE_MESSAGE = (
    "Continue working on the task. The run ends only when you call the `submit` tool with your final "
    "answer; call it as soon as the task is done."
)

#: How each adapter is told to return at most one tool call per response.
RA_PROVIDER_OPTIONS: dict[str, dict[str, Any]] = {
    "openai-compatible": {"parallel_tool_calls": False},
    "openai": {"parallel_tool_calls": False},
    "anthropic": {"disable_parallel_tool_use": True},
}


class RaProfile(AlignedProfile):
    """ra-spec's profile. Build it with :func:`create_ra_profile`."""

    base_prompt = "ra"
    doc_files = ()
    #: ra-spec: one tool call per step, whatever config the host passes.
    max_tool_calls_per_step = 1
    #: ra-spec: prune on context overflow; ``max_turns`` is the step limit, not rounds per input.
    session_defaults = {"context_overflow": "prune", "max_tool_rounds_per_input": 0}

    def __init__(
        self,
        model: str,
        tool_registry: ToolRegistry | None = None,
        *,
        provider: str = DEFAULT_PROVIDER,
        submit: bool = False,
        web: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("supports_streaming", True)
        kwargs["supports_parallel_tool_calls"] = False
        super().__init__("ra", model, tool_registry or ToolRegistry(), provider=provider, **kwargs)
        self.submit_enabled = submit
        self.web_enabled = web

    async def discover_project_docs(self, environment: ExecutionEnvironment) -> str:
        """AGENTS.md from the working directory and every parent, outermost first (ra-spec)."""
        from ra.profiles.prompting import ra_agents_md_chain

        return await ra_agents_md_chain(environment)

    def provider_options(self) -> dict[str, Any] | None:
        options = {name: dict(values) for name, values in RA_PROVIDER_OPTIONS.items()}
        # The adapter reads its options under the profile's provider name (e.g. a renamed
        # Chat Completions adapter); give it the Chat Completions flag there too.
        name = self.provider or DEFAULT_PROVIDER
        if name not in options and name not in ("gemini", "local"):
            options[name] = {"parallel_tool_calls": False}
        return options


def create_ra_profile(
    model: str,
    *,
    submit: bool = False,
    web: bool = False,
    provider: str = DEFAULT_PROVIDER,
    web_search_api_key: str | None = None,
    shell_timeout_ms: int | None = None,
    **options: Any,
) -> RaProfile:
    """The ra profile for ``model``, on the Chat Completions adapter unless ``provider`` says
    otherwise. ``submit`` adds the ``submit`` tool; ``web`` adds the web tools (the search needs
    ``web_search_api_key`` or ``BRAVE_SEARCH_API_KEY``). Other options go to :class:`RaProfile`
    (``user_instructions``, ``context_window_size``, ``knowledge_cutoff``, capability flags)."""
    from ra.tools.builtin import (
        apply_patch_tool,
        grep_files_tool,
        list_dir_tool,
        read_file_tool,
        shell_command_tool,
    )

    profile = RaProfile(model, provider=provider, submit=submit, web=web, **options)
    profile._register_all(
        [
            shell_command_tool(default_timeout_ms=shell_timeout_ms),
            read_file_tool(),
            list_dir_tool(),
            grep_files_tool(),
            apply_patch_tool(unified_diff=True),
        ]
    )
    if web:
        from ra.tools.web import web_tools

        profile._register_all(web_tools(search_api_key=web_search_api_key))
    if submit:
        from ra.tools.builtin.submit import submit_tool

        profile._register_all([submit_tool()])
        profile.add_control(SubmitMode())
    return profile


def ra_session_config(**overrides: Any) -> SessionConfig:
    """A SessionConfig with ra-spec's rules: one tool call per step, prune on context overflow,
    no per-input round limit (``max_turns`` is the step limit). Keyword arguments override."""
    from ra.agent.config import SessionConfig

    values: dict[str, Any] = {
        "max_tool_calls_per_step": 1,
        "context_overflow": "prune",
        "max_tool_rounds_per_input": 0,
    }
    values.update(overrides)
    return SessionConfig(**values)


class SubmitMode(Control):
    """Submit mode's rule, as a stop control: a reply without tool calls does not end the input;
    ``message`` is added as a user message and the loop takes another step. ``submit(answer)``
    (a tool that ends the input) is the only way to finish; a limit still ends the run, with its
    own stop reason."""

    def __init__(self, message: str = CONTINUE_MESSAGE) -> None:
        self.message = message

    async def on_stop(self, run: RunState, answer: str) -> Continue | None:
        if run.abort.aborted:
            return None
        return Continue(self.message)


def continue_in_submit_mode(session: Session, message: str = CONTINUE_MESSAGE) -> Callable[[], None]:
    """Add submit mode's rule (:class:`SubmitMode`) to ``session``; returns a function that
    removes it. Sessions on a profile created with ``submit=True`` have it already."""
    control = session.controls.add(SubmitMode(message))

    def remove() -> None:
        session.controls.remove(control)

    return remove

"""System prompt assembly (coding-agent-loop-spec 6.1): five layers, later ones taking precedence.

1. the profile's base instructions (``prompts/<name>.md``, package data),
2. the environment block (6.3) and the git snapshot (6.4),
3. a compact list of the active tools,
4. project instructions (6.5: AGENTS.md plus the profile's own files, 32 KB at most),
5. the user's own instructions, last, so they win.

Base prompts may carry conditional sections keyed on the active tools, so a prompt never tells the
model about a tool it does not have (the ra prompt's ``submit`` rule, the subagent and web notes)::

    {{#tool:submit}} shown only when a tool named submit is active {{/tool:submit}}
    {{^tool:submit}} shown only when it is not {{/tool:submit}}

A tag alone on its line takes the line with it. No other placeholder exists; any other ``{{...}}``
text is left alone, so a custom base prompt may contain template examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import date
from functools import cache
from importlib import resources

from ..env.base import ExecutionEnvironment
from ..llm.catalog import get_model_info
from ..llm.types import ToolDefinition
from .context import (
    GitSnapshot,
    discover_agents_md_chain,
    discover_project_docs,
    environment_block,
    format_project_docs,
    git_snapshot,
)

__all__ = [
    "assemble_system_prompt",
    "available_base_prompts",
    "load_base_prompt",
    "load_project_docs",
    "ra_agents_md_chain",
    "render_tool_sections",
    "tool_summary",
]

#: A tool's description is cut to about this many characters in the tool list (layer 3); the
#: full description still travels with the tool's schema in the request.
_SUMMARY_CHARS = 240
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_TAG = r"\{\{([#^/])tool:([A-Za-z][A-Za-z0-9_]*)\}\}"
# A tag alone on its line (group 1, 2) swallows the line; otherwise the tag alone (group 3, 4).
_TAG_RE = re.compile(rf"(?m)^[ \t]*{_TAG}[ \t]*(?:\n|\Z)|{_TAG}")


def _prompt_dir():  # -> importlib.resources.abc.Traversable
    # Chained "/" rather than joinpath(a, b): a namespace package's MultiplexedPath takes one part.
    return resources.files("ra.profiles") / "prompts"


def available_base_prompts() -> list[str]:
    """Names accepted by :func:`load_base_prompt`, sorted."""
    return sorted(p.name[:-3] for p in _prompt_dir().iterdir() if p.name.endswith(".md") and p.is_file())


@cache
def load_base_prompt(name: str) -> str:
    """The packaged base instructions for a profile family: "openai", "anthropic", "gemini" or
    "ra". Read once per process; the text may hold tool sections that assembly resolves."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"base prompt names are lower-case words, got {name!r}")
    resource = _prompt_dir() / f"{name}.md"
    if not resource.is_file():
        raise ValueError(f"no base prompt named {name!r}; available: {', '.join(available_base_prompts())}")
    return resource.read_text("utf-8").strip() + "\n"


def render_tool_sections(text: str, active_tools: Iterable[str]) -> str:
    """Resolve ``{{#tool:x}}`` / ``{{^tool:x}}`` ... ``{{/tool:x}}`` sections against the names of
    the active tools. Sections nest; a section left open or closed under the wrong name is an
    error (the prompt would otherwise say the wrong thing silently)."""
    active = set(active_tools)
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # (tool name, this section is shown)
    shown = True
    pos = 0
    for match in _TAG_RE.finditer(text):
        if shown:
            out.append(text[pos : match.start()])
        pos = match.end()
        kind = match.group(1) or match.group(3)
        tool = match.group(2) or match.group(4)
        if kind == "/":
            if not stack or stack[-1][0] != tool:
                expected = "{{/tool:" + stack[-1][0] + "}}" if stack else "no closing tag"
                raise ValueError(
                    f"prompt template: {match.group(0).strip()} closes nothing open here; expected {expected}"
                )
            stack.pop()
        else:
            wanted = (tool in active) == (kind == "#")
            stack.append((tool, wanted))
        shown = all(visible for _, visible in stack)
    if stack:
        raise ValueError("prompt template: the section for tool " + repr(stack[-1][0]) + " is never closed")
    out.append(text[pos:])
    return "".join(out)


def tool_summary(description: str) -> str:
    """The first paragraph of a description on one line. Past ``_SUMMARY_CHARS`` it is cut after
    the last whole sentence that fits, or else at a word, with "..."."""
    paragraph = re.split(r"\n\s*\n", description.strip(), maxsplit=1)[0]
    text = " ".join(paragraph.split())
    if len(text) <= _SUMMARY_CHARS:
        return text
    head = text[:_SUMMARY_CHARS]
    stop = head.rfind(". ")  # the longest run of whole sentences that fits
    if stop > 0:
        return head[: stop + 1]
    return head[: head.rfind(" ")].rstrip(",;:") + "..." if " " in head else head + "..."


def _tools_layer(tools: Sequence[ToolDefinition]) -> str:
    lines = [
        "# Tools",
        "",
        "Tools available in this session (each call's full parameter schema comes with the request):",
    ]
    lines.extend(f"- {t.name}: {tool_summary(t.description) or '(no description)'}" for t in tools)
    return "\n".join(lines)


def _model_label(model: str, display_name: str | None) -> str:
    if not display_name or display_name == model:
        return model
    return f"{display_name} ({model})"


async def load_project_docs(
    env: ExecutionEnvironment, doc_files: Iterable[str], *, git: GitSnapshot | None = None
) -> str:
    """Spec 6.5's project instructions, formatted for layer 4 ("" when there are none): AGENTS.md
    and ``doc_files`` from the git root (taken from ``git``, else from a fresh snapshot) down to the
    working directory."""
    snap = git if git is not None else await git_snapshot(env)
    docs = await discover_project_docs(env, doc_files, git_root=snap.root if snap.is_repo else None)
    return format_project_docs(docs)


async def ra_agents_md_chain(env: ExecutionEnvironment) -> str:
    """ra-spec's project instructions: AGENTS.md from the working directory and every parent
    directory up to ``/`` (not only to the git root), outermost first, formatted like layer 4's
    blocks; "" when there are none. Pass it as ``project_docs`` to :func:`assemble_system_prompt`."""
    return format_project_docs(await discover_agents_md_chain(env))


async def assemble_system_prompt(
    *,
    base: str,
    env: ExecutionEnvironment,
    model: str,
    tools: Sequence[ToolDefinition],
    doc_files: Iterable[str] = (),
    user_instructions: str | None = None,
    knowledge_cutoff: str | None = None,
    git: GitSnapshot | None = None,
    model_display_name: str | None = None,
    project_docs: str | None = None,
    today: date | None = None,
) -> str:
    """The system prompt, layers in spec 6.1's order.

    ``base`` is the base instructions' text (usually :func:`load_base_prompt`). The git snapshot
    is taken once, here, unless ``git`` is given (a session takes it at start and reuses it).
    ``model_display_name`` and ``knowledge_cutoff`` default to the catalog's entry for ``model``;
    a model the catalog does not know shows its id and an "unknown" cutoff. ``project_docs``, when
    given, replaces discovery (the ra profile passes :func:`ra_agents_md_chain`; a profile that
    already discovered docs passes them); otherwise AGENTS.md plus ``doc_files`` are discovered.
    """
    if not isinstance(base, str):
        raise TypeError(f"base must be the base prompt's text, got {type(base).__name__}")
    if not model:
        raise ValueError("model must name the model the prompt is for")
    names = [t.name for t in tools]
    snap = git if git is not None else await git_snapshot(env)
    info = get_model_info(model)
    display = model_display_name or (info.display_name if info else None)
    cutoff = knowledge_cutoff or (info.knowledge_cutoff if info else None)

    layers = [render_tool_sections(base, names).strip()]
    context = environment_block(
        working_directory=env.working_directory(),
        git=snap,
        platform=env.platform(),
        os_version=env.os_version(),
        model=_model_label(model, display),
        knowledge_cutoff=cutoff,
        today=today,
    )
    git_block = snap.render()
    layers.append(f"{context}\n{git_block}" if git_block else context)
    sandbox = getattr(env, "sandbox_summary", None)  # a sandboxed environment says what it allows
    if sandbox is not None and (summary := sandbox()):
        layers[-1] += f"\n{summary}"
    if tools:
        layers.append(_tools_layer(tools))
    docs = project_docs if project_docs is not None else await load_project_docs(env, doc_files, git=snap)
    if docs.strip():
        layers.append(
            "# Project instructions\n\n"
            "These come from files in the project, outermost directory first. Follow them; where "
            "two disagree, the file deeper in the tree wins.\n\n" + docs.strip()
        )
    if user_instructions is not None and user_instructions.strip():
        layers.append(
            "# User instructions\n\n"
            "These come from the user and take precedence over everything above.\n\n"
            f"<user_instructions>\n{user_instructions.strip()}\n</user_instructions>"
        )
    return "\n\n".join(layer for layer in layers if layer)

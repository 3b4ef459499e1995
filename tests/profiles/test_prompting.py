"""ra.profiles.prompting: packaged base prompts, tool sections, and the five layers of spec 6.1
assembled over real repositories through LocalExecutionEnvironment."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from ra.env.base import ExecResult
from ra.env.local import LocalExecutionEnvironment
from ra.llm.catalog import get_model_info, list_models
from ra.llm.types import ToolDefinition
from ra.profiles.context import PROFILE_DOC_FILES, GitSnapshot, git_snapshot
from ra.profiles.prompting import (
    assemble_system_prompt,
    available_base_prompts,
    load_base_prompt,
    load_project_docs,
    ra_agents_md_chain,
    render_tool_sections,
    tool_summary,
)
from ra.tools.apply_patch import apply_patch
from tests.profiles.test_context import git, git_identity, make_repo, write

__all__ = ["git_identity"]  # the autouse fixture, imported so it applies here too

FAMILIES = ("anthropic", "gemini", "openai", "ra")
TODAY = date(2026, 2, 14)
PROJECT_LEAD = (
    "These come from files in the project, outermost directory first. Follow them; where two disagree, "
    "the file deeper in the tree wins.\n\n"
)


def tools(*names: str) -> list[ToolDefinition]:
    return [ToolDefinition(name, f"Does {name.replace('_', ' ')}.\n\nLonger explanation.") for name in names]


OPENAI_TOOLS = tools("read_file", "apply_patch", "write_file", "shell", "grep", "glob")
ANTHROPIC_TOOLS = tools("read_file", "write_file", "edit_file", "shell", "grep", "glob")
GEMINI_TOOLS = tools("read_file", "read_many_files", "write_file", "edit_file", "shell", "grep", "glob", "list_dir")
RA_TOOLS = tools("shell_command", "read_file", "list_dir", "grep_files", "apply_patch")
SUBAGENT_TOOLS = tools("spawn_agent", "send_input", "wait", "close_agent")
EVERY_OPTIONAL = [*SUBAGENT_TOOLS, *tools("submit", "web_search", "web_fetch", "web_open", "web_find")]


class CountingEnv(LocalExecutionEnvironment):
    """The real environment, counting the commands it is asked to run."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands: list[str] = []

    async def exec_command(self, command: str, *args: object, **kwargs: object) -> ExecResult:
        self.commands.append(command)
        return await super().exec_command(command, *args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository on branch "work" with instruction files of every family at two levels, an
    AGENTS.md above it, and the working directory two levels down (app/api)."""
    write(tmp_path / "AGENTS.md", "OUTSIDE-REPO agents\n")
    repo = make_repo(tmp_path / "repo", branch="work", commits=("set up project", "add api"))
    write(repo / "AGENTS.md", "ROOT-AGENTS build with make\n")
    write(repo / "CLAUDE.md", "ROOT-CLAUDE\n")
    write(repo / "GEMINI.md", "ROOT-GEMINI\n")
    write(repo / ".codex" / "instructions.md", "ROOT-CODEX\n")
    write(repo / "app" / "AGENTS.md", "APP-AGENTS\n")
    write(repo / "app" / "api" / "CLAUDE.md", "API-CLAUDE\n")
    write(repo / "app" / "api" / "GEMINI.md", "API-GEMINI\n")
    write(repo / "app" / "api" / "untracked.py", "x = 1\n")
    return repo / "app" / "api"


# -- base prompts --------------------------------------------------------------------------------


def test_every_family_has_a_packaged_prompt() -> None:
    assert set(FAMILIES) <= set(available_base_prompts())
    for name in FAMILIES:
        text = load_base_prompt(name)
        assert text == text.strip() + "\n"
        assert 40 <= len(text.splitlines()) <= 160, name
        assert load_base_prompt(name) is text  # read once


def test_unknown_or_malformed_prompt_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="available: anthropic, gemini, openai, ra"):
        load_base_prompt("mistral")
    for bad in ("../context", "OpenAI", "", "a/b"):
        with pytest.raises(ValueError):
            load_base_prompt(bad)


@pytest.mark.parametrize("name", FAMILIES)
def test_prompts_resolve_fully_with_any_tool_set(name: str) -> None:
    for active in ([], EVERY_OPTIONAL):
        rendered = render_tool_sections(load_base_prompt(name), [t.name for t in active])
        assert "{{" not in rendered and "}}" not in rendered
        assert "\n\n\n" not in rendered


@pytest.mark.parametrize("name", FAMILIES)
def test_prompts_cover_the_shared_topics(name: str) -> None:
    text = load_base_prompt(name).lower()
    assert "coding agent" in text and ("repository" in text or "project" in text)  # identity
    assert "read" in text and "before" in text  # read before changing
    assert "minimal" in text or "small" in text  # focused changes
    assert "test" in text  # verify
    assert "revert" in text  # the user's own changes
    assert "secret" in text and "destructive" in text  # safety
    assert "final answer" in text or "summary" in text  # reporting


def test_openai_prompt_teaches_apply_patch_not_edit_file() -> None:
    text = load_base_prompt("openai")
    for needle in ("*** Begin Patch", "*** End Patch", "*** Add File: ", "*** Update File: ", "*** Delete File: "):
        assert needle in text
    assert "*** Move to: " in text and "@@" in text
    assert "old_string" not in text and "edit_file" not in text


def test_anthropic_prompt_teaches_edit_file() -> None:
    text = load_base_prompt("anthropic")
    assert "`old_string`" in text and "exactly once" in text and "`replace_all`" in text
    assert "Prefer editing existing files" in text
    assert "before you edit" in text
    assert "apply_patch" not in text and "GEMINI.md" not in text


def test_gemini_prompt_teaches_its_conventions() -> None:
    text = load_base_prompt("gemini")
    assert "GEMINI.md" in text and "`read_many_files`" in text and "absolute paths" in text
    assert "apply_patch" not in text and "CLAUDE.md" not in text


def test_ra_prompt_submit_rule_follows_the_submit_tool() -> None:
    base = load_base_prompt("ra")
    assert "Use at most one tool call per step." in base
    with_submit = render_tool_sections(base, [t.name for t in [*RA_TOOLS, *tools("submit")]])
    without = render_tool_sections(base, [t.name for t in RA_TOOLS])
    assert "The run ends only when you call `submit(answer)`" in with_submit
    assert "submit" not in without
    assert "first message that contains no tool call" in without
    assert "first message that contains no tool call" not in with_submit
    for tool in ("shell_command(", "read_file(", "list_dir(", "grep_files(", "apply_patch("):
        assert tool in without
    assert "web_search" not in without
    assert "`web_search(query" in render_tool_sections(base, ["web_search"])


def _fenced_blocks(text: str) -> list[str]:
    return re.findall(r"```\n(.*?)```", text, flags=re.S)


async def test_the_openai_example_patch_applies(tmp_path: Path) -> None:
    (patch,) = [b for b in _fenced_blocks(load_base_prompt("openai")) if "*** Begin Patch\n*** Update" in b]
    write(
        tmp_path / "app" / "settings.py",
        "class Settings:\n    retries: int = 3\n    timeout_s: float = 5.0\n    verbose: bool = False\n",
    )
    await apply_patch(patch, LocalExecutionEnvironment(tmp_path))
    assert (tmp_path / "app" / "settings.py").read_text() == (
        "class Settings:\n    retries: int = 3\n    timeout_s: float = 30.0\n    verbose: bool = False\n"
    )
    assert (tmp_path / "app" / "NOTES.txt").read_text() == "timeout raised to 30 s for slow mirrors\n"


async def test_the_ra_example_diff_applies(tmp_path: Path) -> None:
    (diff,) = [b for b in _fenced_blocks(load_base_prompt("ra")) if b.startswith("--- a/")]
    head = "".join(f"# line {n}\n" for n in range(1, 9)) + "def main():\n"
    write(tmp_path / "src" / "app.py", head + "    args = parse()\n    run(args)\n    return 0\n")
    await apply_patch(diff, LocalExecutionEnvironment(tmp_path))
    assert (tmp_path / "src" / "app.py").read_text() == (
        head + "    args = parse()\n    result = run(args)\n    report(result)\n    return 0\n"
    )


# -- tool sections and summaries -----------------------------------------------------------------


def test_sections_show_hide_invert_and_nest() -> None:
    text = (
        "start\n"
        "{{#tool:a}}\n"
        "A on\n"
        "{{#tool:b}}\n"
        "A and B\n"
        "{{/tool:b}}\n"
        "{{/tool:a}}\n"
        "{{^tool:a}}\n"
        "A off\n"
        "{{/tool:a}}\n"
        "inline {{#tool:b}}[b]{{/tool:b}}{{^tool:b}}[no b]{{/tool:b}} end\n"
        "{{name}} stays\n"
    )
    assert render_tool_sections(text, []) == "start\nA off\ninline [no b] end\n{{name}} stays\n"
    assert render_tool_sections(text, ["a"]) == "start\nA on\ninline [no b] end\n{{name}} stays\n"
    assert render_tool_sections(text, {"a", "b"}) == "start\nA on\nA and B\ninline [b] end\n{{name}} stays\n"
    assert render_tool_sections(text, ["b"]) == "start\nA off\ninline [b] end\n{{name}} stays\n"


def test_unbalanced_sections_are_errors() -> None:
    with pytest.raises(ValueError, match="never closed"):
        render_tool_sections("{{#tool:a}} open", [])
    with pytest.raises(ValueError, match="closes nothing"):
        render_tool_sections("text {{/tool:a}}", [])
    with pytest.raises(ValueError, match=re.escape("{{/tool:a}} closes nothing open here; expected {{/tool:b}}")):
        render_tool_sections("{{#tool:a}}{{#tool:b}}{{/tool:a}}{{/tool:b}}", ["a", "b"])


def test_tool_summary() -> None:
    assert tool_summary("  Read a file.\n\n  Details nobody needs here.") == "Read a file."
    assert tool_summary("Run a\n   shell command\tnow.\nSecond line.") == "Run a shell command now. Second line."
    assert tool_summary("") == ""
    sentences = "First sentence is here. " + "word " * 80
    assert tool_summary(sentences) == "First sentence is here."
    long = "word " * 100
    summary = tool_summary(long)
    assert summary.endswith("...") and len(summary) <= 243 and "  " not in summary
    assert tool_summary("x" * 300) == "x" * 240 + "..."


# -- assembly ------------------------------------------------------------------------------------


async def test_layers_come_in_spec_order_with_user_instructions_last(project: Path) -> None:
    env = LocalExecutionEnvironment(project)
    prompt = await assemble_system_prompt(
        base=load_base_prompt("anthropic"),
        env=env,
        model="claude-sonnet-4-5",
        tools=ANTHROPIC_TOOLS,
        doc_files=PROFILE_DOC_FILES["anthropic"],
        user_instructions="Always answer in French.",
        today=TODAY,
    )
    marks = [
        "You are a coding agent built on ra",
        "<environment>",
        "<git>",
        "# Tools",
        "# Project instructions",
        "# User instructions",
    ]
    positions = [prompt.index(m) for m in marks]
    assert positions == sorted(positions) and positions[0] == 0
    assert prompt.endswith("<user_instructions>\nAlways answer in French.\n</user_instructions>")

    repo = project.parent.parent
    env_lines = prompt[prompt.index("<environment>") : prompt.index("</environment>") + 14].splitlines()
    assert env_lines == [
        "<environment>",
        f"Working directory: {project}",
        "Is git repository: true",
        "Git branch: work",
        f"Platform: {env.platform()}",
        f"OS version: {env.os_version()}",
        "Today's date: 2026-02-14",
        "Model: Claude Sonnet 4.5 (claude-sonnet-4-5)",
        "Knowledge cutoff: 2025-01",
        "</environment>",
    ]
    git_block = prompt[prompt.index("<git>") : prompt.index("</git>") + 6]
    assert git_block.splitlines() == [
        "<git>",
        "Branch: work",
        "Modified files: 0",
        "Untracked files: 8",  # the seven instruction files and untracked.py
        "Recent commits:",
        "- add api",
        "- set up project",
        "</git>",
    ]
    assert prompt.index("</environment>\n<git>") > 0

    tool_lines = [line for line in prompt.splitlines() if line.startswith("- ") and ": Does " in line]
    assert tool_lines == [f"- {t.name}: Does {t.name.replace('_', ' ')}." for t in ANTHROPIC_TOOLS]
    assert "Longer explanation" not in prompt

    docs = prompt[prompt.index("# Project instructions") : prompt.index("# User instructions")]
    assert re.findall(r'<project_instructions path="([^"]+)">', docs) == [
        str(repo / "AGENTS.md"),
        str(repo / "CLAUDE.md"),
        str(repo / "app" / "AGENTS.md"),
        str(repo / "app" / "api" / "CLAUDE.md"),
    ]
    assert "GEMINI" not in docs and "CODEX" not in docs and "OUTSIDE-REPO" not in prompt


@pytest.mark.parametrize(
    ("family", "present", "absent"),
    [
        ("anthropic", ["ROOT-AGENTS", "APP-AGENTS", "ROOT-CLAUDE", "API-CLAUDE"], ["GEMINI", "CODEX"]),
        ("gemini", ["ROOT-AGENTS", "APP-AGENTS", "ROOT-GEMINI", "API-GEMINI"], ["CLAUDE", "CODEX"]),
        ("openai", ["ROOT-AGENTS", "APP-AGENTS", "ROOT-CODEX"], ["CLAUDE", "GEMINI"]),
        ("ra", ["ROOT-AGENTS", "APP-AGENTS"], ["CLAUDE", "GEMINI", "CODEX"]),
    ],
)
async def test_each_profile_gets_its_own_project_files(
    project: Path, family: str, present: list[str], absent: list[str]
) -> None:
    prompt = await assemble_system_prompt(
        base=load_base_prompt(family),
        env=LocalExecutionEnvironment(project),
        model="some-model",
        tools=[],
        doc_files=PROFILE_DOC_FILES[family],
        today=TODAY,
    )
    docs = prompt[prompt.index("# Project instructions") :]
    for needle in present:
        assert needle in docs
    for needle in absent:
        assert f"{needle}\n" not in docs and f"-{needle}" not in docs
    assert docs.index("ROOT-AGENTS") < docs.index("APP-AGENTS")


async def test_unknown_models_and_overrides(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    snap = GitSnapshot()
    unknown = await assemble_system_prompt(base="B", env=env, model="my-local-model", tools=[], git=snap, today=TODAY)
    assert "Model: my-local-model\n" in unknown and "Knowledge cutoff: unknown\n" in unknown
    assert "Is git repository: false\nGit branch: (none)\n" in unknown
    assert (
        "<git>" not in unknown and "# Tools" not in unknown and "# Project" not in unknown and "# User" not in unknown
    )
    assert unknown.startswith("B\n\n<environment>\n") and unknown.endswith("</environment>")

    known = await assemble_system_prompt(base="B", env=env, model="gpt-5.2", tools=[], git=snap)
    assert "Model: GPT-5.2 (gpt-5.2)\n" in known and "Knowledge cutoff: 2025-08-31\n" in known
    assert f"Today's date: {date.today().isoformat()}\n" in known

    same = await assemble_system_prompt(
        base="B", env=env, model="gpt-5.2", tools=[], git=snap, model_display_name="gpt-5.2"
    )
    assert "Model: gpt-5.2\n" in same

    overridden = await assemble_system_prompt(
        base="B",
        env=env,
        model="gpt-5.2",
        tools=[],
        git=snap,
        knowledge_cutoff="2030-01",
        model_display_name="House Model",
        user_instructions="   ",
    )
    assert "Model: House Model (gpt-5.2)\n" in overridden and "Knowledge cutoff: 2030-01\n" in overridden
    assert "# User instructions" not in overridden


async def test_git_snapshot_is_taken_once_or_reused(project: Path) -> None:
    env = CountingEnv(project)
    await assemble_system_prompt(
        base="B", env=env, model="m", tools=[], doc_files=PROFILE_DOC_FILES["gemini"], today=TODAY
    )
    assert len(env.commands) == 1

    env.commands.clear()
    given = GitSnapshot(is_repo=True, root=str(project.parent.parent), branch="from-session-start", head="abc1234")
    prompt = await assemble_system_prompt(
        base="B", env=env, model="m", tools=[], doc_files=PROFILE_DOC_FILES["gemini"], git=given
    )
    assert env.commands == []
    assert "Git branch: from-session-start\n" in prompt and "Branch: from-session-start\n" in prompt
    assert "ROOT-GEMINI" in prompt  # the given snapshot's root drives the docs walk


async def test_project_docs_override_replaces_discovery(project: Path) -> None:
    env = LocalExecutionEnvironment(project)
    prompt = await assemble_system_prompt(
        base="B", env=env, model="m", tools=[], doc_files=["CLAUDE.md"], project_docs="HOST DOCS", today=TODAY
    )
    assert prompt.endswith("# Project instructions\n\n" + PROJECT_LEAD + "HOST DOCS")
    assert "ROOT-AGENTS" not in prompt
    empty = await assemble_system_prompt(base="B", env=env, model="m", tools=[], project_docs="", today=TODAY)
    assert "# Project instructions" not in empty


async def test_load_project_docs_matches_what_assembly_includes(project: Path) -> None:
    env = LocalExecutionEnvironment(project)
    snap = await git_snapshot(env)
    docs = await load_project_docs(env, ["GEMINI.md"], git=snap)
    prompt = await assemble_system_prompt(base="B", env=env, model="m", tools=[], doc_files=["GEMINI.md"], git=snap)
    assert docs and docs in prompt
    assert await load_project_docs(env, ["GEMINI.md"]) == docs


async def test_ra_prompt_end_to_end(project: Path, tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(project)
    prompt = await assemble_system_prompt(
        base=load_base_prompt("ra"),
        env=env,
        model="gpt-4.1-mini",
        tools=[*RA_TOOLS, *tools("submit")],
        project_docs=await ra_agents_md_chain(env),
        today=TODAY,
    )
    assert prompt.startswith("You are ra")
    assert "Use at most one tool call per step." in prompt
    assert "The run ends only when you call `submit(answer)`" in prompt
    assert f"Working directory: {project}\n" in prompt
    assert "- submit: Does submit." in prompt and "- shell_command: Does shell command." in prompt
    docs = prompt[prompt.index("# Project instructions") :]
    ours = [p for p in re.findall(r'path="([^"]+)"', docs) if p.startswith(str(tmp_path))]
    assert ours == [
        str(tmp_path / "AGENTS.md"),
        str(project.parent.parent / "AGENTS.md"),
        str(project.parent / "AGENTS.md"),
    ]
    assert "CLAUDE" not in docs and "GEMINI" not in docs


async def test_ra_chain_is_empty_without_agents_md(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    chain = await ra_agents_md_chain(LocalExecutionEnvironment(bare))
    assert str(tmp_path) not in chain


async def test_bad_arguments(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    with pytest.raises(TypeError, match="base"):
        await assemble_system_prompt(base=None, env=env, model="m", tools=[])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        await assemble_system_prompt(base="B", env=env, model="", tools=[])
    with pytest.raises(ValueError, match="never closed"):
        await assemble_system_prompt(base="{{#tool:x}}", env=env, model="m", tools=[])


def test_sections_in_a_real_profile_prompt(tmp_path: Path) -> None:
    base = load_base_prompt("openai")
    assert "## Subagents" not in render_tool_sections(base, [t.name for t in OPENAI_TOOLS])
    assert "`spawn_agent`" in render_tool_sections(base, [t.name for t in [*OPENAI_TOOLS, *SUBAGENT_TOOLS]])
    gem = load_base_prompt("gemini")
    assert "web_search" not in render_tool_sections(gem, [t.name for t in GEMINI_TOOLS])
    assert "`web_fetch`" in render_tool_sections(gem, ["web_fetch"])


# -- catalog knowledge cutoffs -------------------------------------------------------------------


def test_catalog_knowledge_cutoffs_are_dates_where_given() -> None:
    for info in list_models():
        assert info.knowledge_cutoff is None or re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", info.knowledge_cutoff), info.id
    known = {m.id for m in list_models() if m.knowledge_cutoff}
    assert {"claude-opus-4-6", "claude-sonnet-4-5", "gpt-5.2", "gemini-2.5-pro"} <= known
    info = get_model_info("claude-haiku-4-5")
    assert info is not None and info.knowledge_cutoff == "2025-02"


def test_repo_helper_sanity(tmp_path: Path) -> None:
    """The fixture repository really is on its branch with its commits (guards the tests above)."""
    repo = make_repo(tmp_path / "r", branch="work", commits=("a", "b"))
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "work"
    assert git(repo, "log", "--format=%s").splitlines() == ["b", "a"]

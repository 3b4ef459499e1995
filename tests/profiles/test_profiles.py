"""The OpenAI, Anthropic and Gemini profiles: tools, flags, options, prompts, and a real session each."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ra.agent import Session, SessionConfig
from ra.agent.events import EventKind
from ra.env import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.llm.types import ToolCall
from ra.profiles import (
    AnthropicProfile,
    GeminiProfile,
    OpenAIProfile,
    create_anthropic_profile,
    create_gemini_profile,
    create_openai_profile,
)
from ra.tools.pipeline import ToolPipeline
from ra.tools.registry import RegisteredTool, ToolDefinition

SUBAGENT_TOOLS = ["spawn_agent", "send_input", "wait", "close_agent"]
HAS_SUBAGENTS = True
try:
    import ra.agent.subagents.tools  # noqa: F401
except ImportError:
    HAS_SUBAGENTS = False


def subagents() -> list[str]:
    return SUBAGENT_TOOLS if HAS_SUBAGENTS else []


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=T", "-c", "init.defaultBranch=main", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


# -- tool lists and flags ------------------------------------------------------------------------


def test_tool_lists_per_profile() -> None:
    assert create_openai_profile().tool_registry.names() == [
        "read_file",
        "apply_patch",
        "write_file",
        "shell",
        "grep",
        "glob",
        "update_plan",
        *subagents(),
    ]
    assert "update_plan" not in create_openai_profile(enable_plan=False).tool_registry
    assert create_anthropic_profile().tool_registry.names() == [
        "read_file",
        "write_file",
        "edit_file",
        "shell",
        "grep",
        "glob",
        *subagents(),
    ]
    assert create_gemini_profile().tool_registry.names() == [
        "read_file",
        "read_many_files",
        "write_file",
        "edit_file",
        "shell",
        "grep",
        "glob",
        "list_dir",
        *subagents(),
    ]
    for factory in (create_openai_profile, create_anthropic_profile, create_gemini_profile):
        names = factory(enable_subagents=False).tool_registry.names()
        assert not set(names) & set(SUBAGENT_TOOLS)


def test_provider_specific_tool_flavours() -> None:
    anthropic_grep = create_anthropic_profile().tool_registry.get("grep")
    assert anthropic_grep is not None and "output_mode" in anthropic_grep.definition.parameters["properties"]
    for factory in (create_openai_profile, create_gemini_profile):
        grep = factory().tool_registry.get("grep")
        assert grep is not None and "output_mode" not in grep.definition.parameters["properties"]
    assert "edit_file" not in create_openai_profile().tool_registry
    assert "apply_patch" not in create_anthropic_profile().tool_registry


def test_gemini_web_tools_are_opt_in() -> None:
    pytest.importorskip("ra.tools.web")
    assert "web_search" not in create_gemini_profile().tool_registry
    names = create_gemini_profile(enable_web=True).tool_registry.names()
    assert "web_search" in names and "web_fetch" in names


def test_ids_providers_and_capability_flags() -> None:
    for factory, ident in (
        (create_openai_profile, "openai"),
        (create_anthropic_profile, "anthropic"),
        (create_gemini_profile, "gemini"),
    ):
        profile = factory()
        assert (profile.id, profile.provider) == (ident, ident)
        assert profile.supports_streaming and profile.supports_parallel_tool_calls and profile.supports_reasoning
    custom = create_openai_profile(provider="azure", supports_parallel_tool_calls=False)
    assert custom.provider == "azure" and not custom.supports_parallel_tool_calls
    assert isinstance(create_openai_profile(), OpenAIProfile)
    assert isinstance(create_anthropic_profile(), AnthropicProfile)
    assert isinstance(create_gemini_profile(), GeminiProfile)


def test_context_window_from_the_catalog() -> None:
    from ra.llm.catalog import get_model_info

    for factory, model in (
        (create_openai_profile, "gpt-5.2-codex"),
        (create_anthropic_profile, "claude-sonnet-4-5"),
        (create_gemini_profile, "gemini-3-flash-preview"),
    ):
        info = get_model_info(model)
        assert info is not None
        assert factory().context_window_size == info.context_window
    assert create_openai_profile("my-private-finetune").context_window_size == 128_000
    assert create_openai_profile(context_window_size=50_000).context_window_size == 50_000
    assert create_anthropic_profile(beta_headers=["context-1m-2025-08-07"]).context_window_size == 1_000_000


# -- provider options ----------------------------------------------------------------------------


def test_openai_provider_options() -> None:
    profile = create_openai_profile()
    assert profile.provider_options() is None  # the session's reasoning_effort travels on the request
    profile = create_openai_profile(reasoning_effort="high", reasoning_summary="auto")
    # The profile's effort is a default the loop puts on the request (see the session test below);
    # it is not a provider option, so an explicit SessionConfig.reasoning_effort wins.
    assert profile.provider_options() == {"openai": {"reasoning_summary": "auto"}}
    assert profile.reasoning_effort == "high"


def test_anthropic_provider_options() -> None:
    assert create_anthropic_profile().provider_options() is None
    profile = create_anthropic_profile(
        beta_headers=["interleaved-thinking-2025-05-14"], thinking={"type": "enabled", "budget_tokens": 2048}
    )
    assert profile.provider_options() == {
        "anthropic": {
            "beta_headers": ["interleaved-thinking-2025-05-14"],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        }
    }
    with pytest.raises(TypeError, match="list"):
        create_anthropic_profile(beta_headers="context-1m-2025-08-07")  # type: ignore[arg-type]


def test_gemini_provider_options() -> None:
    assert create_gemini_profile().provider_options() is None
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    profile = create_gemini_profile(safety_settings=safety, grounding=True)
    assert profile.provider_options() == {"gemini": {"safetySettings": safety, "tools": [{"googleSearch": {}}]}}


# -- shell defaults per profile ------------------------------------------------------------------


async def run_shell(profile: Any, root: Path, config: SessionConfig) -> dict[str, Any]:
    class Sink:
        def tool_start(self, call: ToolCall) -> None: ...
        def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None: ...
        def tool_end(self, outcome: Any) -> None: ...

    pipeline = ToolPipeline(profile.tool_registry, LocalExecutionEnvironment(root), Sink(), config=config)
    outcome = await pipeline.run(ToolCall("c1", "shell", {"command": "echo hi"}))
    assert not outcome.is_error, outcome.content
    return outcome.metadata or {}


async def test_shell_default_timeouts(tmp_path: Path) -> None:
    config = SessionConfig()
    assert (await run_shell(create_anthropic_profile(), tmp_path, config))["timeout_ms"] == 120_000
    assert (await run_shell(create_openai_profile(), tmp_path, config))["timeout_ms"] == 10_000
    assert (await run_shell(create_gemini_profile(), tmp_path, config))["timeout_ms"] == 10_000
    assert (await run_shell(create_anthropic_profile(shell_timeout_ms=None), tmp_path, config))["timeout_ms"] == 10_000


# -- custom tools --------------------------------------------------------------------------------


def test_custom_tools_register_on_top_and_latest_wins() -> None:
    for factory in (create_openai_profile, create_anthropic_profile, create_gemini_profile):
        profile = factory()
        before = profile.tool_registry.names()
        run_tests = RegisteredTool(
            ToolDefinition(
                "run_tests", "Run the test suite", {"type": "object", "properties": {"filter": {"type": "string"}}}
            ),
            lambda args, ctx: "ok",
        )
        profile.tool_registry.register(run_tests)
        mine = RegisteredTool(ToolDefinition("shell", "My own shell"), lambda args, ctx: "custom shell")
        profile.tool_registry.register(mine)
        assert profile.tool_registry.names() == [*before, "run_tests"]
        assert profile.tool_registry.get("shell") is mine
        definitions = {d.name: d for d in profile.tools()}
        assert definitions["shell"].description == "My own shell" and "run_tests" in definitions


# -- system prompt -------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "AGENTS.md").write_text("AGENTS-RULE\n")
    (root / "CLAUDE.md").write_text("CLAUDE-RULE\n")
    (root / "GEMINI.md").write_text("GEMINI-RULE\n")
    (root / ".codex").mkdir()
    (root / ".codex" / "instructions.md").write_text("CODEX-RULE\n")
    git(root, "init")
    git(root, "add", ".")
    git(root, "commit", "-m", "first commit")
    return root


@pytest.mark.parametrize(
    ("factory", "own", "foreign"),
    [
        (create_openai_profile, "CODEX-RULE", ("CLAUDE-RULE", "GEMINI-RULE")),
        (create_anthropic_profile, "CLAUDE-RULE", ("CODEX-RULE", "GEMINI-RULE")),
        (create_gemini_profile, "GEMINI-RULE", ("CODEX-RULE", "CLAUDE-RULE")),
    ],
)
async def test_project_docs_per_profile(repo: Path, factory: Any, own: str, foreign: tuple[str, ...]) -> None:
    env = LocalExecutionEnvironment(repo)
    profile = factory(user_instructions="USER-SAYS-LAST")
    docs = await profile.discover_project_docs(env)
    assert "AGENTS-RULE" in docs and own in docs
    assert not any(f in docs for f in foreign)
    prompt = await profile.build_system_prompt(env, docs)
    from ra.profiles.prompting import load_base_prompt

    base_start = load_base_prompt(profile.base_prompt).strip().splitlines()[0]
    assert prompt.startswith(base_start[:40])
    assert f"Working directory: {repo}" in prompt and "Is git repository: true" in prompt
    assert "first commit" in prompt
    for name in profile.tool_registry.names():
        assert f"- {name}:" in prompt
    assert prompt.index("AGENTS-RULE") < prompt.index("USER-SAYS-LAST")
    assert prompt.rstrip().endswith("</user_instructions>")


async def test_git_snapshot_and_date_are_taken_once_per_environment(repo: Path) -> None:
    profile = create_anthropic_profile()
    env = LocalExecutionEnvironment(repo)
    first = await profile.build_system_prompt(env, await profile.discover_project_docs(env))
    (repo / "untracked.txt").write_text("new\n")
    git(repo, "checkout", "-b", "feature")
    again = await profile.build_system_prompt(env, await profile.discover_project_docs(env))
    assert again == first  # the same bytes: provider prompt caches keep working
    other = LocalExecutionEnvironment(repo)
    fresh = await profile.build_system_prompt(other, await profile.discover_project_docs(other))
    assert "Branch: feature" in fresh and "Untracked files: 1" in fresh
    profile.forget_environment(env)
    assert "Branch: feature" in await profile.build_system_prompt(env, "")


def test_clone_for_another_model() -> None:
    profile = create_anthropic_profile(user_instructions="keep me")
    twin = profile.clone(model="claude-opus-4-6")
    assert twin.model == "claude-opus-4-6" and profile.model == "claude-sonnet-4-5"
    assert twin.user_instructions == "keep me" and twin.tool_registry is profile.tool_registry
    assert twin._snapshots == {} and twin._snapshots is not profile._snapshots
    unknown = create_openai_profile().clone(model="unknown-model")
    assert unknown.context_window_size == 128_000
    fixed = create_openai_profile(context_window_size=64_000).clone(model="gpt-5.2")
    assert fixed.context_window_size == 64_000


# -- a real session per profile ------------------------------------------------------------------

PATCH_ADD = "*** Begin Patch\n*** Add File: hello.py\n+print('Hello')\n*** End Patch\n"
PATCH_EDIT = "*** Begin Patch\n*** Update File: hello.py\n@@\n print('Hello')\n+print('Goodbye')\n*** End Patch\n"


def scripts() -> dict[str, list[Any]]:
    return {
        "openai": [
            call("apply_patch", patch=PATCH_ADD),
            call("read_file", file_path="hello.py"),
            call("apply_patch", input=PATCH_EDIT),
            call("shell", command="python3 hello.py"),
            reply("Created and extended hello.py."),
        ],
        "anthropic": [
            call("write_file", file_path="hello.py", content="print('Hello')\n"),
            call("read_file", file_path="hello.py"),
            call(
                "edit_file",
                file_path="hello.py",
                old_string="print('Hello')\n",
                new_string="print('Hello')\nprint('Goodbye')\n",
            ),
            call("shell", command="python3 hello.py"),
            reply("Created and extended hello.py."),
        ],
        "gemini": [
            call("write_file", file_path="hello.py", content="print('Hello')\n"),
            call("read_many_files", paths=["*.py"]),
            call(
                "edit_file",
                file_path="hello.py",
                old_string="print('Hello')",
                new_string="print('Hello')\nprint('Goodbye')",
            ),
            call("shell", command="python3 hello.py"),
            reply("Created and extended hello.py."),
        ],
    }


@pytest.mark.parametrize(
    ("name", "factory", "options"),
    [
        ("openai", create_openai_profile, {"reasoning_summary": "auto"}),
        ("anthropic", create_anthropic_profile, {"beta_headers": ["interleaved-thinking-2025-05-14"]}),
        ("gemini", create_gemini_profile, {"grounding": True}),
    ],
)
async def test_session_creates_and_edits_a_file(tmp_path: Path, name: str, factory: Any, options: dict) -> None:
    (tmp_path / "AGENTS.md").write_text("Always say please.\n")
    model = ScriptedAdapter(scripts()[name], name=name)
    profile = factory(**options)
    env = LocalExecutionEnvironment(tmp_path)
    session = Session(profile, env, Client(providers={name: model}), SessionConfig())
    ends: list[Any] = []
    session.add_listener(lambda e: ends.append(e) if e.kind is EventKind.TOOL_CALL_END else None)
    result = await session.submit("Create hello.py that prints Hello, then add Goodbye.")
    assert result.text == "Created and extended hello.py."
    assert (tmp_path / "hello.py").read_text() == "print('Hello')\nprint('Goodbye')\n"
    assert [e["is_error"] for e in ends] == [False, False, False, False], [e["output"] for e in ends]
    assert ends[-1]["output"].endswith("Output:\nHello\nGoodbye")
    request = model.requests[0]
    assert request.provider == name and request.model == profile.model
    assert [t.name for t in request.tools] == profile.tool_registry.names()
    assert request.provider_options == profile.provider_options() and request.provider_options
    system = request.messages[0]
    assert system.role == "system" and "Always say please." in system.text
    # The system prompt is identical on every request of the session.
    assert all(r.messages[0].text == system.text for r in model.requests)
    await session.close()


async def test_profile_reasoning_effort_is_a_default_the_session_overrides(tmp_path: Path) -> None:
    model = ScriptedAdapter([reply("a"), reply("b"), reply("c")], name="openai")
    profile = create_openai_profile(reasoning_effort="high")
    config = SessionConfig()
    session = Session(profile, LocalExecutionEnvironment(tmp_path), Client(providers={"openai": model}), config)
    await session.submit("one")
    config.reasoning_effort = "low"
    await session.submit("two")
    config.reasoning_effort = None
    await session.submit("three")
    assert [r.reasoning_effort for r in model.requests] == ["high", "low", "high"]

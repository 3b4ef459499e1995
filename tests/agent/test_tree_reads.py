"""Read deny rules against tools that read whole trees: ``grep`` / ``grep_files`` over a
directory (or the working directory when no path is given) and ``read_many_files`` with a
directory, a glob or an ``include`` pattern. Before, a rule was matched only against the path
as given, so ``grep(path=".")`` printed the lines of ``secrets/key.txt`` under
``Read(./secrets/**)``, and ``read_many_files(paths=["README.md"], include=[".env"])`` read
``.env`` under ``Read(./.env)``. Real files, the real tools, a scripted model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ra.agent.permissions import rules as rules_module
from ra.agent.permissions.rules import CallFacts, Rule
from ra.llm import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.llm.types import ToolCall
from ra.sdk import QueryOptions, query

DENY = ["Read(./.env)", "Read(./secrets/**)"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".env").write_text("TOKEN=SECRET-ENV\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_text("SECRET-KEY\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('SECRET-FREE')\n")
    (tmp_path / "README.md").write_text("hello\n")
    return tmp_path


async def _run(project: Path, profile: str, *calls: dict[str, Any], deny: list[str] = DENY) -> list[str]:
    model = ScriptedAdapter([*(call(c.pop("tool"), **c) for c in calls), reply("done")])
    options = QueryOptions(
        profile=profile,
        provider="scripted",
        model="m",
        client=Client({"scripted": model}, default_provider="scripted"),
        cwd=project,
        permission_mode="bypass",
        disallowed_tools=deny,
    )
    [m async for m in query("go", options=options)]
    return [str(p.tool_result.content) for m in model.requests[-1].messages for p in m.content if p.tool_result]


@pytest.mark.parametrize(
    ("profile", "arguments"),
    [
        ("gemini", {"tool": "read_many_files", "paths": ["."]}),
        ("gemini", {"tool": "read_many_files", "paths": ["secrets"]}),
        ("gemini", {"tool": "read_many_files", "paths": ["README.md"], "include": [".env"]}),
        ("gemini", {"tool": "read_many_files", "paths": ["README.md"], "include": ["secrets/*.txt"]}),
        ("gemini", {"tool": "read_many_files", "paths": ["*/key.txt"]}),
        ("gemini", {"tool": "grep", "pattern": "SECRET", "path": "."}),
        ("gemini", {"tool": "grep", "pattern": "SECRET"}),
        ("gemini", {"tool": "grep", "pattern": "SECRET", "path": "secrets"}),
        ("openai", {"tool": "grep", "pattern": "SECRET"}),
        ("ra", {"tool": "grep_files", "pattern": "SECRET", "path": "."}),
    ],
)
async def test_a_read_deny_rule_holds_for_a_tool_that_reads_a_tree(
    project: Path, profile: str, arguments: dict[str, Any]
) -> None:
    (result,) = await _run(project, profile, dict(arguments))
    assert "SECRET-KEY" not in result and "SECRET-ENV" not in result and "key.txt" not in result
    assert "Denied by the rule" in result


async def test_a_tree_without_a_denied_file_is_read(project: Path) -> None:
    # src/ holds nothing a rule names; hidden files are skipped by the tools and by the check,
    # so .env at the top does not stop a search of the project either.
    results = await _run(
        project,
        "gemini",
        {"tool": "grep", "pattern": "SECRET", "path": "src"},
        {"tool": "read_many_files", "paths": ["src"]},
        {"tool": "grep", "pattern": "SECRET", "path": "."},
        deny=["Read(./.env)"],
    )
    assert all("SECRET-FREE" in r for r in results), results


def test_a_tree_too_large_to_list_makes_a_read_deny_rule_unsure(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def check(rule: str) -> tuple[bool, bool]:
        facts = CallFacts.of(ToolCall("c1", "grep", {"pattern": "x", "path": "."}), str(project))
        parsed = Rule.parse(rule)
        return parsed.matches(facts, every_part=False), parsed.unsure(facts)

    assert check("Read(*.pem)") == (False, False)
    monkeypatch.setattr(rules_module, "_TREE_LIMIT", 2)
    assert check("Read(*.pem)") == (False, True)  # a bare name needs the whole tree: too large
    # A path spec lists only the part of the tree it names: secrets/ (one file) fits.
    assert check("Read(./secrets/**)") == (True, False)
    assert check("Read(./other/**)") == (False, False)  # nothing there
    assert check("Read(.env)") == (False, False)  # hidden: the tools skip it


def test_a_link_in_the_tree_to_a_denied_file_is_seen(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "id_rsa"
    outside.write_text("PRIVATE\n")
    (project / "src" / "notes.txt").symlink_to(outside)
    facts = CallFacts.of(ToolCall("c1", "read_many_files", {"paths": ["src"]}), str(project))
    assert Rule.parse(f"Read(/{outside})").matches(facts, every_part=False)

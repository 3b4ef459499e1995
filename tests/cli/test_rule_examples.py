"""Every permission rule `ra --help` and the docs show works: it parses and names a tool of the
default (ra) profile or a Claude Code name (issue 16: the help showed `shell(...)`, which names no
tool of the ra profile and matched nothing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ra.agent.permissions.rules import validate_rules
from ra.agent.permissions.tool_names import RULE_ALIASES
from ra.profiles import create_ra_profile
from tests.cli.support import clean_env, run_ra

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["docs/permissions.md", "docs/cli.md", "docs/sdk.md", "docs/agent.md", "docs/hooks.md", "README.md"]
#: Rules the docs show *because* they match nothing (what the errors look like), and placeholders.
SHOWN_AS_WRONG = {
    "shel_comand(ls)",
    "shell(touch:*)",
    "shell(...)",
    "TOOL(SPEC)",
    "Bash(ls) Bash(rm:*)",
    "Read(./.env) Read(./secrets/**)",
}
_TOOLISH = r"(?:[A-Z][A-Za-z]+|mcp__\w+|[a-z]+(?:_[a-z]+)+|shell|grep|glob)"
_RULE = re.compile(rf"^{_TOOLISH}(?:\(.+\))?$")
#: ``name(a, b?, c)``, ``Class(field=...)``: a signature or a call, not a rule.
_SIGNATURE = re.compile(r"^[a-z_]+\((?:[\w\-]+\??(?:, )?)*\)$|^[a-z_]+\(\)$|^[a-z_]+\(\w+, \w+|^[a-z_]+\(\w+=")


def _ra_tools() -> list[str]:
    profile = create_ra_profile("m", submit=True, web=True)
    return profile.tool_registry.names()


def _rules_in_help(text: str) -> list[str]:
    """Rules in quotes ('Read,Bash(git diff:*)' and "Bash(git diff:*)") and Tool(spec) words."""
    found: list[str] = []
    for quoted in re.findall(r"(?<!\w)'([^'\s][^']*)'(?!\w)|\"([^\"]+)\"", text):
        value = quoted[0] or quoted[1]
        found.extend(part for part in _split(value) if (_RULE.match(part) and "(" in part) or part in RULE_ALIASES)
    found.extend(re.findall(rf"\b{_TOOLISH}\([^()]+\)", text))
    return [r for r in dict.fromkeys(found) if r not in SHOWN_AS_WRONG]


def _split(value: str) -> list[str]:
    from ra.cli.policy import split_rules

    return list(split_rules([value]))


def _rules_in_doc(text: str) -> list[str]:
    """Backticked ``Tool(spec)`` spans, and the strings of allowed/disallowed/ask rule lists."""
    found: list[str] = []
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.startswith("'") and span.endswith("'"):  # a flag's value: 'Read,Bash(git diff:*)'
            found.extend(_split(span[1:-1]))
        elif _RULE.match(span) and "(" in span and not (span[0].isupper() and span.split("(")[0] not in RULE_ALIASES):
            found.append(span)
    for line in text.splitlines():
        for listed in re.findall(r"(?:allowed_tools|disallowed_tools|ask_tools)\s*=\s*(.*)", line):
            found.extend(re.findall(r"\"([^\"]+)\"", listed.split("),", 1)[0]))
    return [
        r
        for r in dict.fromkeys(found)
        if r not in SHOWN_AS_WRONG and not _SIGNATURE.match(r) and not r.startswith(("PermissionAllow", "ra."))
    ]


def test_every_rule_in_ra_help_works_on_the_default_profile(tmp_path: Path) -> None:
    result = run_ra(["--help"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    rules = _rules_in_help(re.sub(r"\s*\n\s*", " ", result.stdout))  # argparse wraps lines
    assert {"Bash(git diff:*)", "Edit(src/**)", "Bash(rm:*)", "WebSearch"} <= set(rules)
    assert validate_rules(rules, _ra_tools(), source="ra --help") == []


@pytest.mark.parametrize("doc", DOCS)
def test_every_rule_in_the_docs_works_on_the_default_profile(doc: str) -> None:
    rules = _rules_in_doc((ROOT / doc).read_text())
    assert validate_rules(rules, _ra_tools(), source=doc) == []


def test_the_permissions_doc_shows_its_rules() -> None:
    rules = _rules_in_doc((ROOT / "docs/permissions.md").read_text())
    assert {"Bash(git diff:*)", "Edit(src/**)", "Read(./.env)", "WebFetch(domain:docs.python.org)"} <= set(rules)
    assert len(rules) > 15

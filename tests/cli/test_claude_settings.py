"""Claude Code's settings-file rule syntax turned into ra's (ra.cli.claude_settings.ra_rule)."""

from __future__ import annotations

import pytest

from ra.cli.claude_settings import ra_rule


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("Read(//etc/hosts)", "Read(//etc/hosts)"),  # absolute in both
        ("Edit(/src/**/*.ts)", "Edit(//proj/.claude/src/**/*.ts)"),  # relative to the settings file
        ("Read(/../secrets/**)", "Read(//proj/secrets/**)"),
        ("Read(./.env)", "Read(./.env)"),  # relative to the working directory in both
        ("read_file(/a/**)", "read_file(//proj/.claude/a/**)"),  # ra's names are file tools too
        ("Read(~/.zshrc)", "Read(~/.zshrc)"),
        ("Read(src/**)", "Read(src/**)"),
        ("Bash(/usr/bin/make:*)", "Bash(/usr/bin/make:*)"),  # a command, not a path
        ("WebFetch(domain:example.com)", "WebFetch(domain:example.com)"),
        ("Read", "Read"),
    ],
)
def test_path_forms_of_file_rules_become_ras(rule: str, expected: str) -> None:
    assert ra_rule(rule, "/proj/.claude") == expected

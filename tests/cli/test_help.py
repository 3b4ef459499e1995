"""`ra --help` is the whole reference a pip install gets (docs/ is not installed)."""

from __future__ import annotations

import re
from pathlib import Path

from ra.cli.config import _TOP_KEYS, PROVIDER_ENV
from tests.cli.support import clean_env, run_ra


def help_text(tmp_path: Path) -> str:
    result = run_ra(["--help"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_help_names_every_config_key_and_environment_variable(tmp_path: Path) -> None:
    text = help_text(tmp_path)
    missing = [key for key in _TOP_KEYS if not re.search(rf"\b{key}\b", text)]
    assert missing == []
    variables = {v for keys, url in PROVIDER_ENV.values() for v in (*keys, url) if v}
    variables |= {"RA_PROVIDER", "RA_MODEL", "RA_CONFIG", "RA_MAX_STEPS", "RA_TIME_LIMIT", "RA_HISTORY_FILE"}
    variables |= {"RA_LOCAL_MODEL", "BRAVE_SEARCH_API_KEY", "NO_COLOR", "RA_SESSIONS_DIR"}
    assert sorted(v for v in variables if v not in text) == []


def test_help_does_not_send_readers_to_files_a_pip_install_lacks(tmp_path: Path) -> None:
    text = help_text(tmp_path)
    assert "docs/" not in text
    for flag in ("--max-budget-usd", "--permission-mode", "--allowed-tools", "--output-format", "--fallback-model"):
        assert flag in text


def test_help_covers_sessions(tmp_path: Path) -> None:
    text = help_text(tmp_path)
    for word in ("--resume", "--continue", "--fork-session", "--session-id", "--no-session-persistence"):
        assert word in text
    for word in ("ra sessions [--all] [--json]", "ra sessions show ID", "/resume [ID]", "/fork", "/compact"):
        assert word in text


def test_help_covers_mcp_servers(tmp_path: Path) -> None:
    text = help_text(tmp_path)
    for word in ("--mcp-config", "--strict-mcp-config", "ra mcp list", "mcp__SERVER", "trusted_mcp_projects"):
        assert word in text
    listing = run_ra(["mcp", "--help"], clean_env(tmp_path))
    assert listing.returncode == 0 and "ra mcp list [--tools] [--json]" in listing.stdout

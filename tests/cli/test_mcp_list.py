"""``ra mcp list``: the real command starts real MCP servers over stdio (tests/cli/mcp_servers),
shows how each stands (table, ``--json``, ``--tools``), exits 1 when one failed, and never shows a
server's env or headers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.cli.support import MCP_NOTES as NOTES
from tests.cli.support import clean_env, jsonl, mcp_json, run_ra
from tests.cli.support import notes_server as notes

#: Real servers started per test: the slow lane (`pytest -m slow`), which CI runs.
pytestmark = pytest.mark.slow


def test_list_shows_a_table_and_exits_0_when_every_server_connected(tmp_path: Path) -> None:
    result = run_ra(["mcp", "list", "--mcp-config", mcp_json(notes=notes())], clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAME", "TRANSPORT", "STATUS", "TOOLS", "SOURCE", "ERROR"]
    assert row.split() == ["notes", "stdio", "connected", "4", "--mcp-config", "JSON", "#1"]


def test_list_tools_names_each_tool_as_the_model_sees_it(tmp_path: Path) -> None:
    result = run_ra(
        ["mcp", "list", "--tools", "--mcp-config", mcp_json(notes=notes())], clean_env(tmp_path), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("notes:")
    tools = {line.split()[0]: " ".join(line.split()[1:]) for line in lines[at + 1 :]}
    assert tools == {
        "mcp__notes__echo": "Say the text back.",
        "mcp__notes__touch": "Create an empty file at path.",
        "mcp__notes__getenv": "An environment variable of the server, or <unset>.",
        "mcp__notes__peek": "Look without changing anything.",
    }


def test_a_failed_server_is_a_row_with_its_error_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    config.write_text(mcp_json(notes=notes(), gone={"command": str(tmp_path / "no-such-program")}))
    result = run_ra(["mcp", "list", "--json", "--mcp-config", str(config)], clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 1
    rows = {row["name"]: row for row in jsonl(result.stdout)}
    assert rows["notes"]["status"] == "connected" and rows["notes"]["tools"] == 4
    assert rows["notes"]["server"] == "notes 0.1" and rows["notes"]["source"] == str(config)
    assert "tool_list" not in rows["notes"]
    gone = rows["gone"]
    assert gone["status"] == "failed" and gone["tools"] == 0
    assert "no-such-program" in gone["error"]
    table = run_ra(["mcp", "list", "--mcp-config", str(config)], clean_env(tmp_path), cwd=tmp_path)
    assert table.returncode == 1
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("gone")]
    assert "failed" in row and "no-such-program" in row


def test_json_with_tools(tmp_path: Path) -> None:
    result = run_ra(
        ["mcp", "list", "--json", "--tools", "--mcp-config", mcp_json(a=notes("a"))],
        clean_env(tmp_path),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (row,) = jsonl(result.stdout)
    assert [t["name"] for t in row["tool_list"]] == ["mcp__a__echo", "mcp__a__touch", "mcp__a__getenv", "mcp__a__peek"]


def test_precedence_and_strict_mode_through_the_command(tmp_path: Path) -> None:
    """The server's own name (from its handshake) shows which entry was started."""
    config = tmp_path / "ra.toml"
    config.write_text(
        f'[mcp_servers.s]\ncommand = "{sys.executable}"\nargs = ["{NOTES}", "--name", "from-config"]\n'
        f'[mcp_servers.mine]\ncommand = "{sys.executable}"\nargs = ["{NOTES}", "--name", "mine"]\n'
    )
    env = clean_env(tmp_path, RA_CONFIG=str(config))

    def started(*flags: str) -> dict[str, str]:
        result = run_ra(["mcp", "list", "--json", *flags], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return {row["name"]: row["server"] for row in jsonl(result.stdout)}

    assert started() == {"s": "from-config 0.1", "mine": "mine 0.1"}
    flag = mcp_json(s=notes("from-flag"))
    assert started("--mcp-config", flag) == {"s": "from-flag 0.1", "mine": "mine 0.1"}
    assert started("--mcp-config", flag, "--strict-mcp-config") == {"s": "from-flag 0.1"}


def test_a_trusted_projects_file_is_read_and_an_untrusted_one_is_not(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    (project / ".mcp.json").write_text(mcp_json(proj=notes("proj")))
    config = tmp_path / "ra.toml"
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    config.write_text("")
    untrusted = run_ra(["mcp", "list", "--json"], env, cwd=project)
    assert untrusted.returncode == 0 and untrusted.stdout == ""
    assert "not trusted" in untrusted.stderr
    config.write_text(f'trusted_mcp_projects = ["{project}"]\n')
    trusted = run_ra(["mcp", "list", "--json"], env, cwd=project)
    assert trusted.returncode == 0, trusted.stderr
    assert [row["server"] for row in jsonl(trusted.stdout)] == ["proj 0.1"]
    assert trusted.stderr == ""
    # -C names the directory whose file (and trust) counts.
    elsewhere = run_ra(["mcp", "list", "--json", "-C", str(project)], env, cwd=tmp_path)
    assert [row["name"] for row in jsonl(elsewhere.stdout)] == ["proj"]


def test_secrets_in_env_and_headers_are_never_shown(tmp_path: Path) -> None:
    secret_env, secret_header, secret_url = "sk-env-0123456789", "sk-header-9876543210", "sk-url-5555"
    config = tmp_path / "servers.json"
    config.write_text(
        mcp_json(
            gone={"command": str(tmp_path / "missing"), "env": {"API_TOKEN": secret_env}},
            web={
                "type": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": f"Bearer {secret_header}"},
            },
            userinfo={"type": "http", "url": f"http://user:{secret_url}@127.0.0.1:9/mcp?key={secret_url}"},
            unset={"command": "x", "env": {"T": "${RA_TEST_UNSET_VARIABLE}", "K": secret_env}},
        )
    )
    for flags in ([], ["--json"], ["--tools"], ["--json", "--tools"]):
        result = run_ra(["mcp", "list", "--mcp-config", str(config), *flags], clean_env(tmp_path), cwd=tmp_path)
        assert result.returncode == 1
        assert "gone" in result.stdout and "web" in result.stdout and "unset" in result.stdout
        for secret in (secret_env, secret_header, secret_url):
            assert secret not in result.stdout and secret not in result.stderr


def test_no_server_process_outlives_the_listing(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    result = run_ra(
        ["mcp", "list", "--mcp-config", mcp_json(notes=notes("notes", "--pidfile", str(pidfile)))],
        clean_env(tmp_path),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the MCP server (pid {pid}) still runs after `ra mcp list` exited")


_NO_MCP = '''
import sys

class _NoMcp:
    """Makes `mcp` look uninstalled (as in `pip install ra-agent` without the extra)."""

    def find_spec(self, name, path=None, target=None):
        if name in ("mcp", "mcp_types") or name.startswith(("mcp.", "mcp_types.")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoMcp())
'''


def test_without_the_mcp_package_a_warning_says_what_to_install(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NO_MCP)
    env = clean_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    result = run_ra(["mcp", "list", "--mcp-config", mcp_json(notes=notes())], env, cwd=tmp_path)
    assert result.returncode == 1
    assert "the mcp package is not installed" in result.stderr and "pip install 'ra-agent[mcp]'" in result.stderr
    assert "failed" in result.stdout


def test_what_a_name_or_error_holds_is_shown_never_obeyed(tmp_path: Path) -> None:
    clear_screen = "\x1b[2J"
    servers = mcp_json(**{f"evil{clear_screen}name": {"command": str(tmp_path / f"prog{clear_screen}")}})
    result = run_ra(["mcp", "list", "--mcp-config", servers], clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 1
    assert "\x1b" not in result.stdout and "\x1b" not in result.stderr
    assert "evil" in result.stdout and "name" in result.stdout

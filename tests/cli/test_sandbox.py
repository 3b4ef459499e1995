"""``ra --sandbox MODE`` and ``sandbox_mode`` in the config file: the real command, a scripted
Chat Completions server on 127.0.0.1, real bwrap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, run_ra, tool_messages
from tests.env.sandbox.support import outside_tree, require_bwrap
from tests.support.replay import ReplayServer


def args(server: ReplayServer, *extra: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "m", *extra]


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_tree() as path:
        yield path


def test_read_only_sandbox_refuses_a_shell_write(replay_server: ReplayServer, tmp_path: Path) -> None:
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo hi > made.txt && echo wrote"}))
    enqueue_text(replay_server, "Could not write.")
    result = run_ra(args(replay_server, "--sandbox", "read-only", "go"), clean_env(tmp_path), cwd=work)
    assert result.returncode == 0, result.stderr
    assert not (work / "made.txt").exists()
    (denied,) = tool_messages(chat_requests(replay_server)[1])
    assert "Read-only file system" in denied["content"] and "wrote" not in denied["content"]


def test_read_only_sandbox_refuses_the_write_file_tool(replay_server: ReplayServer, tmp_path: Path) -> None:
    require_bwrap()
    enqueue_tools(replay_server, ("c1", "write_file", {"file_path": "new.txt", "content": "x"}))
    enqueue_text(replay_server, "Could not write.")
    flags = ["--profile", "anthropic", "--provider", "openai-compatible", "--sandbox", "read-only", "go"]
    result = run_ra(args(replay_server, *flags), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "new.txt").exists()
    (denied,) = tool_messages(chat_requests(replay_server)[1])
    assert "sandbox (read-only)" in denied["content"]


def test_a_bad_mode_is_refused(tmp_path: Path) -> None:
    result = run_ra(["--sandbox", "off", "--base-url", "http://127.0.0.1:9/v1", "go"], clean_env(tmp_path))
    assert result.returncode == 2
    assert "unknown sandbox mode 'off': use one of read-only, workspace-write, danger-full-access" in result.stderr


def test_config_file_mode_and_writable_roots(replay_server: ReplayServer, tmp_path: Path, outside: Path) -> None:
    (outside / "cache").mkdir()
    config = tmp_path / "ra.toml"
    config.write_text(
        f'sandbox_mode = "workspace-write"\n[sandbox_workspace_write]\nwritable_roots = ["{outside}/cache"]\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    command = f"echo a > in-ws && echo b > {outside}/cache/c && echo c > {outside}/not-a-root; echo done"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": command}))
    enqueue_text(replay_server, "ok")
    result = run_ra(args(replay_server, "go"), clean_env(tmp_path, RA_CONFIG=str(config)), cwd=work)
    assert result.returncode == 0, result.stderr
    assert (work / "in-ws").exists() and (outside / "cache" / "c").exists()
    assert not (outside / "not-a-root").exists()


def test_config_file_errors_are_clear(tmp_path: Path) -> None:
    config = tmp_path / "ra.toml"
    config.write_text('sandbox_mode = "read-only"\n[sandbox_workspace_write]\nnetwork = true\n')
    result = run_ra(["--base-url", "http://127.0.0.1:9/v1", "go"], clean_env(tmp_path, RA_CONFIG=str(config)))
    assert result.returncode == 2
    assert "unknown key 'sandbox_workspace_write.network'" in result.stderr


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_add_dir_makes_a_directory_writable_in_workspace_write_only(
    replay_server: ReplayServer, tmp_path: Path, outside: Path, mode: str
) -> None:
    """Claude's ``--add-dir`` grants a directory: under workspace-write it becomes a writable root;
    read-only stays read-only (with a notice); without the flag the directory is not writable."""
    work = tmp_path / "work"
    work.mkdir()
    for n, add in enumerate((True, False)):
        target = outside / f"made-{n}.txt"
        enqueue_tools(replay_server, ("c1", "shell_command", {"command": f"echo hi > {target} && echo wrote"}))
        enqueue_text(replay_server, "done")
        extra = ["--add-dir", str(outside)] if add else []
        result = run_ra(args(replay_server, "--sandbox", mode, *extra, "go"), clean_env(tmp_path), cwd=work)
        assert result.returncode == 0, result.stderr
        assert target.exists() == (add and mode == "workspace-write"), (n, result.stderr)
        if add and mode == "read-only":
            assert "stay read-only" in result.stderr

"""``ra --ssh DEST``: the real command, a scripted Chat Completions server on 127.0.0.1 and (in the
slow lane) a real sshd on 127.0.0.1 with throwaway keys (:mod:`tests.env.ssh.support`). The
"remote" is this machine, so a test checks that the tools' effects land in the remote working
directory and not in ra's own working directory."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.agent.permissions.rules import path_scoped
from ra.cli.config import ConfigError
from ra.cli.ssh import parse_destination
from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, run_ra, tool_messages
from tests.env.ssh.support import SshServer, running_sshd
from tests.support.replay import ReplayServer

DEAD = "http://127.0.0.1:9/v1"  # nothing listens: a run that got as far as the model would fail differently


def args(server: ReplayServer | None, *extra: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1" if server is not None else DEAD, "--model", "m", *extra]


# -- default lane: no sshd needed --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host", (None, "host", 22)),
        ("me@host:2222", ("me", "host", 2222)),
        ("a@b@host", ("a@b", "host", 22)),
        ("[::1]:2200", (None, "::1", 2200)),
        ("me@[fe80::1]", ("me", "fe80::1", 22)),
    ],
)
def test_destinations_are_read(text: str, expected: tuple[str | None, str, int]) -> None:
    assert parse_destination(text) == expected


@pytest.mark.parametrize("text", ["", "@host", "host:", "host:0", "host:70000", "host:x", "::1", "-oProxy=x", "a b"])
def test_bad_destinations_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--ssh|port"):
        parse_destination(text)


def test_a_bad_destination_exits_2(tmp_path: Path) -> None:
    result = run_ra(args(None, "--ssh", "host:99999", "go"), clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "--ssh 'host:99999': the port must be a number from 1 to 65535" in result.stderr


def test_ssh_flags_without_ssh_are_refused(tmp_path: Path) -> None:
    result = run_ra(args(None, "--ssh-dir", "/srv", "--ssh-key", "k", "go"), clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "--ssh-dir, --ssh-key only means something with --ssh" in result.stderr


def test_a_missing_key_file_is_named(tmp_path: Path) -> None:
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", "--ssh-key", str(tmp_path / "nokey"), "go"), clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert f"--ssh-key {tmp_path / 'nokey'}: no such file" in result.stderr


def test_the_sandbox_with_ssh_is_refused(tmp_path: Path) -> None:
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", "--sandbox", "read-only", "go"), clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "--ssh cannot run under the sandbox (read-only)" in result.stderr


def test_the_config_files_sandbox_with_ssh_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "ra.toml"
    config.write_text('sandbox_mode = "workspace-write"\n')
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", "go"), env)
    assert result.returncode == 2, result.stderr
    assert "--ssh cannot run under the sandbox (workspace-write)" in result.stderr


@pytest.mark.parametrize(
    ("flag", "rule"),
    [
        ("--allowed-tools", "Read(src/**)"),
        ("--disallowed-tools", "Read(./.env)"),
        ("--disallowed-tools", "read_file(//etc/**)"),
        ("--disallowed-tools", "Edit(secrets/**)"),
        ("--disallowed-tools", "*(.env)"),
    ],
)
def test_a_path_rule_with_ssh_is_refused(tmp_path: Path, flag: str, rule: str) -> None:
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", flag, rule, "go"), clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert f"--ssh: the permission rule {rule!r} names files" in result.stderr


def test_a_config_files_path_rule_with_ssh_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "ra.toml"
    config.write_text('disallowed_tools = ["Bash", "Read(~/.ssh/**)"]\n')
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", "go"), clean_env(tmp_path, RA_CONFIG=str(config)))
    assert result.returncode == 2, result.stderr
    assert "the permission rule 'Read(~/.ssh/**)' names files" in result.stderr


def test_which_rules_are_path_scoped() -> None:
    from ra.profiles.ra import create_ra_profile

    registry = create_ra_profile("m").tool_registry
    for rule in ("Read(src/**)", "Grep(/x)", "apply_patch(a/**)", "*(x)", "mcp__fs__read(/etc/**)", "list_dir(/x)"):
        assert path_scoped(rule, registry), rule
    for rule in ("Read", "Bash", "Edit", "Bash(git:*)", "shell_command(rm:*)", "WebFetch(domain:example.com)"):
        assert not path_scoped(rule, registry), rule
    # An agent type, a search query, a tool the profile does not have: no path is resolved.
    for rule in ("Task(reviewer)", "spawn_agent(reviewer)", "WebSearch(python)", "Nothing(x)"):
        assert not path_scoped(rule, registry), rule


def test_a_missing_asyncssh_names_the_install(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "asyncssh"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named asyncssh (shadowed by the test)')\n")
    env = clean_env(tmp_path)
    env["PYTHONPATH"] = f"{shadow.parent}:{env.get('PYTHONPATH', '')}"
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", "go"), env)
    assert result.returncode == 2, result.stderr
    assert "--ssh needs the asyncssh package: pip install 'ra-agent[ssh]'" in result.stderr


def test_a_host_that_does_not_answer_exits_2(tmp_path: Path) -> None:
    result = run_ra(args(None, "--ssh", "127.0.0.1:9", "go"), clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "--ssh 127.0.0.1:9: cannot connect to 127.0.0.1:9" in result.stderr


# -- slow lane: a real sshd ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with running_sshd(tmp_path_factory) as server:
        yield server


def ssh_flags(server: SshServer, remote: Path, known_hosts: Path | None = None) -> list[str]:
    return [
        "--ssh",
        f"root@127.0.0.1:{server.port}",
        "--ssh-dir",
        str(remote),
        "--ssh-known-hosts",
        str(known_hosts or server.known_hosts),
        "--ssh-key",
        str(server.client_key),
    ]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    local, remote = tmp_path / "local", tmp_path / "remote"
    local.mkdir()
    remote.mkdir()
    return local, remote


PATCH = "*** Begin Patch\n*** Add File: patched.txt\n+from the patch\n*** End Patch\n"


@pytest.mark.slow
def test_the_tools_run_in_the_remote_directory(
    sshd: SshServer, replay_server: ReplayServer, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    local, remote = dirs
    (remote / "notes.txt").write_text("remote needle\n")
    (local / "notes.txt").write_text("local only\n")
    # The ra profile runs one call per step.
    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "notes.txt"}))
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "pwd && echo made > shell.txt"}))
    enqueue_tools(replay_server, ("c3", "apply_patch", {"patch": PATCH}))
    enqueue_tools(replay_server, ("c4", "grep_files", {"pattern": "needle|from the"}))
    enqueue_text(replay_server, "done")
    sessions = tmp_path / "sessions"
    env = clean_env(tmp_path, RA_SESSIONS_DIR=str(sessions))
    result = run_ra(args(replay_server, *ssh_flags(sshd, remote), "go"), env, cwd=local)
    assert result.returncode == 0, result.stderr
    assert (remote / "shell.txt").read_text() == "made\n"
    assert (remote / "patched.txt").read_text() == "from the patch\n"
    assert not (local / "shell.txt").exists() and not (local / "patched.txt").exists()
    requests = chat_requests(replay_server)
    read, shell, _patch, grep = (m["content"] for m in tool_messages(requests[4]))
    assert "remote needle" in read and "local only" not in read
    assert str(remote) in shell
    assert "notes.txt" in grep and "patched.txt" in grep
    # What the user is shown says where the tools run.
    assert f"root@127.0.0.1:{sshd.port}:{remote} (over SSH)" in result.stderr
    # The context the model is given (cwd, AGENTS.md) is the remote's.
    assert str(remote) in json.dumps(requests[0]["messages"])
    # The record stays here; its header names the remote directory and the host it is on.
    (record,) = sessions.rglob("*.jsonl")
    head = json.loads(record.read_text().splitlines()[0])
    assert head["cwd"] == str(remote)
    assert head["ssh"] == f"root@127.0.0.1:{sshd.port}"


@pytest.mark.slow
def test_write_file_and_a_command_rule_over_ssh(
    sshd: SshServer, replay_server: ReplayServer, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    local, remote = dirs
    enqueue_tools(
        replay_server,
        ("c1", "write_file", {"file_path": "new.txt", "content": "written"}),
        ("c2", "shell", {"command": "echo allowed"}),
        ("c3", "shell", {"command": "touch denied.txt"}),
    )
    enqueue_text(replay_server, "done")
    flags = ["--profile", "anthropic", "--provider", "openai-compatible", "--permission-mode", "acceptEdits"]
    rules = ["--allowed-tools", "Bash(echo:*)"]
    result = run_ra(args(replay_server, *flags, *rules, *ssh_flags(sshd, remote), "go"), clean_env(tmp_path), cwd=local)
    assert result.returncode == 0, result.stderr
    assert (remote / "new.txt").read_text() == "written" and not (local / "new.txt").exists()
    assert not (remote / "denied.txt").exists()
    _wrote, allowed, denied = (m["content"] for m in tool_messages(chat_requests(replay_server)[1]))
    assert "allowed" in allowed
    assert "needs the user's permission" in denied


@pytest.mark.slow
def test_an_unknown_host_key_is_refused(
    sshd: SshServer, replay_server: ReplayServer, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    local, remote = dirs
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    wrong = tmp_path / "known_hosts"
    kind, key = other.with_suffix(".pub").read_text().split()[:2]
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {kind} {key}\n")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo ran > ran.txt"}))
    enqueue_text(replay_server, "done")
    for known in (wrong, None):
        flags = ssh_flags(sshd, remote, wrong)
        if known is None:  # no --ssh-known-hosts, and the (test) home has no ~/.ssh/known_hosts
            i = flags.index("--ssh-known-hosts")
            del flags[i : i + 2]
        result = run_ra(args(replay_server, *flags, "go"), clean_env(tmp_path), cwd=local)
        assert result.returncode == 2, result.stderr
        assert f"root@127.0.0.1:{sshd.port}" in result.stderr
        assert "is not trusted" in result.stderr and "refusing to connect" in result.stderr
    assert chat_requests(replay_server) == []
    assert not (remote / "ran.txt").exists() and not (local / "ran.txt").exists()


@pytest.mark.slow
def test_a_missing_remote_directory_exits_2(
    sshd: SshServer, replay_server: ReplayServer, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    local, remote = dirs
    result = run_ra(args(replay_server, *ssh_flags(sshd, remote / "nope"), "go"), clean_env(tmp_path), cwd=local)
    assert result.returncode == 2, result.stderr
    assert "working directory does not exist or is not a directory" in result.stderr
    assert chat_requests(replay_server) == []


@pytest.mark.slow
def test_hooks_run_here_in_ras_directory(
    sshd: SshServer, replay_server: ReplayServer, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    local, remote = dirs
    hook = 'cat > "$RA_PROJECT_DIR/hook-input.json"; pwd > hook-pwd.txt; echo "no rm" >&2; exit 2'
    config = tmp_path / "ra.toml"
    config.write_text(
        '[[hooks.PreToolUse]]\nmatcher = "shell_command"\n'
        f'hooks = [{{type = "command", command = {json.dumps(hook)}}}]\n'
    )
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch ran.txt"}))
    enqueue_text(replay_server, "done")
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    result = run_ra(args(replay_server, *ssh_flags(sshd, remote), "go"), env, cwd=local)
    assert result.returncode == 0, result.stderr
    assert (local / "hook-pwd.txt").read_text().strip() == str(local)
    assert json.loads((local / "hook-input.json").read_text())["cwd"] == str(remote)
    assert not (remote / "ran.txt").exists()
    (denied,) = tool_messages(chat_requests(replay_server)[1])
    assert "no rm" in denied["content"]


@pytest.mark.slow
def test_plan_mode_over_ssh_changes_nothing(
    sshd: SshServer, replay_server: ReplayServer, tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    local, remote = dirs
    enqueue_tools(replay_server, ("c1", "write_file", {"file_path": "new.txt", "content": "x"}))
    enqueue_text(replay_server, "done")
    flags = ["--profile", "anthropic", "--provider", "openai-compatible", "--permission-mode", "plan"]
    result = run_ra(args(replay_server, *flags, *ssh_flags(sshd, remote), "go"), clean_env(tmp_path), cwd=local)
    assert result.returncode == 0, result.stderr
    assert not (remote / "new.txt").exists() and not (local / "new.txt").exists()

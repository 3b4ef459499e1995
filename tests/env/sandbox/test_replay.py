"""``ra replay --sandbox MODE`` (and ``sandbox_mode`` in the config file), and the library's
``replay()`` on a sandboxed environment: a record from elsewhere replayed under real bwrap.

Each record is made by a real session (scripted model, real tools, unconfined) whose calls aim
outside the workspace: a file under /var/tmp (not /tmp, which workspace-write may write), a
server on 127.0.0.1, the workspace's ``.git/hooks``. The replay must refuse them, report the
difference (exit 1), and leave the host as it was.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.llm.testing import call, reply
from tests.cli.support import clean_env, run_ra
from tests.support.records import run_session, write_record

from .support import HostServer, host_server, outside_tree, require_bwrap, sandboxed

#: The slow lane (``pytest -m slow``, which CI runs): real bwrap sandboxes and real processes.
pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Iterator[HostServer]:
    """An HTTP server on 127.0.0.1 that counts the requests that reach it."""
    with host_server() as srv:
        yield srv


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_tree() as path:
        yield path


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def _python() -> str:
    # The interpreter behind the venv's link, isolated: read-only mode's private /tmp hides a venv
    # made under /tmp (as CI makes it), and this needs only the standard library.
    return shlex.quote(os.path.realpath(sys.executable))


def _escape_command(outside: Path, port: int) -> str:
    """A write into ``outside`` and a read from the host's 127.0.0.1, each saying how it went."""
    fetch = (
        "import urllib.request as u; opener = u.build_opener(u.ProxyHandler({})); "
        f"print('net', opener.open('http://127.0.0.1:{port}/', timeout=5).read().decode())"
    )
    return (
        f"echo leaked > {outside}/stolen.txt && echo wrote || echo write-failed; "
        f'{_python()} -I -c "{fetch}" 2>/dev/null || echo net-failed'
    )


def _record(tmp_path: Path, work: Path, script: list, *, cwd: Path | None = None) -> Path:
    """A real session's record (unconfined, in ``work``); ``cwd`` is what its header claims."""
    turns = asyncio.run(run_session(work, script, ["go"]))
    return write_record(tmp_path / "record.jsonl", turns, cwd=str(cwd or work))


def _replay(tmp_path: Path, work: Path, record: Path, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_ra(["replay", str(record), "--json", *flags], clean_env(tmp_path / "home", **env), cwd=work)


def test_workspace_write_refuses_a_write_outside_and_the_network(
    tmp_path: Path, work: Path, outside: Path, server: HostServer
) -> None:
    command = _escape_command(outside, server.server_address[1])
    # A record "from elsewhere": its header claims it was made in the directory it writes to.
    record = _record(tmp_path, work, [call("shell", _id="x1", command=command), reply("done")], cwd=outside)
    stolen = outside / "stolen.txt"
    assert stolen.exists() and server.hits == 1  # the recorded run did both
    stolen.unlink()
    server.hits = 0

    done = _replay(tmp_path, work, record, "--sandbox", "workspace-write")
    assert done.returncode == 1, done.stderr
    assert not stolen.exists() and server.hits == 0  # nothing escaped
    [diff] = json.loads(done.stdout)["differences"]
    assert (diff["kind"], diff["step"], diff["tool"]) == ("result", 1, "shell")
    assert "wrote" in diff["recorded"]["content"] and "net from-the-host" in diff["recorded"]["content"]
    now = diff["now"]["content"]
    assert "write-failed" in now and "net-failed" in now and "from-the-host" not in now
    assert f"the record was made in {outside}; replaying in {work}" in done.stderr

    # Without --sandbox the same record runs as it always did: unconfined.
    plain = _replay(tmp_path, work, record)
    assert plain.returncode == 0, plain.stdout
    assert stolen.exists() and server.hits == 1


def test_read_only_refuses_writes_in_the_workspace_too(tmp_path: Path, work: Path) -> None:
    require_bwrap()
    script = [
        call("shell", _id="x1", command="echo made > in-ws.txt && echo wrote || echo write-failed"),
        call("write_file", _id="x2", file_path="tool.txt", content="x"),
        reply("done"),
    ]
    record = _record(tmp_path, work, script)
    made = [work / "in-ws.txt", work / "tool.txt"]
    for path in made:
        path.unlink()

    done = _replay(tmp_path, work, record, "--sandbox", "read-only")
    assert done.returncode == 1, done.stderr
    assert not any(path.exists() for path in made)
    shell, tool = json.loads(done.stdout)["differences"]
    assert (shell["kind"], shell["tool"], tool["kind"], tool["tool"]) == ("result", "shell", "result", "write_file")
    assert "write-failed" in shell["now"]["content"]
    assert "sandbox (read-only)" in tool["now"]["content"] and tool["now"]["is_error"]

    # workspace-write: the directory replayed in is the workspace, and the same record matches.
    ws = _replay(tmp_path, work, record, "--sandbox", "workspace-write")
    assert ws.returncode == 0, ws.stdout
    assert all(path.exists() for path in made)


def test_workspace_write_keeps_git_hooks_read_only(tmp_path: Path, work: Path) -> None:
    """A replay runs in a checkout; a hook planted there would run unconfined at the next commit."""
    require_bwrap()
    hooks = work / ".git" / "hooks"
    hooks.mkdir(parents=True)
    script = [
        call("shell", _id="x1", command="echo evil > .git/hooks/pre-commit && echo planted || echo refused"),
        call("write_file", _id="x2", file_path=".git/hooks/post-checkout", content="evil"),
        reply("done"),
    ]
    record = _record(tmp_path, work, script)
    for name in ("pre-commit", "post-checkout"):
        (hooks / name).unlink()

    done = _replay(tmp_path, work, record, "--sandbox", "workspace-write")
    assert done.returncode == 1, done.stderr
    assert list(hooks.iterdir()) == []
    shell, tool = json.loads(done.stdout)["differences"]
    assert "refused" in shell["now"]["content"] and tool["now"]["is_error"]


def test_the_config_files_sandbox_mode_applies_and_the_flag_wins(tmp_path: Path, work: Path) -> None:
    require_bwrap()
    script = [call("shell", _id="x1", command="echo made > in-ws.txt && echo wrote || echo write-failed"), reply("ok")]
    record = _record(tmp_path, work, script)
    made = work / "in-ws.txt"
    made.unlink()
    config = tmp_path / "ra.toml"
    config.write_text('sandbox_mode = "read-only"\n')

    confined = _replay(tmp_path, work, record, RA_CONFIG=str(config))
    assert confined.returncode == 1 and not made.exists(), confined.stderr
    # The flag over the file, both ways: a looser mode, and no sandbox at all.
    for mode in ("workspace-write", "danger-full-access"):
        loose = _replay(tmp_path, work, record, "--sandbox", mode, RA_CONFIG=str(config))
        assert loose.returncode == 0 and made.exists(), (mode, loose.stdout, loose.stderr)
        made.unlink()


def test_the_config_files_workspace_write_table_applies(
    tmp_path: Path, work: Path, outside: Path, server: HostServer
) -> None:
    """``[sandbox_workspace_write]`` opens what it names (network, a writable root) and nothing more."""
    root, other = outside / "root", outside / "other"
    root.mkdir()
    other.mkdir()
    command = f"{_escape_command(root, server.server_address[1])}; echo x > {other}/f && echo wrote-2 || echo refused-2"
    record = _record(tmp_path, work, [call("shell", _id="x1", command=command), reply("done")])
    stolen = root / "stolen.txt"
    stolen.unlink()
    (other / "f").unlink()
    server.hits = 0
    config = tmp_path / "ra.toml"
    config.write_text(
        f'sandbox_mode = "workspace-write"\n[sandbox_workspace_write]\nnetwork_access = true\n'
        f'writable_roots = ["{root}"]\n'
    )
    opened = _replay(tmp_path, work, record, RA_CONFIG=str(config))
    assert opened.returncode == 1, opened.stderr
    assert stolen.exists() and server.hits == 1 and not (other / "f").exists()
    [diff] = json.loads(opened.stdout)["differences"]
    now = diff["now"]["content"]
    assert "wrote\nnet from-the-host\n" in now and "refused-2" in now and "wrote-2" not in now

    # The same table under a read-only flag: not used (said on stderr), everything refused.
    stolen.unlink()
    closed = _replay(tmp_path, work, record, "--sandbox", "read-only", RA_CONFIG=str(config))
    assert closed.returncode == 1
    assert not stolen.exists() and server.hits == 1
    assert "applies to the workspace-write mode only; not used" in closed.stderr


def _without_bwrap(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` run where no bwrap can be found: every bwrap in the usual places hidden behind
    /dev/null (a real bwrap does the hiding, in a namespace of its own)."""
    real = require_bwrap()
    hidden = {os.path.realpath(real), real, "/usr/bin/bwrap"}
    masks = [arg for path in sorted(hidden) if os.path.exists(path) for arg in ("--ro-bind", "/dev/null", path)]
    return subprocess.run(
        [real, "--dev-bind", "/", "/", *masks, "--", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_missing_bwrap_is_the_same_clear_error_as_for_ra(tmp_path: Path, work: Path) -> None:
    from tests.cli.support import ra_command

    record = _record(tmp_path, work, [call("shell", _id="x1", command="touch ran"), reply("ok")])
    (work / "ran").unlink()
    env = clean_env(tmp_path / "home")
    run_args = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--sandbox", "read-only", "go"]
    ra = _without_bwrap([*ra_command(), *run_args], env, work)
    replayed = _without_bwrap([*ra_command(), "replay", str(record), "--sandbox", "read-only"], env, work)
    assert ra.returncode == replayed.returncode == 2, (replayed.stdout, replayed.stderr)
    assert replayed.stderr == ra.stderr
    assert "--sandbox read-only: the sandbox needs bubblewrap (bwrap), which is not installed" in replayed.stderr
    # The config file's sandbox_mode, the same way.
    config = tmp_path / "ra.toml"
    config.write_text('sandbox_mode = "workspace-write"\n')
    from_config = _without_bwrap([*ra_command(), "replay", str(record)], {**env, "RA_CONFIG": str(config)}, work)
    assert from_config.returncode == 2
    assert "--sandbox workspace-write: the sandbox needs bubblewrap" in from_config.stderr
    assert not (work / "ran").exists()  # nothing ran


def test_the_library_replays_on_a_sandboxed_environment(tmp_path: Path, work: Path, outside: Path) -> None:
    """``replay(execution_env=SandboxedExecutionEnvironment(...))``: the recorded calls run confined."""
    from ra.agent.replay import replay
    from ra.env.local import LocalExecutionEnvironment
    from tests.support.records import config, profile

    target = outside / "stolen.txt"
    script = [
        call("shell", _id="x1", command=f"echo leaked > {target} && echo wrote || echo write-failed"),
        call("write_file", _id="x2", file_path=str(outside / "tool.txt"), content="x"),
        reply("done"),
    ]
    turns = asyncio.run(run_session(work, script, ["go"]))
    for path in (target, outside / "tool.txt"):
        path.unlink()

    async def run(env: object) -> object:
        return await asyncio.wait_for(replay(turns, profile=profile(), execution_env=env, config=config()), 60)

    report = asyncio.run(run(sandboxed(work, "workspace-write")))
    assert not report.ok and [d.tool for d in report.differences] == ["shell", "write_file"]
    assert not target.exists() and not (outside / "tool.txt").exists()
    unconfined = asyncio.run(run(LocalExecutionEnvironment(work)))
    assert unconfined.ok and target.exists()


def test_a_subagent_of_a_replayed_record_is_sandboxed_too(tmp_path: Path, work: Path, outside: Path) -> None:
    """The subagent, answered from its own record, runs its commands in the replay's environment:
    its write outside the workspace is refused under --sandbox, as the parent's would be."""
    from ra.agent.store import FileSessionStore
    from tests.support.records import parent_script, record_tree

    sessions = tmp_path / "sessions"
    stolen = outside / "by-the-subagent.txt"
    child = [call("shell", _id="c1", command=f"echo leaked > {stolen} && echo wrote"), reply("written")]
    scripts = {"delegate": parent_script("go"), "go": child}  # by each agent's first message
    session_id = asyncio.run(record_tree(work, FileSessionStore(sessions), scripts))
    assert stolen.exists()  # the recorded run wrote it
    stolen.unlink()
    env = clean_env(tmp_path / "home", RA_SESSIONS_DIR=str(sessions))
    done = run_ra(["replay", session_id, "--json", "--sandbox", "workspace-write"], env, cwd=work)
    assert done.returncode == 1, done.stderr
    assert not stolen.exists()
    [diff] = [d for d in json.loads(done.stdout)["differences"] if d.get("subagent")]
    assert (diff["kind"], diff["tool"]) == ("result", "shell") and "wrote" not in diff["now"]["content"]

"""SshExecutionEnvironment against a real sshd on 127.0.0.1: what the conformance kit does not cover.

The remote is this machine, so a test can look at the remote's process table directly: each
command that must die carries a unique marker in its command line, and ``/proc`` is searched for
it afterwards (zombies, already dead, do not count).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ra.agent import Session, SessionConfig
from ra.env.ssh import SshConnectionError, SshExecutionEnvironment
from ra.llm.client import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.profiles import create_anthropic_profile

from .support import SshServer, require_sshd

#: The slow lane (``pytest -m slow``, which CI runs): a real sshd per module.
pytestmark = pytest.mark.slow


def live_with(marker: str) -> list[int]:
    """PIDs of live processes whose command line holds ``marker`` (zombies have none)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


async def wait_gone(marker: str, seconds: float = 5.0) -> list[int]:
    """The processes still marked after up to ``seconds``."""
    for _ in range(int(seconds / 0.05)):
        if not live_with(marker):
            break
        await asyncio.sleep(0.05)
    return live_with(marker)


async def wait_running(marker: str, count: int, seconds: float = 5.0) -> int:
    """How many marked processes run, once ``count`` do or ``seconds`` have passed."""
    for _ in range(int(seconds / 0.05)):
        if len(live_with(marker)) >= count:
            break
        await asyncio.sleep(0.05)
    return len(live_with(marker))


def created_anywhere(name: str, tree: Path) -> list[str]:
    """Where a file ``name`` exists: in ``tree``, the home directory, or /."""
    places = [str(Path.home()), "/", *(root for root, _, _ in os.walk(tree))]
    return [p for p in places if os.path.exists(os.path.join(p, name))]


def make_env(server: SshServer, root: Path, **options: object) -> SshExecutionEnvironment:
    kwargs: dict[str, object] = {**server.environment_kwargs(), "working_directory": str(root), "kill_grace_ms": 300}
    kwargs.update(options)
    return SshExecutionEnvironment(**kwargs)  # type: ignore[arg-type]


def tree_script(marker: str) -> str:
    """A command with a child in its group and a setsid child that ignores SIGTERM, each marked."""
    return (
        f"sh -c 'sleep 300; : {marker}-group' & "
        f"setsid sh -c 'trap \"\" TERM; sleep 300; : {marker}-setsid' & "
        "echo started; sleep 300"
    )


async def test_smoke_files_commands_and_search(sshd: SshServer, tmp_path: Path) -> None:
    """The fast check of the default run (the full kit is in test_conformance)."""
    async with make_env(sshd, tmp_path) as env:
        assert env.platform() == "linux" and env.os_version().startswith("Linux ")
        await env.write_file("src/a.py", "x = 1\nneedle = 2\n")
        assert (tmp_path / "src/a.py").read_text() == "x = 1\nneedle = 2\n"
        assert await env.read_file("src/a.py", 2, 1) == "2 | needle = 2"
        result = await env.exec_command("cat src/a.py | wc -l; echo oops >&2; exit 4")
        assert (result.stdout.strip(), result.stderr, result.exit_code) == ("2", "oops\n", 4)
        assert await env.grep("needle", "src") == f"{tmp_path}/src/a.py:2:needle = 2"
        assert await env.glob("**/*.py") == [f"{tmp_path}/src/a.py"]


async def test_output_past_the_cap_is_copied_to_the_remote_and_removed_by_cleanup(
    sshd: SshServer, tmp_path: Path
) -> None:
    async with make_env(sshd, tmp_path, output_memory_cap=4096) as env:
        result = await env.exec_command("seq 1 20000")
        spill = result.full_output_path
        assert spill is not None and spill.startswith("/tmp/ra-output-") and spill in result.stdout
        assert result.total_bytes == len("".join(f"{i}\n" for i in range(1, 20001)))
        assert await env.read_file(spill, 12345, 1) == "12345 | 12345"
        assert await asyncio.to_thread(os.path.isfile, spill)  # on the remote, which is this machine
    assert not await asyncio.to_thread(os.path.exists, os.path.dirname(spill))


def test_missing_programs_fail_instead_of_skipping_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    from . import support

    monkeypatch.setattr(support, "SSHD", "/nonexistent/sshd")
    monkeypatch.setenv("RA_TEST_REQUIRE_PROGRAMS", "1")
    with pytest.raises(pytest.fail.Exception, match="RA_TEST_REQUIRE_PROGRAMS is set but sshd"):
        require_sshd()
    monkeypatch.delenv("RA_TEST_REQUIRE_PROGRAMS")
    with pytest.raises(pytest.skip.Exception, match="sshd or ssh-keygen is not installed"):
        require_sshd()


async def test_a_timeout_kills_the_whole_remote_tree(sshd: SshServer, tmp_path: Path) -> None:
    marker = f"ra-ssh-timeout-{secrets.token_hex(4)}"
    async with make_env(sshd, tmp_path) as env:
        started = time.monotonic()
        result = await env.exec_command(tree_script(marker), timeout_ms=800)
        assert result.timed_out and result.stdout.startswith("started\n")
        assert "timed out after 800ms" in result.stdout
        assert time.monotonic() - started < 5
        assert await wait_gone(marker, 2.0) == [], "processes of the timed-out command survived on the remote"


async def test_abort_stops_the_remote_tree_and_the_env_keeps_working(sshd: SshServer, tmp_path: Path) -> None:
    marker = f"ra-ssh-abort-{secrets.token_hex(4)}"
    async with make_env(sshd, tmp_path) as env:
        task = asyncio.create_task(env.exec_command(tree_script(marker), timeout_ms=60_000))
        assert await wait_running(marker, 2) == 2
        await asyncio.wait_for(env.terminate_all(), 10)
        result = await asyncio.wait_for(task, 10)
        assert result.aborted and not result.timed_out
        assert await wait_gone(marker, 2.0) == []
        assert (await env.exec_command("echo again")).stdout == "again\n"


async def test_host_secrets_never_reach_the_remote_even_if_sshd_and_ssh_config_would_pass_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sshd accepts every variable (AcceptEnv *) and ~/.ssh/config asks to send every variable
    (SendEnv *): still nothing of the host's environment arrives, secret-named or not."""
    require_sshd()
    server = SshServer(tmp_path / "sshd")
    config = server.config()
    config.write_text(config.read_text() + "AcceptEnv *\n")
    server.config = lambda: config  # type: ignore[method-assign]
    server.start()
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host *\n  SendEnv *\n  SetEnv RA_SETENV_TOKEN=from-config\n")
    secret, plain = secrets.token_hex(8), secrets.token_hex(8)
    monkeypatch.setenv("RA_HOST_API_KEY", secret)
    monkeypatch.setenv("LC_RA_HOST_PLAIN", plain)  # a locale-looking name sshd configs often accept
    work = tmp_path / "work"
    work.mkdir()
    try:
        async with make_env(server, work, ssh_config=[str(ssh_config)]) as env:
            dump = (await env.exec_command("env")).stdout
            assert secret not in dump and plain not in dump and "from-config" not in dump
            assert "RA_PROCESS_COOKIE=" in dump and "PATH=" in dump  # the remote's own environment is there
            given = await env.exec_command('printf %s "$RA_GIVEN_TOKEN"', env_vars={"RA_GIVEN_TOKEN": "on-purpose"})
            assert given.stdout == "on-purpose"
    finally:
        server.stop()


async def test_remote_secrets_are_filtered_by_the_same_policy(tmp_path: Path) -> None:
    """The remote's own environment (here set by sshd's SetEnv) gets the local policy: secret-looking
    names are dropped by default, kept with exclude_secrets=False; core_only keeps only core names."""
    require_sshd()
    server = SshServer(tmp_path / "sshd")
    config = server.config()
    extra = "SetEnv SHLVL=1 REMOTE_API_KEY=rk-123 REMOTE_PLAIN=p1"
    config.write_text(config.read_text().replace("SetEnv SHLVL=1", extra))
    server.config = lambda: config  # type: ignore[method-assign]
    server.start()
    work = tmp_path / "work"
    work.mkdir()
    probe = 'printf "%s|%s" "$REMOTE_API_KEY" "$REMOTE_PLAIN"'
    try:
        async with make_env(server, work) as env:
            assert (await env.exec_command(probe)).stdout == "|p1"
        async with make_env(server, work, exclude_secrets=False) as env:
            assert (await env.exec_command(probe)).stdout == "rk-123|p1"
        async with make_env(server, work, env_policy="core_only") as env:
            result = await env.exec_command(probe + '; printf "|%s" "$HOME"')
            assert result.stdout == "||/root"
    finally:
        server.stop()


async def test_variables_are_not_on_any_remote_command_line(tmp_path: Path) -> None:
    """Other users of the remote can read every process's command line: the variables a command
    gets (env_vars, extra_env, the filtered login environment) travel on the channel's stdin. The
    login shell's own command line - what sshd ran - is recorded through BASH_ENV, which bash
    sources before it runs anything."""
    require_sshd()
    seen = tmp_path / "cmdlines"
    hook = tmp_path / "record.sh"
    hook.write_text(f"tr '\\0' ' ' < /proc/$$/cmdline >> {seen}; echo >> {seen}\n")
    server = SshServer(tmp_path / "sshd")
    config = server.config()
    config.write_text(config.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 BASH_ENV={hook}"))
    server.config = lambda: config  # type: ignore[method-assign]
    server.start()
    work = tmp_path / "work"
    work.mkdir()
    given, extra = secrets.token_hex(8), secrets.token_hex(8)
    try:
        async with make_env(server, work, extra_env={"RA_EXTRA_TOKEN": extra}) as env:
            result = await env.exec_command(
                'printf "%s %s" "$RA_GIVEN_TOKEN" "$RA_EXTRA_TOKEN"', env_vars={"RA_GIVEN_TOKEN": given}
            )
            assert result.stdout == f"{given} {extra}"
        recorded = seen.read_text()
        assert "exec /bin/sh -c" in recorded  # the launcher's command line was recorded ...
        assert given not in recorded and extra not in recorded  # ... without the values
    finally:
        server.stop()


async def test_shell_syntax_in_paths_values_and_patterns_is_data(sshd: SshServer, tmp_path: Path) -> None:
    """Everything reaches the remote shell quoted: a directory, a variable, a file name or a grep
    pattern holding shell syntax is taken as it is, and runs nothing."""
    canary = f"ra-pwned-{secrets.token_hex(4)}"  # relative: created wherever an injected shell runs
    evil = f"$(touch {canary})`touch {canary}`;touch {canary}"
    weird = f"d '{evil}\" x"
    async with make_env(sshd, tmp_path) as env:
        await env.write_file(f"{weird}/f.txt", f"{evil}\n")
        result = await env.exec_command(
            'printf "%s|" "$RA_VALUE" "$(pwd)"',
            working_dir=weird,
            env_vars={"RA_VALUE": f"'{evil}\n\"$HOME"},
        )
        assert result.stdout == f"'{evil}\n\"$HOME|{tmp_path}/{weird}|"
        await env.move_file(f"{weird}/f.txt", f"{weird}/{evil}.txt")
        assert await env.grep(evil.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)"), weird) == (
            f"{tmp_path}/{weird}/{evil}.txt:1:{evil}"
        )
        assert await env.glob("*.txt", weird) == [f"{tmp_path}/{weird}/{evil}.txt"]
    assert created_anywhere(canary, tmp_path) == []


async def test_a_wrong_host_key_is_refused(sshd: SshServer, tmp_path: Path) -> None:
    other = SshServer(tmp_path / "other")  # only its keys: a known_hosts entry for another key
    wrong = tmp_path / "known_hosts"
    wrong.write_text(other.known_hosts.read_text().replace(f":{other.port}]", f":{sshd.port}]"))
    env = make_env(sshd, tmp_path, known_hosts=str(wrong))
    with pytest.raises(SshConnectionError, match=r"host key of root@127\.0\.0\.1:\d+ is not trusted"):
        await env.initialize()
    # The error is a ConnectionError (an OSError): the tools report it like a failed call.
    with pytest.raises(ConnectionError):
        await env.exec_command("echo never")


async def test_a_key_the_host_does_not_know_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    stranger = SshServer(tmp_path / "stranger")  # only for its client key, which sshd does not accept
    env = make_env(sshd, tmp_path, client_keys=[str(stranger.client_key)])
    with pytest.raises(SshConnectionError, match=r"authentication to root@127\.0\.0\.1:\d+ failed"):
        await asyncio.wait_for(env.initialize(), 20)


async def test_an_unknown_host_is_refused_when_no_known_hosts_file_exists(
    sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/known_hosts: nothing is trusted
    env = make_env(sshd, tmp_path, known_hosts=None, ssh_config=[])
    with pytest.raises(SshConnectionError, match="not trusted"):
        await env.initialize()


def test_a_missing_known_hosts_file_is_an_error_at_once(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="known_hosts file not found"):
        SshExecutionEnvironment("127.0.0.1", known_hosts=str(tmp_path / "nope"))


def test_without_asyncssh_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "asyncssh", None)
    with pytest.raises(ImportError, match=r"pip install 'ra-agent\[ssh\]'"):
        SshExecutionEnvironment("127.0.0.1")


async def test_connecting_is_bounded_when_the_peer_never_speaks(tmp_path: Path) -> None:
    """A port that accepts but never sends an SSH banner: initialize() fails within its timeout."""
    require_sshd()
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    known = tmp_path / "known_hosts"
    known.write_text("")
    env = SshExecutionEnvironment("127.0.0.1", port=port, known_hosts=str(known), connect_timeout_s=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(SshConnectionError, match="within 1 s"):
            await env.initialize()
        assert time.monotonic() - started < 5
    finally:
        for writer in accepted:
            writer.close()
        server.close()


async def test_nothing_listening_is_a_clear_error(tmp_path: Path) -> None:
    require_sshd()
    known = tmp_path / "known_hosts"
    known.write_text("")
    with socket_port() as port:
        pass  # the port is free again: nothing listens on it
    env = SshExecutionEnvironment("127.0.0.1", port=port, known_hosts=str(known), connect_timeout_s=5.0)
    with pytest.raises(SshConnectionError, match=r"cannot connect to 127\.0\.0\.1"):
        await env.initialize()


def socket_port():  # type: ignore[no-untyped-def]
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))

    class _Port:
        def __enter__(self) -> int:
            return int(sock.getsockname()[1])

        def __exit__(self, *exc: object) -> None:
            sock.close()

    return _Port()


async def test_a_killed_sshd_mid_command_is_a_clear_error_and_the_next_call_reconnects(tmp_path: Path) -> None:
    require_sshd()
    server = SshServer(tmp_path / "sshd").start()
    marker = f"ra-ssh-dropped-{secrets.token_hex(4)}"
    work = tmp_path / "work"
    work.mkdir()
    env = make_env(server, work)
    try:
        await env.initialize()
        task = asyncio.create_task(env.exec_command(f"echo started; sh -c 'sleep 300; : {marker}'", timeout_ms=60_000))
        assert await wait_running(marker, 1) == 1
        server.kill()
        started = time.monotonic()
        with pytest.raises(
            SshConnectionError, match=r"connection to root@127\.0\.0\.1:\d+ was lost while the command ran"
        ):
            await asyncio.wait_for(task, 10)
        assert time.monotonic() - started < 5
        # The command outlived its connection (sshd's death does not kill it) ...
        assert live_with(marker)
        # ... a file call while sshd is down fails clearly ...
        with pytest.raises(SshConnectionError, match="cannot connect"):
            await asyncio.wait_for(env.read_file("x"), 20)
        # ... and once sshd is back, the next call reconnects and first stops what was left running.
        server.start()
        await env.write_file("after.txt", "back\n")
        assert await env.read_file("after.txt") == "1 | back"
        assert await wait_gone(marker, 3.0) == []
    finally:
        await env.cleanup()
        server.stop()


async def test_working_directory_defaults_to_the_remote_home(sshd: SshServer) -> None:
    kwargs = sshd.environment_kwargs()
    async with SshExecutionEnvironment(**kwargs) as env:  # type: ignore[arg-type]
        assert env.working_directory() == "/root"
        assert (await env.exec_command("pwd")).stdout == "/root\n"
    with pytest.raises(RuntimeError, match="initialize"):
        SshExecutionEnvironment(**kwargs).working_directory()  # type: ignore[arg-type]


async def test_a_missing_working_directory_is_refused_at_initialize(sshd: SshServer, tmp_path: Path) -> None:
    env = make_env(sshd, tmp_path / "missing")
    with pytest.raises(NotADirectoryError, match="working directory does not exist"):
        await env.initialize()


async def test_write_file_replaces_atomically_and_keeps_the_mode(sshd: SshServer, tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    target.chmod(0o751)
    before = target.stat().st_ino
    async with make_env(sshd, tmp_path) as env:
        await env.write_file("run.sh", "#!/bin/sh\necho new\n")
    assert target.read_text() == "#!/bin/sh\necho new\n"
    assert target.stat().st_mode & 0o777 == 0o751
    assert target.stat().st_ino != before  # a new file renamed over the old one
    assert os.listdir(tmp_path) == ["run.sh"]  # no temporary file left behind


async def test_a_session_reads_edits_and_runs_commands_over_ssh(sshd: SshServer, tmp_path: Path) -> None:
    """The scripted model drives the real tools; every one goes through the SSH environment."""
    (tmp_path / "app.py").write_text("def greet():\n    return 'hello'\n")
    script = [
        call("read_file", file_path="app.py"),
        call("edit_file", file_path="app.py", old_string="'hello'", new_string="'hello, ssh'"),
        call("shell", command="python3 -c 'import app; print(app.greet())'"),
        call("grep", pattern="greet", path="."),
        reply("done"),
    ]
    model = ScriptedAdapter(script)
    async with make_env(sshd, tmp_path) as env:
        client = Client(providers={"anthropic": model})
        session = Session(create_anthropic_profile(model="m"), env, client, SessionConfig())
        result = await session.submit("make it greet over ssh")
    assert result.stop_reason == "completed"
    assert (tmp_path / "app.py").read_text() == "def greet():\n    return 'hello, ssh'\n"
    outputs = [m.content[0].tool_result.content for m in model.requests[-1].messages if m.role == "tool"]  # type: ignore[union-attr]
    assert "1 | def greet():" in outputs[0]
    assert "hello, ssh" in outputs[2]
    assert outputs[3] == f"{tmp_path}/app.py"  # grep's default mode lists the files


@pytest.mark.parametrize("backend", ["rg", "grep"])
async def test_grep_output_matches_the_local_environment(sshd: SshServer, tmp_path: Path, backend: str) -> None:
    """Remote ripgrep and the GNU grep fallback give what the local environment gives, byte for byte
    (a tree without ignore files: the fallback does not read them)."""
    from ra.env import GrepOptions, LocalExecutionEnvironment
    from ra.env.search import find_ripgrep

    rg = find_ripgrep()
    if backend == "rg" and rg is None:
        pytest.skip("no rg on this machine")
    files = {
        "a.txt": "alpha\nneedle one\nbeta\ngamma\nNeedle two\n",
        "sub/b.py": "x = 'needle'\n# needle again\n",
        "sub/deeper/c.md": "no match\n",
        ".hidden/h.txt": "needle hidden\n",
        "z-last.txt": "".join(f"needle {i}\n" for i in range(30)),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "blob.bin").write_bytes(b"needle\0binary\n")
    local = LocalExecutionEnvironment(tmp_path)
    cases = [
        ("needle", None, GrepOptions()),
        ("needle", None, GrepOptions(case_insensitive=True, context_lines=1)),
        ("needle", "sub", GrepOptions(glob_filter="*.py")),
        ("needle", None, GrepOptions(output_mode="files_with_matches")),
        ("needle", None, GrepOptions(output_mode="count")),
        ("needle", None, GrepOptions(max_results=5)),
        ("needle", "blob.bin", GrepOptions()),
        ("needle", "blob.bin", GrepOptions(output_mode="count")),
        (r"needle \d+$", "z-last.txt", GrepOptions(max_results=3)),
    ]
    async with make_env(sshd, tmp_path, ripgrep=rg if backend == "rg" else None) as env:
        for pattern, path, options in cases:
            expected = await local.grep(pattern, path, options)
            assert await env.grep(pattern, path, options) == expected, (pattern, options)


@pytest.mark.parametrize("tree", ["fake note", "genuine note", "both"])
async def test_grep_reads_note_shaped_names_as_the_local_environment(
    sshd: SshServer, tmp_path: Path, tree: str
) -> None:
    """Remote ripgrep's plain output, where a directory is named like its note about binary data:
    what the local environment gives (a directory's note followed by more goes to the JSON search)."""
    from ra.env import GrepOptions, LocalExecutionEnvironment
    from ra.env.search import find_ripgrep

    from ..test_search_names import TREES, note_name

    rg = find_ripgrep()
    if rg is None:
        pytest.skip("no rg on this machine")
    root = TREES[tree](tmp_path / "t")
    local = LocalExecutionEnvironment(root, grep_backend="python")
    cases = [
        (None, GrepOptions()),
        (None, GrepOptions(context_lines=1)),
        (None, GrepOptions(max_results=1)),
        (None, GrepOptions(max_results=2, context_lines=1)),
        (None, GrepOptions(output_mode="count")),
        (None, GrepOptions(output_mode="files_with_matches")),
    ]
    if tree == "fake note":
        cases.append((f"{note_name(5)}/r/foo", GrepOptions()))  # a file named on its own
    async with make_env(sshd, root, ripgrep=rg) as env:
        for path, options in cases:
            assert await env.grep("hit", path, options) == await local.grep("hit", path, options), (path, options)


async def test_grep_of_a_directory_reads_remote_ripgreps_grouped_output(sshd: SshServer, tmp_path: Path) -> None:
    """Content without context lines comes grouped by file (each path once over the connection);
    a path holding a newline sends the search to the per-line form, with the same result."""
    from ra.env import GrepOptions, LocalExecutionEnvironment
    from ra.env.search import find_ripgrep

    rg = find_ripgrep()
    if rg is None:
        pytest.skip("no rg on this machine")
    for i in range(20):
        (tmp_path / f"d{i % 3}").mkdir(exist_ok=True)
        (tmp_path / f"d{i % 3}" / f"f{i}.txt").write_text("".join(f"hit {i} {j}\nmiss\n" for j in range(50)))
    local = LocalExecutionEnvironment(tmp_path)
    async with make_env(sshd, tmp_path, ripgrep=rg) as env:
        sent: list[list[str]] = []
        stream = env._stream

        async def recording(argv: list[str], *args: Any, **kwargs: Any) -> Any:
            sent.append(argv)
            return await stream(argv, *args, **kwargs)

        env._stream = recording  # type: ignore[method-assign]
        for options in (GrepOptions(max_results=10_000), GrepOptions(max_results=7)):
            assert await env.grep("hit", None, options) == await local.grep("hit", None, options)
        assert [("--heading" in argv, "--no-heading" in argv) for argv in sent] == [(True, False)] * 2
        (tmp_path / "d1" / "odd\nname.txt").write_text("hit odd\n")
        sent.clear()
        options = GrepOptions(max_results=10_000)
        assert await env.grep("hit", None, options) == await local.grep("hit", None, options)
        assert [("--heading" in argv, "--no-heading" in argv) for argv in sent] == [(True, False), (False, True)]

"""Escape attempts, as a model would try them, against real bwrap sandboxes and real processes.

Each test aims at a file outside the writable roots (a directory under /var/tmp: not /tmp, which
workspace-write may write) or at a guarded path, through the shell and through the file tools,
and checks on the host that nothing changed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.env import ExecResult
from ra.env.sandbox import SandboxedExecutionEnvironment

from .support import host_server, outside_tree, sandboxed

#: The slow lane (``pytest -m slow``, which CI runs): real bwrap sandboxes and real processes.
pytestmark = pytest.mark.slow


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_tree() as path:
        yield path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _shell(env: SandboxedExecutionEnvironment, command: str) -> str:
    try:
        result = await env.exec_command(command, timeout_ms=20_000)
    finally:
        await env.cleanup()
    return result.output


# -- writing outside: the shell -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_shell_cannot_write_outside_by_absolute_path_or_dotdot(ws: Path, outside: Path, mode: str) -> None:
    rel = os.path.relpath(outside / "dotdot", ws)
    out = run(
        _shell(
            sandboxed(ws, mode),
            f"echo x > {outside}/abs; echo x > {rel}; cp /etc/hostname {outside}/cp; mkdir {outside}/d; "
            f"touch /etc/ra-sandbox-probe /usr/ra-sandbox-probe; echo done",
        )
    )
    assert "done" in out and "Read-only file system" in out
    assert list(outside.iterdir()) == []
    assert not os.path.exists("/etc/ra-sandbox-probe") and not os.path.exists("/usr/ra-sandbox-probe")


def test_read_only_mode_writes_nothing_but_its_private_tmp(ws: Path) -> None:
    marker = f"ra-sandbox-private-{os.getpid()}"
    out = run(
        _shell(
            sandboxed(ws, "read-only"),
            f"touch inside || echo ws-refused; echo x > /tmp/{marker} && cat /tmp/{marker} && echo tmp-ok",
        )
    )
    assert "ws-refused" in out and "tmp-ok" in out
    assert not (ws / "inside").exists()
    assert not os.path.exists(f"/tmp/{marker}")  # the /tmp it wrote to was its own


def test_workspace_write_writes_the_workspace_and_tmp(ws: Path) -> None:
    marker = f"/tmp/ra-sandbox-shared-{os.getpid()}"
    try:
        out = run(_shell(sandboxed(ws, "workspace-write"), f"echo a > made && echo b > {marker} && echo ok"))
        assert out == "ok\n"
        assert (ws / "made").read_text() == "a\n" and Path(marker).read_text() == "b\n"
    finally:
        Path(marker).unlink(missing_ok=True)


def test_writable_roots_are_writable_and_nothing_next_to_them(ws: Path, outside: Path) -> None:
    (outside / "extra").mkdir()
    env = sandboxed(ws, "workspace-write", writable_roots=(str(outside / "extra"),))
    out = run(_shell(env, f"echo a > {outside}/extra/f && echo ok; echo b > {outside}/g"))
    assert "ok" in out and (outside / "extra" / "f").read_text() == "a\n"
    assert not (outside / "g").exists()


def test_symlinks_in_the_workspace_do_not_lead_out(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    (ws / "dangling").symlink_to(outside / "new-file")
    out = run(
        _shell(
            sandboxed(ws),
            "echo x > link/f; echo x > dangling; ln -s "
            f"{outside} made && echo x > made/g; ln -sf {outside}/h ws-h && echo x > ws-h; echo done",
        )
    )
    assert "done" in out
    assert list(outside.iterdir()) == []


def test_proc_root_links_lead_back_into_the_sandbox(ws: Path, outside: Path) -> None:
    out = run(
        _shell(
            sandboxed(ws),
            f"echo x > /proc/self/root{outside}/a; echo x > /proc/1/root{outside}/b; "
            f"echo x > /proc/$$/cwd/../../../../../../..{outside}/c; echo pid1=$(cat /proc/1/comm); "
            "echo visible=$(ls /proc | grep -c '^[0-9]')",
        )
    )
    assert list(outside.iterdir()) == []
    assert "pid1=bwrap" in out  # PID 1 is the sandbox's own init, not the host's
    visible = [line for line in out.splitlines() if line.startswith("visible=")]
    assert visible and int(visible[0].split("=")[1]) < 10  # only the sandbox's own processes are seen


def test_root_inside_has_no_capabilities_no_mount_no_new_user_namespace(ws: Path, outside: Path) -> None:
    out = run(
        _shell(
            sandboxed(ws),
            "grep CapEff /proc/self/status; "
            "mount -o remount,rw / && echo REMOUNTED; "
            f"mount --bind {ws} {outside} && echo BOUND; "
            f"unshare -r sh -c 'mount -o remount,rw / && echo x > {outside}/u' && echo UNSHARED; "
            f"unshare -Urm sh -c 'mount -t tmpfs none {outside}' && echo NEWNS; "
            f"chmod 777 {outside} && echo CHMOD; chown 1:1 /etc/hostname && echo CHOWN; "
            "ln /etc/hostname hardlink && echo HARDLINK; grep NoNewPrivs /proc/self/status; "
            "echo fds=$(ls /proc/self/fd | wc -l); echo done",
        )
    )
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out  # setuid programs gain nothing
    assert "fds=4" in out  # stdin, stdout, stderr and ls's own: nothing of ra's leaks in
    for escaped in ("REMOUNTED", "BOUND", "UNSHARED", "NEWNS", "CHMOD", "CHOWN", "HARDLINK"):
        assert escaped not in out
    assert "done" in out and list(outside.iterdir()) == []


def test_host_unix_sockets_cannot_be_reached(ws: Path, outside: Path) -> None:
    """A read-only mount does not stop connect() on a socket file; the seccomp filter does."""
    import socket

    path = str(outside / "host.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    server.settimeout(5)
    try:
        probe = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({path!r})\nprint('CONNECTED')\n"
        script = ws / "probe.py"
        script.write_text(probe)
        out = run(_shell(sandboxed(ws, network=True), f"{sys.executable} -I probe.py; echo done"))
        assert "CONNECTED" not in out and "Operation not permitted" in out
        # socketpair reaches nothing outside and keeps working (Python's subprocess and asyncio use it).
        out = run(
            _shell(sandboxed(ws), f"{sys.executable} -I -c 'import socket; socket.socketpair(); print(\"pair-ok\")'")
        )
        assert out == "pair-ok\n"
    finally:
        server.close()


# -- writing outside: the file tools ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_file_tools_refuse_paths_outside(ws: Path, outside: Path, mode: str) -> None:
    (outside / "keep").write_text("keep")
    (ws / "link").symlink_to(outside)
    (ws / "dangling").symlink_to(outside / "new-file")
    (ws / "inside.txt").write_text("in")
    env = sandboxed(ws, mode)
    rel = os.path.relpath(outside / "dotdot", ws)
    attempts = [
        env.write_file(str(outside / "abs"), "x"),
        env.write_file(rel, "x"),
        env.write_file("link/f", "x"),
        env.write_file("dangling", "x"),
        env.write_file(f"/proc/self/root{outside}/proc", "x"),
        env.delete_file(str(outside / "keep")),
        env.delete_file("link/keep"),
        env.move_file(str(outside / "keep"), "stolen"),
        env.move_file("inside.txt", str(outside / "moved")),
        env.move_file("inside.txt", "dangling"),
    ]

    async def attempt_all() -> list[BaseException | None]:
        results: list[BaseException | None] = []
        for call in attempts:
            try:
                await call
                results.append(None)
            except BaseException as exc:
                results.append(exc)
        return results

    errors = run(attempt_all())
    for index, error in enumerate(errors):
        assert isinstance(error, PermissionError), f"attempt {index}: {error!r}"
        assert f"sandbox ({mode})" in str(error)
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert (outside / "keep").read_text() == "keep" and (ws / "inside.txt").read_text() == "in"


def test_file_tools_follow_symlinks_that_stay_inside(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to(ws / "real")
    env = sandboxed(ws)
    run(env.write_file("alias/f.txt", "hello"))
    run(env.move_file("alias/f.txt", "alias/g.txt"))
    assert (ws / "real" / "g.txt").read_text() == "hello"
    (ws / "out-link").symlink_to("/etc/hostname")
    run(env.delete_file("out-link"))  # deleting a link removes the link, wherever it pointed
    assert not (ws / "out-link").is_symlink() and os.path.exists("/etc/hostname")


def test_a_link_made_by_a_command_is_resolved_by_the_file_tools(ws: Path, outside: Path) -> None:
    env = sandboxed(ws)

    async def scenario() -> None:
        made = await env.exec_command(f"ln -s {outside} sneaky && ln -s {outside}/t sneaky-file && echo ok")
        assert made.stdout == "ok\n"
        for path in ("sneaky/t", "sneaky-file"):
            with pytest.raises(PermissionError, match="outside the writable roots"):
                await env.write_file(path, "x")
        await env.cleanup()

    run(scenario())
    assert list(outside.iterdir()) == []


# -- git -----------------------------------------------------------------------------------------


def _git_repo(ws: Path) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(ws)], check=True, timeout=30)


def test_git_hooks_and_config_stay_read_only(ws: Path) -> None:
    _git_repo(ws)
    before = (ws / ".git" / "config").read_text()
    out = run(
        _shell(
            sandboxed(ws),
            "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
            "rm -rf .git/hooks; git config core.hooksPath /tmp/evil-hooks; echo x >> .git/config; "
            "mv .git .git-old || echo move-refused; mkdir -p evil && mv .git/hooks evil/ || echo hooks-stay; "
            "touch a && git add a && git -c user.name=t -c user.email=t@t commit -qm first && echo committed",
        )
    )
    assert "move-refused" in out and "hooks-stay" in out and "committed" in out
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / ".git" / "config").read_text() == before
    assert (ws / ".git").is_dir() and not (ws / ".git-old").exists()


def test_git_hooks_and_config_are_refused_to_the_file_tools(ws: Path) -> None:
    _git_repo(ws)
    env = sandboxed(ws)

    async def attempts() -> None:
        for path in (".git/hooks/pre-commit", ".git/config", ".git/hooks"):
            with pytest.raises(PermissionError, match="read-only"):
                await env.write_file(path, "#!/bin/sh\ntouch /tmp/pwned\n")
        with pytest.raises(PermissionError, match="must stay where it is"):
            await env.move_file(".git", "git-old")
        with pytest.raises(PermissionError, match="read-only"):
            await env.move_file(".git/hooks", "hooks-old")
        await env.write_file(".git/description", "fine\n")  # the rest of .git is the repository's to change

    run(attempts())
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / ".git" / "description").read_text() == "fine\n"


def test_a_worktree_git_file_is_read_only(tmp_path: Path) -> None:
    main = tmp_path / "main"
    _git_repo(main)
    git = shutil.which("git")
    assert git is not None
    subprocess.run(
        [git, "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "m"],
        check=True,
        timeout=30,
    )
    subprocess.run([git, "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")], check=True, timeout=30)
    # The main repository lies in /tmp (writable): its hooks must still be guarded.
    out = run(
        _shell(
            sandboxed(tmp_path / "wt"),
            f"echo 'gitdir: /tmp/elsewhere' > .git || echo file-refused; "
            f"echo evil > {main}/.git/hooks/post-checkout || echo hooks-refused",
        )
    )
    assert "file-refused" in out and "hooks-refused" in out
    assert not (main / ".git" / "hooks" / "post-checkout").exists()


# -- processes -----------------------------------------------------------------------------------


def test_nothing_a_command_starts_outlives_it(ws: Path) -> None:
    """``setsid env -i``, also after a double fork: out of the process group and without the kill
    cookie - unconfined, such a child outlives the command and even ``cleanup``. In the sandbox
    it lives in the command's PID namespace, which ends with the command: the call returns at
    once (no wait for background children holding the output) and the children are gone."""
    beat = ws / "beat"
    env = sandboxed(ws)

    async def scenario() -> ExecResult:
        try:
            return await env.exec_command(
                f"setsid env -i sh -c 'while :; do echo >> {beat}; sleep 0.05; done' >/dev/null 2>&1 < /dev/null & "
                f"(setsid sh -c 'setsid env -i sh -c \"while :; do echo >> {beat}2; sleep 0.05; done\" &' "
                "> /dev/null 2>&1 &); sleep 0.3; echo started"
            )
        finally:
            await env.terminate_all()  # stops running commands only: nothing is running

    result = run(scenario())
    assert result.stdout == "started\n" and result.stderr == "", result
    assert result.duration_ms < 1500, result  # not the background grace plus the kill grace
    sizes = (beat.stat().st_size, Path(f"{beat}2").stat().st_size)
    assert min(sizes) > 0  # both children ran while the command did
    time.sleep(0.3)
    assert (beat.stat().st_size, Path(f"{beat}2").stat().st_size) == sizes
    run(env.cleanup())


def test_a_timeout_stops_a_setsid_unshare_child(ws: Path) -> None:
    beat = ws / "beat"
    env = sandboxed(ws)

    async def scenario() -> None:
        result = await env.exec_command(
            f"setsid sh -c 'trap \"\" TERM; while :; do echo >> {beat}; sleep 0.05; done' & "
            f"(unshare -p -f sh -c 'while :; do echo >> {beat}u; sleep 0.05; done' 2>/dev/null &); sleep 30",
            timeout_ms=800,
        )
        assert result.timed_out
        await env.cleanup()

    run(scenario())
    size = beat.stat().st_size
    time.sleep(0.4)
    assert beat.stat().st_size == size


# -- network -------------------------------------------------------------------------------------


@pytest.fixture
def http_url() -> Iterator[str]:
    with host_server(b"hello-from-the-host") as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/"


def _fetch(url: str) -> str:
    code = f'import urllib.request as u; print(u.urlopen("{url}", timeout=3).read().decode())'
    # The interpreter behind a virtual environment's link: read-only mode's private /tmp hides a
    # venv made under /tmp (as CI makes it), and this needs nothing but the standard library.
    return f"{os.path.realpath(sys.executable)} -I -c '{code}'"


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_network_is_off_by_default(ws: Path, http_url: str, mode: str) -> None:
    out = run(_shell(sandboxed(ws, mode), _fetch(http_url)))
    assert "hello-from-the-host" not in out and "Connection refused" in out


def test_network_on_reaches_the_host(ws: Path, http_url: str) -> None:
    out = run(_shell(sandboxed(ws, network=True), _fetch(http_url)))
    assert out == "hello-from-the-host\n"


def test_danger_full_access_runs_unconfined(ws: Path, outside: Path, http_url: str) -> None:
    env = sandboxed(ws, "danger-full-access")
    out = run(_shell(env, f"echo x > {outside}/free && {_fetch(http_url)}"))
    assert out == "hello-from-the-host\n" and (outside / "free").exists()


# -- secrets -------------------------------------------------------------------------------------


def test_secrets_stay_filtered_and_the_mark_is_not_shown(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_PROBE_API_KEY", "sk-should-not-leak")
    out = run(_shell(sandboxed(ws), "env"))
    assert "sk-should-not-leak" not in out and "RA_SANDBOX_MARK" not in out and "RA_PROCESS_COOKIE" in out


# -- races ---------------------------------------------------------------------------------------

_FLIPPER = """
import os, sys, time
out, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
os.makedirs("d", exist_ok=True)
steps = [
    lambda: os.rename("d", "d.real"),
    lambda: os.symlink(out, "d"),
    lambda: os.symlink(out + "/g", "g"),
    lambda: os.unlink("d"),
    lambda: os.unlink("g"),
    lambda: os.rename("d.real", "d"),
]
while time.monotonic() < deadline:
    for step in steps:
        try:  # the file tools create and replace these names too: go on whatever happened
            step()
        except OSError:
            if os.path.isdir("d") and not os.path.islink("d") and os.path.isdir("d.real"):
                os.rename("d", "d.other." + str(time.monotonic_ns()))
"""


def test_a_symlink_swapped_in_during_a_file_tool_write_does_not_redirect_it(ws: Path, outside: Path) -> None:
    """A sandboxed command flips ``d`` between a directory and a symlink to the outside (and
    ``g`` between nothing and such a link) as fast as it can, while the file tools write
    ``d/f`` and ``g`` again and again: checking the path and then writing by name would
    sometimes land outside; writing along descriptors never does."""
    (ws / "flip.py").write_text(_FLIPPER)
    env = sandboxed(ws)
    outcomes: dict[str, int] = {}

    async def scenario() -> None:
        command = f"{sys.executable} -I flip.py {outside} 1.5"
        flipping = asyncio.ensure_future(env.exec_command(command, timeout_ms=20_000))
        await asyncio.sleep(0.3)
        for _ in range(2000):
            for path in ("d/f", "g"):
                try:
                    await env.write_file(path, "x")
                    outcomes["written"] = outcomes.get("written", 0) + 1
                except (PermissionError, FileNotFoundError, NotADirectoryError) as exc:
                    outcomes[type(exc).__name__] = outcomes.get(type(exc).__name__, 0) + 1
            if flipping.done():
                break
            await asyncio.sleep(0)
        result = await flipping
        assert result.exit_code == 0, result.output
        await env.cleanup()

    run(scenario())
    assert list(outside.iterdir()) == [], outcomes
    assert outcomes.get("written", 0) > 0 and outcomes.get("PermissionError", 0) > 0, outcomes


def test_a_repository_given_as_a_writable_root_keeps_its_hooks(tmp_path: Path, outside: Path) -> None:
    """A worktree outside /tmp whose repository's .git is added as a writable root (so that it
    can commit): the hooks of that .git are still read-only, though no root holds a ``.git``."""
    repo = outside / "repo"
    _git_repo(repo)
    env = sandboxed(tmp_path, writable_roots=(str(repo / ".git"),))
    out = run(_shell(env, f"echo x > {repo}/.git/hooks/pre-commit || echo refused; touch {repo}/.git/ok && echo ok"))
    assert "refused" in out and "ok" in out
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


def test_symlinked_hooks_keep_the_whole_repository_read_only(ws: Path) -> None:
    """``.git/hooks`` as a link (to a directory in the workspace): a command could replace the
    link with one to hooks of its own, so the whole .git is read-only instead."""
    _git_repo(ws)
    shutil.rmtree(ws / ".git" / "hooks")
    (ws / "shared-hooks").mkdir()
    (ws / ".git" / "hooks").symlink_to(ws / "shared-hooks")
    out = run(
        _shell(
            sandboxed(ws),
            "rm .git/hooks || echo link-stays; echo x > shared-hooks/pre-commit || echo target-refused; "
            "touch .git/other || echo git-read-only",
        )
    )
    assert "link-stays" in out and "target-refused" in out and "git-read-only" in out
    assert (ws / ".git" / "hooks").is_symlink() and not (ws / "shared-hooks" / "pre-commit").exists()


def test_the_hosts_system_v_ipc_is_out_of_reach(ws: Path) -> None:
    """A shared memory segment of the host (a database's, say) is not visible inside."""
    if shutil.which("ipcmk") is None or shutil.which("ipcrm") is None:
        pytest.skip("ipcmk/ipcrm (util-linux) are not installed")
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, timeout=10, check=True)
    shmid = made.stdout.split()[-1]
    try:
        host = subprocess.run(["ipcs", "-m"], capture_output=True, text=True, timeout=10).stdout
        (key,) = [line.split()[0] for line in host.splitlines() if line.split()[1:2] == [shmid]]
        inside = run(_shell(sandboxed(ws), "ipcs -m"))
        assert "Shared Memory Segments" in inside and key not in inside
    finally:
        subprocess.run(["ipcrm", "-m", shmid], capture_output=True, timeout=10)


def test_a_path_that_keeps_changing_while_resolved_is_refused(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.path.realpath`` raises EINVAL when a link becomes a directory between its own
    ``islink`` and ``readlink`` (the race test above meets it on a loaded machine): the file
    tool refuses with a PermissionError rather than failing with a bare OSError."""
    env = sandboxed(ws)

    def swapping(path: str) -> str:
        raise OSError(22, "Invalid argument", path)

    monkeypatch.setattr("os.path.realpath", swapping)
    with pytest.raises(PermissionError, match="kept changing while it was resolved"):
        run(env.write_file("d/f", "x"))

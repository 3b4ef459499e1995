"""Finding and stopping every process a command started, including those that left its group.

A command runs in its own session and process group, so ``killpg`` reaches everything that
stays in the group. ``setsid``, a double fork into a new session, or a daemonising tool leaves
the group, and such a process would outlive a timeout or an abort. So every command also carries
a *cookie*: an environment variable (:data:`COOKIE_VAR`) with a random value unique to that
command. Children inherit it through fork and exec, whatever group or session they move to, and
``/proc/<pid>/environ`` - readable for the user's own processes, no root needed - shows it (the
same technique as Jenkins' ProcessTreeKiller).

Stopping a command (:func:`stop_tree`):

1. **freeze** - SIGSTOP every process of the group and every process with the cookie, and scan
   again until no new one appears, so nothing can fork away while it is being stopped;
2. **terminate** - SIGTERM, then SIGCONT, to all of them, and wait up to the grace period;
3. **kill** - SIGKILL whatever is left (processes that trap or ignore SIGTERM), scanning again
   for stragglers, until none is alive.

What it cannot catch (and ``docs/agent.md`` says so): a process that starts with a fresh
environment (``env -i``, a daemon that rebuilds its environment) *and* leaves the process group;
a process of another user (``sudo``); anything on a system without ``/proc`` (there only the
process group is reached). Zombies - already dead, waiting for a parent to reap them - count as
gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterable

__all__ = ["COOKIE_VAR", "alive", "find_by_cookie", "group_members", "new_cookie", "stop_tree"]

#: The variable every command's environment carries; its value is unique to the command.
COOKIE_VAR = "RA_PROCESS_COOKIE"

_HAS_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc")
_POLL_S = 0.05
#: Rounds of "scan, signal" before giving up on a process that keeps forking.
_MAX_ROUNDS = 20


def new_cookie() -> str:
    """A random value for :data:`COOKIE_VAR` (unique per command; carries no secret)."""
    return secrets.token_hex(12)


def _pids() -> Iterable[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return ()
    return (int(name) for name in names if name.isdigit())


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields after it are fixed.
    return data.rpartition(b")")[2].split()


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    if not _HAS_PROC:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = _stat_fields(pid)
    return fields is not None and len(fields) >= 1 and fields[0] not in (b"Z", b"X")


def group_members(pgid: int) -> set[int]:
    """Live processes of process group ``pgid``."""
    if not _HAS_PROC:
        return set()
    found: set[int] = set()
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 3 or fields[0] in (b"Z", b"X"):
            continue
        if fields[2] == str(pgid).encode():
            found.add(pid)
    return found


def find_by_cookie(cookie: str) -> set[int]:
    """Live processes whose environment carries ``cookie`` (empty without ``/proc``)."""
    if not _HAS_PROC or not cookie:
        return set()
    needle = f"{COOKIE_VAR}={cookie}".encode()
    me = os.getpid()
    found: set[int] = set()
    for pid in _pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ.split(b"\0") and alive(pid):
            found.add(pid)
    return found


def _members(pgid: int, cookie: str) -> set[int]:
    return group_members(pgid) | find_by_cookie(cookie)


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def freeze(pgid: int, cookie: str) -> set[int]:
    """SIGSTOP the group and every cookie process, rescanning until nothing new appears."""
    frozen: set[int] = set()
    _signal_group(pgid, signal.SIGSTOP)
    for _ in range(_MAX_ROUNDS):
        current = _members(pgid, cookie)
        new = current - frozen
        if not new:
            break
        _signal_all(new, signal.SIGSTOP)
        frozen |= new
    return frozen


async def stop_tree(pgid: int, cookie: str, grace_s: float) -> None:
    """Freeze, SIGTERM, wait up to ``grace_s``, SIGKILL: the group and every cookie process.

    Runs its /proc scans in a worker thread, so the event loop stays responsive."""
    frozen = await asyncio.to_thread(freeze, pgid, cookie)
    targets = frozen | {pgid}
    _signal_group(pgid, signal.SIGTERM)
    _signal_all(targets, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)
    _signal_all(targets, signal.SIGCONT)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while loop.time() < deadline:
        await asyncio.sleep(_POLL_S)
        if not await asyncio.to_thread(_any_alive, pgid, cookie):
            return
    await asyncio.to_thread(kill_now, pgid, cookie)


def _any_alive(pgid: int, cookie: str) -> bool:
    if _HAS_PROC:
        return bool(_members(pgid, cookie))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_now(pgid: int, cookie: str) -> None:
    """SIGKILL the group and every cookie process, rescanning until none is left (bounded:
    about half a second for processes to die, then it gives up on what the kernel still holds)."""
    _signal_group(pgid, signal.SIGKILL)
    for _ in range(_MAX_ROUNDS):
        left = _members(pgid, cookie)
        if not left:
            return
        _signal_all(left, signal.SIGKILL)
        _signal_group(pgid, signal.SIGKILL)
        time.sleep(0.025)

"""Process-table checks for the orphan tests (Linux /proc)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def live_group_members(pgid: int) -> list[int]:
    """PIDs of processes in group ``pgid`` that are not zombies.

    Zombies are ignored on purpose: where PID 1 does not reap orphans (many containers), a killed
    orphan stays in the table as a zombie forever, yet it is gone for every practical purpose.
    """
    members: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


def is_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

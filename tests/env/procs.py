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
    return _live_where(2, pgid)


def live_children(pid: int) -> list[int]:
    """PIDs of the children of ``pid`` that are not zombies."""
    return _live_where(1, pid)


def _live_where(field: int, value: int) -> list[int]:
    """Live processes whose ``/proc/PID/stat`` field after the name (0 state, 1 parent, 2 group)
    is ``value``."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[field]) == value and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


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

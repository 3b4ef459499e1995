"""The conformance kit (``ra.env.testing``) against ra's own environments, and against broken ones.

The local environment and the wrappers a session really uses - a scope over a subdirectory, and a
subagent's ``ChildExecutionEnvironment`` over such a scope - must pass every check. Then three
environments with a classic bug each must *fail* the check aimed at that bug, which shows the kit
can fail: one that loses track of children that left with ``setsid`` (no process cookie), one that
turns a missing file into a bare ``OSError``, and one that opens a FIFO synchronously on the event
loop's thread (the kit must fail it within its bound rather than hang).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ra.agent.subagents import ChildExecutionEnvironment
from ra.env import (
    DelegatingExecutionEnvironment,
    ExecResult,
    ExecutionEnvironment,
    LocalExecutionEnvironment,
    OutputCallback,
    ScopedExecutionEnvironment,
)
from ra.env.testing import EnvironmentConformance

GRACE_MS = 200
CAP = 64 * 1024


def local(root: Path) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(root, kill_grace_ms=GRACE_MS, background_grace_ms=200, output_memory_cap=CAP)


class _Fast(EnvironmentConformance):
    kill_grace_s = GRACE_MS / 1000
    output_memory_cap = CAP
    check_timeout_s = 30.0


class TestLocalEnvironment(_Fast):
    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        return local(root)


class TestScopedEnvironment(_Fast):
    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        (root / "work").mkdir()
        return ScopedExecutionEnvironment(local(root), "work")


class TestSubagentEnvironment(_Fast):
    """What ``subagent(working_dir=...)`` builds: the parent's environment, scoped, as a child."""

    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        (root / "work").mkdir()
        return ChildExecutionEnvironment(ScopedExecutionEnvironment(local(root), "work"))


# ---------------------------------------------------------------------------------------------
# the kit can fail


class _NoCookie(DelegatingExecutionEnvironment):
    """Stops commands by process group only: each command drops the variable that marks its tree,
    so a child that leaves the group with ``setsid`` is out of reach (the bug a naive sandbox or SSH
    environment that only kills the group would have)."""

    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        return await self.inner.exec_command(
            f"unset RA_PROCESS_COOKIE\n{command}", timeout_ms, working_dir, env_vars, on_output
        )


class _BareOSError(DelegatingExecutionEnvironment):
    """Reports a missing file as a bare ``OSError``, which the tools cannot tell from other failures."""

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        try:
            return await self.inner.read_file(path, offset, limit)
        except FileNotFoundError:
            raise OSError(f"cannot read {path}") from None


class _BlockingOpen(DelegatingExecutionEnvironment):
    """Reads with a plain ``open()`` on the event loop's thread: a FIFO blocks it until a writer comes."""

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        with open(self.resolve(path), "rb") as fh:
            fh.read()
        return await self.inner.read_file(path, offset, limit)


class _LeakyKit(_Fast):
    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        return _NoCookie(local(root))


class _BareOSErrorKit(_Fast):
    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        return _BareOSError(local(root))


class _BlockingKit(_Fast):
    check_timeout_s = 1.0

    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        return _BlockingOpen(local(root))


def test_the_kit_fails_an_environment_whose_timeout_spares_setsid_children() -> None:
    kit = _LeakyKit()
    with pytest.raises(AssertionError, match="a child that left with setsid") as failure:
        kit.test_timeout_stops_the_whole_tree()
    assert "process group" not in str(failure.value)  # the group child was stopped; only escapees named
    # The environment is otherwise sound: the kit blames only what is broken.
    kit.test_streams_exit_code_and_counts()


def test_the_kit_fails_an_environment_with_untyped_errors() -> None:
    kit = _BareOSErrorKit()
    with pytest.raises(AssertionError, match=r"read_file of a missing path: expected FileNotFoundError, got OSError"):
        kit.test_missing_paths_are_file_not_found()
    kit.test_text_round_trip_and_numbered_lines()


def test_the_kit_fails_an_environment_that_blocks_the_loop_and_does_not_hang() -> None:
    kit = _BlockingKit()
    started = time.monotonic()
    with pytest.raises(AssertionError, match="blocked the event loop"):
        kit.test_special_files_are_refused_without_blocking()
    assert time.monotonic() - started < 15


def test_the_kit_is_not_imported_with_ra() -> None:
    """A library user never pays for the kit: ``import ra`` and ``import ra.env`` leave it out."""
    code = "import sys, ra, ra.env; print('ra.env.testing' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"

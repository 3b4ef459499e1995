"""The console entry point's exit: the collector frozen only when the process is about to end.

``ra`` as a command freezes the garbage collector once its run is over (the interpreter's last
collections walked every object of the run: bench/bench_cli.py). A host or a test that calls
``main(argv)`` in its own process must never get that: its objects would stay uncollected.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from ra.cli.__main__ import main


def test_main_with_argv_leaves_the_collector_alone(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_freeze_count()
    assert main(["--version"]) == 0
    assert gc.get_freeze_count() == before
    assert "ra " in capsys.readouterr().out


def test_the_command_freezes_the_collector_after_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["ra", "--version"])
    before = gc.get_freeze_count()
    try:
        assert main() == 0
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


def test_the_real_command_still_prints_everything_at_exit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen process's output, left in stdout's buffer for the interpreter to flush into a
    pipe at exit, arrives whole: the same text as the run in this process."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--help"]) == 0
    expected = capsys.readouterr().out
    done = subprocess.run(
        [sys.executable, "-m", "ra.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=dict(os.environ),
    )
    assert len(expected) > 2000
    assert done.stdout == expected

"""Standard input piped along with a task is appended to the prompt (``git diff | ra "review"``)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from ra.cli import piped
from tests.cli.support import chat_requests, clean_env, enqueue_text, run_ra
from tests.support.replay import ReplayServer

DIFF = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-print('a')\n+print('b')\n"


def user_text(server: ReplayServer) -> str:
    (body,) = chat_requests(server)
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def args(server: ReplayServer, *extra: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "m", *extra]


def test_piped_input_follows_the_task(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "looks fine")
    result = run_ra(args(replay_server, "review this"), clean_env(tmp_path), stdin=DIFF)
    assert result.returncode == 0, result.stderr
    assert user_text(replay_server) == f"review this\n\n<stdin>\n{DIFF}</stdin>"


def test_an_empty_pipe_leaves_the_task_as_it_is(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    result = run_ra(args(replay_server, "just this"), clean_env(tmp_path), stdin="")
    assert result.returncode == 0, result.stderr
    assert user_text(replay_server) == "just this"


def test_without_a_task_stdin_is_the_task(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    result = run_ra(args(replay_server), clean_env(tmp_path), stdin="the task from a file\n")
    assert result.returncode == 0, result.stderr
    assert user_text(replay_server) == "the task from a file"


def test_long_piped_input_is_cut_and_both_the_model_and_stderr_are_told(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "ok")
    line = "x" * 99 + "\n"
    result = run_ra(args(replay_server, "summarise"), clean_env(tmp_path), stdin=line * 4000)  # 400 KB
    assert result.returncode == 0, result.stderr
    assert "standard input was cut to its first 256 KiB" in result.stderr
    text = user_text(replay_server)
    assert text.startswith("summarise\n\n<stdin>\nxxx")
    assert text.endswith("</stdin>\n[Standard input was longer than 256 KiB; only its beginning is shown.]")
    body = text.split("<stdin>\n", 1)[1].split("</stdin>", 1)[0]
    assert len(body) <= piped.MAX_PIPED_BYTES and body.endswith("\n") and set(body) == {"x", "\n"}


def test_a_cut_never_splits_a_character() -> None:
    r, w = os.pipe()
    os.write(w, ("é" * 100).encode())
    os.close(w)
    with os.fdopen(r, "rb") as stream:
        text, dropped = piped.read_piped(stream, notice=lambda _: None, limit=51)
    assert dropped == -1 and text == "é" * 25


def test_a_silent_pipe_is_reported_while_ra_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(piped, "QUIET_NOTICE_S", 0.1)
    r, w = os.pipe()

    def late_writer() -> None:
        time.sleep(0.5)
        os.write(w, b"late data\n")
        os.close(w)

    thread = threading.Thread(target=late_writer)
    thread.start()
    notices: list[str] = []
    with os.fdopen(r, "rb") as stream:
        text, dropped = piped.read_piped(stream, notice=notices.append)
    thread.join()
    assert (text, dropped) == ("late data\n", 0)
    assert notices == ["waiting for standard input to end (run ra with `< /dev/null` to pipe nothing)"]

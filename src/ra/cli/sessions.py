"""``ra sessions``: the recorded sessions - list them, show one's conversation, delete one.

``ra sessions [--all] [--json] [-C DIR]`` lists the sessions recorded for the working directory
(``--all``: every directory), newest first, as a table: the id to give ``--resume``, when it was
last written, the model, how many entries, the first message. ``ra sessions show ID`` prints the
conversation on the record's current branch (the path ``--resume`` would continue);
``ra sessions delete ID`` removes the record (refused while a live session records to it, as
its lease shows; ``--force`` removes it anyway and that session goes on unrecorded).
``--json`` prints JSON instead (one object, or one per line for the list). Records come from
``ra.agent.store.default_store()``, the store every ``ra`` run records to (``$RA_SESSIONS_DIR``
overrides where it is).

Everything shown comes from records, which hold what models and tools wrote: it is shown with
control characters as symbols (:func:`ra.cli.terminal_text.visible`), never obeyed.
Subagents' records (their own sessions, spawned by a recorded one) are left out of the list.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import IO, Any, NoReturn

from .errors import ExitCode, RunError, UsageError

__all__ = ["run_sessions"]

#: Characters of a tool result ``show`` prints (the record keeps it whole).
_RESULT_CHARS = 400


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"ra sessions: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="ra sessions",
        usage="ra sessions [--all] [-C DIR] [--json]\n       ra sessions show ID [--json]\n"
        "       ra sessions delete ID [--force]",
        description="List the recorded sessions of this directory (--all: of every directory), show "
        "one's conversation, or delete one. `ra --resume ID` goes on with one.",
    )
    p.add_argument("action", nargs="?", choices=("list", "show", "delete"), default="list", help=argparse.SUPPRESS)
    p.add_argument("session", nargs="?", metavar="ID", help=argparse.SUPPRESS)
    p.add_argument("--all", action="store_true", help="every directory's sessions, not only this one's")
    p.add_argument("-C", "--cwd", metavar="DIR", help="the directory whose sessions to list (default: the current)")
    p.add_argument("--json", action="store_true", help="JSON: one object per session, or the record for show")
    p.add_argument("--force", action="store_true", help="delete: even the record of a session that is running")
    return p


def run_sessions(argv: list[str]) -> int:
    """``ra sessions ...``; returns the exit code (2 for an unknown id or a bad argument)."""
    args = _parser().parse_intermixed_args(argv)  # flags may come between the action and the id
    if args.force and args.action != "delete":
        raise UsageError(f"ra sessions {args.action}: --force is for delete")
    from ra.agent.store import default_store

    store = default_store()
    if args.action == "list":
        if args.session is not None:
            raise UsageError(f"ra sessions: unexpected argument {args.session!r} (show ID or delete ID?)")
        return _list(store, args)
    if args.session is None:
        raise UsageError(f"ra sessions {args.action} needs a session id (`ra sessions` lists them)")
    from ra.agent.store.base import check_session_id

    try:
        check_session_id(args.session)
    except ValueError as exc:
        raise UsageError(f"ra sessions {args.action}: {exc}") from None
    if args.action == "show":
        return _show(store, args.session, args.json)
    if args.json:
        raise UsageError("ra sessions delete: --json is for list and show")
    from ra.agent.store import SessionInUseError

    try:
        deleted = asyncio.run(store.delete(args.session, force=args.force))
    except SessionInUseError as exc:
        raise RunError(f"ra sessions delete: {exc} (--force deletes it anyway)", ExitCode.FAILED) from None
    if not deleted:
        raise RunError(f"no session {args.session!r} in {store.root} (`ra sessions --all` lists them)", ExitCode.USAGE)
    sys.stdout.write(f"deleted session {args.session}\n")
    return 0


# -- list ---------------------------------------------------------------------------------------------


def _list(store: Any, args: argparse.Namespace) -> int:
    from .config import working_directory

    try:
        cwd = None if args.all else working_directory(args.cwd)
    except Exception as exc:
        raise UsageError(str(exc)) from None
    sessions = [s for s in asyncio.run(store.list(cwd)) if s.agent_id is None]
    if args.json:
        for info in sessions:
            sys.stdout.write(json.dumps(_info_json(info), ensure_ascii=False) + "\n")
        return 0
    where = "any directory" if cwd is None else cwd
    if not sessions:
        sys.stdout.write(f"no sessions recorded for {where} (in {store.root})\n")
        return 0
    _table(sessions, all_dirs=cwd is None, out=sys.stdout)
    return 0


def _info_json(info: Any) -> dict[str, Any]:
    return {
        "id": info.id,
        "cwd": info.cwd,
        "created": info.created,
        "updated": info.updated,
        "model": info.model,
        "title": info.title,
        "parent_id": info.parent_id,
        "entries": info.entries,
    }


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def _table(sessions: list[Any], *, all_dirs: bool, out: IO[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .terminal_text import visible

    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("SESSION", no_wrap=True, min_width=8)
    table.add_column("UPDATED", no_wrap=True)
    table.add_column("MODEL", no_wrap=True)
    table.add_column("ENTRIES", justify="right")
    if all_dirs:
        table.add_column("DIRECTORY", overflow="fold")
    table.add_column("FIRST MESSAGE", overflow="fold")
    for info in sessions:
        row = [
            Text(info.id),
            Text(_when(info.updated)),
            Text(visible(info.model or "?")),
            Text(str(info.entries if info.entries is not None else "?")),
        ]
        if all_dirs:
            row.append(Text(visible(info.cwd)))
        title = visible(info.title) or "(no message yet)"
        if info.parent_id:
            title += f"  (fork of {info.parent_id})"
        row.append(Text(title))
        table.add_row(*row)
    # On a terminal the long columns wrap; into a pipe or a file nothing is cut.
    width = None if out.isatty() else 4096
    console = Console(file=out, width=width, soft_wrap=False, highlight=False)
    console.print(table)


# -- show ---------------------------------------------------------------------------------------------


def _show(store: Any, session_id: str, as_json: bool) -> int:
    from ra.agent.store import RecordFormatError, SessionNotFoundError, StoreError, load_record

    try:
        record = asyncio.run(load_record(store, session_id))
    except SessionNotFoundError:
        raise RunError(f"no session {session_id!r} in {store.root} (`ra sessions --all` lists them)", ExitCode.USAGE)
    except (StoreError, RecordFormatError) as exc:
        raise RunError(f"cannot read session {session_id}: {exc}", ExitCode.FAILED) from None
    if as_json:
        data = {"header": record.header, "leaf_id": record.leaf_id, "entries": record.path}
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
        return 0
    sys.stdout.write(_conversation(record))
    return 0


def _conversation(record: Any) -> str:
    from ra.agent.history import (
        AssistantTurn,
        CompactionTurn,
        ContextTurn,
        SteeringTurn,
        SystemTurn,
        ToolResultsTurn,
        UserTurn,
    )

    from .render import tool_label
    from .terminal_text import visible

    head = record.header
    lines = [f"session {record.id} · {visible(record.cwd)} · {visible(record.model or '?')}"]
    parent = record.parent_session
    if parent:
        lines.append(f"forked from {parent.get('id')} at entry {parent.get('entry_id')}")
    lines.append(f"started {_when(_epoch(head.get('timestamp')))} · {record.turn_count} model call(s)")
    cost = record.total_cost_usd
    unpriced = f" ({record.unpriced_calls} call(s) of unknown price)" if record.unpriced_calls else ""
    lines.append(f"spent ${cost:.4f}{unpriced}")
    names: dict[str, str] = {}
    labels, elsewhere = _labels_by_turn(record)
    lines.extend(f"⚑ label {visible(name)}" for name in labels.get(-1, ()))
    for index, turn in enumerate(record.turns):
        lines.append("")
        if isinstance(turn, UserTurn):
            lines.append("> " + visible(turn.content).replace("\n", "\n  "))
        elif isinstance(turn, SteeringTurn):
            lines.append("> (steering) " + visible(turn.content))
        elif isinstance(turn, AssistantTurn):
            if turn.content:
                lines.append(visible(turn.content))
            for call in turn.tool_calls:
                names[call.id] = call.name
                lines.append(f"  → {tool_label(call.name, call.arguments)}")
        elif isinstance(turn, ToolResultsTurn):
            for result in turn.results:
                content = result.content if isinstance(result.content, str) else json.dumps(result.content)
                text = visible(content)
                if len(text) > _RESULT_CHARS:
                    text = text[:_RESULT_CHARS] + f"… ({len(content):,} characters)"
                mark = "✗" if result.is_error else "←"
                name = visible(names.get(result.tool_call_id, result.tool_call_id))
                lines.append(f"  {mark} {name}: " + text.replace("\n", "\n    "))
        elif isinstance(turn, CompactionTurn):
            lines.append(f"[compacted: {turn.tokens_before:,} → {turn.tokens_after:,} tokens]")
            lines.append(visible(turn.summary))
        elif isinstance(turn, (SystemTurn, ContextTurn)):
            lines.append("[" + visible(turn.content) + "]")
        lines.extend(f"  ⚑ label {visible(name)}" for name in labels.get(index, ()))
    if elsewhere:
        lines.append("")
        lines.extend(f"⚑ label {visible(name)} (entry {visible(eid)}, on another branch)" for name, eid in elsewhere)
    return "\n".join(lines) + "\n"


def _labels_by_turn(record: Any) -> tuple[dict[int, list[str]], list[tuple[str, str]]]:
    """The record's labels placed after the turn they follow on the shown branch (index into
    ``record.turns``; -1: before the first turn), and the (name, entry id) of those elsewhere."""
    position = {entry.get("id"): i for i, entry in enumerate(record.path)}
    turn_at = [position[eid] for eid in record.turn_ids]
    placed: dict[int, list[str]] = {}
    elsewhere: list[tuple[str, str]] = []
    for name, entry_id in record.labels.items():
        where = position.get(entry_id)
        if where is None:
            elsewhere.append((name, entry_id))
            continue
        last = max((i for i, at in enumerate(turn_at) if at <= where), default=-1)
        placed.setdefault(last, []).append(name)
    return placed, elsewhere


def _epoch(stamp: Any) -> float:
    from ra.agent.store.format import RecordFormatError, parse_time

    try:
        return parse_time(stamp, "timestamp")
    except RecordFormatError:
        return 0.0

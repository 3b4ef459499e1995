"""Which session a run records to and goes on from: ``--resume``, ``--continue``, ``--fork-session``,
``--session-id``, ``--no-session-persistence``.

Every run is recorded to ``ra.agent.store.default_store()`` (``$RA_SESSIONS_DIR``, else the
platform's state directory) unless ``--no-session-persistence`` says not to. The flags are checked
here, before anything contacts a provider: contradictions are usage errors (exit 2), and so are a
session id that is unknown, malformed or already in use. ``--resume`` without an id lets the user
pick one of this directory's sessions on a terminal; without a terminal it is a usage error that
says to give the id (a script must not hang on a question nobody sees).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ExitCode, RunError, UsageError

if TYPE_CHECKING:
    import argparse

    from ra.agent.session import Session
    from ra.agent.store import SessionInfo, SessionStore

__all__ = ["PICK", "SessionChoice", "choose", "open_error", "pick"]

#: ``--resume`` given without an id.
PICK = "\x00pick"
#: How many sessions the picker offers.
_PICK_LIMIT = 20


@dataclass(slots=True)
class SessionChoice:
    """The session flags, checked. ``store`` is None with ``--no-session-persistence``."""

    store: SessionStore | None
    resume: str | None = None
    continue_conversation: bool = False
    fork_session: bool = False
    session_id: str | None = None
    #: ``--resume-session-at``: the entry id or label to go on from (None: the record's last entry).
    resume_at: str | None = None

    def open_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Session.open`` (besides profile, env, client and config)."""
        return {
            "store": self.store,
            "resume": self.resume,
            "continue_conversation": self.continue_conversation,
            "fork_session": self.fork_session,
            "session_id": self.session_id,
            "resume_at": self.resume_at,
        }


def choose(args: argparse.Namespace) -> SessionChoice:
    """The session flags of ``args``, checked (UsageError for contradictions). ``resume`` may
    still be :data:`PICK` (resolved by :func:`pick` once the working directory is known)."""
    from ra.agent.store.base import check_session_id

    resume = args.resume
    resuming = resume is not None or args.continue_
    if resume is not None and args.continue_:
        raise UsageError("--resume and --continue both choose the session to go on with; give one")
    if args.fork_session and not resuming:
        raise UsageError("--fork-session forks the session given by --resume ID or --continue")
    resume_at = getattr(args, "resume_session_at", None)
    if resume_at is not None and not resuming:
        raise UsageError("--resume-session-at names an entry or label of the session of --resume ID or --continue")
    if resume_at is not None and not resume_at.strip():
        raise UsageError("--resume-session-at: give an entry id or a label (`ra sessions show ID` lists labels)")
    if args.no_session_persistence and resuming:
        raise UsageError(
            "--no-session-persistence records nothing, and --resume/--continue go on recording a session; "
            "drop one of them"
        )
    for flag, value in (("--resume", resume), ("--session-id", args.session_id)):
        if value is not None and value != PICK:
            try:
                check_session_id(value)
            except ValueError as exc:
                hint = ""
                if flag == "--resume" and any(ch.isspace() for ch in value):
                    # `ra --resume "fix it"` reads the task as the id.
                    hint = "; to pick a session and give a task, put -- before the task: ra --resume -- TASK"
                raise UsageError(f"{flag}: {exc}{hint}") from None
    if args.session_id is not None and resuming and not args.fork_session:
        raise UsageError(
            "--session-id names a new session: with --resume or --continue it needs --fork-session "
            "(the fork gets that id)"
        )
    store = None
    if not args.no_session_persistence:
        from ra.agent.store import default_store

        store = default_store()
    return SessionChoice(store, resume, bool(args.continue_), bool(args.fork_session), args.session_id, resume_at)


def pick(choice: SessionChoice, cwd: str) -> None:
    """Resolve ``--resume`` without an id: ask on the terminal which of ``cwd``'s sessions."""
    if choice.resume != PICK:
        return
    if not (sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError(
            "--resume without a session id needs a terminal to pick one; give the id (`ra sessions` lists them)"
        )
    assert choice.store is not None
    import asyncio

    sessions = [s for s in asyncio.run(choice.store.list(cwd)) if s.agent_id is None][:_PICK_LIMIT]
    if not sessions:
        raise UsageError(f"no session is recorded for {cwd}; `ra sessions --all` lists the other directories'")
    out = sys.stderr
    out.write(f"sessions in {cwd} (newest first):\n")
    for number, info in enumerate(sessions, start=1):
        out.write(f"  {number:>2}  {describe(info)}\n")
    out.flush()
    while True:
        out.write(f"resume which? [1-{len(sessions)}, Enter for 1, q to quit] ")
        out.flush()
        try:
            answer = input().strip().lower()
        except EOFError:
            answer = "q"
        if answer in ("q", "quit"):
            raise RunError("no session chosen", ExitCode.INTERRUPTED)
        if not answer:
            answer = "1"
        if answer.isdigit() and 1 <= int(answer) <= len(sessions):
            choice.resume = sessions[int(answer) - 1].id
            return
        out.write(f"  {answer!r} is not one of the numbers above\n")


def describe(info: SessionInfo) -> str:
    """One line for a session: id, when, model, title."""
    import time

    from .terminal_text import visible

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
    title = visible(info.title) or "(no message yet)"  # a record's text is shown, never obeyed
    return f"{info.id}  {when}  {visible(info.model or '?')}  {title}"


def open_error(exc: BaseException, choice: SessionChoice) -> RunError | None:
    """The run's error for what ``Session.open`` raised, or None when it is not about the session
    flags (unknown or used ids are usage errors; an unreadable record fails the run)."""
    from ra.agent.errors import SessionError
    from ra.agent.store import RecordFormatError, SessionInUseError, SessionNotFoundError, StoreError

    if isinstance(exc, SessionInUseError):
        which = f"--resume {choice.resume}" if choice.resume else "--continue"
        return RunError(f"{which}: {exc} (--fork-session)", ExitCode.USAGE)
    if isinstance(exc, SessionNotFoundError):
        which = f"--resume {choice.resume}" if choice.resume else "--continue"
        if choice.resume_at is not None:
            which += f" --resume-session-at {choice.resume_at}"
        return RunError(f"{which}: {exc}; `ra sessions --all` lists the recorded sessions", ExitCode.USAGE)
    if isinstance(exc, (StoreError, RecordFormatError)):
        return RunError(f"cannot read the session's record: {exc}", ExitCode.FAILED)
    if isinstance(exc, SessionError) and "already exists" in str(exc):
        return RunError(f"--session-id {choice.session_id}: the id is in use; choose another", ExitCode.USAGE)
    if isinstance(exc, ValueError):
        return RunError(str(exc), ExitCode.USAGE)
    return None


async def open_session(choice: SessionChoice, make: Any) -> Session:
    """``await make(**choice.open_kwargs())`` with the errors :func:`open_error` maps."""
    try:
        return await make(**choice.open_kwargs())
    except Exception as exc:
        error = open_error(exc, choice)
        if error is None:
            raise
        raise error from exc

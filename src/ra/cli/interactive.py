"""``ra`` without a task: an interactive, multi-turn session on the terminal.

Each line you enter is one input to the same conversation. Ctrl-C while the agent works stops
that turn (the model call is cancelled, running commands are terminated) and keeps the
conversation: the next line continues it, and any tool call the interruption cut short is
answered with an "interrupted" result so the model knows. Ctrl-C at the prompt clears the line;
Ctrl-D or ``/exit`` leaves; the other commands (``/model``, ``/cost``, ...) are in
:mod:`ra.cli.slash`. Lines are kept in a readline history file
(``platformdirs.user_state_dir("ra")/history``, or ``RA_HISTORY_FILE``), so the arrow keys recall
earlier inputs across sessions.

The event loop lives for the whole session and runs only while a turn is processed; between
turns the main thread blocks in ``input()``, which is what readline needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ExitCode

if TYPE_CHECKING:
    from .config import Settings
    from .render import Renderer

__all__ = ["history_path", "run_interactive"]

PROMPT = "ra> "


def history_path() -> Path:
    explicit = os.environ.get("RA_HISTORY_FILE")
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("ra")) / "history"


class _History:
    """Readline history persisted to a file (a no-op where readline is missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.readline: Any = None
        self.ctrl_c_bound = False
        try:
            import readline
        except ImportError:
            return
        self.readline = readline
        # GNU readline only: libedit (macOS) reads another binding syntax, and keeps the signal.
        self.ctrl_c_bound = "libedit" not in (readline.__doc__ or "")
        if self.ctrl_c_bound:
            readline.parse_and_bind(_CTRL_C_CLEARS_LINE)
        readline.set_history_length(2000)
        try:
            readline.read_history_file(str(path))
        except (FileNotFoundError, OSError):
            pass

    def add(self, line: str) -> None:
        if self.readline is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                self.path.touch()
            self.readline.append_history_file(1, str(self.path))
        except OSError:
            pass  # history is a convenience; never fail a session over it


#: Ctrl-C at the prompt, as readline sees it once it is a key (below): go to the end of the line,
#: discard it, accept the (now empty) line.
_CTRL_C_CLEARS_LINE = r'"\C-c": "\C-e\C-u\C-j"'


@contextlib.contextmanager
def _ctrl_c_as_key(history: _History) -> Iterator[None]:
    """While the prompt waits, Ctrl-C is a key that readline handles, not a SIGINT.

    Why: the terminal discards typed-ahead input when it sends SIGINT, and readline waits in
    its own read loop (which retries on EINTR) for a byte that will never come: with text typed
    just before Ctrl-C, the prompt hung until the next key press. With the terminal's interrupt
    character switched off for the prompt only, Ctrl-C reaches readline as a plain key bound to
    "clear the line"; Ctrl-Z and Ctrl-\\ keep their signals, and the turn that follows gets Ctrl-C
    back as SIGINT (which stops the turn).
    """
    fd = sys.stdin.fileno() if sys.stdin is not None else -1
    if history.readline is None or not history.ctrl_c_bound or fd < 0 or not os.isatty(fd):
        yield
        return
    import termios

    try:
        saved = termios.tcgetattr(fd)
        changed = termios.tcgetattr(fd)
        changed[6][termios.VINTR] = b"\x00"  # _POSIX_VDISABLE on Linux and the BSDs
        termios.tcsetattr(fd, termios.TCSANOW, changed)
    except (termios.error, OSError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def _read_line(history: _History) -> str | None:
    """One input line; None at end of input. Ctrl-C at the prompt gives an empty line."""
    try:
        with _ctrl_c_as_key(history):
            return input(PROMPT)
    except EOFError:
        print(file=sys.stdout)
        return None
    except KeyboardInterrupt:
        print(file=sys.stdout)
        return ""


def run_interactive(settings: Settings, renderer: Renderer, *, trajectory: str | None, debug: bool) -> int:
    from .ask import TerminalAsker
    from .render import RunSummary
    from .runner import as_run_error, header, open_trajectory, prepare, run_start_record
    from .slash import Action, SlashCommands

    writer = open_trajectory(trajectory)
    listeners = [renderer] + ([writer.event] if writer else [])
    loop = asyncio.new_event_loop()
    ctx: Any = None
    exit_code = int(ExitCode.DONE)
    try:
        try:
            ctx = loop.run_until_complete(prepare(settings, listeners))
        except Exception as exc:
            raise as_run_error(exc, settings, debug) from exc
        if writer is not None:
            writer.write(run_start_record(settings, None, ctx.profile))
        ctx.can_use_tool = TerminalAsker(renderer.pause)  # permission questions go to the user
        history = _History(history_path())
        renderer.start(
            f"{header(settings)}\nEnter a task. Ctrl-C stops a turn; Ctrl-D or /exit leaves; /help for more."
        )
        commands = SlashCommands(ctx)
        try:
            session = loop.run_until_complete(ctx.open_chosen())
        except Exception as exc:
            raise as_run_error(exc, settings, debug) from exc
        for note in ctx.session_notes(session):
            renderer.notice(note)
        while True:
            renderer.pause()
            line = _read_line(history)
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            action = commands.handle(text, session)
            if action is Action.EXIT:
                break
            history.add(text)
            if action is Action.NEW:
                commands.end(session)
                loop.run_until_complete(session.close())
                session = ctx.new_session()
                loop.run_until_complete(session.start())  # the run's MCP tools, before the first input
                commands.begin(session)
                renderer.notice("new conversation")
            elif action in (Action.RESUME, Action.FORK):
                session = loop.run_until_complete(_switch(ctx, commands, session, action, renderer))
            elif action is Action.COMPACT:
                _compact(loop, session, commands.argument, renderer)
            elif action is Action.LABEL:
                _label(loop, ctx, session, commands.argument, renderer)
            if action is not None:
                continue
            started = time.monotonic()
            outcome = loop.run_until_complete(ctx.run_input(session, text))
            if outcome.reason == "terminated":  # SIGTERM / SIGHUP: the session ends too
                renderer.error(outcome.message or outcome.reason)
                exit_code = int(outcome.code)
                break
            if outcome.code is ExitCode.DONE:
                renderer.answer(outcome.text)
            elif outcome.reason == "interrupted":
                renderer.notice("interrupted; the conversation is kept")
            else:
                if debug and outcome.error is not None:
                    import traceback

                    traceback.print_exception(outcome.error)
                renderer.error(outcome.message or outcome.reason)
            if session.state.value == "closed":
                # Only a fatal error (credentials, configuration) closes a session; carry the
                # conversation over to a fresh one so that a fixed setup can go on with it.
                loop.run_until_complete(session.wait_closed())
                commands.end(session)
                session = loop.run_until_complete(ctx.continue_session(session))
                commands.begin(session)
            elif outcome.reason == "error":
                renderer.notice("the turn failed; the conversation is kept - enter a line to try again")
            elapsed = time.monotonic() - started
            renderer.summary(
                RunSummary(
                    outcome.steps,
                    outcome.tool_calls,
                    session.usage,
                    ctx.cost(session),
                    elapsed,
                    price_source=ctx.price_source(),
                    unpriced=ctx.unpriced_models(),
                    session_id=session.id,
                    recorded=ctx.recorded(session),
                )
            )
        return exit_code
    finally:
        renderer.close()
        if ctx is not None:
            loop.run_until_complete(ctx.aclose())
        if writer is not None:
            writer.write({"type": "result", "timestamp": time.time(), "status": "exited", "exit_code": exit_code})
            writer.close()
        loop.close()


async def _switch(ctx: Any, commands: Any, session: Any, action: Any, renderer: Renderer) -> Any:
    """``/resume ID`` or ``/fork``: when the other session cannot be opened, say why and stay
    (nothing is lost). ``/resume`` opens the other session before it closes this one; ``/fork``
    closes this one first, so that its record holds everything (a ``/compact`` since the last
    input is written when it closes), then reopens it if the fork cannot be made."""
    from .resume import open_error
    from .slash import Action

    store = ctx.store
    if store is None:
        renderer.error("sessions are not recorded in this run (--no-session-persistence): nothing to resume or fork")
        return session
    if action is Action.RESUME and not commands.argument:
        from .resume import describe

        found = [s for s in await store.list(ctx.settings.cwd) if s.agent_id is None][:20]
        if not found:
            renderer.notice(f"no session is recorded for {ctx.settings.cwd}")
        else:
            lines = [f"sessions in {ctx.settings.cwd} (newest first; /resume ID goes on with one):"]
            lines += [f"  {describe(info)}" + ("  (this one)" if info.id == session.id else "") for info in found]
            commands.out("\n".join(lines))
        return session
    if action is Action.FORK:
        if await store.load(session.id) is None:
            renderer.error("nothing to fork yet: this session has no recorded turn (enter a task first)")
            return session
        choice: dict[str, Any] = {"store": store, "resume": session.id, "fork_session": True}
        # Not counted as a closed conversation (/cost): the fork starts with this one's spend.
        await session.close()
    else:
        choice = {"store": store, "resume": commands.argument}
    try:
        new = await ctx.open_session(**choice)
    except Exception as exc:
        from .resume import SessionChoice

        error = open_error(exc, SessionChoice(store, resume=choice["resume"]))
        if error is None:
            raise
        renderer.error(str(error).replace(f"--resume {choice['resume']}", f"/resume {choice['resume']}"))
        if action is Action.FORK:  # back to the session as it was
            session = await ctx.open_session(store=store, resume=session.id)
            commands.begin(session)
        return session
    if action is not Action.FORK:
        commands.end(session)
        await session.close()
    commands.begin(new)
    turns = len(new.history.turns)
    if action is Action.FORK:
        renderer.notice(f"forked session {session.id} into {new.id} ({turns} turns); /resume {session.id} goes back")
    else:
        renderer.notice(f"resumed session {new.id} ({turns} turns, {new.turn_count} model calls so far)")
    return new


def _label(loop: asyncio.AbstractEventLoop, ctx: Any, session: Any, name: str, renderer: Renderer) -> None:
    """``/label NAME``: name this point of the conversation in the session's record."""
    if ctx.store is None:
        renderer.error("sessions are not recorded in this run (--no-session-persistence): nothing to label")
        return
    from ra.agent.errors import SessionError

    try:
        loop.run_until_complete(session.label(name))
    except (SessionError, ValueError, TypeError) as exc:
        renderer.error(f"/label: {exc}")
        return
    renderer.notice(f"labelled this point of session {session.id} {name!r} (`ra sessions show {session.id}` lists it)")


def _compact(loop: asyncio.AbstractEventLoop, session: Any, instructions: str, renderer: Renderer) -> None:
    """``/compact [instructions]``: summarise the older part of the conversation now."""
    try:
        turn = loop.run_until_complete(session.compact(instructions or None))
    except Exception as exc:
        from .errors import describe_error

        renderer.error(f"/compact: {describe_error(exc, None)}")
        return
    if turn is None:
        renderer.notice("nothing to compact yet (or a PreCompact hook cancelled it); the conversation is as it was")
        return
    renderer.notice(
        f"compacted the conversation: about {turn.tokens_before:,} → {turn.tokens_after:,} tokens of context; "
        "your own messages are kept as you wrote them"
    )

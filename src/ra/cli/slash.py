"""The interactive session's commands: ``/help``, ``/new``, ``/clear``, ``/resume``, ``/fork``,
``/label``, ``/compact``, ``/model``, ``/cost``, ``/tools``, ``/exit``.

A line is a command when its first word is a known ``/name`` (``/model gpt-5.2``). A lone
unknown ``/word`` is answered here ("unknown command"), not sent: a mistyped command sent to the
model costs a turn and does nothing the user wanted. An unknown ``/word`` followed by more text
is a task, so a line that starts with a path (``/tmp is full, why?``) still goes to the model.

Commands act on the conversation between turns, never during one (the prompt is only shown
between turns). What they change outlives ``/new``: a model chosen with ``/model`` stays chosen
for the next conversation. ``/resume``, ``/fork``, ``/label`` and ``/compact`` act on the session itself, which
only the interactive loop can do (they await it): they return their :class:`Action` and leave their
argument in :attr:`SlashCommands.argument`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ra.agent.session import Session

    from .runner import RunContext

__all__ = ["HELP", "Action", "SlashCommands"]

HELP = """\
Enter a task or a follow-up; the conversation continues from turn to turn.
  Ctrl-C          stop the current turn (the conversation is kept); at the prompt: clear the line
  Ctrl-D          leave (also /exit or /quit)
  /new            start a new conversation
  /clear          clear the screen and start a new conversation
  /resume [ID]    go on with recorded session ID (without ID: list this directory's sessions)
  /fork           go on in a copy of this session (a new id); the original stays as it is
  /label NAME     name this point of the conversation (`ra sessions show` lists labels)
  /compact [TEXT] summarise the older part of the conversation now (TEXT: what the summary keeps)
  /model [NAME]   show the model, or use NAME from the next call on (same provider)
  /cost           tokens and cost of this conversation and of the whole session
  /tools          the tools the model can call, what each may change, the permission mode
  /help           this text"""

_COMMAND = re.compile(r"^/([A-Za-z]+)(?:\s+(.*))?$", re.S)


class Action(Enum):
    """What the interactive loop does after a command."""

    NONE = "none"  # handled; read the next line
    NEW = "new"  # close this conversation and start another
    RESUME = "resume"  # switch to the recorded session named by ``argument``
    FORK = "fork"  # go on in a fork of this session
    LABEL = "label"  # label this point of the session's record (``argument``: the name)
    COMPACT = "compact"  # compact this session's context (``argument``: instructions)
    EXIT = "exit"


@dataclass
class SlashCommands:
    """Runs one command line against the current session; output goes to ``out``."""

    ctx: RunContext
    out: Callable[[str], None] = print
    #: ``/model``'s choice, applied to each new conversation too.
    model: str | None = None
    #: Totals of the conversations already closed in this session (for ``/cost``).
    spent: float = 0.0
    spent_unknown: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    conversations: int = 0
    #: The argument of the last ``/resume`` or ``/compact``.
    argument: str = ""
    _names: dict[str, Callable[[Session, str], Action]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._names = {
            "help": self._help,
            "exit": self._exit,
            "quit": self._exit,
            "new": self._new,
            "clear": self._clear,
            "model": self._model,
            "cost": self._cost,
            "tools": self._tools,
            "resume": self._resume,
            "fork": self._fork,
            "label": self._label,
            "compact": self._compact,
        }

    # -- entry points ----------------------------------------------------------------------------
    def handle(self, line: str, session: Session) -> Action | None:
        """The command's action, or None when ``line`` is a task for the model."""
        match = _COMMAND.match(line.strip())
        if match is None:
            return None
        name, argument = match.group(1).lower(), (match.group(2) or "").strip()
        command = self._names.get(name)
        if command is None:
            if argument:
                return None  # "/tmp is full": a task that starts with a path
            self.out(f"unknown command /{name}: /help lists them")
            return Action.NONE
        return command(session, argument)

    def begin(self, session: Session) -> None:
        """Apply what outlives a conversation (the ``/model`` choice) to a new one."""
        if self.model is not None:
            session.set_model(self.model)

    def end(self, session: Session) -> None:
        """Count a conversation that is being closed into the session's totals."""
        self.conversations += 1
        cost = self.ctx.cost(session)
        self.spent_unknown = self.spent_unknown or cost is None
        self.spent += cost or 0.0
        usage = session.total_usage
        self.tokens_in += usage.input_tokens
        self.tokens_out += usage.output_tokens

    # -- the commands ----------------------------------------------------------------------------
    def _help(self, session: Session, argument: str) -> Action:
        self.out(HELP)
        return Action.NONE

    def _exit(self, session: Session, argument: str) -> Action:
        return Action.EXIT

    def _new(self, session: Session, argument: str) -> Action:
        return Action.NEW

    def _clear(self, session: Session, argument: str) -> Action:
        if sys.stdout.isatty():
            sys.stdout.write("\x1b[H\x1b[2J\x1b[3J")  # home, clear the screen and the scrollback
            sys.stdout.flush()
        return Action.NEW

    def _resume(self, session: Session, argument: str) -> Action:
        if argument and len(argument.split()) > 1:
            self.out("usage: /resume [ID] (one session id; `ra sessions` lists them)")
            return Action.NONE
        if argument == session.id:
            self.out(f"already in session {session.id}")
            return Action.NONE
        self.argument = argument
        return Action.RESUME

    def _fork(self, session: Session, argument: str) -> Action:
        if argument:
            self.out("usage: /fork (it forks this session as it is now)")
            return Action.NONE
        return Action.FORK

    def _label(self, session: Session, argument: str) -> Action:
        if not argument:
            self.out("usage: /label NAME (names this point of the conversation)")
            return Action.NONE
        self.argument = argument
        return Action.LABEL

    def _compact(self, session: Session, argument: str) -> Action:
        self.argument = argument
        return Action.COMPACT

    def _model(self, session: Session, argument: str) -> Action:
        settings = self.ctx.settings
        if not argument:
            where = f" at {settings.base_url}" if settings.base_url else ""
            self.out(f"model: {session.model} via {settings.provider}{where}; /model NAME switches")
            return Action.NONE
        if settings.provider == "local":
            self.out("the local provider serves the model file it loaded (RA_LOCAL_MODEL); /model cannot switch it")
            return Action.NONE
        name = argument.split()[0]
        from .budget_prices import refusal

        refused = refusal(settings, [("model", name)])
        if refused is not None:  # a budget the new model could not be kept to: stay on the old one
            self.out(f"{refused}; still on {session.model}")
            return Action.NONE
        session.set_model(name)
        self.model = name
        from ra.llm.catalog import get_model_info

        note = ""
        configured = settings.policy.prices if settings.policy is not None else {}
        if name not in configured and get_model_info(name) is None:
            note = f' (not in ra\'s catalogue: no price known; set one under [prices."{name}"] in the config)'
        self.out(f"model: {name} from the next call on{note}")
        return Action.NONE

    def _cost(self, session: Session, argument: str) -> Action:
        cost = self.ctx.cost(session)
        usage = session.total_usage
        this = f"this conversation: {_money(cost)} · tokens {usage.input_tokens:,} in / {usage.output_tokens:,} out"
        if usage.cache_read_tokens:
            this += f" ({usage.cache_read_tokens:,} cached)"
        lines = [this]
        if self.conversations:
            total = None if self.spent_unknown or cost is None else self.spent + cost
            lines.append(
                f"whole session: {_money(total)} · tokens "
                f"{self.tokens_in + usage.input_tokens:,} in / {self.tokens_out + usage.output_tokens:,} out"
            )
        unpriced = self.ctx.unpriced_models()
        if unpriced:
            lines.append(f"no price known for {', '.join(unpriced)}: set one under [prices] in the config")
        limit = self.ctx.settings.policy.max_budget_usd if self.ctx.settings.policy is not None else None
        if limit is not None:
            lines.append(f"budget: ${limit:g} per conversation (--max-budget-usd)")
        self.out("\n".join(lines))
        return Action.NONE

    def _tools(self, session: Session, argument: str) -> Action:
        tools = list(session.profile.tool_registry)
        width = max((len(t.definition.name) for t in tools), default=0)
        lines = [f"{len(tools)} tools · permission mode: {session.permission_mode}"]
        for tool in sorted(tools, key=lambda t: t.definition.name):
            effect = tool.effect.value if tool.effect is not None else "unknown"
            lines.append(f"  {tool.definition.name.ljust(width)}  {effect:<8}  {_first_sentence(tool.definition)}")
        self.out("\n".join(lines))
        return Action.NONE


def _money(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"${cost:.4f}"


def _first_sentence(definition: Any, limit: int = 70) -> str:
    text = " ".join(str(definition.description or "").split())
    end = text.find(". ")
    text = text[: end + 1] if 0 < end < limit else text
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""What a run may do and spend: budget, permissions, hooks, named agents, fallback models, prices.

Each of these is a library control (``ra.agent``: ``max_budget_usd``, ``permission_mode`` and
the rules, ``Hooks``, ``agents``, ``fallback_models``, ``prices``); the command only reads them
from its flags and the config file and hands them over. Flags win over the file for single
values; rule lists from both are used together (a project's deny rules stay in force when a
flag adds an allow rule).

**Permission checks are off unless asked for.** Without a permission mode and without allow or
ask rules, ``ra`` runs every tool call as it always has (mode ``bypass``; deny rules still
apply). Naming a mode, or giving allow or ask rules, turns checking on, with ``default`` as the
mode: reads run, edits and commands are asked about - on the terminal in an interactive session
(allow once, always, or deny with a reason), and denied in a one-shot run, with a line on stderr
that says what was denied and which flag would allow it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ConfigError

if TYPE_CHECKING:
    from ra.agent.definitions import AgentDefinition
    from ra.agent.hooks import Hooks
    from ra.llm.pricing import ModelPrice

__all__ = ["PERMISSION_MODES", "Policy", "add_arguments", "resolve_policy", "split_rules"]

PERMISSION_MODES = ("default", "accept_edits", "plan", "bypass", "dont_ask")
#: Where a project's agent files live (Claude Code keeps them in .claude/agents; same format).
AGENTS_DIR = Path(".ra") / "agents"

_LIST_KEYS = ("allowed_tools", "disallowed_tools", "ask_tools", "fallback_models")


@dataclass(slots=True)
class Policy:
    """The run's controls, resolved from flags and the config file."""

    max_budget_usd: float | None = None
    #: None: not set anywhere (see :attr:`mode`).
    permission_mode: str | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    ask_tools: tuple[str, ...] = ()
    fallback_models: tuple[str, ...] = ()
    #: The config file's ``[hooks]`` table (Claude Code's settings shape), or None.
    hooks_config: Mapping[str, Any] | None = None
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    prices: dict[str, ModelPrice] = field(default_factory=dict)

    @property
    def checks(self) -> bool:
        """Whether calls are checked at all (a mode was named, or allow/ask rules given)."""
        return self.permission_mode is not None or bool(self.allowed_tools or self.ask_tools)

    @property
    def mode(self) -> str:
        if self.permission_mode is not None:
            return self.permission_mode
        return "default" if self.checks else "bypass"

    def session_values(self) -> dict[str, Any]:
        """The ``SessionConfig`` fields this policy sets."""
        return {
            "max_budget_usd": self.max_budget_usd,
            "permission_mode": self.mode,
            "allowed_tools": self.allowed_tools,
            "disallowed_tools": self.disallowed_tools,
            "ask_tools": self.ask_tools,
            "fallback_models": self.fallback_models,
            "agents": dict(self.agents),
            "prices": dict(self.prices),
        }

    def build_hooks(self) -> Hooks | None:
        """The command hooks of the config file (None when there are none)."""
        if not self.hooks_config:
            return None
        from ra.agent.command_hooks import hooks_from_config

        return hooks_from_config({"hooks": self.hooks_config})


# -- flags -------------------------------------------------------------------------------------------


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _mode(text: str) -> str:
    from ra.agent.rules import normalize_mode

    try:
        return normalize_mode(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"choose one of {', '.join(PERMISSION_MODES)}; got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("budget and permissions")
    g.add_argument(
        "--max-budget-usd",
        type=_budget,
        metavar="USD",
        help="stop when the run has spent USD (exit 1)",
    )
    g.add_argument(
        "--permission-mode",
        type=_mode,
        metavar="MODE",
        help=f"{' | '.join(PERMISSION_MODES)}: what runs without asking (default: everything, unless "
        "rules are given; then 'default': reads run, edits and commands are asked about)",
    )
    g.add_argument(
        "--allowed-tools",
        action="append",
        metavar="RULES",
        help="tool calls that run without asking, e.g. 'read_file,shell(git diff:*),edit_file(src/**)' (repeatable)",
    )
    g.add_argument(
        "--disallowed-tools",
        action="append",
        metavar="RULES",
        help="tool calls that are always denied, e.g. 'shell(rm:*),web_search' (repeatable)",
    )
    g.add_argument(
        "--fallback-model",
        action="append",
        metavar="MODEL",
        help="model to retry a call on when the model is overloaded, failing or missing (repeatable, in order)",
    )


def split_rules(values: list[str] | None) -> tuple[str, ...]:
    """Rules from repeated flags, each a comma-separated list; commas inside ``(...)`` or ``{...}``
    belong to the rule (``edit_file(src/{a,b}/**)``)."""
    rules: list[str] = []
    for value in values or ():
        depth, start = 0, 0
        for i, char in enumerate(value):
            if char in "({":
                depth += 1
            elif char in ")}":
                depth = max(0, depth - 1)
            elif char == "," and depth == 0:
                rules.append(value[start:i])
                start = i + 1
        rules.append(value[start:])
    return tuple(r.strip() for r in rules if r.strip())


# -- resolving -----------------------------------------------------------------------------------------


def resolve_policy(args: argparse.Namespace, file: Mapping[str, Any], cwd: str, *, source: str = "config") -> Policy:
    """The policy of a run: flags over the config file; agent files of the project added.

    Problems (an unknown permission mode, a malformed rule, hook or agent) are ConfigErrors
    (exit 2) naming where they are, found before anything runs."""
    from ra.agent.rules import normalize_mode, parse_rules

    for key in _LIST_KEYS:
        value = file.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{source}: '{key}' must be a list of strings, got {value!r}")
    mode = args.permission_mode if args.permission_mode is not None else file.get("permission_mode")
    if mode is not None:
        try:
            mode = normalize_mode(mode)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    budget = args.max_budget_usd if args.max_budget_usd is not None else file.get("max_budget_usd")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float) or budget < 0):
        raise ConfigError(f"{source}: 'max_budget_usd' must be a number >= 0, got {budget!r}")
    policy = Policy(
        max_budget_usd=float(budget) if budget is not None else None,
        permission_mode=mode,
        allowed_tools=tuple(file.get("allowed_tools", ())) + split_rules(args.allowed_tools),
        disallowed_tools=tuple(file.get("disallowed_tools", ())) + split_rules(args.disallowed_tools),
        ask_tools=tuple(file.get("ask_tools", ())),
        fallback_models=tuple(args.fallback_model or file.get("fallback_models", ())),
        hooks_config=file.get("hooks"),
        agents=_agents(file.get("agents"), cwd, source),
        prices=parse_prices(file.get("prices"), source),
    )
    if any(not model.strip() for model in policy.fallback_models):
        where = "--fallback-model" if args.fallback_model else f"{source}: 'fallback_models'"
        raise ConfigError(f"{where}: a model name is empty (give a model id, e.g. --fallback-model gpt-5-mini)")
    for key in ("allowed_tools", "disallowed_tools", "ask_tools"):
        try:
            parse_rules(getattr(policy, key))
        except ValueError as exc:
            raise ConfigError(f"{key.replace('_', '-')}: {exc}") from None
    try:
        policy.build_hooks()
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return policy


def _agents(table: Any, cwd: str, source: str) -> dict[str, AgentDefinition]:
    """Named agents: ``[agents.NAME]`` tables of the config file, then the project's
    ``.ra/agents/*.md`` files (which win: they are closer to the work)."""
    from ra.agent.definitions import AgentDefinition, load_agent_files

    agents: dict[str, AgentDefinition] = {}
    if table is not None:
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: 'agents' must be a table of [agents.NAME] tables")
        for name, spec in table.items():
            if not isinstance(spec, Mapping):
                raise ConfigError(f"{source}: agents.{name} must be a table")
            try:
                agents[name] = AgentDefinition(
                    description=str(spec.get("description", "")),
                    prompt=str(spec.get("prompt", "")),
                    tools=tuple(spec["tools"]) if spec.get("tools") is not None else None,
                    disallowed_tools=tuple(spec.get("disallowed_tools", ())),
                    model=spec.get("model"),
                    max_turns=spec.get("max_turns"),
                    permission_mode=spec.get("permission_mode"),
                )
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{source}: agents.{name}: {exc}") from None
    try:
        agents.update(load_agent_files(os.path.join(cwd, AGENTS_DIR)))
    except ValueError as exc:
        raise ConfigError(f"agent file {exc}") from None
    return agents


def parse_prices(table: Any, source: str) -> dict[str, ModelPrice]:
    """``[prices."MODEL"]`` tables: ``input``, ``output`` (USD per million tokens), optional
    ``cache_read`` / ``cache_write``; ``input = 0, output = 0`` makes a model free."""
    if table is None:
        return {}
    from ra.llm.pricing import ModelPrice

    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: 'prices' must be a table of [prices.\"MODEL\"] tables")
    prices: dict[str, ModelPrice] = {}
    for model, spec in table.items():
        where = f'{source}: prices."{model}"'
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where} must be a table with input and output (USD per million tokens)")
        unknown = set(spec) - {"input", "output", "cache_read", "cache_write"}
        if unknown or "input" not in spec or "output" not in spec:
            raise ConfigError(f"{where} needs input and output (and may have cache_read, cache_write)")
        try:
            prices[model] = ModelPrice(spec["input"], spec["output"], spec.get("cache_read"), spec.get("cache_write"))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return prices

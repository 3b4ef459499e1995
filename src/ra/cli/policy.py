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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ConfigError

if TYPE_CHECKING:
    from ra.agent.hooks import Hooks
    from ra.agent.subagents.definitions import AgentDefinition
    from ra.llm.pricing import ModelPrice

__all__ = ["PERMISSION_MODES", "Policy", "add_arguments", "resolve_policy", "split_rules"]

PERMISSION_MODES = ("default", "accept_edits", "plan", "bypass", "dont_ask")
#: Where a project's agent files live: Claude Code's folder and ra's (same format; ra's wins).
AGENTS_DIR = Path(".ra") / "agents"
CLAUDE_AGENTS_DIR = Path(".claude") / "agents"

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
    #: The rules given as flags, by flag (checked against the profile's tools: :meth:`check_flag_rules`).
    flag_rules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: A settings file's ``additionalDirectories`` (absolute; see docs/permissions.md: ra does not
    #: confine file tools to the working directory, so they need no grant).
    additional_directories: tuple[str, ...] = ()
    #: One-line remarks for stderr (what an agent file says that ra does not use, ...).
    notices: list[str] = field(default_factory=list)

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

    def check_flag_rules(self, tool_names: list[str]) -> None:
        """Refuse (ConfigError, exit 2) a rule given as a flag that names no tool of the session
        and no Claude Code name: it would match nothing. The config file's rules are warned
        about by the session instead (a WARNING when it starts), so a file shared between
        profiles keeps working."""
        from ra.agent.permissions.rules import validate_rules

        problems = [
            p for flag, rules in self.flag_rules.items() for p in validate_rules(rules, tool_names, source=flag)
        ]
        if problems:
            raise ConfigError("; ".join(problems))

    def build_hooks(self, cwd: str | None = None) -> Hooks | None:
        """The command hooks of the config file (None when there are none). ``cwd``: the local
        directory they run in when the session's is elsewhere (``ra --ssh``)."""
        if not self.hooks_config:
            return None
        from ra.agent.hooks.command import hooks_from_config

        return hooks_from_config({"hooks": self.hooks_config}, cwd=cwd)


# -- flags -------------------------------------------------------------------------------------------


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {text!r}") from None
    from ra.agent.config import is_budget

    if not is_budget(value):  # NaN and inf are no budget: refused, not run unbounded
        raise argparse.ArgumentTypeError(f"must be a finite amount, 0 or more (0 makes no model call), got {text}")
    return value


def _mode(text: str) -> str:
    from ra.agent.permissions.rules import normalize_mode

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
        help="stop when the run has spent USD (exit 1); every model the run may call must have a price "
        "(0 makes no model call)",
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
        help="tool calls that run without asking, e.g. 'Read,Bash(git diff:*),Edit(src/**)' (repeatable; "
        "Claude Code's tool names work on every profile)",
    )
    g.add_argument(
        "--disallowed-tools",
        action="append",
        metavar="RULES",
        help="tool calls that are always denied, e.g. 'Bash(rm:*),WebSearch' (repeatable)",
    )
    g.add_argument(
        "--settings",
        metavar="FILE",
        help="a Claude Code settings.json: its hooks and permissions (allow, deny, ask, defaultMode, "
        "additionalDirectories) are used with the config file's",
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
    from ra.agent.permissions.rules import normalize_mode, parse_rules

    for key in _LIST_KEYS:
        value = file.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{source}: '{key}' must be a list of strings, got {value!r}")
    claude = None
    if getattr(args, "settings", None):
        from .claude_settings import read_settings

        claude = read_settings(args.settings, cwd)
    mode = args.permission_mode if args.permission_mode is not None else file.get("permission_mode")
    if args.permission_mode is None and claude is not None and claude.default_mode is not None:
        mode = claude.default_mode  # the settings file named on the command line wins over the config file
    if mode is not None:
        try:
            mode = normalize_mode(mode)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    notices: list[str] = list(claude.notices) if claude is not None else []
    from ra.agent.config import is_budget

    budget = args.max_budget_usd if args.max_budget_usd is not None else file.get("max_budget_usd")
    if budget is not None and not is_budget(budget):
        raise ConfigError(f"{source}: 'max_budget_usd' must be a finite number >= 0, got {budget!r}")
    policy = Policy(
        max_budget_usd=float(budget) if budget is not None else None,
        permission_mode=mode,
        allowed_tools=tuple(file.get("allowed_tools", ())) + _of(claude, "allow") + split_rules(args.allowed_tools),
        disallowed_tools=tuple(file.get("disallowed_tools", ()))
        + _of(claude, "deny")
        + split_rules(args.disallowed_tools),
        ask_tools=tuple(file.get("ask_tools", ())) + _of(claude, "ask"),
        fallback_models=tuple(args.fallback_model or file.get("fallback_models", ())),
        hooks_config=_hooks(file.get("hooks"), claude.hooks if claude is not None else None),
        additional_directories=claude.additional_directories if claude is not None else (),
        agents=_agents(file.get("agents"), cwd, source, notices),
        prices=parse_prices(file.get("prices"), source),
        flag_rules={
            "--allowed-tools": split_rules(args.allowed_tools),
            "--disallowed-tools": split_rules(args.disallowed_tools),
        },
        notices=notices,
    )
    if claude is not None:
        # The settings file's rules first, alone, so that a mistake names the file.
        for key in ("allow", "deny", "ask"):
            try:
                parse_rules(getattr(claude, key))
            except ValueError as exc:
                raise ConfigError(f"settings file {claude.path}: permissions.{key}: {exc}") from None
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
        where = source if claude is None else f"{source} or settings file {claude.path}"
        raise ConfigError(f"{where}: {exc}") from None
    return policy


def _of(claude: Any, key: str) -> tuple[str, ...]:
    return tuple(getattr(claude, key)) if claude is not None else ()


def _hooks(config: Any, settings: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The config file's hooks and the settings file's together: per event, the config file's
    matchers first."""
    if not settings:
        return config
    if not config:
        return settings
    if not isinstance(config, Mapping):
        return config  # reported as malformed by build_hooks
    merged: dict[str, Any] = {k: list(v) if isinstance(v, list) else v for k, v in config.items()}
    for event, matchers in settings.items():
        before = merged.get(event)
        if isinstance(before, list) and isinstance(matchers, list):
            merged[event] = before + matchers
        elif before is None:
            merged[event] = matchers
        else:
            merged[event] = matchers if not isinstance(matchers, list) else before
    return merged


def _agents(table: Any, cwd: str, source: str, notices: list[str]) -> dict[str, AgentDefinition]:
    """Named agents: ``[agents.NAME]`` tables of the config file, then the agent files of the
    user (``~/.claude/agents``) and of the project (``.claude/agents``, then ``.ra/agents``); a
    later one wins a name (the project's files are closer to the work, as in Claude Code)."""
    from ra.agent.subagents.definitions import AgentDefinition, load_agent_files

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
    folders = [Path.home() / CLAUDE_AGENTS_DIR, Path(cwd) / CLAUDE_AGENTS_DIR, Path(cwd) / AGENTS_DIR]
    for folder in dict.fromkeys(folders):  # the home folder may be the project's
        try:
            agents.update(load_agent_files(folder, warnings=notices))
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

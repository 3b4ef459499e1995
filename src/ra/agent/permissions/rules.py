"""Permission modes and rules: the pure part of :mod:`ra.agent.permissions`.

A rule is ``Tool`` or ``Tool(spec)``; what the spec means depends on what the tool acts on
(commands, files, URLs) - the syntax is documented in :mod:`ra.agent.permissions`. Everything
here is a pure function of a call's name and arguments, so it can be tested, cached and reused
(the ``ra`` command's config validation uses it) without a session.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, get_args
from urllib.parse import urlsplit

from .tool_names import names_of

if TYPE_CHECKING:
    from ra.llm.types import ToolCall

__all__ = [
    "PERMISSION_MODES",
    "CallFacts",
    "PermissionMode",
    "Rule",
    "normalize_mode",
    "parse_rules",
    "patch_paths",
    "read_only_tools",
    "rules_for",
    "rules_of",
    "split_command",
    "visible_tools",
]

PermissionMode = Literal["default", "accept_edits", "plan", "bypass", "dont_ask"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)
#: The Claude Agent SDK's spellings, accepted everywhere a mode is.
_MODE_ALIASES = {
    "acceptEdits": "accept_edits",
    "bypassPermissions": "bypass",
    "bypass_permissions": "bypass",
    "dontAsk": "dont_ask",
}


def normalize_mode(mode: str) -> PermissionMode:
    """``mode`` as ra spells it (the SDK's camelCase names are accepted); ValueError if unknown."""
    value = _MODE_ALIASES.get(mode, mode)
    if value not in PERMISSION_MODES:
        choices = ", ".join(PERMISSION_MODES)
        raise ValueError(f"unknown permission mode {mode!r}; expected one of {choices} (or the SDK's camelCase)")
    return value  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Rule:
    """``Tool`` or ``Tool(spec)``: see the module docstring."""

    text: str
    tool: str
    spec: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"a permission rule is a non-empty string, got {text!r}")
        raw = text.strip()
        match = re.fullmatch(r"([^()\s]+)\s*(?:\((.*)\))?", raw, re.DOTALL)
        if match is None:
            raise ValueError(
                f"cannot read permission rule {raw!r}; expected Tool or Tool(spec), e.g. shell(git diff:*)"
            )
        tool, spec = match.group(1), match.group(2)
        if spec is not None and not spec.strip():
            raise ValueError(f"permission rule {raw!r} has an empty spec; write just {tool!r} to match every call")
        return cls(raw, tool, None if spec is None else spec.strip())

    @property
    def bare(self) -> bool:
        return self.spec is None

    def names_tool(self, tool_name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, self.tool) for name in names_of(tool_name))

    def matches(self, call: CallFacts, *, every_part: bool) -> bool:
        if not self.names_tool(call.tool_name):
            return False
        spec = self.spec
        if spec is None:
            return True
        if call.commands is not None:
            if call.opaque_command:
                # Never allowed by a spec; a deny or ask rule looks at the whole line and at
                # every part it can make out (a substitution must not hide ``; rm -rf x``).
                if every_part:
                    return False
                return _command_matches(spec, call.command_text) or any(
                    _command_matches(spec, part) for part in call.commands
                )
            parts = call.commands or [""]
            test = all if every_part else any
            return test(_command_matches(spec, part) for part in parts)
        if spec.startswith("domain:"):
            domain = spec[len("domain:") :].strip().lower()
            return call.host is not None and (call.host == domain or call.host.endswith("." + domain))
        if call.paths:
            test = all if every_part else any
            return test(_path_matches(spec, path, call.cwd) for path in call.paths)
        return any(fnmatch.fnmatchcase(value, spec) for value in call.strings or [""])


def parse_rules(rules: Iterable[str]) -> tuple[Rule, ...]:
    return tuple(Rule.parse(r) for r in rules)


@lru_cache(maxsize=64)
def rules_of(rules: tuple[str, ...]) -> tuple[Rule, ...]:
    """``parse_rules`` with a cache: configs hold their rules as tuples, parsed once."""
    return parse_rules(rules)


@lru_cache(maxsize=1024)
def rules_for(rules: tuple[str, ...], tool_name: str) -> tuple[Rule, ...]:
    """The rules of ``rules`` that name ``tool_name`` (cached: a call pays a dictionary lookup)."""
    return tuple(rule for rule in rules_of(rules) if rule.names_tool(tool_name))


def _command_matches(spec: str, command: str) -> bool:
    if spec.endswith(":*"):
        prefix = spec[:-2].strip()
        return command == prefix or command.startswith(prefix + " ")
    if "*" in spec or "?" in spec:
        return fnmatch.fnmatchcase(command, spec)
    return command == spec


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if pattern[i : i + 3] == "**/":
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern[i : i + 2] == "**":
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


def _path_matches(spec: str, path: str, cwd: str) -> bool:
    spec = os.path.expanduser(spec)
    absolute = os.path.normpath(os.path.join(cwd, path))
    if spec.startswith("/"):
        return _glob_regex(spec).fullmatch(absolute) is not None
    relative = os.path.relpath(absolute, cwd)
    if relative == ".." or relative.startswith("../"):
        return False  # outside the working directory: only absolute specs reach it
    if "/" not in spec.rstrip("/"):
        # A bare name (``*.py``, ``secrets.env``) matches at any depth, as in .gitignore.
        return _glob_regex(spec).fullmatch(os.path.basename(relative)) is not None or (
            _glob_regex(spec).fullmatch(relative) is not None
        )
    return _glob_regex(spec.rstrip("/") if not spec.endswith("/**") else spec).fullmatch(relative) is not None


# -- what a call acts on ----------------------------------------------------------------------------

_PATH_KEYS = ("file_path", "path", "dir_path", "absolute_path", "notebook_path")
_OPAQUE = re.compile(r"\$\(|`|<\(|>\(")


@dataclass(slots=True)
class CallFacts:
    """The parts of a call that rules look at, worked out once per call."""

    tool_name: str
    cwd: str
    command_text: str = ""
    commands: list[str] | None = None
    opaque_command: bool = False
    paths: list[str] = field(default_factory=list)
    host: str | None = None
    strings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, call: ToolCall, cwd: str) -> CallFacts:
        args = call.arguments if isinstance(call.arguments, Mapping) else {}
        facts = cls(call.name, cwd)
        command = args.get("command", args.get("cmd"))
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        if isinstance(command, str):
            facts.command_text = command.strip()
            facts.opaque_command = bool(_OPAQUE.search(command))
            facts.commands = split_command(command)
            if facts.commands is None:  # unbalanced quotes: nothing a rule can vouch for
                facts.opaque_command = True
                # What deny rules can still look at: the pieces between operators, quotes or not.
                facts.commands = [p.strip() for p in _ROUGH_SPLIT.split(command) if p.strip()]
            return facts
        for key in _PATH_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value:
                facts.paths.append(value)
        patch = args.get("patch", args.get("input"))
        if isinstance(patch, str) and call.name == "apply_patch":
            facts.paths.extend(patch_paths(patch))
        url = args.get("url")
        if isinstance(url, str):
            facts.host = (urlsplit(url).hostname or "").lower() or None
        facts.strings = [v for v in args.values() if isinstance(v, str)]
        return facts


_OPERATORS = {"&&", "||", ";", "|", "&", "|&", ";;", "\n", "(", ")"}
_OPERATOR_CHARS = set(";&|()")
#: Words that start or end a compound command (``if x; then y; fi``, ``{ y; }``, ``! y``): the
#: command is what follows them, so ``then rm -rf x`` is read as ``rm -rf x``.
_SHELL_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time"})
_ROUGH_SPLIT = re.compile(r"[;&|()`\n]+")


def split_command(command: str) -> list[str] | None:
    """The simple commands of a shell command line, each as its words joined by one space,
    leading ``VAR=value`` assignments dropped; None when the line cannot be read (unbalanced
    quotes). Cached: agents run the same commands again and again."""
    parts = _split_command(command)
    return None if parts is None else list(parts)


@lru_cache(maxsize=512)
def _split_command(command: str) -> tuple[str, ...] | None:
    # Subshells, groups and substitutions (``(a)``, ``$(a)``, backticks) are split like operators,
    # so the commands inside them are parts too (a command with a substitution is never allowed
    # by a rule anyway; this is what deny rules see of it).
    text = command.replace("\n", " ; ").replace("`", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    parts: list[str] = []
    current: list[str] = []
    for token in tokens:
        if token in _OPERATORS or (token and set(token) <= _OPERATOR_CHARS):
            if current:
                parts.append(" ".join(current))
            current = []
            continue
        if not current and (token in _SHELL_KEYWORDS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token)):
            continue
        current.append(token)
    if current:
        parts.append(" ".join(current))
    return tuple(parts)


def patch_paths(patch: str) -> list[str]:
    """Every file a patch names (v4a headers and unified-diff headers), in order, once each."""
    found: list[str] = []
    for line in patch.splitlines():
        stripped = line.strip()
        for marker in ("*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:"):
            if stripped.startswith(marker):
                found.append(stripped[len(marker) :].strip())
                break
        else:
            if stripped.startswith(("--- ", "+++ ")):
                name = stripped[4:].split("\t", 1)[0].strip()
                if name and name != "/dev/null":
                    if name.startswith(("a/", "b/")):
                        name = name[2:]
                    found.append(name)
    return list(dict.fromkeys(found))


def visible_tools(definitions: list[Any], disallowed: tuple[str, ...]) -> list[Any]:
    """The tool definitions minus those a bare deny rule names (the model never sees them)."""
    bare = [rule for rule in rules_of(disallowed) if rule.bare]
    if not bare:
        return definitions
    return [d for d in definitions if not any(rule.names_tool(d.name) for rule in bare)]


def read_only_tools(definitions: list[Any], effect_of: Callable[[str], Any]) -> list[Any]:
    """The tool definitions plan mode offers: those whose declared effect changes nothing (read,
    network, none). Edits, commands and tools that declare nothing are left out - plan mode
    would deny them - so the model plans with what it can use instead of trying them one by one.
    ``effect_of(name)`` is the tool's ``ToolEffect`` (None when undeclared or unknown)."""
    kept = []
    for definition in definitions:
        effect = effect_of(definition.name)
        if effect is not None and not effect.mutating:
            kept.append(definition)
    return kept

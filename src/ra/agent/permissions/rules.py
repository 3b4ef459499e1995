"""Permission modes and rules: the pure part of :mod:`ra.agent.permissions`.

A rule is ``Tool`` or ``Tool(spec)``; what the spec means depends on what the tool acts on
(commands, files, URLs) - the syntax is documented in :mod:`ra.agent.permissions`. Everything
here is a pure function of a call's name and arguments, so it can be tested, cached and reused
(the ``ra`` command's config validation uses it) without a session.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, get_args

from .shell_words import SimpleCommand, deny_views, hides_commands, read_commands
from .tool_names import RULE_ALIASES, rule_names_of

if TYPE_CHECKING:
    from ra.llm.types import ToolCall

__all__ = [
    "PERMISSION_MODES",
    "CallFacts",
    "PathFacts",
    "PermissionMode",
    "Rule",
    "SdkPermissionMode",
    "anchor_for_child",
    "anchor_rule",
    "claude_mode",
    "effective_mode",
    "normalize_mode",
    "parse_rules",
    "patch_paths",
    "read_only_tools",
    "rules_for",
    "rules_of",
    "split_command",
    "validate_rules",
    "visible_tools",
]

PermissionMode = Literal["default", "accept_edits", "plan", "bypass", "dont_ask"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)
#: The Claude Agent SDK's spellings of the modes, accepted everywhere a mode is given.
SdkPermissionMode = Literal["acceptEdits", "bypassPermissions", "bypass_permissions", "dontAsk"]
_MODE_ALIASES: dict[str, PermissionMode] = {
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


_CLAUDE_MODES = {"accept_edits": "acceptEdits", "bypass": "bypassPermissions", "dont_ask": "dontAsk"}


def claude_mode(mode: str) -> str:
    """``mode`` as Claude Code spells it (``acceptEdits``, ``bypassPermissions``, ``dontAsk``):
    what consumers of stream-json, hook input and SDK messages compare against. Either spelling
    in; ValueError if unknown."""
    value = normalize_mode(mode)
    return _CLAUDE_MODES.get(value, value)


def effective_mode(config: Any, *, can_ask: bool = False) -> PermissionMode:
    """The mode a session with ``config`` starts in: its ``permission_mode``; when none is set,
    "default" if anything asks for checks (allow or ask rules - they only mean something when the
    rest is asked about - or a ``can_use_tool`` callback, ``can_ask``), else "bypass"."""
    mode = getattr(config, "permission_mode", None)
    if mode is not None:
        return normalize_mode(mode)
    return "default" if can_ask or config.allowed_tools or config.ask_tools else "bypass"


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
            raise ValueError(f"cannot read permission rule {raw!r}; expected Tool or Tool(spec), e.g. Bash(git diff:*)")
        tool, spec = match.group(1), match.group(2)
        if spec is not None and not spec.strip():
            raise ValueError(f"permission rule {raw!r} has an empty spec; write just {tool!r} to match every call")
        if spec is not None and _closes_early(spec):
            # ``Bash(ls)Bash(rm:*)``: two rules run together, read as one that matches nothing.
            raise ValueError(
                f"permission rule {raw!r} closes its parenthesis before the end; write one rule per entry "
                "(separate rules with a comma in a flag), or quote a ')' that belongs to the command"
            )
        return cls(raw, tool, None if spec is None else spec.strip())

    @property
    def bare(self) -> bool:
        return self.spec is None

    def names_tool(self, tool_name: str) -> bool:
        pattern = _name_pattern(self.tool)
        if pattern.startswith("mcp__") and "__" not in pattern[5:] and not _GLOB_CHARS.intersection(pattern):
            # ``mcp__server``: every tool of that server (Claude Code's form).
            return tool_name == pattern or tool_name.startswith(pattern + "__")
        return any(fnmatch.fnmatchcase(name, pattern) for name in rule_names_of(tool_name))

    def matches(self, call: CallFacts, *, every_part: bool) -> bool:
        """Whether the rule matches the call: as an allow rule (``every_part``: every command of a
        line, every file of a patch, read strictly) or as a deny/ask rule (any of them, read every
        way the call could be meant)."""
        if not self.names_tool(call.tool_name):
            return False
        spec = self.spec
        if spec is None:
            return True
        if call.commands is not None:
            compiled = _command_spec(spec)
            if every_part:
                if call.opaque_command or call.elsewhere:
                    # What runs cannot be read off the line, or it runs in a directory outside
                    # the working directory (``workdir``: like ``cd elsewhere && ...``, whose
                    # ``cd`` a rule would have to allow): never allowed by a spec.
                    return False
                return all(_allow_command(compiled, part) for part in call.commands or [_EMPTY])
            if compiled.match(call.command_text) or any(compiled.match(view) for view in call.rough):
                return True
            return any(compiled.match(view) for part in call.commands for view in deny_views(part))
        if spec.startswith("domain:"):
            domain = _host(spec[len("domain:") :])
            named = [host == domain or host.endswith("." + domain) for host in call.hosts]
            # An allow rule must name every host the call reaches; a deny or ask rule any.
            if every_part:
                return bool(named) and all(named) and not call.unknown_host
            return any(named)
        if call.paths or call.scopes:
            path_spec = _path_spec(spec)
            if every_part:
                # Allowed when what is really touched is allowed: the resolved path.
                return bool(call.paths) and all(
                    _path_matches(path_spec, real, call, allow=True) for p in call.paths for real in p.real
                )
            return any(
                _path_matches(path_spec, candidate, call, allow=False)
                for p in (*call.paths, *call.tree_for(path_spec)[0])
                for candidate in (p.given, *p.real)
            )
        return any(fnmatch.fnmatchcase(value, spec) for value in call.strings or [""])

    def unsure(self, call: CallFacts) -> bool:
        """For a deny or ask rule with a command spec that did not match: whether a command of the
        call is one ra cannot read (``$CMD x``, ``{rm,-rf,x}``, unbalanced quotes, a shell that
        reads its commands from standard input: ``... | bash``), so the rule might name what runs.
        The check asks about such a call instead of running it."""
        if self.spec is None or not self.names_tool(call.tool_name):
            return False
        if self.spec.startswith("domain:"):
            return call.unknown_host
        if call.commands is None:
            # A search or read of a directory tree too large to list: a file in it may be one
            # the rule names.
            if not call.scopes or self.spec.startswith("domain:"):
                return False
            return not call.tree_for(_path_spec(self.spec))[1]
        return call.unreadable or any(part.unreadable or hides_commands(part) for part in call.commands)


def _name_pattern(pattern: str) -> str:
    """A rule's tool name as a glob. ``.*`` is read as ``*``: hook matchers are regular expressions
    (``mcp__github__.*``), and a rule copied from one must not silently match nothing - no tool
    name holds a ``.``, so the spelling cannot mean anything else."""
    return pattern.replace(".*", "*") if ".*" in pattern else pattern


def _closes_early(spec: str) -> bool:
    """Whether an unquoted ``)`` in ``spec`` closes the rule's parenthesis before its end."""
    depth = 0
    quote = ""
    for char in spec:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return True
    return False


#: Rule names whose specs are paths.
_PATH_RULE_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "Grep", "Glob", "LS"})


def anchor_rule(text: str, root: str) -> str:
    """``text`` with a file spec relative to the project root (``Edit(/src/**)``) anchored at
    ``root`` (``Edit(//home/me/project/src/**)``): for rules read from a settings file, whose
    ``/path`` means the file's project, not the session's working directory. Other rules are
    returned as they are."""
    rule = Rule.parse(text)
    spec = rule.spec
    if spec is None or not spec.startswith("/") or spec.startswith("//"):
        return rule.text
    if rule.tool not in _PATH_RULE_TOOLS and not (_FILE_TOOLS & set(_tools_named(rule.tool))):
        return rule.text
    # normpath: a deny rule written ``/../secrets/**`` must name the directory it means.
    return f"{rule.tool}(/{os.path.normpath(os.path.join(os.path.abspath(root), spec.lstrip('/')))})"


def anchor_for_child(rules: Iterable[str], root: str, *, allow: bool) -> tuple[str, ...]:
    """``rules`` for a subagent whose working directory is not ``root`` (``spawn_agent`` with a
    ``working_dir``): every file spec that is relative to the working directory - ``./p``,
    ``dir/p``, ``/p`` - anchored at ``root`` (``//root/p``), so that it names the files it named
    for the parent. A child spawned in ``..`` otherwise read ``Read(./.env)`` as its own ``.env``
    and reached the project's as ``project/.env``. Allow rules are replaced (a bare name too:
    ``*.md`` becomes ``//root/**/*.md``); deny and ask rules keep their own reading besides (a
    superset; a bare name matches anywhere already)."""
    base = os.path.abspath(root).rstrip("/")
    out: list[str] = []
    for text in rules:
        rule = Rule.parse(text)
        spec = rule.spec
        path_rule = rule.tool in _PATH_RULE_TOOLS or bool(_FILE_TOOLS & set(_tools_named(rule.tool)))
        if spec is None or not path_rule or spec.startswith(("//", "~", "domain:")):
            out.append(rule.text)
            continue
        body = spec[2:] if spec.startswith("./") else spec.lstrip("/")
        if "/" not in spec:
            if not allow:
                out.append(rule.text)
                continue
            body = f"**/{spec}"
        anchored = f"{rule.tool}(/{base}/{body})"
        out.extend((anchored,) if allow else (rule.text, anchored))
    return tuple(dict.fromkeys(out))


_FILE_TOOLS = frozenset(
    {"read_file", "read_many_files", "grep", "grep_files", "glob", "list_dir", "edit_file", "write_file", "apply_patch"}
)


def _tools_named(pattern: str) -> list[str]:
    return [name for name in _FILE_TOOLS if fnmatch.fnmatchcase(name, pattern)]


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


_GLOB_CHARS = frozenset("*?[")


def validate_rules(rules: Iterable[str], tool_names: Iterable[str], *, source: str) -> list[str]:
    """The problems of ``rules`` for a session whose tools are ``tool_names``, each a sentence
    that starts with ``source`` (a flag, a file, "allowed_tools"): a rule that cannot be read, or
    one that names no tool of the session and no Claude Code name (``shel_comand(ls)``, or
    ``shell(ls)`` on a profile whose command tool is ``shell_command``) - it would match nothing.
    Names of MCP tools (``mcp__...``) are accepted without a tool to match (servers connect later).
    An empty list: every rule takes effect. The ``ra`` command refuses a flag's problems (exit 2)
    and warns about a file's; a session warns once (a WARNING event and log)."""
    names = sorted(set(tool_names))
    problems: list[str] = []
    for text in rules:
        try:
            rule = Rule.parse(text)
        except ValueError as exc:
            problems.append(f"{source}: {exc}")
            continue
        if rule.tool.startswith("mcp__"):
            continue
        if rule.tool in RULE_ALIASES or any(rule.names_tool(name) for name in names):
            continue
        if _GLOB_CHARS.intersection(rule.tool) and any(fnmatch.fnmatchcase(a, rule.tool) for a in RULE_ALIASES):
            continue
        close = difflib.get_close_matches(rule.tool, [*names, *RULE_ALIASES], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(
            f"{source}: the rule {rule.text!r} names no tool of this session{hint}, so it would match nothing; "
            f"the tools are {', '.join(names) or '(none)'}, and Claude Code's names "
            f"{', '.join(RULE_ALIASES)} work on every profile"
        )
    return problems


# -- commands --------------------------------------------------------------------------------------

_EMPTY = SimpleCommand((), (), (), False, False)


@dataclass(frozen=True, slots=True)
class _CommandSpec:
    """A command spec, read like a command: ``git status:*`` (prefix), ``npm run *`` (glob: ``*``
    is any text), anything else exact. ``names_extra``: the spec itself starts with assignments or
    has a redirection, so it is matched against the whole command (:attr:`SimpleCommand.full`)."""

    kind: str
    text: str
    assigns: bool
    redirects: bool
    pattern: re.Pattern[str] | None = None
    #: An exact spec's words, as the shell splits them: an allow rule compares words, not the
    #: text they make joined by spaces (``find . -name 'x -delete'`` is not ``find . -name x
    #: -delete``).
    words: tuple[str, ...] | None = None

    def match(self, command: str) -> bool:
        if self.kind == "prefix":
            return command == self.text or command.startswith(self.text + " ")
        if self.pattern is not None:
            return self.pattern.fullmatch(command) is not None
        return command == self.text


@lru_cache(maxsize=512)
def _command_spec(spec: str) -> _CommandSpec:
    prefix = spec.endswith(":*")
    body = spec[:-2].rstrip() if prefix else spec
    text, assigns, redirects = body, False, False
    words: tuple[str, ...] | None = None
    read = read_commands(body)
    if read is not None and len(read) == 1:
        command = read[0]
        assigns, redirects = bool(command.assignments), bool(command.redirects)
        text = command.full if assigns or redirects else command.text
        words = None if command.unreadable else tuple(command.words)
    if prefix:
        return _CommandSpec("prefix", text, assigns, redirects)
    if "*" in text:
        regex = ".*".join(re.escape(piece) for piece in text.split("*"))
        if text.endswith(" *"):  # Claude Code: ``ls *`` is ``ls`` or ``ls`` and more words
            regex = regex[: -len(re.escape(" ") + ".*")] + "(?: .*)?"
        return _CommandSpec("glob", text, assigns, redirects, re.compile(regex, re.DOTALL))
    return _CommandSpec("exact", text, assigns, redirects, words=words)


def _allow_command(spec: _CommandSpec, command: SimpleCommand) -> bool:
    """An allow rule matches a simple command only as written: not one whose command word the
    shell works out at run time, not one with leading assignments or an output redirection
    unless the spec has them too."""
    if command.unreadable:
        return False
    if command.assignments and not spec.assigns:
        return False
    if command.writes and not spec.redirects:
        return False
    if spec.kind == "exact" and spec.words is not None and not (spec.assigns or spec.redirects):
        return tuple(command.words) == spec.words
    return spec.match(command.full if spec.assigns or spec.redirects else command.text)


# -- paths -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PathSpec:
    """A file spec, in Claude Code's (gitignore's) forms: ``//abs`` absolute, ``~/p`` under the
    home directory, ``/p`` relative to the project root (the working directory), ``./p`` or
    ``dir/p`` relative to the working directory, a bare name (``*.env``) at any depth.
    ``legacy``: a ``/p`` spec, which deny and ask rules also read as the absolute path ``/p``
    (what it meant before ra took Claude Code's forms)."""

    kind: str  # "absolute" | "relative" | "name"
    pattern: re.Pattern[str]
    legacy: re.Pattern[str] | None = None
    #: The globs the patterns were made from (an absolute one for ``legacy``): where a search of
    #: a directory tree can find a match (:meth:`CallFacts.tree_for`).
    globs: tuple[str, ...] = ()


def _spec(kind: str, glob: str, legacy: str | None = None) -> _PathSpec:
    globs = (glob,) if legacy is None else (glob, legacy)
    return _PathSpec(kind, _glob_regex(glob), None if legacy is None else _glob_regex(legacy), globs)


@lru_cache(maxsize=256)
def _path_spec(spec: str) -> _PathSpec:
    directory = spec.endswith("/") and spec.strip("/") != ""
    body = spec.rstrip("/") + "/**" if directory else spec
    if body.startswith("//"):
        return _spec("absolute", "/" + body.lstrip("/"))
    if body == "~" or body.startswith("~/"):
        return _spec("absolute", os.path.expanduser("~") + body[1:])
    if body.startswith("/"):
        return _spec("relative", body.lstrip("/"), legacy=body)
    if body.startswith("./"):
        return _spec("relative", os.path.normpath(body))
    if "/" not in body:
        return _spec("name", body)
    return _spec("relative", os.path.normpath(body) if "**" not in body else body)


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
    return re.compile("".join(out), re.DOTALL)


def _path_matches(spec: _PathSpec, path: str, call: CallFacts, *, allow: bool) -> bool:
    """Whether ``spec`` matches the absolute ``path`` or, as in .gitignore, a directory it is in."""
    if spec.kind == "absolute":
        return any(spec.pattern.fullmatch(c) for c in _self_and_parents(path))
    if not allow and spec.legacy is not None and any(spec.legacy.fullmatch(c) for c in _self_and_parents(path)):
        return True
    relative = call.relative(path)
    if spec.kind == "name":
        if relative is None:
            # Outside the project: a deny or ask rule's name still matches; an allow rule's does not.
            return not allow and any(spec.pattern.fullmatch(part) for part in path.split("/") if part)
        parts = relative.split("/")
        return any(spec.pattern.fullmatch(part) for part in parts) or any(
            spec.pattern.fullmatch(c) for c in _self_and_parents(relative)
        )
    if relative is None:
        return False  # outside the working directory: only absolute specs reach it
    return any(spec.pattern.fullmatch(c) for c in _self_and_parents(relative))


def _self_and_parents(path: str) -> Iterator[str]:
    """``path``, then each directory it is in (``a/b/c``, ``a/b``, ``a``; ``/x/y``, ``/x``, ``/``)."""
    yield path
    end = len(path)
    while (end := path.rfind("/", 0, end)) > 0:
        yield path[:end]
    if path.startswith("/") and path != "/":
        yield "/"


# -- what a call acts on ----------------------------------------------------------------------------

_PATH_KEYS = ("file_path", "path", "dir_path", "absolute_path", "notebook_path")
_PATH_LIST_KEYS = ("paths", "file_paths")
#: Tools that read every file of a directory or glob: deny and ask rules look at those files.
_TREE_READERS = frozenset({"grep", "grep_files", "read_many_files"})
#: Most directory entries looked at for one call; a larger tree is one a rule cannot vouch for.
_TREE_LIMIT = 20_000
_GLOB_MAGIC = frozenset("*?[{")
_OPAQUE = re.compile(r"\$\(|`|<\(|>\(")
_ROUGH_SPLIT = re.compile(r"[;&|()`\n\"']+|\$\(")


@dataclass(frozen=True, slots=True)
class PathFacts:
    """A path a call touches: as given (made absolute against the working directory, ``..``
    taken off lexically, as the tools do) and as the file system resolves it - every symlink
    followed, a file that does not exist yet under its deepest existing directory resolved. Both
    resolutions are kept when they differ: the lexical path resolved (what the tools open) and the
    path as written resolved (``src/up/..`` where ``up`` is a link: what the kernel would open)."""

    given: str
    real: tuple[str, ...]


@dataclass(slots=True)
class CallFacts:
    """The parts of a call that rules look at, worked out once per call."""

    tool_name: str
    cwd: str
    command_text: str = ""
    commands: list[SimpleCommand] | None = None
    #: A substitution (``$(...)``, backticks, ``<(...)``): what runs cannot be read off the line.
    opaque_command: bool = False
    #: The line could not be read at all (unbalanced quotes).
    unreadable: bool = False
    #: The command runs in a ``workdir`` outside the working directory (as resolved).
    elsewhere: bool = False
    #: For an opaque line: the pieces between operators and quotes, for deny and ask rules.
    rough: list[str] = field(default_factory=list)
    paths: list[PathFacts] = field(default_factory=list)
    #: The hosts a web call reaches: its ``url``'s, or every URL in ``web_fetch``'s ``prompt``.
    hosts: list[str] = field(default_factory=list)
    #: A URL of the call whose host cannot be read: a ``domain:`` deny or ask rule might name it.
    unknown_host: bool = False
    strings: list[str] = field(default_factory=list)
    #: What a tool that reads whole trees (``grep``, ``read_many_files``) reads besides single
    #: files: directories (absolute) and glob patterns (as given). Deny and ask rules are matched
    #: against every file under them (:meth:`tree`).
    scopes: list[str] = field(default_factory=list)
    _real_cwd: str | None = None
    _listings: dict[str, tuple[list[PathFacts], bool]] = field(default_factory=dict)
    _budget: int = 0

    @classmethod
    def of(cls, call: ToolCall, cwd: str, *, local: bool = True) -> CallFacts:
        """The facts of ``call`` run in ``cwd``. ``local``: the paths are this machine's; where they
        are not (an SSH environment), a command's ``workdir`` other than ``cwd`` itself counts as
        elsewhere, as links there cannot be resolved."""
        args = call.arguments if isinstance(call.arguments, Mapping) else {}
        facts = cls(call.name, cwd)
        command = args.get("command", args.get("cmd"))
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        if isinstance(command, str):
            facts.command_text = command.strip()
            facts.opaque_command = bool(_OPAQUE.search(command))
            commands = read_commands(command)
            if commands is None:  # unbalanced quotes: nothing a rule can vouch for
                facts.opaque_command = facts.unreadable = True
                commands = ()
            facts.commands = list(commands)
            if facts.opaque_command:
                facts.rough = [p.strip() for p in _ROUGH_SPLIT.split(command) if p.strip()]
            workdir = args.get("workdir")
            if isinstance(workdir, str) and workdir and not local:
                facts.elsewhere = posixpath.normpath(posixpath.join(cwd, workdir)) != posixpath.normpath(cwd)
            elif isinstance(workdir, str) and workdir:
                where = facts._path(workdir)
                facts.elsewhere = any(facts.relative(real) is None for real in where.real)
            return facts
        given: list[str] = []
        for key in _PATH_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value:
                given.append(value)
        for key in _PATH_LIST_KEYS:
            value = args.get(key)
            if isinstance(value, list):
                given.extend(v for v in value if isinstance(v, str) and v)
        if call.name in _TREE_READERS:
            given = facts._tree_scopes(args, given)
            facts._budget = _TREE_LIMIT
        patch = args.get("patch", args.get("input"))
        if isinstance(patch, str) and call.name == "apply_patch":
            given.extend(patch_paths(patch))
        facts.paths = [facts._path(p) for p in dict.fromkeys(given)]
        url = args.get("url")
        urls = [url] if isinstance(url, str) else []
        prompt = args.get("prompt")
        if call.name == "web_fetch" and isinstance(prompt, str):
            from ra.tools.web import prompt_urls

            urls.extend(prompt_urls(prompt))
        for u in urls:
            host = _url_host(u)
            if host:
                facts.hosts.append(host)
            else:
                facts.unknown_host = True
        facts.strings = [v for v in args.values() if isinstance(v, str)]
        return facts

    def _tree_scopes(self, args: Mapping[str, Any], given: list[str]) -> list[str]:
        """For a tool that reads trees: ``given`` without glob patterns, which go to
        :attr:`scopes` with every directory the tool would read (``grep``'s ``path``, the
        working directory when it has none; ``read_many_files``' directories, globs and
        ``include`` patterns)."""
        entries = list(given)
        if self.tool_name == "read_many_files":
            include = args.get("include")
            if isinstance(include, list):
                entries.extend(v for v in include if isinstance(v, str) and v.strip())
        elif not entries:
            entries.append(".")
        files: list[str] = []
        for entry in entries:
            if _GLOB_MAGIC.intersection(entry):
                self.scopes.append(entry)
                continue
            full = os.path.normpath(os.path.join(self.cwd, os.path.expanduser(entry)))
            if os.path.isdir(full):
                self.scopes.append(full)
            files.append(entry)
        return files

    def tree_for(self, spec: _PathSpec) -> tuple[list[PathFacts], bool]:
        """The files under :attr:`scopes` that ``spec`` could match, as the tree-reading tools
        pick them (hidden names and links to directories left out, as they do; a link to a file
        kept, with its target), and whether the list is complete. Only the part of a tree the
        spec can reach is listed (``secrets/**``: ``secrets/``; ``.env``: nothing, the tools skip
        hidden files); a bare name (``*.pem``) needs the whole tree. At most ``_TREE_LIMIT``
        entries are looked at for a call."""
        found: list[PathFacts] = []
        complete = True
        for scope in self.scopes:
            if not scope.startswith("/"):  # a glob pattern: the files it names, as the tool finds them
                files, whole = self._listing(scope, glob=True)
                found.extend(files)
                complete = complete and whole
                continue
            # grep skips links; read_many_files reads a link to a file, wherever it points, so
            # its trees are listed whole (the tool reads 500 files at most anyway).
            starts = [scope] if self.tool_name == "read_many_files" else _starts(spec, scope, self.cwd)
            for start in starts:
                files, whole = self._listing(start, glob=False)
                found.extend(files)
                complete = complete and whole
        return found, complete

    def _listing(self, start: str, *, glob: bool) -> tuple[list[PathFacts], bool]:
        """The files of a glob pattern, or under a directory (or the file itself), cached for
        the call; the listing stops once the call has looked at ``_TREE_LIMIT`` entries."""
        known = self._listings.get(start)
        if known is not None:
            return known
        found: list[PathFacts] = []
        complete = True
        if glob:
            from ra.env.search import glob_files

            try:
                names = glob_files(start, self.cwd)
            except (OSError, ValueError):
                names = []
            if len(names) > self._budget:
                complete, names = False, names[: max(self._budget, 0)]
            self._budget -= len(names)
            found.extend(self._path(name) for name in names)
        elif not os.path.isdir(start):
            if os.path.lexists(start):
                found.append(self._path(start))
        else:
            stack = [start]
            while stack and complete:
                directory = stack.pop()
                try:
                    with os.scandir(directory) as entries:
                        for entry in entries:
                            self._budget -= 1
                            if self._budget < 0:
                                complete = False
                                break
                            if entry.name.startswith("."):
                                continue
                            if entry.is_dir(follow_symlinks=False):
                                stack.append(entry.path)
                            else:
                                found.append(self._path(entry.path))
                except OSError:
                    continue
        self._listings[start] = (found, complete)
        return found, complete

    def _path(self, path: str) -> PathFacts:
        joined = os.path.join(self.cwd, os.path.expanduser(path))
        given = os.path.normpath(joined)
        real = os.path.realpath(given)
        if joined == given or ".." not in joined.split("/"):
            return PathFacts(given, (real,))  # no ``..`` to read two ways: one resolution (~20 us)
        written = os.path.realpath(joined)
        return PathFacts(given, (real,) if written == real else (real, written))

    def relative(self, path: str) -> str | None:
        """``path`` relative to the working directory (as given, or as resolved), or None when it
        is outside it."""
        found = _under(path, self.cwd)
        return found if found is not None or self.real_cwd == self.cwd else _under(path, self.real_cwd)

    @property
    def real_cwd(self) -> str:
        if self._real_cwd is None:
            self._real_cwd = os.path.realpath(self.cwd)
        return self._real_cwd


def _starts(spec: _PathSpec, scope: str, cwd: str) -> list[str]:
    """Where, under the directory ``scope``, a file ``spec`` matches can be: the scope itself
    for a bare name that is not hidden; for a path spec, the deepest directory its glob names
    literally (``secrets/**``: ``<cwd>/secrets``) when that is in the scope and not hidden
    from the tools, or the scope when the scope is inside it; nothing otherwise."""
    if spec.kind == "name":
        (glob,) = spec.globs
        return [] if glob.startswith(".") else [scope]
    starts: list[str] = []
    for glob in spec.globs:
        parts: list[str] = []
        for part in glob.split("/"):
            if _GLOB_MAGIC.intersection(part):
                break
            parts.append(part)
        literal = "/".join(parts)
        root = os.path.normpath(literal if glob.startswith("/") else os.path.join(cwd, literal))
        inside = _under(root, scope)
        if inside is not None:
            if not any(part.startswith(".") and part != "." for part in inside.split("/")):
                starts.append(root)
        elif _under(scope, root) is not None:
            starts.append(scope)
    return list(dict.fromkeys(starts))


def path_scoped(text: str, tool_registry: Any) -> bool:
    """Whether a rule's spec is matched against file paths, resolved on this machine: it has a
    spec (not ``domain:``) and names a tool of ``tool_registry`` that takes paths (``file_path``,
    ``path``, ``paths``..., a patch, a tree to search) or an MCP tool (its arguments are not known
    here). A rule on a command tool reads its spec as a command line; one on another tool (an
    agent type, a search query) matches the argument's text; one that names no tool of the
    session matches nothing (a warning says so)."""
    try:
        rule = Rule.parse(text)
    except ValueError:
        return False  # refused with its own message by the rule checks
    if rule.spec is None or rule.spec.startswith("domain:"):
        return False
    if rule.tool.startswith("mcp__"):
        return True
    for name in tool_registry.names():
        if not rule.names_tool(name):
            continue
        tool = tool_registry.get(name)
        properties = (tool.definition.parameters or {}).get("properties", {}) if tool is not None else {}
        if "command" in properties or "cmd" in properties:
            continue
        if name in _TREE_READERS or any(key in properties for key in (*_PATH_KEYS, *_PATH_LIST_KEYS, "patch")):
            return True
    return False


def refuse_file_rules_elsewhere(config: Any, env: object, tool_registry: Any) -> None:
    """A ValueError for a rule that names files when ``env``'s files are not this machine's (an
    SSH environment): such a rule resolves links here, where the files are not, so an allow rule
    would follow no remote link and a deny rule would miss one - it cannot take effect."""
    from ra.env.base import local_paths

    if local_paths(env):
        return
    for key in ("allowed_tools", "disallowed_tools", "ask_tools"):
        for text in getattr(config, key):
            if path_scoped(text, tool_registry):
                raise ValueError(
                    f"the permission rule {text!r} ({key}) names files, and ra checks file rules against this "
                    "machine's files (links resolved here), not those of the environment the tools use "
                    f"({type(env).__name__}); use rules on whole tools (Read, Edit) and commands (Bash(git:*))"
                )


def _url_host(url: str) -> str | None:
    """The host a request to ``url`` reaches, as the web tools' client reads it
    (:func:`ra.tools.web.url_host`); None where it reads none."""
    from ra.tools.web import url_host

    return url_host(url)


def _host(name: str) -> str:
    """A rule's ``domain:`` host in the spelling requests use (:func:`ra.tools.web.host_key`:
    case, the root's trailing dot, IDNA 2008, IPv4 spellings), so that a rule and a URL that name
    one host compare equal."""
    from ra.tools.web import host_key

    return host_key(name)


def _under(path: str, root: str) -> str | None:
    if path == root:
        return "."
    base = root.rstrip("/") + "/"
    return path[len(base) :] if path.startswith(base) else None


def split_command(command: str) -> list[str] | None:
    """The simple commands of a shell command line, each as its words joined by one space
    (leading ``VAR=value`` assignments and redirections left out); None when the line cannot be
    read (unbalanced quotes)."""
    commands = read_commands(command)
    return None if commands is None else [c.text for c in commands if c.words]


def patch_paths(patch: str) -> list[str]:
    """Every file a patch touches, in order, once each, as the patch parser reads it (the tool
    applies what the parser reads): added, updated and deleted files, the source and the target
    of a move, a unified diff's other name. A patch the parser refuses is refused by the tool too;
    its header lines are scanned instead (with and without ``a/`` / ``b/``), so that deny rules
    still see its files."""
    found: list[str] = []
    try:
        from ra.tools.patch_parse import parse_patch

        for op in parse_patch(patch).operations:
            found.append(op.path)
            if op.move_to:
                found.append(op.move_to)
            found.extend(op.alt_paths)
    except Exception:
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
                        found.append(name)
                        if name.startswith(("a/", "b/")):
                            found.append(name[2:])
    return [p for p in dict.fromkeys(found) if p]


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

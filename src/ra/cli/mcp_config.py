"""Which MCP servers a ``ra`` run (or ``ra mcp list``) uses, and where each was configured.

Three sources, read in this order; a later one replaces an earlier one's server of the same name
(the whole entry, not field by field), and an entry switched off (``"disabled": true``) removes
the name:

1. the config file's ``[mcp_servers.NAME]`` tables (``command``/``args``/``env``/``cwd``, or
   ``url``/``headers``/``type``: the ``.mcp.json`` entry shape in TOML);
2. the project's ``.mcp.json`` in the working directory, **only when the directory is trusted**:
   listed in the config file's ``trusted_mcp_projects``. A cloned repository's ``.mcp.json`` can
   name any command, and ra starts stdio servers when a session starts, so a file that merely sits
   in the directory must not run anything. Untrusted, the file is not read and a notice says how
   to use it (``--mcp-config .mcp.json`` for one run, or the trust setting);
3. every ``--mcp-config`` in the order given: a file, or (as Claude Code accepts) the JSON itself
   when the argument starts with ``{``. A relative path is relative to the working directory
   (``-C``), like ``--settings``.

``--strict-mcp-config`` keeps only the ``--mcp-config`` servers (no flag: no servers at all).

An entry that cannot be used (a ``${VAR}`` that is not set, no command) is a
:class:`~ra.mcp.spec.ServerProblem`: it stays in the result and the session reports it as a
failed server (a warning), and the run goes on. A source that cannot be read at all (no such
file, not JSON, not the ``mcpServers`` shape) is a :class:`ConfigError` (exit 2) naming it.
Nothing here prints a server's ``env`` or ``headers``: they may hold secrets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import ConfigError

if TYPE_CHECKING:
    from ra.mcp.spec import McpServerSpec, ServerProblem

__all__ = [
    "PROJECT_FILE",
    "McpConfig",
    "check_mcp_rules",
    "missing_package_notice",
    "remember_secrets",
    "resolve_mcp_config",
    "trusted_projects",
]

#: The project's MCP file, in the working directory (Claude Code's name and shape).
PROJECT_FILE = ".mcp.json"


@dataclass(slots=True)
class McpConfig:
    """The servers of a run, by name, in the order they were first configured."""

    servers: dict[str, McpServerSpec | ServerProblem] = field(default_factory=dict)
    #: Where each server's entry came from (a file path, ``--mcp-config JSON #2``, ...).
    sources: dict[str, str] = field(default_factory=dict)
    #: One-line remarks for stderr (an untrusted project file that was not read).
    notices: list[str] = field(default_factory=list)

    def _merge(self, parsed: Mapping[str, Any], disabled: set[str], source: str) -> None:
        for name in disabled:
            self.servers.pop(name, None)
            self.sources.pop(name, None)
        for name, spec in parsed.items():
            self.servers[name] = spec
            self.sources[name] = source


def remember_secrets(config: McpConfig) -> None:
    """Tell ra's redaction (:func:`ra.llm.redaction.remember_secret`) the secrets the servers'
    entries hold, so that no log line or error of this process shows them: the ``mcp`` package
    logs the URL it connects to at DEBUG (``--debug`` prints it), and a URL may carry
    ``user:password@`` or a ``?key=``. Remembered: every header value (and its part after a scheme
    such as ``Bearer``), env values whose names look secret (``*_TOKEN``, ``*_API_KEY``, ...),
    and a URL's password and query values."""
    from urllib.parse import parse_qsl, urlsplit

    from ra.llm.redaction import is_secret_name, remember_secret
    from ra.mcp.spec import HttpServer, StdioServer

    for spec in config.servers.values():
        if isinstance(spec, StdioServer):
            for name, value in spec.env.items():
                if is_secret_name(name):
                    remember_secret(value)
        elif isinstance(spec, HttpServer):
            for value in spec.headers.values():
                remember_secret(value)
                remember_secret(value.partition(" ")[2].strip())
            try:
                parts = urlsplit(spec.url)
                remember_secret(parts.password)
            except ValueError:
                continue
            for _, value in parse_qsl(parts.query):
                remember_secret(value)


def missing_package_notice(config: McpConfig) -> str | None:
    """A warning when servers are configured but the ``mcp`` package (the ``ra-agent[mcp]`` extra)
    is not installed: each server would fail with an import error that does not say what to do."""
    from ra.mcp.spec import ServerProblem

    startable = [name for name, spec in config.servers.items() if not isinstance(spec, ServerProblem)]
    if not startable:
        return None
    import importlib.util

    try:
        if importlib.util.find_spec("mcp") is not None:
            return None
    except (ImportError, ValueError):
        pass
    return (
        f"warning: MCP servers are configured ({', '.join(startable)}) but the mcp package is not installed, "
        "so none can start: pip install 'ra-agent[mcp]'"
    )


def trusted_projects(file: Mapping[str, Any], config_file: str | None) -> list[str]:
    """The config file's ``trusted_mcp_projects``: absolute directories (``~`` expanded), real paths."""
    value = file.get("trusted_mcp_projects", [])
    where = f"config file {config_file}" if config_file else "config file"
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: 'trusted_mcp_projects' must be a list of directories, got {value!r}")
    out = []
    for entry in value:
        path = os.path.expanduser(entry)
        if not os.path.isabs(path):
            raise ConfigError(
                f"{where}: trusted_mcp_projects entry {entry!r} is not an absolute path (a relative one would "
                "trust whatever directory ra runs in)"
            )
        out.append(os.path.realpath(path))
    return out


def _parse(data: Any, source: str, environ: Mapping[str, str]) -> tuple[dict[str, Any], set[str]]:
    """(servers, names switched off) of one source; ConfigError when it is not the shape at all."""
    from ra.mcp.spec import McpConfigError, parse_mcp_servers

    try:
        parsed = parse_mcp_servers(data, source=source, environ=environ)
    except McpConfigError as exc:
        raise ConfigError(str(exc)) from None
    inner = data["mcpServers"] if isinstance(data, Mapping) and "mcpServers" in data else data
    return parsed, {name for name in inner if name not in parsed}


def _read_json(path: str, source: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a directory, not an MCP config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _flag(value: str, index: int, cwd: str) -> tuple[Any, str, str | None]:
    """(data, source, absolute path or None) of one ``--mcp-config`` value."""
    if value.lstrip().startswith("{"):
        source = f"--mcp-config JSON #{index}"
        try:
            return json.loads(value), source, None
        except json.JSONDecodeError as exc:
            # Where it went wrong, never the text itself (it may carry a token).
            raise ConfigError(f"{source}: not valid JSON (column {exc.colno}: {exc.msg})") from None
    if not value.strip():
        raise ConfigError(f"--mcp-config #{index}: empty (give a file, or the JSON itself)")
    path = os.path.abspath(os.path.join(cwd, os.path.expanduser(value)))
    return _read_json(path, f"--mcp-config {path}"), path, path


def resolve_mcp_config(
    flags: Sequence[str] | None,
    *,
    strict: bool,
    file: Mapping[str, Any],
    config_file: str | None,
    cwd: str,
    environ: Mapping[str, str] | None = None,
) -> McpConfig:
    """The servers of a run from the config file's contents (``file``, read from ``config_file``),
    the project's ``.mcp.json`` in ``cwd`` and the ``--mcp-config`` values (see the module docstring)."""
    environ = os.environ if environ is None else environ
    config = McpConfig()
    where = f"config file {config_file}" if config_file else "config file"
    trusted = trusted_projects(file, config_file)  # checked whether or not there is a project file
    table = file.get("mcp_servers")
    if table is not None and not isinstance(table, Mapping):
        raise ConfigError(f"{where}: 'mcp_servers' must be a table of [mcp_servers.NAME] tables")
    flag_data = [_flag(value, i, cwd) for i, value in enumerate(flags or (), start=1)]
    if not strict:
        if table is not None:
            config._merge(*_parse(table, f"{where} [mcp_servers]", environ), where)
        _project(config, trusted, config_file, cwd, environ, [path for _, _, path in flag_data if path])
    for data, source, _ in flag_data:
        config._merge(*_parse(data, source, environ), source)
    config.notices.extend(_overlaps(config.servers))
    return config


def _overlaps(servers: Mapping[str, Any]) -> list[str]:
    """Servers whose tool names a rule for another server also matches: ``a.b`` and ``a_b`` both
    serve ``mcp__a_b__*``, and ``notes__x``'s tools (``mcp__notes__x__*``) are ``mcp__notes``'s
    to a rule. An allow rule meant for one would allow the other's tools."""
    from ra.mcp.names import mcp_server_prefix

    prefixes = {name: mcp_server_prefix(name) for name in servers}
    notices = []
    for name, prefix in prefixes.items():
        for other, other_prefix in prefixes.items():
            if other != name and other_prefix.startswith(prefix) and (other_prefix != prefix or other > name):
                rule = prefix[:-2]
                notices.append(
                    f"warning: MCP servers {name!r} and {other!r} overlap: the rule {rule} matches the tools of both "
                    f"({other_prefix}*); rename one of them"
                )
    return notices


def _project(
    config: McpConfig,
    trusted: list[str],
    config_file: str | None,
    cwd: str,
    environ: Mapping[str, str],
    flag_paths: list[str],
) -> None:
    """The project's ``.mcp.json``: read when ``cwd`` is trusted; otherwise a notice (unless a
    ``--mcp-config`` names that very file, which is the user choosing it)."""
    path = os.path.join(cwd, PROJECT_FILE)
    if not os.path.isfile(path):
        return
    real = os.path.realpath(path)
    if any(os.path.realpath(p) == real for p in flag_paths):
        return
    if os.path.realpath(cwd) in trusted:
        config._merge(*_parse(_read_json(path, path), path, environ), path)
        return
    where = config_file or "the config file"
    config.notices.append(
        f"{path} configures MCP servers that ra does not start: this directory is not trusted (a "
        f"repository's file can name any command). Use them with --mcp-config {PROJECT_FILE}, or add "
        f"{os.path.realpath(cwd)!r} to trusted_mcp_projects in {where}"
    )


def check_mcp_rules(policy: Any, config: McpConfig, sdk_servers: Sequence[str] = ()) -> list[str]:
    """Permission rules naming an MCP server that is not configured (``mcp__notse`` for server
    ``notes``): a flag's is refused (ConfigError, exit 2) - a mistyped deny rule would silently
    deny nothing - and the config or settings file's is returned as a notice (a file may be shared
    by runs with other servers). Globs (``mcp__*``) are not checked; they name no one server.
    ``sdk_servers``: the Claude Agent SDK's in-process servers (configured too)."""
    from ra.agent.permissions.rules import Rule
    from ra.mcp.names import mcp_server_prefix

    names = [*config.servers, *sdk_servers]
    prefixes = [mcp_server_prefix(name) for name in names]
    where = ", ".join(sorted(names)) or "none"
    flagged = {rule for rules in policy.flag_rules.values() for rule in rules}
    problems: list[str] = []
    notices: list[str] = []
    for key in ("allowed_tools", "disallowed_tools", "ask_tools"):
        for text in getattr(policy, key):
            tool = Rule.parse(text).tool
            if not tool.startswith("mcp__") or any(c in tool for c in "*?["):
                continue
            if any((tool + "__").startswith(prefix) for prefix in prefixes):
                continue
            message = f"the rule {text!r} names no configured MCP server (configured: {where})"
            if text in flagged:
                flag = next(f for f, rules in policy.flag_rules.items() if text in rules)
                problems.append(f"{flag}: {message}, so it would match nothing")
            else:
                notices.append(f"warning: {key}: {message}")
    if problems:
        raise ConfigError("; ".join(problems))
    return notices

"""What an MCP server is, as configured: how to start or reach it, and its time limits.

The shape follows ``.mcp.json`` (``{"mcpServers": {name: {...}}}``), the file Claude Code, Cursor
and others read, so a user's existing file configures ra unchanged: ``command`` / ``args`` /
``env`` / ``cwd`` for a server ra starts over stdio, ``type: "http"`` (or ``"sse"``) with ``url``
and ``headers`` for one it reaches over the network. ``${VAR}`` and ``${VAR:-default}`` in those
values are read from the environment when the file is read, as Claude Code does.

A server whose entry cannot be used (a variable that is not set, no command, a bad URL) is not a
reason to refuse the whole file: it becomes a :class:`ServerProblem`, which the session reports as
a failed server with that message, and the other servers start. A file that is not JSON, or not
in this shape at all, is refused with :class:`McpConfigError`.

Values that may hold secrets (``env``, ``headers``) never appear in a ``repr``: only their keys.
This module imports nothing from the ``mcp`` package (reading a config needs none of it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

__all__ = [
    "HttpServer",
    "McpConfigError",
    "McpServerSpec",
    "ServerProblem",
    "StdioServer",
    "load_mcp_config",
    "parse_mcp_servers",
]


class McpConfigError(ValueError):
    """An MCP configuration that cannot be read at all (not JSON, not the ``mcpServers`` shape)."""


def _keys_only(values: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k!r}: '***'" for k in values) + "}"


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server ra starts as a child process and talks to over its stdin and stdout.

    The process gets the ``mcp`` package's default environment (``HOME``, ``LOGNAME``, ``PATH``,
    ``SHELL``, ``TERM``, ``USER``) plus ``env``: ra's own API keys are not handed to every server.
    ``cwd`` defaults to the session's working directory.
    """

    transport: ClassVar[str] = "stdio"

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    #: Seconds to wait for the server to start and list its tools (None: the session's default).
    startup_timeout: float | None = None
    #: Seconds one tool call may take (None: the session's default).
    tool_timeout: float | None = None

    def __repr__(self) -> str:
        return (
            f"StdioServer(command={self.command!r}, args={self.args!r}, env={_keys_only(self.env)}, "
            f"cwd={self.cwd!r}, startup_timeout={self.startup_timeout!r}, tool_timeout={self.tool_timeout!r})"
        )


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server reached over streamable HTTP (``transport="http"``) or the older SSE transport.

    ``bearer_token_env_var`` names an environment variable whose value is sent as
    ``Authorization: Bearer <value>`` (read when the connection is made, so the token is in no
    config object); ``headers`` are sent as they are.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token_env_var: str | None = None
    transport: Literal["http", "sse"] = "http"
    startup_timeout: float | None = None
    tool_timeout: float | None = None

    def __repr__(self) -> str:
        return (
            f"HttpServer(url={self.url!r}, headers={_keys_only(self.headers)}, "
            f"bearer_token_env_var={self.bearer_token_env_var!r}, transport={self.transport!r}, "
            f"startup_timeout={self.startup_timeout!r}, tool_timeout={self.tool_timeout!r})"
        )


@dataclass(frozen=True, slots=True)
class ServerProblem:
    """A configured server that cannot be started as written; ``message`` says why."""

    message: str


McpServerSpec = StdioServer | HttpServer

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Keys other tools write into ``.mcp.json`` entries that mean nothing to ra's client; they are
#: skipped without a word. Any other unknown key makes the entry a problem (it may be a typo of a
#: key that matters, such as ``comand``).
_FOREIGN_KEYS = frozenset({"description", "autoApprove", "alwaysAllow", "disabledTools", "oauth", "trust"})
_COMMON_KEYS = frozenset({"type", "transport", "timeout", "startup_timeout", "tool_timeout", "disabled", "enabled"})
_STDIO_KEYS = _COMMON_KEYS | {"command", "args", "env", "cwd"}
_HTTP_KEYS = _COMMON_KEYS | {"url", "headers", "bearer_token_env_var"}


class _Unset(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _expand(value: str, environ: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found is not None and (found or default is None):
            return found
        if default is not None:
            return default
        raise _Unset(name)

    return _VAR.sub(replace, value)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _table(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{what} must be an object of strings")
    return dict(value)


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds")
    return float(value)


def _parse_one(entry: Mapping[str, Any], environ: Mapping[str, str]) -> McpServerSpec | None:
    """One entry -> a spec, or None when the entry is switched off; ValueError says what is wrong."""
    if entry.get("disabled") is True or entry.get("enabled") is False:
        return None
    kind = entry.get("type", entry.get("transport"))
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http", "sse"):
        raise ValueError(f"type {kind!r} is not one of stdio, http, sse")
    known = _STDIO_KEYS if kind == "stdio" else _HTTP_KEYS
    unknown = sorted(set(entry) - known - _FOREIGN_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)} for a {kind} server")
    # ``timeout`` (Cline, gemini-cli write it) is the tool-call bound in seconds.
    tool_timeout = _seconds(entry.get("tool_timeout", entry.get("timeout")), "tool_timeout")
    startup_timeout = _seconds(entry.get("startup_timeout"), "startup_timeout")
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError("a stdio server needs a command")
        args = _strings(entry.get("args", []), "args")
        env = _table(entry.get("env", {}), "env")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("cwd must be a string")
        return StdioServer(
            _expand(command, environ),
            tuple(_expand(a, environ) for a in args),
            {k: _expand(v, environ) for k, v in env.items()},
            None if cwd is None else _expand(cwd, environ),
            startup_timeout,
            tool_timeout,
        )
    url = entry.get("url")
    if not isinstance(url, str):
        raise ValueError(f"an {kind} server needs a url")
    url = _expand(url, environ)
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError(f"url {url!r} is not an http:// or https:// URL")
    headers = {k: _expand(v, environ) for k, v in _table(entry.get("headers", {}), "headers").items()}
    token_var = entry.get("bearer_token_env_var")
    if token_var is not None and (not isinstance(token_var, str) or not token_var):
        raise ValueError("bearer_token_env_var must name an environment variable")
    return HttpServer(url, headers, token_var, "sse" if kind == "sse" else "http", startup_timeout, tool_timeout)


def parse_mcp_servers(
    data: Any, *, source: str = "mcp_servers", environ: Mapping[str, str] | None = None
) -> dict[str, McpServerSpec | ServerProblem]:
    """Servers by name from ``{"mcpServers": {...}}`` or from the inner ``{name: {...}}`` table.

    Entries switched off (``"disabled": true``) are left out. An entry that cannot be used maps
    to a :class:`ServerProblem` naming ``source`` and the server. Raises :class:`McpConfigError`
    when ``data`` is not in this shape at all.
    """
    environ = os.environ if environ is None else environ
    if isinstance(data, Mapping) and "mcpServers" in data:
        extra = sorted(set(data) - {"mcpServers"})
        if extra:
            raise McpConfigError(f"{source}: unknown top-level key(s) {', '.join(extra)} beside mcpServers")
        data = data["mcpServers"]
    if not isinstance(data, Mapping):
        raise McpConfigError(f'{source}: expected {{"mcpServers": {{name: {{...}}}}}}')
    servers: dict[str, McpServerSpec | ServerProblem] = {}
    for name, entry in data.items():
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(f"{source}: a server name must be a non-empty string, got {name!r}")
        if not isinstance(entry, Mapping):
            raise McpConfigError(f"{source}: server {name!r} must be an object")
        try:
            spec = _parse_one(entry, environ)
        except _Unset as unset:
            servers[name] = ServerProblem(f"{source}: server {name!r} uses ${{{unset.name}}}, which is not set")
            continue
        except ValueError as exc:
            servers[name] = ServerProblem(f"{source}: server {name!r}: {exc}")
            continue
        if spec is not None:
            servers[name] = spec
    return servers


def load_mcp_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> dict[str, McpServerSpec | ServerProblem]:
    """Read an ``.mcp.json``-shaped file (see :func:`parse_mcp_servers`)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"cannot read MCP config {file}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    return parse_mcp_servers(data, source=str(file), environ=environ)

"""What the ACP agent needs from its host: the profile, client and policy ``ra`` built.

The command line (:mod:`ra.cli.acp_command`) builds these with the same functions every ``ra``
run uses, so provider, model, keys, rules, hooks and MCP servers come from the usual config and
environment; this layer only turns ACP requests into sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ra.agent.config import SessionConfig
    from ra.agent.profile import ProviderProfile
    from ra.agent.store.base import SessionStore
    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client

__all__ = ["AcpSetup"]


def _local_env(cwd: str) -> ExecutionEnvironment:
    from ra.env.local import LocalExecutionEnvironment

    return LocalExecutionEnvironment(cwd)


@dataclass
class AcpSetup:
    """One agent process's settings; every ACP session is built from them."""

    profile: ProviderProfile
    client: Client
    #: A fresh SessionConfig for each session (limits, rules, retry policy).
    session_config: Callable[[], SessionConfig]
    #: Where sessions are recorded (``session/load``, ``session/list`` and fork need one), or None.
    store: SessionStore | None = None
    #: ``ra.agent.hooks.Hooks`` from the config file, or None.
    hooks: Any = None
    #: MCP servers from ra's own configuration (``ra.mcp`` specs by name); the editor's join them
    #: (an editor's server wins a name).
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    #: The environment a session works in, by working directory (the editor's file system and
    #: terminal are layered on top when the client offers them).
    make_env: Callable[[str], ExecutionEnvironment] = _local_env
    #: Whether files and commands may go through the editor when it offers its file system and
    #: terminal. False under a sandbox: the editor's buffers and terminal are outside it.
    editor_io: bool = True
    #: The permission mode a session starts in when the configuration names none: in an editor,
    #: ask before edits and commands.
    default_mode: str = "default"

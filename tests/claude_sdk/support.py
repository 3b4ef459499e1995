"""Running programs written for the Claude Agent SDK against the real ``ra`` command.

``options(server, tmp_path, ...)`` is a ``ClaudeAgentOptions`` whose ``cli_path`` is the venv's
``ra`` and whose ``env`` points ra at the scripted Chat Completions server, with a private HOME
(config, sessions) under ``tmp_path``; everything else is the test's, as a program would write it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.support import clean_env, ra_command
from tests.support.replay import ReplayServer

#: Every wait on the SDK in these tests is bounded by this many seconds.
BOUND_S = 30.0


def ra_path() -> str:
    command = ra_command()
    assert len(command) == 1, "these tests need the installed `ra` script next to the interpreter"
    return command[0]


def options(server: ReplayServer, tmp_path: Path, **kw: Any) -> Any:
    from claude_agent_sdk import ClaudeAgentOptions

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = clean_env(home, OPENAI_COMPATIBLE_BASE_URL=f"{server.base_url}/v1", RA_MODEL="test-model")
    env.update(kw.pop("env", {}))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    stderr_lines: list[str] = kw.pop("stderr_lines", [])
    return ClaudeAgentOptions(cli_path=ra_path(), cwd=str(work), env=env, stderr=stderr_lines.append, **kw)

"""Helpers for driving the real ``ra`` command against a scripted Chat Completions server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.replay import ReplayServer

#: Provider variables that must not leak from the developer's shell into a test run.
_SCRUB = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_BASE_URL",
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_COMPATIBLE_BASE_URL",
    "RA_PROVIDER",
    "RA_MODEL",
    "RA_CONFIG",
    "RA_MAX_STEPS",
    "RA_TIME_LIMIT",
    "RA_HISTORY_FILE",
    "RA_LOCAL_MODEL",
    "BRAVE_SEARCH_API_KEY",
    "BRAVE_SEARCH_ENDPOINT",
    "NO_COLOR",
    # What shapes terminal output: a CI runner that sets any of these must not change what the
    # tests read (rich honours FORCE_COLOR, TTY_*, COLUMNS and LINES; CLICOLOR_FORCE by convention).
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "COLUMNS",
    "LINES",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
)


def ra_command() -> list[str]:
    """The installed ``ra`` next to this interpreter, else ``python -m ra.cli`` (same code)."""
    script = Path(sys.executable).with_name("ra")
    if script.exists():
        return [str(script)]
    found = shutil.which("ra")
    if found and Path(found).resolve().parent == Path(sys.executable).resolve().parent:
        return [found]
    return [sys.executable, "-m", "ra.cli"]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment with no provider settings and a private HOME / config / state directory."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
        XDG_CACHE_HOME=str(home / ".cache"),
        PYTHONUNBUFFERED="1",
        TERM="xterm",  # whatever the runner's TERM (dumb, unset) was
    )
    env.update(extra)
    return env


def run_ra(
    args: list[str],
    env: dict[str, str],
    *,
    cwd: Path | None = None,
    stdin: str | None = "",
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ra_command(), *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- scripted Chat Completions answers ------------------------------------------------------------


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, *, usage: dict[str, int] | None = None) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def sse_text(text: str, *, prompt_tokens: int = 100, completion_tokens: int = 10, pieces: int = 3) -> str:
    """A streamed text-only answer, split into a few deltas."""
    size = max(1, -(-len(text) // pieces))
    out = [_chunk({"role": "assistant", "content": ""})]
    out.extend(_chunk({"content": text[i : i + size]}) for i in range(0, len(text), size))
    out.append(_chunk({}, "stop"))
    out.append(_chunk(None, usage=_usage(prompt_tokens, completion_tokens)))
    out.append("data: [DONE]\n\n")
    return "".join(out)


def sse_tools(
    *calls: tuple[str, str, dict[str, Any]],
    text: str = "",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
) -> str:
    """A streamed answer with tool calls ``(id, name, arguments)``; arguments arrive in two pieces."""
    out = [_chunk({"role": "assistant", "content": text or None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        half = len(raw) // 2
        out.append(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": raw[:half]},
                        }
                    ]
                }
            )
        )
        out.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[half:]}}]}))
    out.append(_chunk({}, "tool_calls"))
    out.append(_chunk(None, usage=_usage(prompt_tokens, completion_tokens)))
    out.append("data: [DONE]\n\n")
    return "".join(out)


SSE = {"content-type": "text/event-stream"}


def enqueue_text(server: ReplayServer, text: str, **kw: Any) -> None:
    server.enqueue(200, sse_text(text, **kw), SSE, chunking="events")


def enqueue_tools(server: ReplayServer, *calls: tuple[str, str, dict[str, Any]], **kw: Any) -> None:
    server.enqueue(200, sse_tools(*calls, **kw), SSE, chunking="events")


def chat_requests(server: ReplayServer) -> list[dict[str, Any]]:
    """The JSON bodies of the Chat Completions requests the server received, in order."""
    return [r.json() for r in server.requests if r.path.endswith("/chat/completions")]


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m.get("role") == "tool"]


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


#: The MCP server the command's tests start (written with the ``mcp`` package; tools echo,
#: touch, getenv and a read-only peek).
MCP_NOTES = str(Path(__file__).resolve().parent / "mcp_servers" / "notes.py")


def notes_server(name: str = "notes", *extra: str) -> dict[str, Any]:
    """An ``.mcp.json`` entry that starts the notes server under ``name``."""
    return {"command": sys.executable, "args": [MCP_NOTES, "--name", name, *extra]}


def mcp_json(**servers: dict[str, Any]) -> str:
    """``--mcp-config`` JSON text naming ``servers``."""
    return json.dumps({"mcpServers": servers})

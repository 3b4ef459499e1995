"""A scripted Chat Completions server that answers each batch task by its instruction.

Tasks run at once, so one queue of answers cannot say which task gets which; the server reads
the task's instruction (the first user message) and how many tool results the conversation
already holds, and answers from that task's script.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cli.support import SSE, sse_text, sse_tools
from tests.support.replay import ReplayServer, Scripted, chunked

#: A task's script: one answer per step, each ("text", TEXT) or ("shell", COMMAND) or ("stall", SECONDS).
Script = list[tuple[str, Any]]


def _instruction(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return ""


@dataclass
class TaskScripts:
    """Answers by instruction: the script whose key the instruction starts with."""

    scripts: dict[str, Script]

    def __call__(self, received: Any) -> Scripted | None:
        if not received.path.endswith("/chat/completions"):
            return None
        body = json.loads(received.body)
        instruction = _instruction(body)
        key = next((k for k in self.scripts if instruction.startswith(k)), None)
        if key is None:
            return None
        step = sum(1 for m in body["messages"] if m.get("role") == "tool")
        script = self.scripts[key]
        kind, value = script[min(step, len(script) - 1)]
        if kind == "text":
            payload = sse_text(value)
        elif kind == "shell":
            payload = sse_tools((f"call_{step}", "shell_command", {"command": value}))
        elif kind == "stall":
            return Scripted(
                200, dict(SSE), chunked(sse_text("late").encode(), "events"), stall_after=1, stall_seconds=value
            )
        elif kind == "status":
            return Scripted(
                value, {"content-type": "application/json"}, [b'{"error": {"message": "scripted failure"}}']
            )
        else:
            raise ValueError(kind)
        return Scripted(200, dict(SSE), chunked(payload.encode(), "events"))


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


def make_repo(path: Path, files: dict[str, str]) -> str:
    """A git repository at ``path`` with ``files`` committed; returns the commit."""
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "base", cwd=path)
    return git("rev-parse", "HEAD", cwd=path).strip()


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def read_results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def chat_client(server: ReplayServer) -> Any:
    """A client factory (picklable: a partial of a module function) for the scripted server."""
    import functools

    return functools.partial(_client, f"{server.base_url}/v1")


def _client(base_url: str, task: Any) -> Any:
    from ra.llm.client import Client
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

    return Client(providers={"openai-compatible": OpenAICompatibleAdapter(None, base_url)})

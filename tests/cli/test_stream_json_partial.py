"""``ra --output-format stream-json --include-partial-messages``: every event of the streamed
response as a ``stream_event`` line, readable back with ``ra.sdk.read_messages``."""

from __future__ import annotations

import json
from pathlib import Path

from ra.sdk import read_messages
from tests.cli.support import clean_env, enqueue_text, enqueue_tools, jsonl, run_ra
from tests.support.replay import ReplayServer


def _args(server: ReplayServer, *extra: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "m", *extra]


def test_partial_messages_stream_every_event(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo hi"}), text="Looking.")
    enqueue_text(replay_server, "All done.")
    flags = ["--output-format", "stream-json", "--include-partial-messages", "go"]
    result = run_ra(_args(replay_server, *flags), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    messages = jsonl(result.stdout)
    events = [m["event"] for m in messages if m["type"] == "stream_event"]
    first = events[: [e["type"] for e in events].index("message_stop") + 1]
    starts = [e["content_block"] for e in first if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"]
    assert (starts[1]["id"], starts[1]["name"]) == ("c1", "shell_command")
    arguments = "".join(
        e["delta"]["partial_json"] for e in first if e["type"] == "content_block_delta" and e["index"] == 1
    )
    assert json.loads(arguments) == {"command": "echo hi"}
    assert first[0]["type"] == "message_start" and first[-2]["delta"]["stop_reason"] == "tool_use"
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == "Looking.All done."
    assert messages[-1]["type"] == "result" and messages[-1]["result"] == "All done."
    assert [m.to_json() for m in read_messages(result.stdout.splitlines())] == messages


def test_without_the_flag_no_stream_events(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "Done.")
    result = run_ra(_args(replay_server, "--output-format", "stream-json", "go"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert all(m["type"] != "stream_event" for m in jsonl(result.stdout))


def test_partial_messages_need_stream_json(replay_server: ReplayServer, tmp_path: Path) -> None:
    for flags in (
        ["--include-partial-messages", "go"],
        ["--output-format", "json", "--include-partial-messages", "go"],
    ):
        result = run_ra(_args(replay_server, *flags), clean_env(tmp_path), cwd=tmp_path)
        assert (
            result.returncode == 2 and "--include-partial-messages needs --output-format stream-json" in result.stderr
        )
    assert replay_server.requests == []

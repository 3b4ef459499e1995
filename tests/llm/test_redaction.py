"""API keys never reach error text (hardening item 7).

A real server on 127.0.0.1 answers 401 with a message that repeats the key it was sent - as
OpenAI's does ("Incorrect API key provided: sk-...") - and also echoes the value of an unrelated
secret-looking variable. Neither may appear in the raised error (str, repr, args, raw body), in
the session's ERROR event, or in what the ``ra`` command prints: stderr, ``--json`` and the
trajectory file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ra.agent import Session, SessionConfig, StopReason
from ra.agent.events import EventKind
from ra.llm.client import Client
from ra.llm.errors import AuthenticationError
from ra.llm.pricing import ModelPrice
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.redaction import MASK, redact, redact_value, secret_values
from ra.llm.types import Message, Request
from tests.cli.support import clean_env, run_ra
from tests.support.replay import ReplayServer

KEY = "sk-test-5f1c2a9e7b3d4c6a8e0f1a2b3c4d5e6f"
OTHER = "tok-9a8b7c6d5e4f3a2b1c0d"


def refusing(server: ReplayServer, key: str, also: str = OTHER, times: int = 1) -> None:
    body = {
        "error": {
            "message": f"Incorrect API key provided: {key}. Your token {also} does not work either.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
            "param": None,
        }
    }
    for _ in range(times):
        server.enqueue(401, body)


def test_redact_replaces_secret_values_and_keeps_short_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", OTHER)
    monkeypatch.setenv("DEBUG_TOKEN", "1")  # too short to be a secret worth blanking everywhere
    assert OTHER in secret_values() and "1" not in secret_values()
    assert redact(f"a {OTHER} b 1 {KEY}", (KEY,)) == f"a {MASK} b 1 {MASK}"
    assert redact_value({"e": [f"x{KEY}"], "n": 3}, (KEY,)) == {"e": [f"x{MASK}"], "n": 3}


async def test_the_error_never_holds_the_key(replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", OTHER)
    refusing(replay_server, KEY)
    adapter = OpenAICompatibleAdapter(api_key=KEY, base_url=f"{replay_server.base_url}/v1")  # given in code
    client = Client(providers={"openai-compatible": adapter})
    with pytest.raises(AuthenticationError) as caught:
        await client.complete(Request(model="m", messages=[Message.user("hi")], provider="openai-compatible"))
    await client.close()
    error = caught.value
    for text in (str(error), repr(error), repr(error.args), error.message, json.dumps(error.raw)):
        assert KEY not in text and OTHER not in text, text
    assert MASK in str(error) and "Incorrect API key provided" in str(error)


async def test_the_error_event_never_holds_the_key(
    replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ra.agent import GenericProfile

    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", KEY)  # from the environment this time
    monkeypatch.setenv("MY_SERVICE_TOKEN", OTHER)
    refusing(replay_server, KEY)
    adapter = OpenAICompatibleAdapter(api_key=KEY, base_url=f"{replay_server.base_url}/v1")
    profile = GenericProfile("p", "m", provider="openai-compatible")
    events = []
    session = Session(
        profile,
        _Env(),
        Client(providers={"openai-compatible": adapter}),
        SessionConfig(prices={"m": ModelPrice.free()}),
    )
    session.add_listener(events.append)
    result = await session.submit("hi")
    assert result.stop_reason is StopReason.ERROR
    error_events = [e for e in events if e.kind is EventKind.ERROR]
    assert error_events
    dumped = repr([e.data for e in events]) + str(result.error)
    assert KEY not in dumped and OTHER not in dumped


class _Env:
    def working_directory(self) -> str:
        return "/tmp"

    def platform(self) -> str:
        return "linux"

    def os_version(self) -> str:
        return "test"

    async def terminate_all(self) -> None:
        return None


def test_the_ra_command_never_prints_the_key(replay_server: ReplayServer, tmp_path: Path) -> None:
    refusing(replay_server, KEY, times=2)
    env = clean_env(tmp_path, OPENAI_COMPATIBLE_API_KEY=KEY, MY_SERVICE_TOKEN=OTHER)
    trajectory = tmp_path / "run.jsonl"
    args = [
        "--base-url",
        f"{replay_server.base_url}/v1",
        "--model",
        "m",
        "--json",
        "--output-trajectory",
        str(trajectory),
        "hi",
    ]
    result = run_ra(args, env, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    outputs = {"stdout": result.stdout, "stderr": result.stderr, "trajectory": trajectory.read_text()}
    for name, text in outputs.items():
        assert KEY not in text and OTHER not in text, f"{name} holds a secret: {text[:500]}"
    assert "Incorrect API key provided" in result.stderr
    plain = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "hi"], env, cwd=tmp_path)
    assert plain.returncode == 3 and KEY not in plain.stderr and OTHER not in plain.stderr

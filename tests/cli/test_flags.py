"""Flags users reach for: --system-prompt, --append-system-prompt, --image, --no-submit."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.cli.support import chat_requests, clean_env, enqueue_text, run_ra
from tests.support.replay import ReplayServer

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def args(server: ReplayServer, *extra: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "m", *extra]


def system_text(server: ReplayServer) -> str:
    (body,) = chat_requests(server)
    return body["messages"][0]["content"]


def test_system_prompt_replaces_the_base_instructions_and_keeps_the_rest(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "ok")
    enqueue_text(replay_server, "ok")
    run_ra(args(replay_server, "go"), clean_env(tmp_path), cwd=tmp_path)
    default = system_text(replay_server)
    replay_server.requests.clear()
    result = run_ra(
        args(replay_server, "--system-prompt", "You are a careful reviewer.", "go"), clean_env(tmp_path), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    text = system_text(replay_server)
    assert text.startswith("You are a careful reviewer.")
    first_line = default.splitlines()[0]
    assert first_line not in text  # the profile's own instructions are gone
    assert str(tmp_path) in text  # the environment section stays


def test_append_system_prompt_comes_last(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    result = run_ra(args(replay_server, "--append-system-prompt", "Answer in French.", "go"), clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert system_text(replay_server).endswith("<user_instructions>\nAnswer in French.\n</user_instructions>")


def test_image_goes_with_the_task(replay_server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    enqueue_text(replay_server, "a transparent pixel")
    result = run_ra(args(replay_server, "--image", "shot.png", "what is this?"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (body,) = chat_requests(replay_server)
    user = [m for m in body["messages"] if m["role"] == "user"][-1]
    text, image = user["content"]
    assert text == {"type": "text", "text": "what is this?"}
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.mark.parametrize(("name", "message"), [("missing.png", "no such file"), ("notes.txt", "not a png")])
def test_a_bad_image_is_a_usage_error(replay_server: ReplayServer, tmp_path: Path, name: str, message: str) -> None:
    (tmp_path / "notes.txt").write_text("x")
    result = run_ra(args(replay_server, "--image", name, "go"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert chat_requests(replay_server) == []


def test_no_submit_overrides_the_config_file(replay_server: ReplayServer, tmp_path: Path) -> None:
    config = tmp_path / "ra.toml"
    config.write_text("submit = true\n")
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    enqueue_text(replay_server, "ok")
    enqueue_text(replay_server, "ok")
    run_ra(args(replay_server, "--max-steps", "1", "go"), env)  # submit mode: a text answer is not the end
    run_ra(args(replay_server, "--no-submit", "go"), env)
    with_config, overridden = chat_requests(replay_server)
    names = [[t["function"]["name"] for t in body["tools"]] for body in (with_config, overridden)]
    assert "submit" in names[0] and "submit" not in names[1]

"""``ra models``: the catalogue, and what the configured server lists, through the real command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.support import clean_env, run_ra
from tests.support.replay import ReplayServer

LISTING = {"object": "list", "data": [{"id": "qwen3-coder-30b"}, {"id": "gpt-5.2"}, {"id": "priced-here"}]}


def test_the_catalogue_is_listed_with_prices_and_defaults(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(200, {"data": [{"id": "claude-sonnet-4-5", "type": "model"}], "has_more": False})
    env = clean_env(tmp_path, ANTHROPIC_API_KEY="k-anthropic", ANTHROPIC_BASE_URL=replay_server.base_url)
    result = run_ra(["models", "--provider", "anthropic", "--json"], env)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["catalogue"] and all(row["provider"] == "anthropic" for row in record["catalogue"])
    assert sum(row["default"] for row in record["catalogue"]) == 1
    sonnet = next(row for row in record["catalogue"] if row["id"] == "claude-sonnet-4-5")
    assert sonnet["input_per_million"] == 3.0 and sonnet["long_context_prices"] is True
    # Anthropic's own listing: its path and headers.
    (request,) = replay_server.requests
    assert request.path == "/v1/models"
    assert request.headers["x-api-key"] == "k-anthropic" and request.headers["anthropic-version"]
    assert record["served"]["models"] == [
        {
            "id": "claude-sonnet-4-5",
            "in_catalogue": True,
            "price_source": "catalogue",
            "input_per_million": 3.0,
            "output_per_million": 15.0,
        }
    ]


def test_with_nothing_configured_only_the_catalogue_and_the_local_model(tmp_path: Path) -> None:
    result = run_ra(["models"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "gpt-5.2 *" in result.stdout and "gemini" in result.stdout
    assert "served by local" in result.stdout or "only the catalogue" in result.stdout


def test_a_servers_models_are_listed_with_where_their_price_comes_from(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    # Named as a run matches it (case aside): the listing shows the price the run would use.
    config.write_text('[prices."Priced-Here"]\ninput = 0.5\noutput = 1.5\n')
    replay_server.enqueue(200, LISTING)
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    result = run_ra(["models", "--base-url", f"{replay_server.base_url}/v1"], env)
    assert result.returncode == 0, result.stderr
    assert replay_server.requests[0].method == "GET" and replay_server.requests[0].path == "/v1/models"
    served = result.stdout.split("served by openai-compatible at ")[1]
    lines = {line.split()[0]: line for line in served.splitlines()[1:]}
    assert list(lines) == ["qwen3-coder-30b", "gpt-5.2", "priced-here"]
    assert 'no price known (set one with [prices."qwen3-coder-30b"]' in lines["qwen3-coder-30b"]
    assert "1.75 / 14.00 USD per million (catalogue)" in lines["gpt-5.2"]
    assert "0.50 / 1.50 USD per million (configured)" in lines["priced-here"]
    assert "ra's catalogue" in result.stdout  # the catalogue comes first


def test_the_servers_key_is_sent_and_a_refusal_is_a_provider_error(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(401, {"error": {"message": "Incorrect API key provided: sk-secret-123"}})
    env = clean_env(tmp_path, OPENAI_COMPATIBLE_API_KEY="sk-secret-123")
    result = run_ra(["models", "--base-url", f"{replay_server.base_url}/v1"], env)
    assert result.returncode == 3
    assert replay_server.requests[0].headers["authorization"] == "Bearer sk-secret-123"
    assert "ra: error:" in result.stderr and "sk-secret-123" not in result.stderr + result.stdout


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_is_a_warning_after_the_catalogue(tmp_path: Path) -> None:
    """The catalogue is a complete answer; a server that is not running (connection refused) is
    one warning line naming the URL that was asked, exit 0 (before: an error, exit 3, no URL)."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = run_ra(["models", "--base-url", url], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "ra's catalogue" in result.stdout and "gpt-5.2" in result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ra: warning: could not list the models at {url}/models: cannot reach")


def test_a_configured_provider_that_is_down_still_lists_the_catalogue(tmp_path: Path) -> None:
    """Configured in the config file, not asked for: text and --json both carry the warning."""
    url = f"http://127.0.0.1:{_closed_port()}"
    config = tmp_path / ".config" / "ra"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'provider = "anthropic"\n[providers.anthropic]\napi_key = "sk-ant-test-key"\nbase_url = "{url}"\n'
    )
    result = run_ra(["models"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "claude-sonnet-4-5" in result.stdout
    assert f"could not list the models at {url}/v1/models" in result.stderr
    result = run_ra(["models", "--json"], clean_env(tmp_path))
    record = json.loads(result.stdout)
    assert result.returncode == 0 and record["served"] is None and "error" not in record
    assert record["catalogue"] and f"{url}/v1/models" in record["warning"]
    assert "sk-ant-test-key" not in result.stdout + result.stderr


def test_a_bad_flag_is_a_usage_error(tmp_path: Path) -> None:
    result = run_ra(["models", "--provider", "nope"], clean_env(tmp_path))
    assert result.returncode == 2 and "ra models:" in result.stderr


def test_a_task_named_models_still_runs_after_a_double_dash(replay_server: ReplayServer, tmp_path: Path) -> None:
    from tests.cli.support import chat_requests, enqueue_text

    enqueue_text(replay_server, "done")
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "--", "models"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    (body,) = chat_requests(replay_server)
    assert body["messages"][-1]["content"] == "models"


def test_a_provider_without_a_key_still_lists_its_catalogue(tmp_path: Path) -> None:
    result = run_ra(["models", "--provider", "openai"], clean_env(tmp_path))
    assert result.returncode == 3
    assert "gpt-5.2 *" in result.stdout and "anthropic" not in result.stdout
    assert result.stderr.startswith("ra: error: no API key for provider openai")


def test_a_server_that_drips_its_answer_is_given_up_on(replay_server: ReplayServer, tmp_path: Path) -> None:
    """httpx bounds each read; a byte every second would never end without a whole-answer deadline."""
    replay_server.enqueue(200, chunks=[b" "] * 60, headers={"content-type": "application/json"}, delay=1.0)
    result = run_ra(["models", "--base-url", f"{replay_server.base_url}/v1"], clean_env(tmp_path), timeout=40)
    assert result.returncode == 3
    assert "did not answer within 10s" in result.stderr


def test_model_ids_with_control_characters_are_shown_not_obeyed(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(200, {"data": [{"id": "m\x1b]52;c;cHduZWQ=\x07\x1b[2J"}]})
    result = run_ra(["models", "--base-url", f"{replay_server.base_url}/v1"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "m\u241b]52;c;cHduZWQ=\u2407\u241b[2J" in result.stdout

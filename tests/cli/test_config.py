"""Config file, environment variables and flags: precedence and checking."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.cli.config import ConfigError, Flags, ProviderSetupError, load_config_file, resolve
from tests.cli.support import chat_requests, clean_env, enqueue_text, run_ra
from tests.support.replay import ReplayServer


def _write_config(home: Path, text: str) -> Path:
    path = home / ".config" / "ra" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- through the command ----------------------------------------------------------------------------


def test_model_precedence_flag_over_env_over_provider_table_over_file(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    _write_config(
        tmp_path,
        f'base_url = "{replay_server.base_url}/v1"\nmodel = "from-file"\n'
        '[providers.openai-compatible]\nmodel = "from-table"\n',
    )
    runs = [
        (["--model", "from-flag", "t"], {"RA_MODEL": "from-env"}, "from-flag"),
        (["t"], {"RA_MODEL": "from-env"}, "from-env"),
        (["t"], {}, "from-table"),
    ]
    for args, extra, expected in runs:
        enqueue_text(replay_server, "ok")
        result = run_ra(args, clean_env(tmp_path, **extra))
        assert result.returncode == 0, result.stderr
        assert chat_requests(replay_server)[-1]["model"] == expected


def test_top_level_model_and_sampling_from_the_config_file(replay_server: ReplayServer, tmp_path: Path) -> None:
    _write_config(tmp_path, f'base_url = "{replay_server.base_url}/v1"\nmodel = "file-model"\ntemperature = 0.3\n')
    enqueue_text(replay_server, "ok")
    result = run_ra(["t"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    body = chat_requests(replay_server)[0]
    assert body["model"] == "file-model"
    assert body["temperature"] == 0.3
    # A flag beats the file.
    enqueue_text(replay_server, "ok")
    assert run_ra(["--temperature", "0.7", "t"], clean_env(tmp_path)).returncode == 0
    assert chat_requests(replay_server)[-1]["temperature"] == 0.7


def test_provider_env_vars_choose_the_server_and_key(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    env = clean_env(
        tmp_path,
        OPENAI_COMPATIBLE_BASE_URL=f"{replay_server.base_url}/v1",
        OPENAI_COMPATIBLE_API_KEY="sk-local",
        RA_MODEL="env-model",
    )
    result = run_ra(["t"], env)
    assert result.returncode == 0, result.stderr
    request = replay_server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-local"
    assert request.json()["model"] == "env-model"


def test_base_url_flag_beats_the_env_var(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    env = clean_env(tmp_path, OPENAI_COMPATIBLE_BASE_URL="http://127.0.0.1:9/nowhere")
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "t"], env)
    assert result.returncode == 0, result.stderr


def test_ra_config_env_names_the_file(replay_server: ReplayServer, tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text(f'base_url = "{replay_server.base_url}/v1"\nmodel = "m-elsewhere"\n')
    enqueue_text(replay_server, "ok")
    result = run_ra(["t"], clean_env(tmp_path, RA_CONFIG=str(path)))
    assert result.returncode == 0, result.stderr
    assert chat_requests(replay_server)[0]["model"] == "m-elsewhere"
    missing = run_ra(["t"], clean_env(tmp_path, RA_CONFIG=str(tmp_path / "nope.toml")))
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr


def test_model_is_discovered_from_the_server_when_not_configured(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(200, {"object": "list", "data": [{"id": "served-model", "object": "model"}]})
    enqueue_text(replay_server, "ok")
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "t"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert replay_server.requests[0].method == "GET"
    assert replay_server.requests[0].path == "/v1/models"
    assert chat_requests(replay_server)[0]["model"] == "served-model"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("model = [", "not valid TOML"),
        ('modle = "x"\n', "unknown key 'modle'"),
        ("max_steps = 'ten'\n", "'max_steps' must be an integer, got 'ten'"),
        ("submit = 1\n", "'submit' must be true or false"),
        ('temperature = "hot"\n', "'temperature' must be a number, got 'hot'"),
        ("[providers.nope]\napi_key = 'x'\n", "unknown provider table [providers.nope]"),
        ("[providers.anthropic]\nkey = 'x'\n", "unknown key 'providers.anthropic.key'"),
        ("max_steps = 0\n", "max steps must be >= 1"),
        ('reasoning_effort = "extreme"\n', "unknown reasoning effort"),
    ],
)
def test_bad_config_files_are_usage_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = _write_config(tmp_path, text)
    result = run_ra(["--base-url", "http://127.0.0.1:1/v1", "t"], clean_env(tmp_path))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert needle in line
    assert str(path) in line or "max steps" in needle or "reasoning" in needle


# -- resolution, in process ---------------------------------------------------------------------------


def _resolve(tmp_path: Path, flags: Flags | None = None, file: dict | None = None, **env: str):
    environ = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **env}
    return resolve(flags or Flags(), environ, file=file if file is not None else {})


def test_provider_auto_selection(tmp_path: Path) -> None:
    assert _resolve(tmp_path, OPENAI_API_KEY="sk").provider == "openai-compatible"
    chat = _resolve(tmp_path, OPENAI_API_KEY="sk")
    assert (chat.base_url, chat.api_key) == (None, "sk")  # Chat Completions at api.openai.com
    assert _resolve(tmp_path, ANTHROPIC_API_KEY="a").provider == "anthropic"
    assert _resolve(tmp_path, GOOGLE_API_KEY="g").provider == "gemini"
    assert _resolve(tmp_path, Flags(base_url="http://h:1/v1")).provider == "openai-compatible"
    # A non-ra profile brings its own provider.
    assert _resolve(tmp_path, Flags(profile="anthropic"), ANTHROPIC_API_KEY="a").provider == "anthropic"
    # RA_PROVIDER beats the file; the flag beats RA_PROVIDER.
    file = {"provider": "gemini"}
    env = {"RA_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g", "OPENAI_API_KEY": "o"}
    assert _resolve(tmp_path, file=file, **env).provider == "anthropic"
    assert _resolve(tmp_path, Flags(provider="openai"), file=file, **env).provider == "openai"
    assert _resolve(tmp_path, file=file, GEMINI_API_KEY="g").provider == "gemini"


def test_keys_and_base_urls_from_env_and_provider_tables(tmp_path: Path) -> None:
    file = {"providers": {"anthropic": {"api_key": "from-file", "base_url": "http://file/"}}}
    s = _resolve(tmp_path, Flags(provider="anthropic"), file=file)
    assert (s.api_key, s.base_url) == ("from-file", "http://file")
    s = _resolve(
        tmp_path, Flags(provider="anthropic"), file=file, ANTHROPIC_API_KEY="env", ANTHROPIC_BASE_URL="http://env"
    )
    assert (s.api_key, s.base_url) == ("env", "http://env")
    s = _resolve(
        tmp_path, Flags(provider="anthropic", base_url="http://flag"), file=file, ANTHROPIC_BASE_URL="http://env"
    )
    assert s.base_url == "http://flag"


def test_nothing_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ra.cli.config as config

    monkeypatch.setattr(config, "local_model_available", lambda: True)
    s = _resolve(tmp_path)
    assert s.provider == "local"
    assert any("local in-process model" in n for n in s.notices)
    monkeypatch.setattr(config, "local_model_available", lambda: False)
    with pytest.raises(ProviderSetupError, match="no model provider is configured"):
        _resolve(tmp_path)


def test_usage_errors_come_before_provider_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max steps"):
        _resolve(tmp_path, Flags(provider="anthropic", max_steps=0))


def test_numbers_from_env(tmp_path: Path) -> None:
    s = _resolve(tmp_path, OPENAI_API_KEY="k", RA_MAX_STEPS="7", RA_TIME_LIMIT="2.5")
    assert (s.max_steps, s.time_limit) == (7, 2.5)
    with pytest.raises(ConfigError, match="RA_MAX_STEPS"):
        _resolve(tmp_path, OPENAI_API_KEY="k", RA_MAX_STEPS="lots")


def test_load_config_file_accepts_every_documented_key(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'provider = "openai-compatible"\nmodel = "m"\nbase_url = "http://x/v1"\nprofile = "ra"\n'
        "submit = true\nweb = false\nmax_steps = 5\ntime_limit = 60\ntemperature = 0.1\ntop_p = 1.0\n"
        'max_tokens = 100\nreasoning_effort = "high"\nmax_retries = 1\n'
        '[providers.openai]\napi_key = "k"\nbase_url = "http://o"\nmodel = "gpt"\n'
    )
    data = load_config_file(path)
    assert data["max_steps"] == 5 and data["providers"]["openai"]["model"] == "gpt"

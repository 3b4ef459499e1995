"""Environment filtering: the pure function and what a real command sees under each policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.env import EnvPolicy, LocalExecutionEnvironment
from ra.env.envvars import build_environment, is_core_name, is_secret_name

PARENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "GOPATH": "/go",
    "CARGO_HOME": "/cargo",
    "VIRTUAL_ENV": "/venv",
    "OPENAI_API_KEY": "sk-1",
    "github_token": "ghp",
    "DB_PASSWORD": "pw",
    "Client_Secret": "s",
    "GCP_CREDENTIAL": "c",
    "AWS_SECRET_ACCESS_KEY": "a",
    "TOKEN": "bare",
    "EDITOR": "vim",
    "TOKENIZERS_PARALLELISM": "false",
}


@pytest.mark.parametrize(
    "name",
    ["OPENAI_API_KEY", "anthropic_api_key", "GITHUB_TOKEN", "x_Password", "MY_SECRET", "AZURE_CREDENTIAL", "TOKEN"],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "TOKENIZERS_PARALLELISM", "SECRETARY", "PASSWORD_HINT_FILE", "EDITOR"])
def test_non_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_core_names() -> None:
    for name in ("PATH", "HOME", "USER", "SHELL", "LANG", "LC_CTYPE", "TERM", "TMPDIR", "GOPATH", "NVM_DIR"):
        assert is_core_name(name)
    assert not is_core_name("EDITOR")


def test_inherit_all_drops_only_secrets() -> None:
    env = build_environment("inherit_all", base=PARENT)
    assert env == {
        k: v
        for k, v in PARENT.items()
        if k
        not in {
            "OPENAI_API_KEY",
            "github_token",
            "DB_PASSWORD",
            "Client_Secret",
            "GCP_CREDENTIAL",
            "AWS_SECRET_ACCESS_KEY",
            "TOKEN",
        }
    }


def test_inherit_all_without_secret_filter_keeps_everything() -> None:
    assert build_environment(EnvPolicy.INHERIT_ALL, exclude_secrets=False, base=PARENT) == PARENT


def test_core_only() -> None:
    env = build_environment("core_only", base=PARENT)
    assert set(env) == {"PATH", "HOME", "LANG", "LC_ALL", "GOPATH", "CARGO_HOME", "VIRTUAL_ENV"}


def test_none_starts_clean_and_extras_go_on_top() -> None:
    assert build_environment("none", base=PARENT) == {}
    env = build_environment("none", base=PARENT, extra={"ONLY": "1", "MY_API_KEY": "explicit"})
    assert env == {"ONLY": "1", "MY_API_KEY": "explicit"}


def test_bad_policy_and_bad_extra() -> None:
    with pytest.raises(ValueError, match="core_only"):
        build_environment("everything", base=PARENT)
    with pytest.raises(ValueError):
        build_environment("none", extra={"A=B": "x"})
    with pytest.raises(TypeError):
        build_environment("none", extra={"A": 1})  # type: ignore[dict-item]


async def _command_env(env: LocalExecutionEnvironment, **kwargs: object) -> dict[str, str]:
    result = await env.exec_command("env -0", **kwargs)  # type: ignore[arg-type]
    pairs = [item.split("=", 1) for item in result.stdout.split("\0") if item]
    return {k: v for k, v in pairs}


@pytest.fixture
def parent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RA_TEST_API_KEY", "secret-value")
    monkeypatch.setenv("ra_test_token", "secret-value")
    monkeypatch.setenv("RA_TEST_VISIBLE", "visible")
    monkeypatch.setenv("LC_RA_TEST", "locale")


async def test_default_policy_in_a_real_shell(tmp_path: Path, parent_env: None) -> None:
    seen = await _command_env(LocalExecutionEnvironment(tmp_path))
    assert seen["RA_TEST_VISIBLE"] == "visible"
    assert seen["LC_RA_TEST"] == "locale"
    assert "RA_TEST_API_KEY" not in seen and "ra_test_token" not in seen
    assert "secret-value" not in "".join(seen.values())


async def test_core_only_in_a_real_shell(tmp_path: Path, parent_env: None) -> None:
    seen = await _command_env(LocalExecutionEnvironment(tmp_path, env_policy="core_only"))
    assert "PATH" in seen and seen["LC_RA_TEST"] == "locale"
    assert "RA_TEST_VISIBLE" not in seen and "RA_TEST_API_KEY" not in seen


async def test_none_in_a_real_shell(tmp_path: Path, parent_env: None) -> None:
    env = LocalExecutionEnvironment(tmp_path, env_policy="none", extra_env={"FROM_HOST": "1"})
    seen = await _command_env(env, env_vars={"PER_CALL": "2"})
    # bash itself defines a few variables, and ra marks the command's process tree with its
    # cookie (ra.env.proctree); nothing else comes from the parent.
    assert set(seen) - {"PWD", "SHLVL", "_", "OLDPWD"} == {"FROM_HOST", "PER_CALL", "RA_PROCESS_COOKIE"}


async def test_per_call_vars_override_and_are_not_filtered(tmp_path: Path, parent_env: None) -> None:
    env = LocalExecutionEnvironment(tmp_path, extra_env={"LEVEL": "host"})
    seen = await _command_env(env, env_vars={"LEVEL": "call", "TOOL_API_KEY": "given"})
    assert seen["LEVEL"] == "call"
    assert seen["TOOL_API_KEY"] == "given"
    seen = await _command_env(env)
    assert seen["LEVEL"] == "host" and "TOOL_API_KEY" not in seen


def test_unknown_policy_rejected_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="env_policy"):
        LocalExecutionEnvironment(tmp_path, env_policy="all")

"""`--max-budget-usd` that holds: a budget the command cannot price is refused before anything
runs (exit 2, naming the model and the [prices] table to add), the edge values of the flag, and
three subagents working at once under one budget - the real command against a scripted Chat
Completions server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.cli.support import SSE, chat_requests, clean_env, enqueue_text, run_ra, sse_text, sse_tools
from tests.support.replay import Received, ReplayServer, Scripted


def args(server: ReplayServer, *extra: str, model: str = "m") -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", model, *extra]


def write_config(home: Path, text: str) -> dict[str, str]:
    path = home / "ra.toml"
    path.write_text(text)
    return clean_env(home, RA_CONFIG=str(path))


# -- refused up front ------------------------------------------------------------------------------------


def test_a_budget_on_an_unpriced_model_is_refused_before_anything_runs(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """Before: the model counted $0, so `--max-budget-usd 0.5` ran as many calls as it liked."""
    enqueue_text(replay_server, "should not be asked")
    env = write_config(tmp_path, "max_steps = 30\n")
    result = run_ra(args(replay_server, "--max-budget-usd", "0.5", "go"), env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "the budget of $0.5 (--max-budget-usd) cannot be kept: no price is known for the model 'm'" in result.stderr
    assert '[prices."m"] input = 1.25 output = 10.0' in result.stderr
    assert str(tmp_path / "ra.toml") in result.stderr
    assert chat_requests(replay_server) == []


def test_an_unpriced_fallback_model_is_refused_too(replay_server: ReplayServer, tmp_path: Path) -> None:
    env = write_config(tmp_path, '[prices."m"]\ninput = 1\noutput = 2\n')
    result = run_ra(args(replay_server, "--max-budget-usd", "1", "--fallback-model", "spare", "go"), env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "no price is known for the fallback model 'spare'" in result.stderr
    assert '[prices."spare"]' in result.stderr and '[prices."m"]' not in result.stderr
    assert chat_requests(replay_server) == []


def test_an_agent_with_an_unpriced_model_of_its_own_is_refused_too(replay_server: ReplayServer, tmp_path: Path) -> None:
    config = '[prices."m"]\ninput = 1\noutput = 2\n\n[agents.scout]\ndescription = "d"\nprompt = "p"\nmodel = "cheap"\n'
    env = write_config(tmp_path, config)
    result = run_ra(args(replay_server, "--max-budget-usd", "1", "go"), env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "the model of agent 'scout' 'cheap'" in result.stderr
    assert chat_requests(replay_server) == []


def test_priced_models_run_and_a_zero_price_is_a_price(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "done", prompt_tokens=1000, completion_tokens=10)
    config = '[prices."m"]\ninput = 0\noutput = 0\n[prices."spare"]\ninput = 1\noutput = 1\n'
    env = write_config(tmp_path, config)
    flags = ["--max-budget-usd", "0.01", "--fallback-model", "spare", "--output-format", "json", "go"]
    result = run_ra(args(replay_server, *flags), env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_cost_usd"] == 0.0


def test_without_a_budget_an_unpriced_model_still_runs(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "done")
    result = run_ra(args(replay_server, "go"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cost unknown (no price for m" in result.stderr


# -- the values of the flag -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "Infinity"])
def test_budgets_that_are_no_budget_are_refused(replay_server: ReplayServer, tmp_path: Path, value: str) -> None:
    result = run_ra(args(replay_server, f"--max-budget-usd={value}", "go"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "--max-budget-usd" in result.stderr and "finite" in result.stderr
    assert chat_requests(replay_server) == []


@pytest.mark.parametrize("value", ["inf", "nan", "-0.5"])
def test_budgets_in_the_config_file_that_are_no_budget_are_refused(
    replay_server: ReplayServer, tmp_path: Path, value: str
) -> None:
    env = write_config(tmp_path, f"max_budget_usd = {value}\n")
    result = run_ra(args(replay_server, "go"), env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "'max_budget_usd' must be a finite number >= 0" in result.stderr
    assert chat_requests(replay_server) == []


def test_a_budget_of_zero_makes_no_model_call(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "should not be asked")
    env = write_config(tmp_path, '[prices."m"]\ninput = 1\noutput = 2\n')
    result = run_ra(args(replay_server, "--max-budget-usd", "0", "go"), env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "budget reached: $0.0000 spent of $0 (--max-budget-usd)" in result.stderr
    assert chat_requests(replay_server) == []


# -- three subagents, one budget ------------------------------------------------------------------------


def _three_workers() -> tuple[object, list[str]]:
    """A parent that spawns three agents and waits for all of them; each agent reads a file for
    ever. Every request is answered by whose it is; the agents' answers come slowly, so their
    calls overlap."""
    lock = threading.Lock()
    spawned: list[str] = []

    def scripted(body: str, delay: float = 0.0) -> Scripted:
        return Scripted(200, dict(SSE), [body.encode()[:40], body.encode()[40:]], delay=delay)

    def answer(request: Received) -> Scripted | None:
        if not request.path.endswith("/chat/completions"):
            return None
        messages = request.json()["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        results = [m for m in messages if m["role"] == "tool"]
        if any("WORKER" in str(u) for u in users[:1]):
            return scripted(sse_tools(("r", "read_file", {"file_path": "a.txt"}), prompt_tokens=1000), delay=0.05)
        if len(results) < 3:
            task = f"WORKER {len(results)}: read a.txt"
            return scripted(sse_tools((f"s{len(results)}", "spawn_agent", {"task": task}), prompt_tokens=0))
        if len(results) == 3:
            with lock:
                spawned[:] = [json.loads(r["content"])["agent_id"] for r in results]
            ids = {"agent_id": spawned[0], "agent_ids": spawned[1:], "timeout_ms": 20_000}
            return scripted(sse_tools(("w", "wait", ids), prompt_tokens=0))
        return scripted(sse_text("parent done", prompt_tokens=0, completion_tokens=0))

    return answer, spawned


@pytest.mark.parametrize("run", range(3))
def test_three_subagents_at_once_overshoot_the_budget_by_one_call_at_most(
    replay_server: ReplayServer, tmp_path: Path, run: int
) -> None:
    """Before: each agent passed the check while the others' calls were in flight, and the run
    spent a call per agent over the budget ($5 under $2.50 in the report). A call costs $1 here
    ($1,000 per million input tokens, 1,000 tokens), the budget is $6.50."""
    (tmp_path / "a.txt").write_text("hello\n")
    replay_server.responder, _ = _three_workers()
    env = write_config(tmp_path, '[prices."m"]\ninput = 1000\noutput = 0\n')
    flags = ["--profile", "anthropic", "--provider", "openai-compatible", "--max-budget-usd", "6.5"]
    result = run_ra(args(replay_server, *flags, "--output-format", "json", "delegate"), env, cwd=tmp_path)
    record = json.loads(result.stdout)
    worker_calls = [
        r
        for r in chat_requests(replay_server)
        if "WORKER" in str([m for m in r["messages"] if m["role"] == "user"][:1])
    ]
    spent = record["total_cost_usd"]
    assert spent == pytest.approx(len(worker_calls) * 1.0)  # only the workers' calls cost anything
    assert 6.5 <= spent <= 7.5, (spent, result.stderr)


# -- the local provider is free -------------------------------------------------------------------------


def test_the_local_provider_needs_no_price_under_a_budget_and_the_summary_says_free_once() -> None:
    """The bundled in-process model costs nothing: a budget on it is not refused for want of a
    price, and the closing line says "local model, free" once instead of "cost unknown"."""
    from ra.cli.budget_prices import check_budget_prices, unpriced_models
    from ra.cli.config import Settings
    from ra.cli.policy import Policy
    from ra.cli.render import RunSummary
    from ra.llm.types import Usage

    settings = Settings(provider="local", model=None, base_url=None, api_key=None, key_source="")
    settings.policy = Policy(max_budget_usd=0.5)
    assert unpriced_models(settings, "gemma-3-270m-it-Q8_0.gguf") == []
    check_budget_prices(settings, "gemma-3-270m-it-Q8_0.gguf")  # does not raise
    settings.provider = "openai-compatible"  # the same name served by a server: no price known
    assert unpriced_models(settings, "gemma-3-270m-it-Q8_0.gguf") == [("model", "gemma-3-270m-it-Q8_0.gguf")]
    line = RunSummary(2, 1, Usage(100, 10), 0.0, 1.0, price_source="local").line()
    assert line.count("free") == 1 and "cost $0.0000 (local model, free)" in line and "unknown" not in line


def test_model_in_an_interactive_session_refuses_an_unpriced_model_under_a_budget(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    import pexpect

    from tests.cli.support import ra_command

    enqueue_text(replay_server, "answered by m", prompt_tokens=10, completion_tokens=1)
    env = write_config(tmp_path, '[prices."m"]\ninput = 1\noutput = 2\n')
    env.update(TERM="xterm", NO_COLOR="1", RA_HISTORY_FILE=str(tmp_path / "history"))
    command = ra_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], *args(replay_server, "--max-budget-usd", "1")],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(40, 200),
        timeout=20,
    )
    try:
        child.expect_exact("ra> ")
        child.sendline("/model mystery")
        child.expect_exact("no price is known for the model 'mystery'")
        child.expect_exact("still on m")
        child.expect_exact("ra> ")
        child.sendline("hello")
        child.expect_exact("answered by m")
        child.expect_exact("ra> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert [r["model"] for r in chat_requests(replay_server)] == ["m"]

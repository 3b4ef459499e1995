"""Every ``python`` block of README.md runs, as written, against a scripted server.

Each block is written to a file and run with this interpreter in a temporary directory, as a
reader would run it. Only these substitutions are made, and each must find its text (so a
README change cannot turn one into a silent no-op):

* ``http://127.0.0.1:8000/v1`` (the local OpenAI-compatible server) -> the replay server's ``/v1``;
* ``/path/to/repo`` -> a temporary project directory.

Cloud providers are reached the documented way, through the environment: a fake key plus
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` pointing at the replay server. The scripted answers
are Chat Completions streams (tests/cli/support.py) and recorded provider replies
(tests/fixtures/provider-cassettes). A block that no test knows fails the suite.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, tool_messages
from tests.support.replay import CASSETTES, ReplayServer, load_cassette

README = Path(__file__).resolve().parents[1] / "README.md"

LOCAL_URL = "http://127.0.0.1:8000/v1"
REPO_PLACEHOLDER = "/path/to/repo"

#: Each README block, named by a line only it has. A new block needs a name and a test here.
KNOWN = {
    "session": "session = ra.Session(",
    "custom_tool": "profile.tool_registry.add(",
    "llm": "Client.from_env()",
}


def python_blocks(text: str) -> list[str]:
    """The ```python fenced blocks of a markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def block(name: str) -> str:
    matches = [b for b in python_blocks(README.read_text(encoding="utf-8")) if KNOWN[name] in b]
    assert len(matches) == 1, f"README.md should have exactly one python block with {KNOWN[name]!r}"
    return matches[0]


def substitute(code: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in code, f"the README block no longer contains {old!r}; update tests/test_readme.py"
        code = code.replace(old, new)
    return code


def run_block(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a script in ``tmp_path`` with no provider settings but ``env``."""
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = clean_env(home, **env)
    # The snippets' tools run commands such as ``pytest``: find this interpreter's scripts first.
    environ["PATH"] = f"{Path(sys.executable).parent}:{environ.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer().start()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    project = tmp_path / "repo"
    project.mkdir()
    (project / "config.py").write_text("import json\n\n\ndef load(path):\n    return json.load(open(path))\n")
    return project


def test_every_python_block_is_run_by_a_test() -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no python blocks?"
    for code in blocks:
        names = [name for name, marker in KNOWN.items() if marker in code]
        assert len(names) == 1, (
            "every python block in README.md must be run by tests/test_readme.py; this one is "
            f"matched by {names or 'no test'}:\n{code}"
        )
    assert len(blocks) == len(KNOWN), "a python block known to tests/test_readme.py left README.md"


def _user_texts(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        out.append(content or "")
    return out


def test_session_example_steers_during_the_run_and_follows_up(server: ReplayServer, repo: Path, tmp_path: Path) -> None:
    enqueue_tools(server, ("call_1", "shell_command", {"command": "grep -n json config.py"}))
    enqueue_text(server, "Added validation to load().")
    enqueue_text(server, "Added test_config.py.")
    code = substitute(block("session"), {LOCAL_URL: f"{server.base_url}/v1", REPO_PLACEHOLDER: str(repo)})

    done = run_block(code, tmp_path)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.index("> Find where the config file is parsed and add validation.") < lines.index("[shell_command]")
    assert lines.index("[shell_command]") < lines.index("> Keep the change small.")
    assert lines.index("> Keep the change small.") < lines.index("> Now add a test for it.")
    assert lines[-1] == "completed: Added test_config.py.", done.stdout
    first, second, third = chat_requests(server)
    assert _user_texts(first) == ["Find where the config file is parsed and add validation."]
    # The steering message was sent while submit() ran: it follows the tool round's result.
    assert "import json" in tool_messages(second)[0]["content"]
    assert _user_texts(second)[-1] == "Keep the change small."
    roles = [m["role"] for m in second["messages"]]
    assert roles[-2:] == ["tool", "user"]
    # The follow-up ran as a new input inside the same submit().
    assert _user_texts(third)[-1] == "Now add a test for it."
    assert len(server.requests) == 3


def test_session_example_reports_a_failed_model_call(server: ReplayServer, repo: Path, tmp_path: Path) -> None:
    server.enqueue(401, {"error": {"message": "Invalid API key", "type": "invalid_request_error"}})
    code = substitute(block("session"), {LOCAL_URL: f"{server.base_url}/v1", REPO_PLACEHOLDER: str(repo)})

    done = run_block(code, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(r"^failed: .*Invalid API key", done.stdout, re.M), done.stdout
    assert len(server.requests) == 1  # an authentication error is not retried


#: The README's cloud form of the session example: that provider's profile, no client.
CLOUD_FORM = {
    'ra.create_ra_profile("Qwen/Qwen2.5-Coder-32B-Instruct")': 'ra.create_anthropic_profile("claude-sonnet-4-5")',
    "ra.Session(profile, env, client)": "ra.Session(profile, env)",
}


def test_readme_states_the_cloud_form_the_tests_use() -> None:
    text = README.read_text(encoding="utf-8")
    assert '`ra.Session(ra.create_anthropic_profile("claude-sonnet-4-5"), env)`' in text


def test_session_example_cloud_form_without_a_key_reports_the_missing_provider(repo: Path, tmp_path: Path) -> None:
    """The README's old example crashed at steer() here; the error belongs in result.error."""
    code = substitute(block("session"), {**CLOUD_FORM, REPO_PLACEHOLDER: str(repo)})

    done = run_block(code, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(r"^failed: .*'anthropic' is not registered", done.stdout, re.M), done.stdout


def test_session_example_cloud_form_reaches_anthropic_base_url(
    server: ReplayServer, repo: Path, tmp_path: Path
) -> None:
    recorded = load_cassette(CASSETTES / "anthropic-messages" / "test_prompt.yaml")
    server.enqueue_cassette(recorded)  # the first input
    server.enqueue_cassette(recorded)  # the follow-up
    code = substitute(block("session"), {**CLOUD_FORM, REPO_PLACEHOLDER: str(repo)})

    done = run_block(code, tmp_path, ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=server.base_url)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["completed: - Captain", "- Scoop"], done.stdout
    first, second = (r.json() for r in server.requests)
    assert first["model"] == second["model"] == "claude-sonnet-4-5"
    assert second["messages"][-1]["content"][-1]["text"] == "Now add a test for it."


def test_custom_tool_example_registers_a_working_tool(server: ReplayServer, repo: Path, tmp_path: Path) -> None:
    """The block builds a profile; a session on it lets the model call ``run_tests``."""
    (repo / "test_calc.py").write_text(
        "def test_add():\n    assert 1 + 1 == 2\n\n\ndef test_sub():\n    assert 1 - 1 == 0\n"
    )
    enqueue_tools(server, ("call_1", "run_tests", {"filter": "add"}))
    enqueue_text(server, "One test passed.")
    driver = f"""
import asyncio
from ra.llm import Client, OpenAICompatibleAdapter


async def drive() -> None:
    client = Client({{"openai-compatible": OpenAICompatibleAdapter(base_url={server.base_url + "/v1"!r})}})
    session = ra.Session(profile, ra.LocalExecutionEnvironment({str(repo)!r}), client)
    result = await session.submit("Run the addition tests.")
    print("RESULT", result.stop_reason, result.text)
    await session.close()
    await client.close()


asyncio.run(drive())
"""
    done = run_block(block("custom_tool") + driver, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "RESULT completed One test passed." in done.stdout
    first, second = chat_requests(server)
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert "run_tests" in names
    output = tool_messages(second)[0]["content"]
    assert "exit code 0" in output
    assert "1 passed, 1 deselected" in output


def test_llm_example_reaches_openai_and_anthropic(server: ReplayServer, tmp_path: Path) -> None:
    openai = load_cassette(CASSETTES / "openai-responses" / "test_openai_responses_model_simple_response.yaml")
    anthropic = load_cassette(
        CASSETTES / "anthropic-messages" / "mirascope__test_call__anthropic_claude_sonnet_4_0__sync.yaml"
    )
    server.enqueue_cassette(openai)
    server.enqueue_cassette(anthropic)

    done = run_block(
        block("llm"),
        tmp_path,
        OPENAI_API_KEY="sk-test-openai",
        OPENAI_BASE_URL=f"{server.base_url}/v1",
        ANTHROPIC_API_KEY="sk-ant-test",
        ANTHROPIC_BASE_URL=server.base_url,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["The capital of France is Paris.", "4200 + 42 = 4242"]
    first, second = server.requests
    assert first.path == "/v1/responses"
    assert first.json()["model"] == "gpt-5.2"
    assert second.path == "/v1/messages"
    assert second.json()["model"] == "claude-sonnet-4-5"
    assert second.headers["x-api-key"] == "sk-ant-test"

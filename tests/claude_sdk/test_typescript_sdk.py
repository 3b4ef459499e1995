"""Programs written against the Claude Agent SDK for TypeScript (``@anthropic-ai/claude-agent-sdk``
on npm), run by node against the real ``ra`` command and a scripted model.

Each test writes a small ES module into ``tmp_path`` the way the SDK's own examples are written -
``for await (const message of query({prompt, options}))`` - with ``pathToClaudeCodeExecutable``
naming the venv's ``ra``. The program prints what it saw as JSON lines on stdout; the test reads
them, the files in the working directory and the requests the model server received.

The SDK comes from ``RA_TEST_NPM_DIR`` (CI installs it there, pinned), else from an ``npm
install`` of the pinned release into a directory of this test session. Without node (or npm, or
the network for that install) the tests skip - and fail when ``RA_TEST_REQUIRE_PROGRAMS`` is set,
as in CI, where a missing program is a broken setup.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.claude_sdk.support import BOUND_S, ra_path
from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, tool_messages
from tests.support.replay import ReplayServer

#: Each program starts node and one or more ``ra`` processes: the slow lane.
pytestmark = pytest.mark.slow

#: The release whose bundled Claude Code (``claudeCodeVersion`` in its package.json) is 2.1.332,
#: the one ``claude-agent-sdk`` 0.2.189 for Python bundles: the same protocol level.
SDK_VERSION = "0.3.332"
SDK_PACKAGE = f"@anthropic-ai/claude-agent-sdk@{SDK_VERSION}"
#: npm may have to download the SDK (a few MB without its optional native binary).
NPM_INSTALL_S = 300.0

PATCH = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"

#: What every program starts with: the SDK, and the options that point it at ra.
PRELUDE = """\
import { query, tool, createSdkMcpServer } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const base = {
  pathToClaudeCodeExecutable: process.env.RA_PATH,
  cwd: process.env.WORK,
  stderr: (text) => process.stderr.write(text),
};
const out = (value) => console.log(JSON.stringify(value));
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("RA_TEST_REQUIRE_PROGRAMS"):
        pytest.fail(f"RA_TEST_REQUIRE_PROGRAMS is set but {reason}")
    pytest.skip(reason)


def _installed(prefix: Path) -> bool:
    manifest = prefix / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "package.json"
    try:
        return json.loads(manifest.read_text())["version"] == SDK_VERSION
    except (OSError, ValueError, KeyError):
        return False


@pytest.fixture(scope="session")
def sdk_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``node_modules`` directory holding the pinned SDK (and zod, its peer dependency)."""
    return find_sdk(lambda: tmp_path_factory.mktemp("npm"))


def find_sdk(make_dir: Callable[[], Path]) -> Path:
    """The pinned SDK's ``node_modules``: ``RA_TEST_NPM_DIR``'s, else an ``npm install`` into
    ``make_dir()``. Skips, or fails under ``RA_TEST_REQUIRE_PROGRAMS``, when that cannot be."""
    if shutil.which("node") is None:
        _unavailable("node is not installed: the TypeScript SDK tests need it (Debian: nodejs, npm)")
    given = os.environ.get("RA_TEST_NPM_DIR")
    if given and _installed(Path(given)):
        return Path(given) / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        _unavailable(f"npm is not installed and RA_TEST_NPM_DIR has no {SDK_PACKAGE}")
    prefix = make_dir()
    try:
        quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), *quiet, "--omit=optional", SDK_PACKAGE],
            capture_output=True,
            text=True,
            timeout=NPM_INSTALL_S,
        )
    except subprocess.TimeoutExpired:
        _unavailable(f"npm install {SDK_PACKAGE} did not finish within {NPM_INSTALL_S:g}s")
    if done.returncode != 0 or not _installed(prefix):
        _unavailable(f"npm install {SDK_PACKAGE} failed: {done.stderr.strip()[-500:]}")
    return prefix / "node_modules"


def run_program(
    sdk_modules: Path, server: ReplayServer, tmp_path: Path, body: str, *, timeout: float = BOUND_S
) -> tuple[list[dict[str, Any]], str]:
    """Run ``PRELUDE + body`` with node; returns the JSON lines it printed and its stderr. The
    whole process group (node and the ra it started) is killed past ``timeout``."""
    (tmp_path / "node_modules").symlink_to(sdk_modules, target_is_directory=True)
    program = tmp_path / "program.mjs"
    program.write_text(PRELUDE + body)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = clean_env(
        home,
        OPENAI_COMPATIBLE_BASE_URL=f"{server.base_url}/v1",
        RA_MODEL="test-model",
        RA_PATH=ra_path(),
        WORK=str(work),
    )
    process = subprocess.Popen(
        ["node", str(program)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"the program did not finish within {timeout:g}s; stderr:\n{_tail(stderr)}")
    assert process.returncode == 0, f"node exited {process.returncode}; stderr:\n{_tail(stderr)}"
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")], stderr


def _tail(text: str) -> str:
    """The end of node's stderr, each line cut short (a stack trace quotes the SDK's minified source)."""
    return "\n".join(line[:300] for line in text.splitlines()[-15:])


def _results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in tool_messages(body)]


def _of(lines: list[dict[str, Any]], kind: str, subtype: str | None = None) -> list[dict[str, Any]]:
    return [m for m in lines if m.get("type") == kind and (subtype is None or m.get("subtype") == subtype)]


def test_query_with_a_plain_answer(sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "Paris is the capital of France.")
    lines, stderr = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
for await (const message of query({ prompt: "What is the capital of France?", options: base })) {
  out(message);
}
""",
    )
    (init,) = _of(lines, "system", "init")
    assert init["model"] == "test-model" and init["permissionMode"] == "default"
    assert init["claude_code_version"] == "2.1.332" and init["cwd"] == str(tmp_path / "work")
    texts = [b["text"] for m in _of(lines, "assistant") for b in m["message"]["content"] if b["type"] == "text"]
    assert texts == ["Paris is the capital of France."]
    (result,) = _of(lines, "result")
    assert lines[-1] is result
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "Paris is the capital of France.",
    )
    assert result["num_turns"] == 1 and result["session_id"] == init["session_id"]
    assert result["usage"]["input_tokens"] == 100 and result["usage"]["output_tokens"] == 10
    assert result["permission_denials"] == [] and result["errors"] == []
    assert isinstance(result["duration_ms"], int) and isinstance(result["total_cost_usd"], (int, float))
    # The TypeScript types require modelUsage: per model, in camelCase.
    usage = result["modelUsage"]["test-model"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (100, 10)
    assert {"cacheReadInputTokens", "cacheCreationInputTokens", "costUSD", "contextWindow", "maxOutputTokens"} <= set(
        usage
    )
    assert "warning" not in stderr  # nothing the SDK passes by default is unknown to ra


def test_tool_use_reads_and_edits_a_real_file(sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "a.txt"}))
    enqueue_tools(replay_server, ("c2", "apply_patch", {"patch": PATCH}))
    enqueue_text(replay_server, "Changed it.")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("old\n")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
const options = { ...base, permissionMode: "acceptEdits" };
for await (const message of query({ prompt: "Change old to new in a.txt", options })) out(message);
""",
    )
    assert (tmp_path / "work" / "a.txt").read_text() == "new\n"
    assert "old" in _results(chat_requests(replay_server)[1])[0]  # the model read the file
    uses = [b for m in _of(lines, "assistant") for b in m["message"]["content"] if b["type"] == "tool_use"]
    assert [(u["id"], u["name"]) for u in uses] == [("c1", "read_file"), ("c2", "apply_patch")]
    results = _of(lines, "user")
    assert [r["message"]["content"][0]["tool_use_id"] for r in results] == ["c1", "c2"]
    assert all(r["parent_tool_use_id"] is None for r in results)
    assert lines[-1]["subtype"] == "success" and lines[-1]["num_turns"] == 3


def test_can_use_tool_deny_keeps_the_file_and_tells_the_model(
    sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "rm a.txt"}))
    enqueue_text(replay_server, "I was not allowed to.")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("keep me\n")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
const canUseTool = async (toolName, input, { toolUseID }) => {
  out({ asked: toolName, input, toolUseID });
  return { behavior: "deny", message: "Deleting files is not allowed." };
};
for await (const message of query({ prompt: "delete a.txt", options: { ...base, canUseTool } })) out(message);
""",
    )
    assert (tmp_path / "work" / "a.txt").read_text() == "keep me\n"
    asked = [m for m in lines if "asked" in m]
    assert asked == [{"asked": "Bash", "input": {"command": "rm a.txt"}, "toolUseID": "c1"}]
    assert _results(chat_requests(replay_server)[1]) == ["Deleting files is not allowed."]
    result = lines[-1]
    assert result["result"] == "I was not allowed to."
    assert [d["tool_use_id"] for d in result["permission_denials"]] == ["c1"]


def test_a_pre_tool_use_hook_blocks_the_call(sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "Blocked.")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
const noTouch = async (input, toolUseID) => {
  out({ hook: input.hook_event_name, tool: input.tool_name, input: input.tool_input, toolUseID });
  return {
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "deny",
      permissionDecisionReason: "touch is not allowed here",
    },
  };
};
const options = {
  ...base,
  permissionMode: "bypassPermissions",
  allowDangerouslySkipPermissions: true,
  hooks: { PreToolUse: [{ matcher: "Bash", hooks: [noTouch] }] },
};
for await (const message of query({ prompt: "make a file", options })) out(message);
""",
    )
    assert not (tmp_path / "work" / "made.txt").exists()
    seen = [m for m in lines if "hook" in m]
    assert seen == [{"hook": "PreToolUse", "tool": "Bash", "input": {"command": "touch made.txt"}, "toolUseID": "c1"}]
    assert _results(chat_requests(replay_server)[1]) == ["touch is not allowed here"]
    assert lines[-1]["subtype"] == "success"


def test_a_hook_that_fails_with_on_failure_block_blocks_the_call(
    sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path
) -> None:
    """The SDK sends no prompt for a program with ``onFailure: "block"`` unless the CLI says it
    honours it; ra does, and the failing callback denies the call."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "Blocked.")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
const broken = async () => { throw new Error("the policy service is down"); };
const options = {
  ...base,
  permissionMode: "bypassPermissions",
  hooks: { PreToolUse: [{ hooks: [broken], onFailure: "block" }] },
};
for await (const message of query({ prompt: "make a file", options })) out(message);
""",
    )
    assert not (tmp_path / "work" / "made.txt").exists()
    assert "the policy service is down" in _results(chat_requests(replay_server)[1])[0]
    assert lines[-1]["result"] == "Blocked."


def test_interrupt_stops_a_running_command(sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "sleep 30 && touch late.txt"}))
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
const options = { ...base, permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true };
const q = query({ prompt: "sleep", options });
let asked = 0;
try {
  for await (const message of q) {
    out(message);
    if (message.type === "assistant" && message.message.content.some((b) => b.type === "tool_use")) {
      await new Promise((resolve) => setTimeout(resolve, 300));  // the command is running
      asked = Date.now();
      await q.interrupt();
    }
    if (message.type === "result") out({ elapsedMs: Date.now() - asked });
  }
} catch (error) {
  out({ thrown: String(error.message) });
}
""",
    )
    (result,) = _of(lines, "result")
    assert (result["subtype"], result["is_error"]) == ("error_during_execution", True)
    assert result["errors"], result  # the SDK reads errors of every error result
    assert next(m["elapsedMs"] for m in lines if "elapsedMs" in m) < 10_000
    # ra exits 1 after an error result (as claude does): the SDK throws with the result's errors.
    (thrown,) = [m["thrown"] for m in lines if "thrown" in m]
    assert "interrupted" in thrown
    assert not (tmp_path / "work" / "late.txt").exists()


def test_after_an_interrupt_the_next_prompt_goes_on_in_the_session(
    sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path
) -> None:
    """Streaming input (an async generator of user messages): the interrupted query ends, the
    session stays, and the next message is answered in it."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "sleep 30"}))
    enqueue_text(replay_server, "After the interrupt.")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
let next;
const interrupted = new Promise((resolve) => (next = resolve));
async function* prompts() {
  yield { type: "user", message: { role: "user", content: "sleep" }, parent_tool_use_id: null };
  await interrupted;
  yield { type: "user", message: { role: "user", content: "go on" }, parent_tool_use_id: null };
}
const options = { ...base, permissionMode: "bypassPermissions" };
const q = query({ prompt: prompts(), options });
let results = 0;
for await (const message of q) {
  if (message.type === "assistant" && message.message.content.some((b) => b.type === "tool_use")) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    await q.interrupt();
  }
  if (message.type === "result") {
    out(message);
    if (++results === 1) next();
    else break;
  }
}
""",
    )
    first, second = lines
    assert (first["subtype"], first["errors"]) == ("error_during_execution", ["stopped: the query was interrupted"])
    assert (second["subtype"], second["result"]) == ("success", "After the interrupt.")
    assert second["session_id"] == first["session_id"]
    sent = [m["content"] for m in chat_requests(replay_server)[1]["messages"] if m["role"] == "user"]
    assert sent[0] == "sleep" and sent[-1] == "go on"


def test_an_in_process_mcp_tool_is_called_by_the_model(
    sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_tools(replay_server, ("c1", "mcp__calc__add", {"a": 2, "b": 40}))
    enqueue_text(replay_server, "42")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
const add = tool("add", "Add two numbers", { a: z.number(), b: z.number() }, async ({ a, b }) => {
  out({ called: { a, b } });
  return { content: [{ type: "text", text: `sum=${a + b}` }] };
});
const calc = createSdkMcpServer({ name: "calc", version: "1.0.0", tools: [add] });
const options = { ...base, mcpServers: { calc }, allowedTools: ["mcp__calc__add"] };
for await (const message of query({ prompt: "add 2 and 40", options })) out(message);
""",
    )
    assert [m["called"] for m in lines if "called" in m] == [{"a": 2, "b": 40}]
    first = chat_requests(replay_server)[0]
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "mcp__calc__add")
    assert add["description"] == "Add two numbers" and set(add["parameters"]["properties"]) == {"a", "b"}
    assert _results(chat_requests(replay_server)[1]) == ["sum=42"]
    (init,) = _of(lines, "system", "init")
    assert [(s["name"], s["status"]) for s in init["mcp_servers"]] == [("calc", "connected")]
    assert lines[-1]["result"] == "42"


def test_resume_goes_on_with_the_conversation(sdk_modules: Path, replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "Noted: the code word is heron.")
    enqueue_text(replay_server, "It was heron.")
    lines, _ = run_program(
        sdk_modules,
        replay_server,
        tmp_path,
        """
let sessionId;
for await (const message of query({ prompt: "Remember the code word heron.", options: base })) {
  if (message.type === "result") { sessionId = message.session_id; out(message); }
}
const options = { ...base, resume: sessionId };
for await (const message of query({ prompt: "What was the code word?", options })) {
  if (message.type === "result") out(message);
}
""",
    )
    first, second = lines
    assert second["session_id"] == first["session_id"] and second["result"] == "It was heron."
    sent = [m["content"] for m in chat_requests(replay_server)[1]["messages"] if m["role"] != "system"]
    assert sent == ["Remember the code word heron.", "Noted: the code word is heron.", "What was the code word?"]


def test_without_node_the_tests_skip_here_and_fail_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.delenv("RA_TEST_REQUIRE_PROGRAMS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="node is not installed"):
        find_sdk(lambda: tmp_path)
    monkeypatch.setenv("RA_TEST_REQUIRE_PROGRAMS", "1")
    with pytest.raises(pytest.fail.Exception, match="RA_TEST_REQUIRE_PROGRAMS is set but node is not installed"):
        find_sdk(lambda: tmp_path)

"""``query()`` programs, written as the Claude Agent SDK's documentation writes them, run on ``ra``."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from claude_agent_sdk import AssistantMessage, ClaudeSDKError, ResultMessage, SystemMessage, TextBlock, query

from tests.claude_sdk.support import BOUND_S, options
from tests.cli.support import chat_requests, enqueue_text, enqueue_tools
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra` command per test, driven by the SDK.
pytestmark = pytest.mark.slow


async def _collect(prompt: str, opts: object) -> list[object]:
    async with asyncio.timeout(BOUND_S):
        return [message async for message in query(prompt=prompt, options=opts)]


def test_a_plain_answer(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "Paris is the capital of France.")
    errors: list[str] = []
    messages = asyncio.run(
        _collect("What is the capital of France?", options(replay_server, tmp_path, stderr_lines=errors))
    )
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init", errors
    assert init.data["model"] == "test-model" and init.data["permissionMode"] == "default"
    texts = [b.text for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, TextBlock)]
    assert texts == ["Paris is the capital of France."]
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result) == ("success", False, "Paris is the capital of France.")
    assert result.num_turns == 1 and result.session_id == init.data["session_id"]
    assert result.usage["input_tokens"] == 100


def test_resume_goes_on_with_the_conversation(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "Noted: the code word is heron.")
    enqueue_text(replay_server, "It was heron.")
    first = asyncio.run(_collect("Remember the code word heron.", options(replay_server, tmp_path)))
    session_id = first[-1].session_id
    second = asyncio.run(_collect("What was the code word?", options(replay_server, tmp_path, resume=session_id)))
    assert second[-1].session_id == session_id and second[-1].result == "It was heron."
    sent = [m["content"] for m in chat_requests(replay_server)[1]["messages"] if m["role"] != "system"]
    assert sent == ["Remember the code word heron.", "Noted: the code word is heron.", "What was the code word?"]


def test_fork_session_starts_a_new_session_on_the_old_one(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "One.")
    enqueue_text(replay_server, "Two.")
    first = asyncio.run(_collect("one", options(replay_server, tmp_path)))
    opts = options(replay_server, tmp_path, resume=first[-1].session_id, fork_session=True)
    second = asyncio.run(_collect("two", opts))
    assert second[-1].session_id != first[-1].session_id
    assert len(chat_requests(replay_server)[1]["messages"]) > len(chat_requests(replay_server)[0]["messages"])


def test_max_turns_ends_with_error_max_turns(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "a.txt"}))
    enqueue_text(replay_server, "never read")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("x\n")

    async def run() -> list[object]:
        out: list[object] = []
        with contextlib.suppress(ClaudeSDKError):  # ra exits 1 after an error result, as claude does
            async with asyncio.timeout(BOUND_S):
                async for message in query(prompt="read", options=options(replay_server, tmp_path, max_turns=1)):
                    out.append(message)  # noqa: PERF401 - the messages before the exception are the point
        return out

    messages = asyncio.run(run())
    result = messages[-1]
    assert isinstance(result, ResultMessage) and (result.subtype, result.is_error) == ("error_max_turns", True)


def test_claude_flags_are_accepted_with_one_warning_each(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    errors: list[str] = []
    opts = options(
        replay_server,
        tmp_path,
        stderr_lines=errors,
        betas=["context-1m-2025-08-07"],
        setting_sources=["user", "project"],
        max_thinking_tokens=1000,
        add_dirs=[str(tmp_path)],
        system_prompt="You are terse.",
        extra_args={"json-schema": "{}"},
    )
    messages = asyncio.run(_collect("hi", opts))
    assert messages[-1].result == "ok"
    warned = [line for line in errors if "accepted and ignored" in line]
    assert len(warned) == 4 and len(set(warned)) == 4, errors
    assert any("--betas" in w for w in warned) and any("--setting-sources" in w for w in warned)
    assert chat_requests(replay_server)[0]["messages"][0]["content"].startswith("You are terse.")


def _offered(body: dict) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or ())


def test_tools_narrows_the_built_in_tools_and_an_empty_list_offers_none(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """``tools=[...]`` (``--tools``) offers only those built-ins, by Claude's names; a call to any
    other is refused, not run; ``tools=[]`` offers none. It only ever takes tools away."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha\n")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "done")
    errors: list[str] = []
    opts = options(replay_server, tmp_path, tools=["Read", "NoSuchTool"], permission_mode="bypassPermissions")
    opts.stderr = errors.append
    messages = asyncio.run(_collect("read a.txt", opts))
    assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success", errors
    offered = _offered(chat_requests(replay_server)[0])
    assert "read_file" in offered and "shell_command" not in offered and "apply_patch" not in offered, offered
    assert not (tmp_path / "work" / "made.txt").exists()
    refused = chat_requests(replay_server)[1]["messages"][-1]
    assert refused["role"] == "tool" and "made.txt" not in refused["content"]

    enqueue_text(replay_server, "no tools")
    asyncio.run(_collect("hello", options(replay_server, tmp_path, tools=[])))
    assert _offered(chat_requests(replay_server)[2]) == []

    enqueue_text(replay_server, "all tools")
    asyncio.run(_collect("hello", options(replay_server, tmp_path)))
    everything = _offered(chat_requests(replay_server)[3])
    assert set(offered) < set(everything) and "shell_command" in everything


def test_no_system_prompt_option_keeps_the_profiles_prompt(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The SDK sends ``--system-prompt ""`` when a program gives none: that is the profile's own
    prompt, not an empty one; a prompt the program gives replaces it; ``append`` adds to it."""

    def system(n: int) -> str:
        (message,) = [m for m in chat_requests(replay_server)[n]["messages"] if m["role"] == "system"]
        return message["content"]

    enqueue_text(replay_server, "a")
    asyncio.run(_collect("hi", options(replay_server, tmp_path)))
    enqueue_text(replay_server, "b")
    asyncio.run(_collect("hi", options(replay_server, tmp_path, system_prompt="You are terse.")))
    enqueue_text(replay_server, "c")
    preset = {"type": "preset", "preset": "claude_code", "append": "Always answer in French."}
    asyncio.run(_collect("hi", options(replay_server, tmp_path, system_prompt=preset)))
    assert len(system(0)) > 500 and "You are terse." not in system(0)
    assert system(1).startswith("You are terse.") and len(system(1)) < len(system(0))
    assert system(2).startswith(system(0)[:200]) and "Always answer in French." in system(2)[len(system(0)) - 200 :]

"""Command hooks (ra.agent.hooks.command): real bash scripts in tmp_path, Claude Code's JSON
convention (input on stdin, answer on stdout, exit 2 = block), and what happens when a script
fails, writes nonsense or hangs."""

from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from ra.agent import Session, SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.agent.hooks import HookEvent, Hooks, PreToolUseInput
from ra.agent.hooks.command import CommandHook, hooks_from_config
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike, call, calls, reply
from ra.llm.types import Request
from ra.profiles import create_anthropic_profile

from ..env.procs import is_alive, needs_proc
from .support import FAST_RETRY, Recorder


def script(tmp_path: Path, name: str, body: str) -> str:
    """An executable bash script in tmp_path/hooks; returns its absolute path."""
    folder = tmp_path / "hooks"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def settings(event: str, command: str, *, matcher: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        spec["timeout"] = timeout
    entry: dict[str, Any] = {"hooks": [spec]}
    if matcher is not None:
        entry["matcher"] = matcher
    return {"hooks": {event: [entry]}}


def build(tmp_path: Path, script_steps: list[StepLike], hooks: Hooks, **config: Any) -> tuple[Session, ScriptedAdapter]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    profile = create_anthropic_profile(model="m")
    model = ScriptedAdapter(script_steps)
    session = Session(
        profile,
        LocalExecutionEnvironment(str(work)),
        Client(providers={"anthropic": model}),
        SessionConfig(retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}, **config),
        hooks=hooks,
    )
    return session, model


def results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


# -- the input -------------------------------------------------------------------------------------


async def test_the_script_reads_claude_code_json_on_stdin_in_the_project_dir(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    hook = script(
        tmp_path,
        "record.sh",
        f'cat > {seen}\necho "$CLAUDE_PROJECT_DIR|$RA_PROJECT_DIR|$(pwd)" > {tmp_path}/env.txt\n',
    )
    hooks = hooks_from_config(settings("PreToolUse", hook, matcher="Bash"))
    session, _ = build(tmp_path, [call("shell", _id="toolu_1", command="echo hi"), reply("ok")], hooks)
    await session.submit("go")
    data = json.loads(seen.read_text())
    work = str(tmp_path / "work")
    assert data == {
        "hook_event_name": "PreToolUse",
        "session_id": session.id,
        "cwd": work,
        "permission_mode": "bypassPermissions",  # nothing asks for checks; Claude Code's spelling
        "transcript_path": None,
        "tool_name": "Bash",
        "ra_tool_name": "shell",
        "tool_input": {"command": "echo hi"},
        "tool_use_id": "toolu_1",
    }
    assert (tmp_path / "env.txt").read_text().strip() == f"{work}|{work}|{work}"


# -- answers -------------------------------------------------------------------------------------------


async def test_exit_2_denies_with_stderr_as_the_reason(tmp_path: Path) -> None:
    hook = script(
        tmp_path,
        "guard.sh",
        "cmd=$(python3 -c \"import json,sys; print(json.load(sys.stdin)['tool_input']['command'])\")\n"
        'case "$cmd" in *rm*) echo "rm is not allowed here: $cmd" >&2; exit 2;; esac\nexit 0\n',
    )
    hooks = hooks_from_config(settings("PreToolUse", hook, matcher="Bash"))
    (tmp_path / "work").mkdir()
    (tmp_path / "work/keep.txt").write_text("k")
    steps = [calls(("shell", {"command": "rm keep.txt"}), ("shell", {"command": "echo fine"})), reply("ok")]
    session, model = build(tmp_path, steps, hooks)
    await session.submit("go")
    denied, fine = results(model.requests[-1])
    assert denied == "rm is not allowed here: rm keep.txt"
    assert "fine" in fine
    assert (tmp_path / "work/keep.txt").exists()
    assert [(d.source, d.reason) for d in session.permission_denials] == [("hook", denied)]


async def test_exit_2_without_stderr_still_gives_a_reason(tmp_path: Path) -> None:
    hooks = hooks_from_config(settings("PreToolUse", "exit 2"))
    session, model = build(tmp_path, [call("shell", command="echo x"), reply("ok")], hooks)
    await session.submit("go")
    assert results(model.requests[-1]) == ["the PreToolUse hook blocked this (exit 2) without saying why"]


async def test_json_answers_deny_rewrite_and_add_context(tmp_path: Path) -> None:
    pre = script(
        tmp_path,
        "pre.py.sh",
        "python3 -c '\n"
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        'cmd = data["tool_input"]["command"]\n'
        'if cmd.startswith("curl"):\n'
        '    out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",\n'
        '           "permissionDecisionReason": "no network from the shell"}}\n'
        "else:\n"
        '    out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",\n'
        '           "updatedInput": {"command": cmd + " --checked"}}}\n'
        "print(json.dumps(out))\n"
        "'\n",
    )
    post = script(
        tmp_path,
        "post.sh",
        'echo \'{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "ran under audit"}}\'\n',
    )
    config = settings("PreToolUse", pre, matcher="Bash")
    config["hooks"].update(settings("PostToolUse", post, matcher="shell")["hooks"])
    hooks = hooks_from_config(config)
    steps = [calls(("shell", {"command": "curl http://x"}), ("shell", {"command": "echo hello"})), reply("ok")]
    session, model = build(tmp_path, steps, hooks)
    await session.submit("go")
    denied, rewritten = results(model.requests[-1])
    assert denied == "no network from the shell"
    assert "Output:\nhello --checked\n" in rewritten and rewritten.endswith("\n\nran under audit")


async def test_continue_false_ends_the_input(tmp_path: Path) -> None:
    hooks = hooks_from_config(settings("PostToolUse", """echo '{"continue": false, "stopReason": "quota"}'"""))
    session, model = build(tmp_path, [call("shell", command="echo a"), reply("never")], hooks)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert len(model.requests) == 1


async def test_plain_stdout_is_context_for_session_start_and_prompt_submit_only(tmp_path: Path) -> None:
    config = settings("SessionStart", "echo 'Today: release freeze'")
    config["hooks"].update(settings("UserPromptSubmit", "echo 'Branch: main'")["hooks"])
    config["hooks"].update(settings("PreToolUse", "echo 'just chatter'")["hooks"])
    hooks = hooks_from_config(config)
    session, model = build(tmp_path, [call("shell", command="echo a"), reply("ok")], hooks)
    await session.submit("hello")
    users = [m.text for m in model.requests[0].messages if m.role == "user"]
    assert users == ["Today: release freeze", "hello", "Branch: main"]
    assert "a" in results(model.requests[-1])[0]  # chatter on stdout does not block the call


async def test_exit_2_refuses_a_prompt_and_makes_a_stop_continue(tmp_path: Path) -> None:
    flag = tmp_path / "stopped-once"
    config = settings("UserPromptSubmit", "grep -q password && { echo 'no passwords' >&2; exit 2; }; exit 0")
    config["hooks"].update(
        settings("Stop", f"test -e {flag} && exit 0; touch {flag}; echo 'tests are failing' >&2; exit 2")["hooks"]
    )
    hooks = hooks_from_config(config)
    session, model = build(tmp_path, [reply("done"), reply("fixed")], hooks)
    refused = await session.submit("my password is x")
    assert refused.stop_reason is StopReason.INTERRUPTED and model.requests == []
    result = await session.submit("fix it")
    assert result.text == "fixed"
    assert [m.text for m in model.requests[1].messages if m.role == "user"][-1] == (
        "You are not done yet: tests are failing"
    )


# -- failures --------------------------------------------------------------------------------------------


async def test_an_exit_other_than_2_is_a_non_blocking_error_the_call_runs_and_the_user_is_warned(
    tmp_path: Path,
) -> None:
    """Claude Code's rule: only exit 2 blocks. A ``set -e; grep -q`` guard exits 1 whenever its
    pattern is absent: that must not block every call (it did: ra denied on any failure)."""
    guard = script(
        tmp_path,
        "guard.sh",
        "set -e\ninput=$(cat)\necho \"$input\" | grep -q 'rm -rf'\necho 'rm -rf is refused' >&2\nexit 2\n",
    )
    config = settings("PreToolUse", guard, matcher="Bash")
    config["hooks"].update(settings("PostToolUse", "echo 'linter crashed' >&2; exit 1", matcher="Read")["hooks"])
    hooks = hooks_from_config(config)
    (tmp_path / "work").mkdir()
    (tmp_path / "work/a.txt").write_text("content")
    steps = [
        calls(("shell", {"command": "touch made"}), ("read_file", {"file_path": "a.txt"})),
        call("shell", command="rm -rf a.txt"),
        reply("ok"),
    ]
    session, model = build(tmp_path, steps, hooks)
    rec = Recorder(session)
    await session.submit("go")
    ran, read = results(model.requests[1])
    assert ran.startswith("Exit code: 0") and (tmp_path / "work/made").exists()
    assert "content" in read and "linter crashed" not in read  # the model never sees it
    (refused,) = results(model.requests[2])[2:]
    assert refused == "rm -rf is refused" and (tmp_path / "work/a.txt").exists()  # exit 2 still blocks
    warnings = rec.of(E.WARNING)
    assert [w["code"] for w in warnings] == ["hook_error", "hook_error"]
    assert warnings[0]["event"] == "PreToolUse" and "exited with status 1" in warnings[0]["message"]
    assert warnings[1]["message"].startswith(
        "hook command:echo 'linter crashed' >&2; exit 1 (PostToolUse) exited with status 1: linter crashed"
    )
    assert rec.of(E.PERMISSION_DENIED)[0]["reason"] == "rm -rf is refused"


async def test_a_hook_killed_by_a_signal_is_a_non_blocking_error(tmp_path: Path) -> None:
    hooks = hooks_from_config(settings("PreToolUse", "kill -KILL $$"))
    session, _ = build(tmp_path, [call("shell", command="touch made"), reply("ok")], hooks)
    rec = Recorder(session)
    await session.submit("go")
    assert (tmp_path / "work/made").exists()
    (warning,) = rec.of(E.WARNING)
    assert warning["code"] == "hook_error" and "killed by signal 9" in warning["message"]


async def test_invalid_json_fails_closed(tmp_path: Path) -> None:
    hooks = hooks_from_config(settings("PreToolUse", "echo '{not json'"))
    session, model = build(tmp_path, [call("shell", command="touch made"), reply("ok")], hooks)
    await session.submit("go")
    (result,) = results(model.requests[-1])
    assert "wrote invalid JSON on stdout" in result and result.startswith("Denied: ")
    assert not (tmp_path / "work/made").exists()


def _live_processes_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if marker.encode() in cmdline and is_alive(int(name)):
            found.append(int(name))
    return found


def _hanging_script(tmp_path: Path, marker: str) -> str:
    """A hook that starts a background child (marked) and then hangs itself."""
    return script(
        tmp_path,
        f"hang-{marker}.sh",
        f"(exec -a {marker} sleep 300) &\necho $! > {tmp_path}/{marker}.pid\nsleep 300\n",
    )


@needs_proc
async def test_a_pre_tool_use_script_past_its_timeout_is_killed_with_its_children_and_denies(tmp_path: Path) -> None:
    marker = f"ra-hook-{uuid.uuid4().hex[:10]}"
    hooks = hooks_from_config(settings("PreToolUse", _hanging_script(tmp_path, marker), timeout=0.5))
    session, model = build(tmp_path, [call("shell", command="touch made"), reply("ok")], hooks)
    try:
        await session.submit("go")
        (result,) = results(model.requests[-1])
        assert result.startswith("Denied: hook command:") and "timed out after 0.5s" in result
        assert not (tmp_path / "work/made").exists()
        child = int((tmp_path / f"{marker}.pid").read_text())
        assert not is_alive(child)
        assert _live_processes_with(marker) == []
    finally:
        for pid in _live_processes_with(marker):
            os.kill(pid, 9)


@needs_proc
async def test_a_post_tool_use_script_past_its_timeout_only_warns(tmp_path: Path) -> None:
    marker = f"ra-hook-{uuid.uuid4().hex[:10]}"
    hooks = hooks_from_config(settings("PostToolUse", _hanging_script(tmp_path, marker), timeout=0.5))
    session, model = build(tmp_path, [call("shell", command="echo survived"), reply("ok")], hooks)
    rec = Recorder(session)
    try:
        result = await session.submit("go")
        assert result.text == "ok"
        assert "survived" in results(model.requests[-1])[0]
        (warning,) = rec.of(E.WARNING)
        assert warning["code"] == "hook_failed" and warning["message"].endswith("timed out after 0.5s")
        assert _live_processes_with(marker) == []
    finally:
        for pid in _live_processes_with(marker):
            os.kill(pid, 9)


async def test_a_command_hook_called_directly_returns_a_hook_result(tmp_path: Path) -> None:
    hook = CommandHook('cat >/dev/null; echo \'{"decision": "block", "reason": "r"}\'', timeout=5)
    data = PreToolUseInput(session_id="s", cwd=str(tmp_path), tool_name="shell", tool_input={}, tool_use_id="t")
    result = await hook(data)
    assert result is not None and (result.decision, result.reason) == ("deny", "r")
    assert hook.__name__ == 'command:cat >/dev/null; echo \'{"decision": "block", "reason": "r"}\''
    failed = await CommandHook("echo why >&2; exit 3")(data)
    assert failed is not None and failed.decision is None
    assert failed.error == "exited with status 3: why (a non-blocking error: only exit 2 blocks)"
    with pytest.raises(ValueError, match="non-empty command"):
        CommandHook("  ")


# -- configuration ---------------------------------------------------------------------------------------


def test_hooks_from_config_reads_claude_codes_settings_shape() -> None:
    config = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "a.sh", "timeout": 5}]},
                {"hooks": [{"command": "b.sh"}]},
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "c.sh"}]}],
        }
    }
    hooks = hooks_from_config(config)
    pre = hooks.for_event(HookEvent.PRE_TOOL_USE)
    assert [(h.matcher, h.callback.command, h.callback.timeout, h.timeout) for h in pre] == [
        ("Bash|Edit", "a.sh", 5.0, 8.0),
        (None, "b.sh", 60.0, 63.0),
    ]
    assert len(hooks) == 3
    # The inner mapping works too, and hooks can be added to an existing Hooks.
    more = hooks_from_config({"SessionEnd": [{"hooks": [{"command": "d.sh"}]}]}, hooks)
    assert more is hooks and len(hooks) == 4


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"hooks": {"PreToolUze": []}}, "unknown hook event 'PreToolUze'; expected one of SessionStart"),
        ({"hooks": {"Stop": {"hooks": []}}}, r"hooks.Stop must be a list"),
        ({"hooks": {"Stop": [{"command": "x"}]}}, r"hooks.Stop\[0\] must be an object with a 'hooks' list"),
        ({"hooks": {"Stop": [{"matcher": 3, "hooks": []}]}}, r"hooks.Stop\[0\].matcher must be a string"),
        ({"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}}, "only hooks of type 'command'"),
        ({"hooks": {"Stop": [{"hooks": [{"command": ""}]}]}}, r"hooks.Stop\[0\].hooks\[0\].command must be"),
        ({"hooks": {"Stop": [{"hooks": [{"command": "x", "timeout": 0}]}]}}, "timeout must be a positive number"),
        ({"hooks": {"Stop": [{"hooks": [{"command": "x", "timeout": True}]}]}}, "timeout must be a positive number"),
        ({"hooks": {"Stop": [{"hooks": [{"command": "x", "timeout": "5"}]}]}}, "timeout must be a positive number"),
        ({"hooks": {"PreToolUse": [{"matcher": "(", "hooks": [{"command": "x"}]}]}}, "not a valid regular"),
        ({"hooks": []}, "must be a mapping of event name"),
    ],
)
def test_hooks_from_config_names_the_bad_place(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hooks_from_config(config)


async def test_a_large_input_and_a_chatty_script_do_not_deadlock(tmp_path: Path) -> None:
    """The script writes a lot before it reads its (large) stdin: both pipes must flow at once."""
    hook = CommandHook(
        'head -c 3000000 /dev/zero | tr \'\\0\' x; cat > input.json; echo \'{"decision": "block", "reason": "seen"}\'',
        timeout=3,
    )
    big = "y" * 3_000_000
    data = PreToolUseInput(
        session_id="s", cwd=str(tmp_path), tool_name="write_file", tool_input={"content": big}, tool_use_id="t"
    )
    result = await hook(data)
    # stdout starts with the x's, so it is not a JSON answer: no opinion, and no timeout.
    assert result is not None and result.decision is None and result.output is not None
    assert json.loads((tmp_path / "input.json").read_text())["tool_input"]["content"] == big


# -- what a hook leaves behind -------------------------------------------------------------------------


@needs_proc
@pytest.mark.parametrize(
    "start",
    [
        "( exec -a {marker} sleep 30 ) &",  # a background job that keeps stdout and stderr open
        "( ( exec -a {marker} sleep 30 ) & )",  # a double fork: the job is reparented away
        "setsid bash -c 'exec -a {marker} sleep 30' &",  # leaves the process group and session
        "setsid bash -c 'exec -a {marker} sleep 30' >/dev/null 2>&1 </dev/null &",  # and the pipes
    ],
    ids=["background", "double-fork", "setsid", "setsid-detached"],
)
async def test_a_hook_is_done_at_its_exit_and_nothing_it_started_outlives_it(tmp_path: Path, start: str) -> None:
    """Before: a background child holding stdout kept the hook 'running' until its timeout (and
    a PreToolUse call was then denied); a setsid child survived the hook."""
    import time

    marker = f"ra-hook-{uuid.uuid4().hex[:10]}"
    # The hook answers once its child is running under the marked name (so the check cannot look
    # before the child exists).
    wait = f"for i in $(seq 100); do pgrep -f '^{marker}' >/dev/null && break; sleep 0.02; done"
    body = f'{start.format(marker=marker)}\n{wait}\necho \'{{"decision": "approve"}}\'\nexit 0\n'
    hooks = hooks_from_config(settings("PreToolUse", script(tmp_path, "bg.sh", body), timeout=20))
    session, _ = build(tmp_path, [call("shell", command="touch made"), reply("ok")], hooks)
    try:
        started = time.monotonic()
        await session.submit("go")
        assert time.monotonic() - started < 8  # not the 20 s timeout
        assert (tmp_path / "work/made").exists()  # the hook's answer was read: the call ran
        assert _live_processes_with(marker) == []
    finally:
        for pid in _live_processes_with(marker):
            os.kill(pid, 9)


async def test_post_tool_use_exit_2_feeds_stderr_to_the_model(tmp_path: Path) -> None:
    hooks = hooks_from_config(settings("PostToolUse", "echo 'lint: unused import in a.py' >&2; exit 2"))
    session, model = build(tmp_path, [call("shell", command="echo hi"), reply("ok")], hooks)
    await session.submit("go")
    (seen,) = results(model.requests[-1])
    assert "hi" in seen and seen.endswith("\n\nlint: unused import in a.py")


async def test_a_shell_tools_response_is_claude_codes_object_and_the_mode_is_spelled_as_claude_does(
    tmp_path: Path,
) -> None:
    seen = tmp_path / "post.json"
    hooks = hooks_from_config(settings("PostToolUse", f"cat > {seen}", matcher="Bash"))
    session, _ = build(
        tmp_path,
        [call("shell", command="echo out; echo err >&2"), reply("ok")],
        hooks,
        permission_mode="accept_edits",
        allowed_tools=("Bash",),  # with nobody to ask, a command must be allowed to run
    )
    await session.submit("go")
    data = json.loads(seen.read_text())
    assert data["permission_mode"] == "acceptEdits"
    assert data["tool_response"] == {
        "stdout": "out\n",
        "stderr": "err\n",
        "interrupted": False,
        "isImage": False,
        "exit_code": 0,
    }
    assert "output" not in data


async def test_events_ra_never_fires_are_accepted_and_warned_about_once(tmp_path: Path) -> None:
    config = settings("Notification", "exit 0")
    config["hooks"].update(settings("PermissionRequest", "exit 0")["hooks"])
    config["hooks"].update(settings("PreCompact", "exit 0")["hooks"])
    hooks = hooks_from_config(config)
    session, _ = build(tmp_path, [reply("a"), reply("b")], hooks)
    rec = Recorder(session)
    await session.submit("one")
    await session.submit("two")
    (warning,) = rec.of(E.WARNING)
    assert warning["code"] == "hook_never_fires" and warning["events"] == ["Notification", "PermissionRequest"]
    with pytest.raises(ValueError, match="unknown hook event 'Notifcation'"):
        hooks_from_config(settings("Notifcation", "exit 0"))


async def test_a_hook_that_cannot_start_denies_a_pre_tool_use_call(tmp_path: Path) -> None:
    """No answer at all (the working directory is gone): ra cannot know what the hook decided."""
    from ra.agent import GenericProfile
    from ra.tools.registry import ToolRegistry

    ran: list[str] = []
    registry = ToolRegistry()
    registry.add("act", "act", None, lambda args, ctx: ran.append("act") or "acted", effect="execute")
    hooks = hooks_from_config(settings("PreToolUse", "exit 0"))
    gone = tmp_path / "gone"
    model = ScriptedAdapter([call("act"), reply("ok")])

    class GoneEnv:
        def working_directory(self) -> str:
            return str(gone)

        def platform(self) -> str:
            return "linux"

        def os_version(self) -> str:
            return "Linux"

        async def terminate_all(self) -> None:
            return None

    session = Session(
        GenericProfile("scripted", "m", registry, system_prompt="s"),
        GoneEnv(),  # type: ignore[arg-type]
        Client(providers={"scripted": model}),
        SessionConfig(retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}),
        hooks=hooks,
    )
    await session.submit("go")
    assert ran == []
    (denied,) = results(model.requests[-1])
    assert denied.startswith("Denied: hook command:exit 0 (PreToolUse) failed: FileNotFoundError")


async def test_transcript_path_is_the_record_file_when_the_session_is_recorded(tmp_path: Path) -> None:
    """Claude Code gives every hook its transcript's path: ra gives the file the session is recorded
    to, which a hook can read (the entries up to the moment of the hook)."""
    from ra.agent.store import FileSessionStore

    seen = tmp_path / "seen"
    seen.mkdir()
    hook = script(tmp_path, "record.sh", f"cat > {seen}/$(date +%s%N).json\n")
    config = {"hooks": {**settings("PreToolUse", hook, matcher="Bash")["hooks"], **settings("Stop", hook)["hooks"]}}
    work = tmp_path / "work"
    work.mkdir()
    store = FileSessionStore(tmp_path / "sessions")
    model = ScriptedAdapter([call("shell", _id="toolu_1", command="echo hi"), reply("ok")])
    session = Session(
        create_anthropic_profile(model="m"),
        LocalExecutionEnvironment(str(work)),
        Client(providers={"anthropic": model}),
        SessionConfig(retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}),
        hooks=hooks_from_config(config),
        store=store,
    )
    await session.submit("go")
    await session.close()
    inputs = [json.loads(p.read_text()) for p in sorted(seen.iterdir())]
    assert [i["hook_event_name"] for i in inputs] == ["PreToolUse", "Stop"]
    path = store.path_of(session.id)
    assert path is not None
    assert {i["transcript_path"] for i in inputs} == {str(path)}
    transcript = Path(inputs[0]["transcript_path"])
    entries = [json.loads(line) for line in transcript.read_text().splitlines()]  # noqa: ASYNC240
    assert entries[0]["type"] == "session" and entries[0]["id"] == session.id
    assert "assistant" in [e["type"] for e in entries]


async def test_a_resumed_sessions_session_start_hook_gets_the_record_file(tmp_path: Path) -> None:
    from ra.agent.store import FileSessionStore

    seen = tmp_path / "seen"
    seen.mkdir()
    hook = script(tmp_path, "record.sh", f"cat > {seen}/$(date +%s%N).json\n")
    work = tmp_path / "work"
    work.mkdir()
    store = FileSessionStore(tmp_path / "sessions")
    model = ScriptedAdapter([reply("one"), reply("two")])
    args: Any = (
        create_anthropic_profile(model="m"),
        LocalExecutionEnvironment(str(work)),
        Client(providers={"anthropic": model}),
    )
    kwargs: dict[str, Any] = {"hooks": hooks_from_config(settings("SessionStart", hook)), "store": store}
    first = Session(*args, SessionConfig(retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}), **kwargs)
    await first.submit("hi")
    await first.close()
    again = await Session.open(
        *args, SessionConfig(retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}), resume=first.id, **kwargs
    )
    await again.submit("more")
    await again.close()
    inputs = [json.loads(p.read_text()) for p in sorted(seen.iterdir())]
    assert [(i["source"], i["transcript_path"]) for i in inputs] == [
        ("startup", None),  # a new session's file is written just after its SessionStart hooks
        ("resume", str(store.path_of(first.id))),
    ]

"""Replay (ra.agent.replay): a recorded session re-run against today's tree with real tools.

Every record here is made by running a real Session (scripted model, real shell and file tools on
a temporary directory), written as a JSONL record and read back; the replay then runs the same
real tools again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ra.agent import Control, SessionConfig
from ra.agent.config import StopReason
from ra.agent.controls import Continue, Stop
from ra.agent.history import (
    AssistantTurn,
    CompactionTurn,
    ContextTurn,
    SteeringTurn,
    ToolResultsTurn,
    UserTurn,
)
from ra.agent.replay import MASK, DifferenceKind, ReplayError, replay
from ra.env.local import LocalExecutionEnvironment
from ra.llm.errors import AuthenticationError
from ra.llm.testing import Step, call, calls, reply
from ra.llm.types import ToolCall, ToolResult
from tests.support.records import config, profile, run_session, through_record


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    return root


async def run_replay(work: Path, turns: Any, **options: Any):
    return await replay(turns, profile=profile(), execution_env=LocalExecutionEnvironment(work), **options)


def kinds(turns: Any) -> list[tuple[str, str]]:
    """Turns as (type, text) pairs: what two runs of one session must share."""
    out = []
    for t in turns:
        if isinstance(t, AssistantTurn):
            out.append(("assistant", t.content + "|" + ",".join(c.id for c in t.tool_calls)))
        elif isinstance(t, ToolResultsTurn):
            results = [[r.tool_call_id, re.sub(r"Duration: \d+ ms", "", r.content), r.is_error] for r in t.results]
            out.append(("results", json.dumps(results)))
        else:
            out.append((type(t).__name__, getattr(t, "content", "")))
    return out


class Snapshot(Control):
    """Keeps the replayed session's turns at the end of each input."""

    def __init__(self) -> None:
        self.turns: list[Any] = []

    async def input_end(self, run, reason) -> None:
        self.turns = list(run.history.turns)


READS = [
    call("shell", _id="c1", command="cat a.txt"),
    call("read_file", _id="c2", file_path="b.txt"),
    reply("read both"),
]


# -- (a) (b) (c): the same tree, a changed file, a tool that now fails -------------------------------------


async def test_unchanged_tree_replays_without_differences(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    snapshot = Snapshot()
    report = await run_replay(work, turns, controls=[snapshot])
    assert report.ok, report.to_text()
    assert (report.steps, report.recorded_steps, report.tool_calls, report.inputs) == (3, 3, 2, 1)
    assert report.differences == [] and report.stopped is None
    assert kinds(snapshot.turns) == kinds(turns)  # the replayed session is the recorded one
    assert "everything matches" in report.to_text()


async def test_a_changed_file_makes_exactly_the_step_that_read_it_differ(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    (work / "a.txt").write_text("ALPHA\n")
    report = await run_replay(work, turns)
    assert not report.ok
    [diff] = report.differences
    assert (diff.kind, diff.step, diff.call_id, diff.tool) == (DifferenceKind.RESULT, 1, "c1", "shell")
    assert "-alpha" in diff.diff and "+ALPHA" in diff.diff
    assert diff.diff.startswith("--- recorded step 1 shell\n+++ now step 1 shell\n")
    text = report.to_text()
    assert "step 1 shell c1: the result differs" in text and "+ALPHA" in text
    data = json.loads(json.dumps(report.to_json()))
    assert data["ok"] is False and data["differences"][0]["step"] == 1
    assert data["differences"][0]["recorded"]["content"] == diff.recorded


async def test_a_tool_that_now_fails_is_reported_with_its_error_flag(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    (work / "b.txt").unlink()
    report = await run_replay(work, turns)
    [diff] = report.differences
    assert (diff.step, diff.tool, diff.recorded_is_error, diff.now_is_error) == (2, "read_file", False, True)
    assert "recorded as a success, now an error" in diff.message


async def test_ignore_patterns_mask_both_texts(work: Path, tmp_path: Path) -> None:
    script = [call("shell", _id="t1", command="date +%s%N; echo fixed"), reply("ok")]
    turns = through_record(tmp_path, await run_session(work, script, ["time it"]))
    plain = await run_replay(work, turns)
    assert [d.step for d in plain.differences] == [1]  # nanoseconds never repeat
    masked = await run_replay(work, turns, ignore=[r"\d{15,}"])
    assert masked.ok, masked.to_text()
    # What is not masked still counts: the fixed text changes.
    (work / "fixed").write_text("")
    changed = [call("shell", _id="t1", command="date +%s%N; ls")]
    turns2 = through_record(tmp_path, await run_session(work, [*changed, reply("ok")], ["x"]))
    (work / "new.txt").write_text("")
    report = await run_replay(work, turns2, ignore=[r"\d{15,}"])
    [diff] = report.differences
    assert MASK in diff.recorded and "+new.txt" in diff.diff


async def test_a_bad_ignore_pattern_or_step_range_is_refused_before_anything_runs(work: Path, tmp_path: Path) -> None:
    turns = through_record(
        tmp_path, await run_session(work, [call("write_file", file_path="x", content="1"), reply("ok")], ["w"])
    )
    (work / "x").unlink()
    with pytest.raises(ValueError, match="not a valid regular expression"):
        await run_replay(work, turns, ignore=["("])
    for bad in [(0, 2), (3, 2), (True, None), ("1", None)]:
        with pytest.raises(ValueError):
            await run_replay(work, turns, steps=bad)
    assert not (work / "x").exists()  # nothing ran


# -- (d) steering --------------------------------------------------------------------------------------------


async def test_steering_mid_run_replays_at_the_same_place(work: Path, tmp_path: Path) -> None:
    holder: dict[str, Any] = {}

    def steer_then_call(request: Any) -> Step:
        holder["session"].steer("check b.txt too")  # arrives during model call 2
        return call("shell", _id="s2", command="echo two")

    script = [
        call("shell", _id="s1", command="echo one"),
        steer_then_call,
        call("read_file", _id="s3", file_path="b.txt"),
        reply("done"),
    ]
    recorded = await run_session(work, script, ["go"], setup=lambda s: holder.update(session=s))
    steering = [i for i, t in enumerate(recorded) if isinstance(t, SteeringTurn)]
    assert len(steering) == 1 and isinstance(recorded[steering[0] - 1], ToolResultsTurn)
    turns = through_record(tmp_path, recorded)
    snapshot = Snapshot()
    report = await run_replay(work, turns, controls=[snapshot])
    assert report.ok, report.to_text()
    assert kinds(snapshot.turns) == kinds(turns)


class SteerAfter(Control):
    """Steers once the call ``call_id`` has run (the user typing while a round runs)."""

    def __init__(self, call_id: str, text: str) -> None:
        self.call_id, self.text = call_id, text

    async def after_tool(self, run, outcome, tool):
        if outcome.call.id == self.call_id:
            run.steering.append(self.text)
        return None


async def test_between_calls_steering_replays_after_the_same_call(work: Path, tmp_path: Path) -> None:
    cfg = lambda: config(steering_mode="between_calls")  # noqa: E731
    round_ = calls(
        ToolCall("b1", "shell", {"command": "echo 1"}),
        ToolCall("b2", "shell", {"command": "echo 2"}),
        ToolCall("b3", "shell", {"command": "echo 3"}),
    )
    recorded = await run_session(
        work, [round_, reply("ok")], ["go"], session_config=cfg(), controls=[SteerAfter("b2", "stop")]
    )
    results = next(t for t in recorded if isinstance(t, ToolResultsTurn))
    assert [r.content.startswith("Skipped") for r in results.results] == [False, False, True]
    turns = through_record(tmp_path, recorded)
    snapshot = Snapshot()
    report = await run_replay(work, turns, config=cfg(), controls=[snapshot])
    assert report.ok, report.to_text()
    assert kinds(snapshot.turns) == kinds(turns)


async def test_steering_queued_before_an_input_goes_right_after_it(work: Path, tmp_path: Path) -> None:
    turns = through_record(
        tmp_path,
        [
            UserTurn("first"),
            SteeringTurn("use tabs"),
            AssistantTurn("", [ToolCall("p1", "shell", {"command": "echo hi"})]),
            ToolResultsTurn([ToolResult("p1", "hi\n", False)], names=["shell"]),
            AssistantTurn("done"),
        ],
    )
    snapshot = Snapshot()
    report = await run_replay(work, turns, controls=[snapshot])
    assert [type(t).__name__ for t in snapshot.turns][:3] == ["UserTurn", "SteeringTurn", "AssistantTurn"]
    # the hand-made result may not be the shell's exact output; what matters is where steering went
    assert all(d.kind == DifferenceKind.RESULT for d in report.differences)


# -- (e) edits: the tree must start where the recording started ------------------------------------------------


EDITS = [
    call("read_file", _id="e1", file_path="a.txt"),
    call("edit_file", _id="e2", file_path="a.txt", old_string="alpha", new_string="gamma"),
    call("write_file", _id="e3", file_path="new.txt", content="created\n"),
    call("shell", _id="e4", command="cat a.txt new.txt"),
    reply("edited"),
]


async def test_edits_replay_from_the_starting_tree(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, EDITS, ["edit"]))
    assert (work / "a.txt").read_text() == "gamma\n"
    # Replayed on the edited tree, the edit cannot apply: that step is reported, not hidden.
    report = await run_replay(work, turns)
    assert [(d.step, d.tool) for d in report.differences] == [(1, "read_file"), (2, "edit_file"), (3, "write_file")]
    assert report.differences[1].now_is_error is True and "+1 | gamma\n" in report.differences[0].diff
    assert "(created)" in report.differences[2].recorded and "(replaced)" in report.differences[2].now
    # From the starting tree (what a checkout gives), everything matches and the edits are made again.
    (work / "a.txt").write_text("alpha\n")
    (work / "new.txt").unlink()
    report = await run_replay(work, turns)
    assert report.ok, report.to_text()
    assert (work / "a.txt").read_text() == "gamma\n" and (work / "new.txt").read_text() == "created\n"


async def test_apply_patch_replays_on_the_ra_profile(work: Path, tmp_path: Path) -> None:
    from ra.agent import Session
    from ra.llm.client import Client
    from ra.llm.testing import ScriptedAdapter
    from ra.profiles import create_ra_profile

    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+delta\n*** End Patch\n"
    model = ScriptedAdapter(
        [call("apply_patch", _id="p1", patch=patch), call("shell_command", _id="p2", command="cat a.txt"), reply("ok")]
    )
    session = Session(
        create_ra_profile(MODEL_RA),
        LocalExecutionEnvironment(work),
        Client(providers={"openai-compatible": model}),
        config(),
    )
    await session.submit("patch it")
    await session.close()
    turns = through_record(tmp_path, session.history.turns)
    assert (work / "a.txt").read_text() == "delta\n"
    (work / "a.txt").write_text("alpha\n")
    report = await replay(
        turns, profile=create_ra_profile(MODEL_RA), execution_env=LocalExecutionEnvironment(work), config=config()
    )
    assert report.ok, report.to_text()
    assert (work / "a.txt").read_text() == "delta\n"


MODEL_RA = "test-model"


# -- (f) several inputs ----------------------------------------------------------------------------------------


async def test_several_inputs_replay_as_several_submits(work: Path, tmp_path: Path) -> None:
    script = [
        call("shell", _id="f1", command="cat a.txt"),
        reply("one"),
        call("shell", _id="f2", command="cat b.txt"),
        reply("two"),
        reply("three, no tools"),
    ]
    turns = through_record(tmp_path, await run_session(work, script, ["first", "second", "third"]))
    snapshot = Snapshot()
    report = await run_replay(work, turns, controls=[snapshot])
    assert report.ok and report.inputs == 3 and report.steps == 5
    assert kinds(snapshot.turns) == kinds(turns)
    (work / "b.txt").write_text("BETA\n")
    report = await run_replay(work, turns)
    assert [(d.step, d.call_id) for d in report.differences] == [(3, "f2")]


# -- (g) divergence ------------------------------------------------------------------------------------------------


async def test_a_record_that_ends_early_reports_the_extra_model_call(work: Path, tmp_path: Path) -> None:
    turns = await run_session(work, READS, ["read the files"])
    cut = turns[:-1]  # the process died before the last reply was recorded
    report = await run_replay(work, through_record(tmp_path, cut))
    [diff] = report.differences
    assert (diff.kind, diff.step) == (DifferenceKind.EXTRA_CALL, 2)
    assert "stopped after a tool round" in diff.message


async def test_the_loop_asking_for_one_more_call_after_a_text_answer_is_reported(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))

    class GoOn(Control):  # today's Stop hook sends the model on where the recorded run stopped
        async def on_stop(self, run, answer):
            return Continue("keep going")

    report = await run_replay(work, turns, controls=[GoOn()])
    [diff] = report.differences
    assert (diff.kind, diff.step) == (DifferenceKind.EXTRA_CALL, 3)
    assert "ended with a text answer" in diff.message


async def test_a_loop_that_stops_before_the_record_reports_the_unused_replies(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    report = await run_replay(work, turns, config=config(max_turns_per_input=1))
    [diff] = report.differences
    assert (diff.kind, diff.step) == (DifferenceKind.UNUSED_REPLIES, 1)
    assert "turn_limit" in diff.message and "2-3" in diff.message


async def test_a_call_denied_now_is_reported_as_denied(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    report = await run_replay(work, turns, config=config(disallowed_tools=("shell",)))
    [diff] = report.differences
    assert (diff.kind, diff.step, diff.tool) == (DifferenceKind.DENIED, 1, "shell")


async def test_a_call_without_a_recorded_result_is_reported(work: Path, tmp_path: Path) -> None:
    turns = await run_session(work, READS, ["read the files"])
    cut = turns[:3]  # user, reply 1, its results: keep reply 2 without its results
    cut.append(turns[3])
    report = await run_replay(work, through_record(tmp_path, cut))
    assert [(d.kind, d.step) for d in report.differences] == [
        (DifferenceKind.NO_RECORDED_RESULT, 2),
        (DifferenceKind.EXTRA_CALL, 2),
    ]


# -- options ---------------------------------------------------------------------------------------------------------


async def test_stop_at_first_stops_after_the_first_difference(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    (work / "a.txt").write_text("A\n")
    (work / "b.txt").write_text("B\n")
    full = await run_replay(work, turns)
    assert [d.step for d in full.differences] == [1, 2]
    first = await run_replay(work, turns, stop_at_first=True)
    assert [d.step for d in first.differences] == [1]
    assert first.steps == 1 and "first difference" in (first.stopped or "")


async def test_a_step_range_compares_only_those_steps_and_stops_after_it(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    (work / "a.txt").write_text("A\n")
    (work / "b.txt").write_text("B\n")
    report = await run_replay(work, turns, steps=(2, 2))
    assert [d.step for d in report.differences] == [2]
    assert report.steps == 2 and "step range" in (report.stopped or "")
    report = await run_replay(work, turns, steps=(None, 1))
    assert [d.step for d in report.differences] == [1] and report.steps == 1


async def test_without_streaming_the_recorded_message_is_used_too(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    snapshot = Snapshot()
    report = await run_replay(work, turns, config=config(stream=False), controls=[snapshot])
    assert report.ok
    assert kinds(snapshot.turns) == kinds(turns)


# -- turns that cannot be replayed ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        ([], "no user input"),
        ([AssistantTurn("hi")], "before any user input"),
        ([UserTurn("x"), ToolResultsTurn([ToolResult("c", "r", False)])], "answer no recorded tool call"),
        (
            [
                UserTurn("x"),
                AssistantTurn("", [ToolCall("c", "shell", {})]),
                ToolResultsTurn([ToolResult("d", "r", False)]),
            ],
            "did not make: d",
        ),
        ([SteeringTurn("x")], "before any user input"),
    ],
)
async def test_turns_that_no_session_could_produce_are_refused(work: Path, turns: Any, message: str) -> None:
    with pytest.raises(ReplayError, match=message):
        await run_replay(work, turns)


async def test_config_is_copied_not_changed(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    cfg = SessionConfig(context_overflow="prune")
    await run_replay(work, turns, config=cfg)
    assert cfg.context_overflow == "prune" and cfg.enable_loop_detection and "test-model" not in cfg.prices


async def test_the_shell_duration_line_is_masked_unless_asked_not_to(work: Path, tmp_path: Path) -> None:
    recorded = await run_session(work, READS, ["read the files"])
    results = recorded[2]
    assert isinstance(results, ToolResultsTurn) and "Duration: " in results.results[0].content
    results.results[0] = ToolResult(
        "c1", re.sub(r"Duration: \d+ ms", "Duration: 987654 ms", results.results[0].content)
    )
    turns = through_record(tmp_path, recorded)
    assert (await run_replay(work, turns)).ok
    exact = await run_replay(work, turns, default_ignores=False)
    [diff] = exact.differences
    assert diff.step == 1 and "-Duration: 987654 ms" in diff.diff


async def test_a_spawn_without_subagent_records_is_refused_and_never_takes_the_parents_replies(
    work: Path, tmp_path: Path
) -> None:
    turns = through_record(
        tmp_path,
        [
            UserTurn("delegate"),
            AssistantTurn("", [ToolCall("sa", "spawn_agent", {"task": "count the files"})]),
            ToolResultsTurn([ToolResult("sa", "spawned", False)], names=["spawn_agent"]),
            AssistantTurn("", [ToolCall("wa", "wait", {"agent_id": "agent-recorded", "timeout_ms": 20000})]),
            ToolResultsTurn([ToolResult("wa", "the subagent's answer", False)], names=["wait"]),
            AssistantTurn("done"),
        ],
    )
    report = await run_replay(work, turns)
    # No store to find the subagent's record in: the spawn is refused (no subagent runs, so none
    # can take the parent's replies: steps 2 and 3 were answered, no extra or unused call).
    assert report.steps == 3 and report.subagent_steps == 0
    assert [(d.kind, d.tool) for d in report.differences] == [
        (DifferenceKind.NO_SUBAGENT_RECORD, "spawn_agent"),
        (DifferenceKind.RESULT, "spawn_agent"),
        (DifferenceKind.RESULT, "wait"),
    ]
    assert "Could not spawn the agent: replay: no record" in (report.differences[1].now or "")


async def test_a_step_range_past_the_record_is_refused(work: Path, tmp_path: Path) -> None:
    turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
    with pytest.raises(ValueError, match="the record has 3 step"):
        await run_replay(work, turns, steps=(4, None))


@pytest.mark.parametrize(
    "stop",
    [
        Stop(StopReason.ERROR, "key revoked", AuthenticationError("key revoked", provider="anthropic")),
        Stop(StopReason.ABORTED, "closed"),
    ],
)
async def test_a_session_that_ends_early_leaves_no_ok_report(work: Path, tmp_path: Path, stop: Stop) -> None:
    script = [call("shell", _id="f1", command="cat a.txt"), reply("one"), reply("two"), reply("three")]
    turns = through_record(tmp_path, await run_session(work, script, ["first", "second", "third"]))

    class EndOnSecond(Control):  # today's hook or control ends the session at the second prompt
        async def input_start(self, run, text):
            return stop if text == "second" else None

    report = await run_replay(work, turns, controls=[EndOnSecond()])
    assert not report.ok and report.inputs == 2 and report.steps == 2
    assert report.differences[0].kind in (DifferenceKind.INPUT_ERROR, DifferenceKind.UNUSED_REPLIES)
    last = report.differences[-1]
    assert last.kind == DifferenceKind.INPUT_ERROR and "input 3" in last.message, report.to_text()


async def test_an_image_result_is_compared_by_its_bytes(work: Path, tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    (work / "shot.png").write_bytes(png)
    script = [call("read_file", _id="i1", file_path="shot.png"), reply("seen")]
    turns = through_record(tmp_path, await run_session(work, script, ["look"]))
    results = turns[2]
    assert isinstance(results, ToolResultsTurn) and results.results[0].image_data == png
    assert (await run_replay(work, turns)).ok
    (work / "shot.png").write_bytes(png[:-1] + b"\x01")  # same size, so the same text: other pixels
    report = await run_replay(work, turns)
    [diff] = report.differences
    assert diff.recorded == diff.now and diff.diff == ""
    assert diff.step == 1 and "the image: 40 bytes recorded, 40 bytes now" in diff.message


async def test_context_and_compaction_turns_are_not_inputs(work: Path, tmp_path: Path) -> None:
    recorded = await run_session(work, READS, ["read the files"])
    # What a hook added at the prompt, and a compaction after the first step: neither is replayed.
    with_extras = [
        recorded[0],
        ContextTurn("a SessionStart hook's note", source="SessionStart"),
        *recorded[1:3],
        CompactionTurn("summary of step 1", first_kept=2),
        *recorded[3:],
    ]
    turns = through_record(tmp_path, with_extras)
    snapshot = Snapshot()
    report = await run_replay(work, turns, controls=[snapshot])
    assert report.ok, report.to_text()
    assert kinds(snapshot.turns) == kinds(recorded)  # today's session added neither


# -- secrets: what the record never held, the replay's report must not show either ------------------------------


async def test_a_secret_a_tool_prints_now_is_redacted_in_the_report(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ra.agent import Session
    from ra.agent.store import FileSessionStore, load_record
    from ra.llm.client import Client
    from ra.llm.testing import ScriptedAdapter

    key = "sk-attack-0123456789abcdef"
    monkeypatch.setenv("RA_ATTACK_API_KEY", key)
    (work / ".env").write_text(f"KEY={key}\n")
    store = FileSessionStore(tmp_path / "sessions")
    model = ScriptedAdapter([call("shell", _id="c1", command="cat .env"), reply("done")])
    session = Session(
        profile(), LocalExecutionEnvironment(work), Client(providers={"anthropic": model}), config(), store=store
    )
    await session.submit("show the env file")
    await session.close()
    assert key not in (store.path_of(session.id) or Path()).read_text()  # the recorder redacted it
    turns = (await load_record(store, session.id)).turns

    # Unchanged tree: the live result holds the key, the record [REDACTED]; that is no difference.
    report = await run_replay(work, turns)
    assert report.ok, report.to_text()
    # A changed file: the diff shows the change, never the key.
    (work / ".env").write_text(f"KEY={key}\nMORE=1\n")
    report = await run_replay(work, turns)
    assert not report.ok
    assert "+MORE=1" in report.to_text()
    assert key not in report.to_text() and key not in json.dumps(report.to_json())


async def test_a_secret_in_a_result_the_record_lacks_is_redacted_in_the_report(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-attack-fedcba9876543210"
    monkeypatch.setenv("RA_ATTACK_TOKEN", key)
    (work / ".env").write_text(f"KEY={key}\n")
    turns = through_record(tmp_path, await run_session(work, [call("shell", _id="c1", command="cat .env")], ["go"]))
    turns = [t for t in turns if not isinstance(t, ToolResultsTurn)]  # the record ends inside the step
    report = await run_replay(work, turns)
    assert [d.kind for d in report.differences][:1] == [DifferenceKind.NO_RECORDED_RESULT]
    assert key not in report.to_text() and key not in json.dumps(report.to_json())


async def test_a_replay_never_calls_a_real_model_whatever_the_record_says(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.path)
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
            monkeypatch.setenv(name, base)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-000000000")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000000")
        turns = through_record(tmp_path, await run_session(work, READS, ["read the files"]))
        # The record ends early: the loop asks for one more call than it holds. It is refused
        # (reported), never sent to a provider.
        report = await run_replay(work, turns[:-1])
        assert [d.kind for d in report.differences] == [DifferenceKind.EXTRA_CALL]
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []

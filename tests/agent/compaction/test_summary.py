"""The summary: its request, what it updates, the task kept verbatim, pieces, the files touched."""

from __future__ import annotations

from typing import Any

from ra.agent.compaction import CompactionConfig
from ra.agent.compaction.cheap import CLEARED_PREFIX
from ra.agent.events import EventKind as E
from ra.agent.history import CompactionTurn, ToolResultsTurn
from ra.llm.testing import Step, reply
from ra.llm.types import Request, Role, ToolCall

from ..support import Recorder
from .helpers import compact_session, is_summary_request, pairing_problems, request_chars, user_texts

NO_CHEAP_PASS = CompactionConfig(clear_tool_outputs=False)


def numbered_summaries(requests: list[Request], steps: int, size: int = 400):  # type: ignore[no-untyped-def]
    """A model whose n-th summary is "SUMMARY n"; it calls echo ``steps`` times, then is done."""
    state = {"calls": 0, "summaries": 0}

    def answer(request: Request) -> Step:
        requests.append(request)
        if is_summary_request(request):
            state["summaries"] += 1
            return reply(f"## Goal\nSUMMARY {state['summaries']}")
        state["calls"] += 1
        if state["calls"] > steps:
            return reply("done")
        return Step(tool_calls=[ToolCall(f"c{state['calls']}", "echo", {"text": f"{state['calls']} " + "x" * size})])

    return answer


async def test_the_summary_request_keeps_the_system_prompt_and_offers_no_tools() -> None:
    seen: list[Request] = []
    session, _ = compact_session(default=numbered_summaries(seen, 30), compaction=NO_CHEAP_PASS)
    await session.submit("THE TASK")
    summary_requests = [r for r in seen if is_summary_request(r)]
    assert summary_requests
    first = summary_requests[0]
    assert first.messages[0].role == Role.SYSTEM and first.messages[0].text == session.system_prompt
    assert session.system_prompt.startswith("SYSTEM PROMPT")
    assert [m.role for m in first.messages] == [Role.SYSTEM, Role.USER]
    assert first.tools is None and first.tool_choice is None
    assert first.max_tokens == session.config.compaction.budgets(4000).summary_max
    prompt = first.messages[1].text
    assert "## Goal" in prompt and "## Open work" in prompt and "<transcript>" in prompt
    assert "[User]: THE TASK" in prompt and "[echo result]: echo: 1 " in prompt
    assert "<previous-note>" not in prompt
    # The main requests after a compaction keep the real system prompt too.
    main_after = [r for r in seen[seen.index(first) + 1 :] if not is_summary_request(r)]
    assert main_after and all(r.messages[0].text == session.system_prompt for r in main_after)


async def test_a_later_compaction_updates_the_previous_summary() -> None:
    seen: list[Request] = []
    session, _ = compact_session(default=numbered_summaries(seen, 60), compaction=NO_CHEAP_PASS)
    await session.submit("THE TASK")
    summary_requests = [r for r in seen if is_summary_request(r)]
    assert len(summary_requests) >= 3
    for n, request in enumerate(summary_requests[1:], start=1):
        prompt = request.messages[1].text
        assert f"<previous-note>\n## Goal\nSUMMARY {n}\n</previous-note>" in prompt
        assert "Write the note anew so that it covers both" in prompt
    compactions = [t for t in session.history if isinstance(t, CompactionTurn)]
    # A compaction's summary is the last one written for it (a small window needs pieces, each
    # updating the one before); each compaction starts from the previous compaction's summary.
    numbers = [int(c.summary.rsplit(" ", 1)[1]) for c in compactions]
    assert numbers == sorted(numbers) and numbers[-1] == len(summary_requests)
    # The transcript of a later compaction starts where the previous kept part began: nothing
    # is summarised twice, nothing skipped.
    firsts = [c.first_kept for c in compactions]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)


async def test_the_users_messages_are_kept_verbatim_after_the_summary() -> None:
    seen: list[Request] = []
    state = {"n": 0}

    def answer(request: Request) -> Step:
        seen.append(request)
        if is_summary_request(request):
            return reply("## Goal\nsomething about foo")
        state["n"] += 1
        if state["n"] in (26, 52):
            return reply("done")
        return Step(tool_calls=[ToolCall(f"c{state['n']}", "echo", {"text": f"{state['n']} " + "x" * 400})])

    session, _ = compact_session(default=answer, compaction=NO_CHEAP_PASS)
    task = "THE TASK: rename every foo to bar, but never touch tests/."
    await session.submit(task)
    seen_before = len(seen)
    await session.submit("SECOND: also update the docs.")
    compacted = [r for r in seen if not is_summary_request(r) and r.messages[1].text.startswith("[Context compacted]")]
    assert compacted
    for request in compacted:
        users = user_texts(request)
        assert users[1] == task  # verbatim, as its own message, right after the summary message
    later = [r for r in compacted if seen.index(r) > seen_before]
    assert later and all("SECOND: also update the docs." in user_texts(r) for r in later)
    assert all(pairing_problems(r) == [] for r in seen)


async def test_a_summary_model_can_be_configured() -> None:
    seen: list[Request] = []
    config = CompactionConfig(clear_tool_outputs=False, summary_model="cheap-model", summary_max_tokens=100)
    session, _ = compact_session(default=numbered_summaries(seen, 30), compaction=config)
    session.config.prices["cheap-model"] = session.config.prices["test-model"]
    await session.submit("go")
    summary_requests = [r for r in seen if is_summary_request(r)]
    assert summary_requests and all(r.model == "cheap-model" and r.max_tokens == 100 for r in summary_requests)
    assert all(r.model == "test-model" for r in seen if not is_summary_request(r))


async def test_a_part_too_long_for_the_window_is_summarised_in_pieces_never_too_long() -> None:
    """Compaction only on overflow (auto off), with a window the whole transcript exceeds by far:
    the summariser gets pieces, each within the window, each updating the last."""
    seen: list[Request] = []
    calls = {"n": 0}

    def answer(request: Request) -> Step | Exception:
        seen.append(request)
        if is_summary_request(request):
            return reply(f"PIECE SUMMARY {sum(1 for r in seen if is_summary_request(r))}")
        calls["n"] += 1
        if calls["n"] == 40:
            from ra.llm.errors import ContextLengthError

            return ContextLengthError("too long", provider="scripted", status_code=400)
        if calls["n"] > 41:
            return reply("done")
        return Step(tool_calls=[ToolCall(f"c{calls['n']}", "echo", {"text": f"{calls['n']} " + "x" * 800})])

    config = CompactionConfig(auto=False, clear_tool_outputs=False, summary_tool_result_chars=600)
    session, _ = compact_session(window=3000, default=answer, compaction=config)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "done", result.error
    pieces = [r for r in seen if is_summary_request(r)]
    assert len(pieces) >= 3
    for request in pieces:
        assert request_chars(request) // 4 + (request.max_tokens or 0) <= 3000
    for n, request in enumerate(pieces[1:], start=1):
        assert f"PIECE SUMMARY {n}" in request.messages[1].text
    (end,) = rec.of(E.COMPACTION_END)
    assert end["strategy"] == "summary" and end["trigger"] == "overflow"
    compaction = next(t for t in session.history if isinstance(t, CompactionTurn))
    assert compaction.summary == f"PIECE SUMMARY {len(pieces)}"


async def test_files_read_and_changed_are_listed_and_carried_across_compactions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ra.tools.registry import ToolRegistry

    from ..support import default_tools

    tools: ToolRegistry = default_tools()
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}}
    tools.add("read_file", "Read.", schema, lambda a, c: "content of " + a["file_path"] + " " + "r" * 1500)
    tools.add("write_file", "Write.", schema, lambda a, c: "wrote " + a["file_path"])
    state = {"n": 0}
    seen: list[Request] = []

    def answer(request: Request) -> Step:
        seen.append(request)
        if is_summary_request(request):
            return reply("## Goal\nfiles")
        state["n"] += 1
        n = state["n"]
        if n > 40:
            return reply("done")
        name = "read_file" if n % 2 else "write_file"
        return Step(tool_calls=[ToolCall(f"c{n}", name, {"file_path": f"src/f{n}.py", "content": "x" * 300})])

    session, _ = compact_session(default=answer, compaction=NO_CHEAP_PASS, tools=tools)
    await session.submit("go")
    compactions = [t for t in session.history if isinstance(t, CompactionTurn)]
    assert len(compactions) >= 2
    first, last = compactions[0], compactions[-1]
    assert "src/f1.py" in first.details["read_files"] and "src/f2.py" in first.details["modified_files"]
    # Carried: the last compaction still lists what the first one saw.
    assert set(first.details["read_files"]) <= set(last.details["read_files"])
    assert set(first.details["modified_files"]) <= set(last.details["modified_files"])
    head = next(r for r in reversed(seen) if not is_summary_request(r)).messages[1].text
    assert "Files changed earlier:" in head and "- src/f2.py" in head and "- src/f1.py" in head


async def test_the_cheap_pass_clears_old_outputs_from_the_context_only_and_may_be_enough() -> None:
    """Old tool outputs are the bulk: clearing them makes room without a summary."""
    seen: list[Request] = []
    config = CompactionConfig(tool_output_protect_tokens=400, tool_output_minimum_tokens=100)
    session, _ = compact_session(default=numbered_summaries(seen, 12, size=900), compaction=config, window=6000)
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    ends = rec.of(E.COMPACTION_END)
    assert ends and ends[0]["strategy"] == "tool_outputs" and ends[0]["cleared_tool_outputs"] > 0
    assert ends[0]["tokens_after"] < ends[0]["tokens_before"]
    assert not any(is_summary_request(r) for r in seen)  # the cheap pass sufficed every time
    last = seen[-1]
    outputs = [str(m.content[0].tool_result.content) for m in last.messages if m.role == Role.TOOL]  # type: ignore[union-attr]
    cleared = [o for o in outputs if o.startswith(CLEARED_PREFIX)]
    assert cleared and len(cleared) < len(outputs)
    assert not outputs[-1].startswith(CLEARED_PREFIX)  # the newest outputs are never cleared
    # The turns keep every output in full.
    results = [r for t in session.history if isinstance(t, ToolResultsTurn) for r in t.results]
    assert all(str(r.content).startswith("echo: ") for r in results)
    assert all(pairing_problems(r) == [] for r in seen)


async def test_a_piece_the_provider_refuses_is_summarised_in_smaller_pieces() -> None:
    from ra.llm.errors import ContextLengthError

    seen: list[Request] = []
    refused = {"n": 0}
    inner = numbered_summaries([], 30)

    def answer(request: Request) -> Step | Exception:
        seen.append(request)
        if is_summary_request(request) and refused["n"] == 0:
            refused["n"] += 1
            return ContextLengthError("too long for me", provider="scripted", status_code=400)
        return inner(request)

    session, _ = compact_session(default=answer, compaction=NO_CHEAP_PASS, window=8000)
    result = await session.submit("go")
    assert result.text == "done"
    summaries = [r for r in seen if is_summary_request(r)]
    assert request_chars(summaries[1]) < request_chars(summaries[0])  # the retry sent less
    assert any(isinstance(t, CompactionTurn) for t in session.history)


async def test_a_summariser_that_always_refuses_or_writes_nothing_ends_the_input_clearly() -> None:
    from ra.agent.errors import ContextOverflowError
    from ra.llm.errors import ContextLengthError

    for bad in (ContextLengthError("no", provider="scripted", status_code=400), reply("   ")):
        inner = numbered_summaries([], 30)

        def answer(request: Request, bad: object = bad, inner: Any = inner) -> object:
            return bad if is_summary_request(request) else inner(request)

        session, model = compact_session(default=answer, compaction=NO_CHEAP_PASS)
        result = await session.submit("go")
        assert isinstance(result.error, ContextOverflowError), bad
        assert "cannot write a summary" in str(result.error) or "empty summary" in str(result.error)
        assert sum(is_summary_request(r) for r in model.requests) <= 4
        assert not any(isinstance(t, CompactionTurn) for t in session.history)
        assert session.state.value == "idle"

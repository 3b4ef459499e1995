"""Issue 17's reliability item: a 500-step session with a small window.

It completes; every request after the first compaction carries the first user request verbatim;
no request ever holds a tool result without its call (or a call without its result); and no
request is larger than the window. The numbers (compactions, tokens before and after) are printed
for the report (``pytest -s``).
"""

from __future__ import annotations

from ra.agent import StopReason
from ra.agent.events import EventKind as E
from ra.agent.history import CompactionTurn, ToolResultsTurn
from ra.llm.testing import Step, reply
from ra.llm.types import Request, ToolCall

from ..support import Recorder
from .helpers import compact_session, is_summary_request, pairing_problems, request_chars, user_texts

STEPS = 500
WINDOW = 8000
FIRST = "FIRST REQUEST: add a docstring to every public function in src/, one file per step; keep tests green."


async def test_a_500_step_session_with_a_small_window_keeps_the_task_and_every_call_with_its_result() -> None:
    state = {"n": 0}

    def model(request: Request) -> Step:
        if is_summary_request(request):
            return reply(f"## Goal\nDocstrings everywhere.\n## Progress\n- Done: through step {state['n']}")
        state["n"] += 1
        n = state["n"]
        if n > STEPS:
            return reply("All done.")
        if n % 50 == 0:  # now and then the model makes several calls at once
            return Step(
                tool_calls=[ToolCall(f"c{n}_{k}", "echo", {"text": f"step {n}.{k} " + "p" * 200}) for k in range(3)]
            )
        return Step(text=f"Step {n}.", tool_calls=[ToolCall(f"c{n}", "echo", {"text": f"step {n} " + "x" * 300})])

    session, scripted = compact_session(window=WINDOW, default=model)
    rec = Recorder(session)
    result = await session.submit(FIRST)
    assert result.stop_reason is StopReason.COMPLETED and result.text == "All done."

    requests = scripted.requests
    main = [r for r in requests if not is_summary_request(r)]
    assert len(main) == STEPS + 1
    first_compacted = next(i for i, r in enumerate(main) if r.messages[1].text.startswith("[Context compacted]"))
    for index, request in enumerate(main):
        assert pairing_problems(request) == [], index
        assert request_chars(request) // 4 < WINDOW, index
        if index >= first_compacted:
            assert FIRST in user_texts(request), index  # verbatim, every time
    for request in requests:
        if is_summary_request(request):
            assert request_chars(request) // 4 + (request.max_tokens or 0) <= WINDOW

    results = sum(len(t.results) for t in session.history if isinstance(t, ToolResultsTurn))
    assert results == STEPS + 2 * (STEPS // 50)  # every call answered, once (the turns keep them all)
    compactions = [t for t in session.history if isinstance(t, CompactionTurn)]
    ends = rec.of(E.COMPACTION_END)
    summaries = [e for e in ends if e["strategy"] == "summary"]
    cleared = [e for e in ends if e["strategy"] == "tool_outputs"]
    assert len(summaries) == len(compactions) >= 10
    assert all(c.user_messages[0] == FIRST for c in compactions)
    before = [e["tokens_before"] for e in summaries]
    after = [e["tokens_after"] for e in summaries]
    assert max(after) < WINDOW - session.config.compaction.budgets(WINDOW).reserve
    print(
        f"\n500 steps, window {WINDOW}: {len(main)} model calls, {len(requests) - len(main)} summary calls, "
        f"{len(summaries)} summary compactions, {len(cleared)} cheap passes; tokens before "
        f"{min(before)}-{max(before)}, after {min(after)}-{max(after)}; largest request "
        f"{max(request_chars(r) for r in main) // 4} tokens"
    )

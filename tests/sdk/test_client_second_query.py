"""A prompt sent after the previous one's result arrived gets its own run and result.

The ``ResultMessage`` goes out (on PROCESSING_END) before ``submit()`` has returned, so a host that
reads the result and at once sends the next prompt - docs/sdk.md's two-way example - found the
earlier task still running; the prompt was queued as a follow-up of an input that had already
drained its follow-ups, and ``receive_response()`` waited for ever.
"""

from __future__ import annotations

import asyncio

from ra.llm.testing import reply
from ra.sdk import AgentClient, ResultMessage

from ..agent.support import make_session


async def test_query_right_after_a_result_runs_as_a_new_prompt() -> None:
    session, model = make_session([reply("first answer"), reply("second answer")])
    client = AgentClient(session=session)
    await client.connect()
    try:
        await client.query("first")
        first = [m async for m in client.receive_response()]
        await client.query("second")  # no await in between: submit() of "first" is still returning

        async def second_response() -> list[object]:
            return [m async for m in client.receive_response()]

        second = await asyncio.wait_for(second_response(), timeout=5)
    finally:
        await client.disconnect()
    assert isinstance(first[-1], ResultMessage) and first[-1].result == "first answer"
    assert isinstance(second[-1], ResultMessage) and second[-1].result == "second answer"
    assert len(model.requests) == 2


async def test_query_while_working_is_still_a_follow_up() -> None:
    session, model = make_session([reply("first answer"), reply("second answer")])
    client = AgentClient(session=session)
    await client.connect()
    try:
        await client.query("first")
        await client.query("second")  # "first" has not produced its result yet

        async def response() -> list[object]:
            return [m async for m in client.receive_response()]

        messages = await asyncio.wait_for(response(), timeout=5)
    finally:
        await client.disconnect()
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1 and results[0].result == "second answer"  # one result covers both
    assert len(model.requests) == 2

"""A model call retried after it had streamed text: the terminal's live region shows the new
attempt's text only, not the abandoned text with the new one appended."""

from __future__ import annotations

import io

from ra.agent.events import EventKind, SessionEvent
from ra.cli.render import LiveRenderer
from ra.llm.errors import StreamError
from ra.llm.testing import Step, reply

from ..agent.support import make_session


async def test_the_live_region_drops_the_text_of_a_retried_call() -> None:
    session, _ = make_session(
        [Step(text="abandoned text", stream_error=StreamError("connection reset")), reply("the whole answer")],
        streaming=True,
    )
    renderer = LiveRenderer(io.StringIO(), io.StringIO())
    shown: list[str] = []

    def after_renderer(event: SessionEvent) -> None:
        if event.kind is EventKind.ASSISTANT_TEXT_DELTA:
            shown.append(renderer._text)

    session.add_listener(renderer, replay=False)
    session.add_listener(after_renderer, replay=False)
    try:
        result = await session.submit("go")
    finally:
        renderer.pause()
        await session.close()
    assert result.text == "the whole answer"
    assert shown[-1] == "the whole answer"

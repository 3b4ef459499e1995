"""What the loop vouches for in each request (``Request.conversation``, ``Request.unchanged``):
the first ``unchanged`` messages are the previous request's very objects, with the contents they
had when it was sent - across steps, inputs, compactions, prunes and a change of system prompt.
An adapter trusts this to skip looking at them again, so a wrong count would send stale text."""

from __future__ import annotations

from typing import Any

import pytest

from ra.agent.history import History, UserTurn
from ra.llm.testing import Step
from ra.llm.types import Message, Request

from .compaction.helpers import agent, compact_session, is_summary_request


def snapshot(messages: list[Message]) -> list[str]:
    return [repr(m) for m in messages]


class Recorder:
    """Wraps a scripted model: keeps each loop request with its messages as they were when sent."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.sent: list[tuple[Request, list[str]]] = []

    def __call__(self, request: Request) -> Step:
        if not is_summary_request(request):
            self.sent.append((request, snapshot(request.messages)))
        return self.model(request)

    def check(self) -> list[int]:
        """Every request's vouched prefix holds; returns the counts."""
        counts = []
        previous: tuple[Request, list[str]] | None = None
        for request, texts in self.sent:
            assert request.conversation is not None
            n = request.unchanged
            if previous is None:
                assert n == 0
            else:
                before, before_texts = previous
                assert request.conversation is before.conversation
                assert n <= len(before.messages)
                assert all(a is b for a, b in zip(request.messages[:n], before.messages[:n], strict=True))
                assert texts[:n] == before_texts[:n]
            counts.append(n)
            previous = (request, texts)
        return counts


async def test_steps_and_inputs_vouch_for_what_was_sent_and_compaction_resets_it() -> None:
    model = Recorder(agent(40, size=400))
    session, _ = compact_session(default=model, window=3000)
    result = await session.submit("Do the task step by step.")
    assert result.error is None
    await session.submit("And once more.")
    counts = model.check()
    compactions = [e for e in session.history.turns if type(e).__name__ == "CompactionTurn"]
    assert compactions, "the window is small enough to compact"
    # Growing steps vouch for all of the previous request; a compaction puts in a new context.
    assert sum(1 for n in counts if n > 0) >= len(counts) - 2 * len(compactions) - 1
    assert 0 in counts[1:]
    await session.close()


def test_history_counts_only_while_the_context_grows_and_the_system_message_stays() -> None:
    history = History()
    system = Message.system("s")
    history.append(UserTurn("task"))
    messages, unchanged = history.request_messages(system)
    assert (len(messages), unchanged) == (2, 0)
    history.append(UserTurn("more"))
    messages, unchanged = history.request_messages(system)
    assert (len(messages), unchanged) == (3, 2)
    assert history.request_messages(Message.system("s"))[1] == 0  # another system message object
    assert history.request_messages(None)[1] == 0
    messages, unchanged = history.request_messages(None)
    assert (len(messages), unchanged) == (2, 2)
    history.replace_messages(list(history.messages))  # pruned or compacted: a new list
    assert history.request_messages(None)[1] == 0
    del history.messages[0]  # a host edits the list in place: the count shrinks with it
    assert history.request_messages(None) == ([history.messages[0]], 1)


def chat_completions() -> Any:
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

    return OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1")


def anthropic_messages() -> Any:
    from ra.llm.providers.anthropic import AnthropicAdapter

    return AnthropicAdapter(api_key="k")


def gemini() -> Any:
    from ra.llm.providers.gemini import GeminiAdapter

    return GeminiAdapter(api_key="k")


def openai_responses() -> Any:
    from ra.llm.providers.openai_responses import OpenAIAdapter

    return OpenAIAdapter(api_key="k")


@pytest.mark.parametrize("make", [chat_completions, anthropic_messages, gemini, openai_responses])
@pytest.mark.parametrize("vouched", [True, False])
async def test_a_session_sends_what_a_fresh_adapter_would(vouched: bool, make: Any) -> None:
    """The whole way: the loop's requests through an adapter's encoder (Chat Completions,
    Anthropic Messages, Gemini, OpenAI Responses), each body the same bytes as a new adapter's
    (nothing remembered) for the same messages."""
    encoder = make()

    def fresh(request: Request) -> bytes:
        return bytes(make().encode_body(request, stream=True))

    inner = agent(30, size=400)

    def model(request: Request) -> Step:
        if not is_summary_request(request):
            if not vouched:
                request = Request(request.model, request.messages, tools=request.tools)
            assert encoder.encode_body(request, stream=True) == fresh(request)
        return inner(request)

    session, _ = compact_session(default=model, window=3000)
    assert (await session.submit("Do the task step by step.")).error is None
    await session.close()

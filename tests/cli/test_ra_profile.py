"""The ra profile in process: tools, flags, provider options on every adapter, session config."""

from __future__ import annotations

from typing import Any

import pytest

from ra.llm.types import Message, Request, ToolChoice
from ra.profiles.ra import CONTINUE_MESSAGE, RaProfile, create_ra_profile, ra_session_config


def _request(profile: RaProfile) -> Request:
    return Request(
        model=profile.model,
        messages=[Message.system("s"), Message.user("u")],
        provider=profile.provider,
        tools=profile.tools(),
        tool_choice=ToolChoice("auto"),
        provider_options=profile.provider_options(),
    )


def test_defaults() -> None:
    profile = create_ra_profile("some-model")
    assert profile.id == "ra" and profile.provider == "openai-compatible"
    assert profile.supports_parallel_tool_calls is False
    assert profile.supports_streaming is True
    assert profile.tool_registry.names() == ["shell_command", "read_file", "list_dir", "grep_files", "apply_patch"]
    assert create_ra_profile("m", submit=True).tool_registry.names()[-1] == "submit"
    assert create_ra_profile("m", web=True).tool_registry.names()[-3:] == ["web_search", "web_open", "web_find"]
    assert "submit" in CONTINUE_MESSAGE


def test_session_config_is_one_call_per_step_with_pruning() -> None:
    config = ra_session_config(max_turns=5)
    assert config.max_tool_calls_per_step == 1
    assert config.context_overflow == "prune"
    assert config.max_tool_rounds_per_input == 0
    assert config.max_turns == 5


def _body(provider: str, profile: RaProfile) -> dict[str, Any]:
    request = _request(profile)
    if provider == "openai-compatible":
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

        return OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1").build_body(request, stream=True)
    if provider == "openai":
        from ra.llm.providers.openai_responses import OpenAIAdapter

        return OpenAIAdapter(api_key="k").build_body(request, stream=True)
    from ra.llm.providers.anthropic import AnthropicAdapter

    return AnthropicAdapter(api_key="k").build_body(request, stream=True)


@pytest.mark.parametrize("provider", ["openai-compatible", "openai", "anthropic"])
def test_parallel_tool_calls_are_off_on_every_adapter_that_has_the_switch(provider: str) -> None:
    body = _body(provider, create_ra_profile("m", provider=provider))
    if provider == "anthropic":
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert body["parallel_tool_calls"] is False
        assert body["tool_choice"] == "auto"
    for key in ("temperature", "top_p"):
        assert key not in body


async def test_one_call_per_step_holds_with_a_default_session_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The ra profile carries its spec's rule: a host that passes a plain SessionConfig (or none)
    still gets one tool call per step, the rest answered as not executed."""
    from ra.agent import Session, SessionConfig, ToolResultsTurn
    from ra.env.local import LocalExecutionEnvironment
    from ra.llm.client import Client
    from ra.llm.testing import ScriptedAdapter, calls, reply

    (tmp_path / "a.txt").write_text("alpha\n")
    for config in (SessionConfig(), None):
        model = ScriptedAdapter([calls(*[("read_file", {"file_path": "a.txt"})] * 3), reply("done")])
        profile = create_ra_profile("m")
        session = Session(
            profile, LocalExecutionEnvironment(tmp_path), Client(providers={"openai-compatible": model}), config
        )
        await session.submit("read")
        results = next(t for t in session.history if isinstance(t, ToolResultsTurn)).results
        assert [r.is_error for r in results] == [False, True, True]
        assert results[1].content.startswith("Not executed: at most 1 tool call(s) run per step")
        if config is None:  # the profile's defaults: prune, no per-input round limit
            assert session.config.context_overflow == "prune"
            assert session.config.max_tool_rounds_per_input == 0
        await session.close()

"""A session the SDK builds keeps its profile's session defaults.

The SDK always handed the Session a config of its own, and a given config replaces the profile's
``session_defaults`` whole: every ``query()`` / ``AgentClient`` on the ra profile lost its pruning
on context overflow and ran under the 200-round limit the ra profile turns off.
"""

from __future__ import annotations

from pathlib import Path

from ra.agent import SessionConfig
from ra.llm import Client
from ra.llm.testing import ScriptedAdapter, reply
from ra.sdk import AgentClient, QueryOptions


def _client() -> Client:
    return Client({"scripted": ScriptedAdapter([reply("done")])}, default_provider="scripted")


async def _config(options: QueryOptions) -> SessionConfig:
    client = AgentClient(options)
    await client.connect()
    try:
        return client.session.config
    finally:
        await client.disconnect()


async def test_the_ra_profile_keeps_its_defaults_under_the_sdk(tmp_path: Path) -> None:
    config = await _config(QueryOptions(profile="ra", model="m", provider="scripted", client=_client(), cwd=tmp_path))
    assert config.context_overflow == "prune" and config.max_tool_rounds_per_input == 0


async def test_fields_set_on_the_options_go_over_the_defaults(tmp_path: Path) -> None:
    options = QueryOptions(
        profile="ra", model="m", provider="scripted", client=_client(), cwd=tmp_path, permission_mode="plan"
    )
    config = await _config(options)
    assert config.permission_mode == "plan" and config.context_overflow == "prune"


async def test_a_config_the_host_gives_is_taken_whole(tmp_path: Path) -> None:
    given = SessionConfig(context_overflow="warn", max_tool_rounds_per_input=5)
    options = QueryOptions(profile="ra", model="m", provider="scripted", client=_client(), cwd=tmp_path, config=given)
    config = await _config(options)
    assert config.context_overflow == "warn" and config.max_tool_rounds_per_input == 5


async def test_profiles_without_defaults_get_the_session_defaults(tmp_path: Path) -> None:
    options = QueryOptions(profile="anthropic", provider="scripted", client=_client(), cwd=tmp_path)
    config = await _config(options)
    assert config == SessionConfig()

"""Shared helpers for the agent tests: a scripted model in a real Client, a small env, tools."""

from __future__ import annotations

import asyncio
from typing import Any

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.events import EventKind, SessionEvent
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, StepLike
from ra.tools.registry import ToolContext, ToolRegistry

FAST_RETRY = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01, jitter=False)


class FakeEnv:
    """Just enough of an ExecutionEnvironment for loop tests; records terminate_all calls."""

    def __init__(self) -> None:
        self.terminated = 0
        self.log: list[str] = []

    def working_directory(self) -> str:
        return "/work/project"

    def platform(self) -> str:
        return "linux"

    def os_version(self) -> str:
        return "Linux 6"

    async def terminate_all(self) -> None:
        self.terminated += 1
        self.log.append("terminate_all")


def echo(args: dict[str, Any], ctx: ToolContext) -> str:
    return f"echo: {args['text']}"


def boom(args: dict[str, Any], ctx: ToolContext) -> str:
    raise RuntimeError("disk on fire")


async def nap(args: dict[str, Any], ctx: ToolContext) -> str:
    await asyncio.sleep(args.get("seconds", 0))
    return f"slept {args.get('seconds', 0)}"


def default_tools() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add(
        "echo",
        "Echo the text back.",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        echo,
    )
    reg.add("boom", "Always fails.", None, boom)
    reg.add("nap", "Sleep a while.", {"type": "object", "properties": {"seconds": {"type": "number"}}}, nap)
    return reg


def make_session(
    script: list[StepLike] | None = None,
    *,
    config: SessionConfig | None = None,
    tools: ToolRegistry | None = None,
    streaming: bool = False,
    parallel: bool = False,
    context_window: int = 1_000_000,
    env: Any = None,
    default: StepLike | None = None,
    system_prompt: Any = "You are a test agent.",
) -> tuple[Session, ScriptedAdapter]:
    model = ScriptedAdapter(script or [], default=default)
    client = Client(providers={"scripted": model})
    profile = GenericProfile(
        "scripted",
        "test-model",
        tools if tools is not None else default_tools(),
        system_prompt=system_prompt,
        supports_streaming=streaming,
        supports_parallel_tool_calls=parallel,
        context_window_size=context_window,
    )
    if config is None:
        config = SessionConfig(retry_policy=FAST_RETRY)
    elif config.retry_policy is None:
        config.retry_policy = FAST_RETRY
    config.prices.setdefault("test-model", ModelPrice.free())  # a known price: no unknown_price warning
    session = Session(profile, env if env is not None else FakeEnv(), client, config)
    return session, model


class Recorder:
    """Collects every event synchronously (a listener), for ordering assertions."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.events: list[SessionEvent] = []
        session.add_listener(self.events.append, replay=False)

    def kinds(self, *only: EventKind) -> list[EventKind]:
        return [e.kind for e in self.events if not only or e.kind in only]

    def of(self, kind: EventKind) -> list[SessionEvent]:
        return [e for e in self.events if e.kind is kind]


def user_texts(request: Any) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]

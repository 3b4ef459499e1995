"""Helpers for the store tests: sessions on a scripted model that can be closed and resumed."""

from __future__ import annotations

from typing import Any

from ra.agent import GenericProfile, Session, SessionConfig
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike

from ..support import FAST_RETRY, FakeEnv, default_tools


class Rig:
    """One scripted model, profile and environment: sessions made from it share the script, so a
    test can record a session, close it, and resume it against the same model."""

    def __init__(
        self,
        script: list[StepLike] | None = None,
        *,
        provider: str = "scripted",
        model: str = "test-model",
        price: ModelPrice | None = None,
        tools: Any = None,
        env: Any = None,
    ) -> None:
        self.model = ScriptedAdapter(script or [], name=provider)
        self.client = Client(providers={provider: self.model})
        self.profile = GenericProfile(
            provider,
            model,
            tools if tools is not None else default_tools(),
            system_prompt="You are a test agent.",
            provider=provider,
            include_environment=False,
            context_window_size=10_000_000,
        )
        self.env = env if env is not None else FakeEnv()
        self.price = price or ModelPrice.free()

    def config(self, **fields: Any) -> SessionConfig:
        config = SessionConfig(retry_policy=FAST_RETRY, **fields)
        config.prices.setdefault(self.profile.model, self.price)
        return config

    def session(self, store: Any = None, **fields: Any) -> Session:
        return Session(self.profile, self.env, self.client, self.config(**fields), store=store)

    async def open(self, store: Any, config: SessionConfig | None = None, **kwargs: Any) -> Session:
        return await Session.open(
            self.profile, self.env, self.client, config if config is not None else self.config(), store=store, **kwargs
        )


def warnings(session: Session) -> list[Any]:
    """A list that fills with the session's WARNING events (the ones so far included)."""
    out: list[Any] = []
    session.add_listener(lambda e: out.append(e.payload) if e.kind.value == "warning" else None)
    return out

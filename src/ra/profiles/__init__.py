"""Provider-aligned profiles (coding-agent-loop-spec 3): tools, prompt and options per model family.

    from ra.profiles import create_anthropic_profile
    profile = create_anthropic_profile("claude-sonnet-4-5")

Names load lazily (PEP 562): ``import ra.profiles`` imports no profile, tool or prompt module
until one of these names is used. To add a profile, add its names to ``_EXPORTS``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> submodule of ra.profiles that defines it
_EXPORTS: dict[str, str] = {
    "AlignedProfile": "base",
    "OpenAIProfile": "openai",
    "create_openai_profile": "openai",
    "AnthropicProfile": "anthropic",
    "create_anthropic_profile": "anthropic",
    "GeminiProfile": "gemini",
    "create_gemini_profile": "gemini",
    "RaProfile": "ra",
    "create_ra_profile": "ra",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ra.profiles' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *globals()})


if TYPE_CHECKING:  # pragma: no cover
    from .anthropic import AnthropicProfile, create_anthropic_profile
    from .base import AlignedProfile
    from .gemini import GeminiProfile, create_gemini_profile
    from .openai import OpenAIProfile, create_openai_profile
    from .ra import RaProfile, create_ra_profile

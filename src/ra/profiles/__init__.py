"""Provider-aligned profiles (coding-agent-loop-spec 3): tools, prompt and options per model family.

    from ra.profiles import create_anthropic_profile
    profile = create_anthropic_profile("claude-sonnet-4-5")

Names load lazily (PEP 562): ``import ra.profiles`` imports no profile, tool or prompt module
until one of these names is used. To add a profile, add its names to ``_EXPORTS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

# name -> submodule of ra.profiles that defines it
_EXPORTS: dict[str, str] = {
    "AlignedProfile": ".base",
    "OpenAIProfile": ".openai",
    "create_openai_profile": ".openai",
    "AnthropicProfile": ".anthropic",
    "create_anthropic_profile": ".anthropic",
    "GeminiProfile": ".gemini",
    "create_gemini_profile": ".gemini",
    "RaProfile": ".ra",
    "create_ra_profile": ".ra",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .anthropic import AnthropicProfile, create_anthropic_profile
    from .base import AlignedProfile
    from .gemini import GeminiProfile, create_gemini_profile
    from .openai import OpenAIProfile, create_openai_profile
    from .ra import RaProfile, create_ra_profile

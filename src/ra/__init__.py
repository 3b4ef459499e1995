"""ra: build coding agents - a language model, developer tools, and a loop the host controls.

``import ra`` is kept light: the agent, tools and LLM layers load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> submodule that defines it (filled in as layers land)
_EXPORTS: dict[str, str] = {}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ra' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

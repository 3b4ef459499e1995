"""Lazy package exports (PEP 562), shared by every ``__init__`` in ra.

``import ra`` must cost no more than ``import httpx``, so packages name their exports here and
import the defining module only when a name is first used; the value is then cached in the
package namespace so later lookups are plain attribute reads.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], aliases: Mapping[str, str] | None = None
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__all__, __getattr__, __dir__)`` for ``package``.

    ``exports`` maps a public name to the module defining it: relative (``".session"``) or
    absolute (``"ra.agent"``). ``aliases`` maps a public name to the attribute it stands for in
    that module, when the two differ.
    """
    names = sorted(exports)
    renamed = dict(aliases or {})

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), renamed.get(name, name))
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return names

    return names, __getattr__, __dir__

"""Models genai-prices does not know, remembered on disk so later processes skip its import.

Importing genai-prices takes 0.2-0.9 s; a process calling a model outside ra's catalogue used to
pay it on its first call only to learn, every run, that the model has no price. Only misses are
kept: a miss needs nothing from the package, while a price does (its tiers and conditions are
computed by it), and a stale miss can only make ra refuse a budget, never undercount one.

The file (``$RA_PRICE_CACHE``, else ``platformdirs.user_cache_dir("ra")/genai-prices-misses.json``;
an empty ``RA_PRICE_CACHE`` turns it off) is keyed by the installed package: the path, size and
modification time of its ``__init__.py``, so an upgrade (or reinstall) starts it afresh. A file
that cannot be read or written is ignored: the look-up then simply happens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["cache_path", "is_known_miss", "package_key", "remember_miss"]


def cache_path() -> Path | None:
    """Where misses are kept, or None when the host turned the cache off."""
    configured = os.environ.get("RA_PRICE_CACHE")
    if configured is not None:
        return Path(configured) if configured else None
    import platformdirs

    return Path(platformdirs.user_cache_dir("ra")) / "genai-prices-misses.json"


def package_key() -> str | None:
    """Identifies the installed genai-prices without importing it; None when it is not installed."""
    from importlib.util import find_spec

    try:
        spec = find_spec("genai_prices")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        stat = os.stat(spec.origin)
    except OSError:
        return None
    return f"{spec.origin}:{stat.st_size}:{stat.st_mtime_ns}"


def _name(model: str, provider: str | None) -> str:
    return f"{provider or ''}/{model}"


def _read(path: Path, key: str) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("package") != key or not isinstance(data.get("misses"), list):
        return []
    return [m for m in data["misses"] if isinstance(m, str)]


def is_known_miss(model: str, provider: str | None, key: str) -> bool:
    """genai-prices (as installed, ``key``) was asked for ``model`` before and had no price."""
    path = cache_path()
    return path is not None and _name(model, provider) in _read(path, key)


def remember_miss(model: str, provider: str | None, key: str) -> None:
    """Record that genai-prices (``key``) has no price for ``model`` (atomically: write, rename)."""
    path = cache_path()
    if path is None:
        return
    misses = _read(path, key)
    name = _name(model, provider)
    if name in misses:
        return
    misses.append(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"package": key, "misses": misses[-1000:]}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return

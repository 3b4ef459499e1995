"""A model genai-prices does not know is remembered on disk, so later processes skip its import
(ra.llm.price_misses). Each case runs real interpreters against the installed genai-prices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("genai_prices")

PROBE = """
import json, sys
from ra.llm.pricing import find_price
price, source = find_price(sys.argv[1], provider=sys.argv[2])
print(json.dumps({"source": source, "priced": price is not None, "imported": "genai_prices" in sys.modules}))
"""


def probe(model: str, provider: str, cache: str) -> dict:
    env = {**os.environ, "RA_PRICE_CACHE": cache}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, model, provider], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout)


def test_a_miss_is_remembered_and_the_next_process_does_not_import_genai_prices(tmp_path: Path) -> None:
    cache = str(tmp_path / "misses.json")
    first = probe("totally-made-up-model-7b", "openai-compatible", cache)
    assert first == {"source": "unknown", "priced": False, "imported": True}
    second = probe("totally-made-up-model-7b", "openai-compatible", cache)
    assert second == {"source": "unknown", "priced": False, "imported": False}
    # Another provider is another question: asked again.
    assert probe("totally-made-up-model-7b", "anthropic", cache)["imported"] is True


def test_a_price_is_never_cached_as_a_miss(tmp_path: Path) -> None:
    cache = str(tmp_path / "misses.json")
    for _ in range(2):
        assert probe("claude-3-5-haiku-latest", "anthropic", cache) == {
            "source": "genai-prices",
            "priced": True,
            "imported": True,
        }


def test_misses_of_another_genai_prices_install_are_ignored(tmp_path: Path) -> None:
    """An upgrade may price a model the old version did not: a miss recorded for another install
    (its key) is not trusted, and this one asks again."""
    cache = tmp_path / "misses.json"
    cache.write_text(json.dumps({"package": "elsewhere:1:1", "misses": ["anthropic/claude-3-5-haiku-latest"]}))
    assert probe("claude-3-5-haiku-latest", "anthropic", str(cache))["priced"] is True


def test_a_corrupt_cache_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "misses.json"
    cache.write_text("{not json")
    assert probe("totally-made-up-model-7b", "openai-compatible", str(cache))["imported"] is True
    assert "openai-compatible/totally-made-up-model-7b" in json.loads(cache.read_text())["misses"]


def test_an_empty_setting_turns_the_cache_off() -> None:
    for _ in range(2):
        assert probe("totally-made-up-model-7b", "openai-compatible", "")["imported"] is True

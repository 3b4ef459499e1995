"""Incremental JSON parsing for stream_object: every prefix reads as the best partial value."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from ra.llm.partial_json import (
    NOTHING,
    PartialJSONError,
    PartialJSONParser,
    parse_json_output,
    parse_partial_json,
)

DOCUMENT = {
    "title": 'Recipes "for" you\n',
    "count": -12.5e2,
    "ok": True,
    "missing": None,
    "tags": ["quick", "vegan", "caf\u00e9 \U0001f600"],
    "recipes": [
        {"name": "Soup", "steps": ["boil", "serve"], "minutes": 20, "spicy": False},
        {"name": "Salad", "steps": [], "minutes": 0, "nested": {"deep": [[1, 2], {"x": "\\"}]}},
    ],
    "empty": {},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", NOTHING),
        ("   \n", NOTHING),
        ("{", {}),
        ('{"na', {}),
        ('{"name"', {}),
        ('{"name":', {}),
        ('{"name": "Al', {"name": "Al"}),
        ('{"name": "Alice", ', {"name": "Alice"}),
        ('{"name": "Alice", "age": 3', {"name": "Alice", "age": 3}),
        ('{"age": 3.', {"age": 3}),
        ('{"age": -', {}),
        ('{"age": 1e', {"age": 1}),
        ('{"age": 2E+', {"age": 2}),
        ('{"ok": tr', {"ok": True}),
        ('{"ok": f', {"ok": False}),
        ('{"v": nu', {"v": None}),
        ('{"s": "a\\', {"s": "a"}),
        ('{"s": "a\\n', {"s": "a\n"}),
        ('{"s": "\\u00', {"s": ""}),
        ('{"s": "\\u00e9', {"s": "\u00e9"}),
        ("[", []),
        ("[1, 2", [1, 2]),
        ("[1, 2,", [1, 2]),
        ('[{"a": [1, {"b": "c', [{"a": [1, {"b": "c"}]}]),
        ('"just a str', "just a str"),
        ("42", 42),
        ("-", NOTHING),
        ("nul", None),
        ('{"a": 1}', {"a": 1}),
        ('{"a": 1}\n```', {"a": 1}),
    ],
)
def test_prefixes(text: str, expected: Any) -> None:
    value = parse_partial_json(text)
    if expected is NOTHING:
        assert value is NOTHING
    else:
        assert value == expected and type(value) is type(expected)


def test_every_prefix_is_readable_and_grows_towards_the_document() -> None:
    text = json.dumps(DOCUMENT, indent=1)
    parser = PartialJSONParser()
    previous_keys = 0
    for ch in text:
        parser.feed(ch)
        value = parser.value()
        if value is NOTHING:
            continue
        assert isinstance(value, dict)
        assert len(value) >= previous_keys  # members never disappear once shown
        previous_keys = len(value)
        for key in value:
            assert key in DOCUMENT  # no half-written keys
    assert parser.complete
    assert parser.value() == DOCUMENT


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_chunking_does_not_matter(seed: int) -> None:
    text = json.dumps(DOCUMENT, ensure_ascii=seed % 2 == 0)
    rng = random.Random(seed)
    parser = PartialJSONParser()
    i = 0
    while i < len(text):
        step = rng.randint(1, 7)
        parser.feed(text[i : i + step])
        i += step
        one_shot = parse_partial_json(text[:i])
        assert parser.value() == one_shot
    assert parser.value() == DOCUMENT


def test_strings_split_inside_escapes() -> None:
    parser = PartialJSONParser()
    for piece in ['{"s": "x', "\\", "u", "00", "e9", "\\", '"', 'y"}']:
        parser.feed(piece)
        parser.value()
    assert parser.value() == {"s": 'x\u00e9"y'}


def test_complete_flag() -> None:
    parser = PartialJSONParser()
    parser.feed('{"a": [1')
    assert not parser.complete
    parser.feed("]}")
    assert parser.complete
    bare = PartialJSONParser()
    bare.feed("12")
    assert not bare.complete  # a number may go on


@pytest.mark.parametrize(
    "text",
    ["{a", "[1,]", '{"a" 1', '{"a": 1,}', '"\\x"', '"\\u12G4"', "x", "[1 2]", "{]", "tx", "[1.2.3]", "-a"],
)
def test_invalid_documents_raise(text: str) -> None:
    parser = PartialJSONParser()
    with pytest.raises(PartialJSONError):
        parser.feed(text)
        parser.value()


def test_trailing_text_is_ignored_or_rejected() -> None:
    lenient = PartialJSONParser()
    lenient.feed('{"a": 1} and more')
    assert lenient.value() == {"a": 1}
    strict = PartialJSONParser(allow_trailing=False)
    strict.feed('{"a": 1}  ')
    with pytest.raises(PartialJSONError, match="after the JSON value"):
        strict.feed(" more")


def test_nothing_is_falsy_and_distinct_from_null() -> None:
    assert not NOTHING and repr(NOTHING) == "NOTHING"
    assert parse_partial_json("null") is None


def test_snapshots_are_fresh_objects() -> None:
    parser = PartialJSONParser()
    parser.feed('{"a": [1')
    first = parser.value()
    parser.feed(", 2")
    second = parser.value()
    assert first == {"a": [1]} and second == {"a": [1, 2]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": 1}\n', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```\n[1, 2]\n```\n", [1, 2]),
        ('{"s": "line\nbreak"}', {"s": "line\nbreak"}),  # raw control characters tolerated
    ],
)
def test_parse_json_output(text: str, expected: Any) -> None:
    assert parse_json_output(text) == expected


@pytest.mark.parametrize("text", ["", "{", "not json", '{"a": 1} extra'])
def test_parse_json_output_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json_output(text)

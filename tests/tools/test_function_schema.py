"""@ra.tool's JSON Schemas: each supported annotation against the exact schema the model sees,
and every annotation it cannot describe faithfully refused at decoration with a clear error."""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NamedTuple,
    NewType,
    NotRequired,
    Optional,
    Required,
    TypedDict,
    TypeVar,
)

import pytest

import ra
from ra.tools import ToolContext, ToolRegistry
from ra.tools.function import FunctionTool, ToolDefinitionError, tool


def params(fn: Any) -> dict[str, Any]:
    return tool(fn).definition.parameters


def prop(annotation: Any, **extra: Any) -> dict[str, Any]:
    """The schema of one parameter ``x: annotation``."""

    def f(x): ...  # type: ignore[no-untyped-def]

    f.__annotations__ = {"x": annotation}
    return tool(f).definition.parameters["properties"]["x"]


class Color(enum.Enum):
    """A colour of the rainbow."""

    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Across.
        y: Up.
    """

    x: float
    y: float = 0.0
    tags: list[str] = field(default_factory=list)


@dataclass
class Tree:
    value: int
    children: list[Tree] = field(default_factory=list)


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Partial(TypedDict, total=False):
    title: Required[str]
    note: str


class Pair(NamedTuple):
    left: int
    right: str = "r"


UserId = NewType("UserId", int)
T = TypeVar("T")


@dataclass
class Box(Generic[T]):
    item: T


# -- scalars and containers ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array", "items": {}}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {"type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        ),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[Level], {"type": "array", "items": {"type": "integer", "enum": [1, 2]}, "uniqueItems": True}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Mapping[str, Any], {"type": "object"}),
        (dict, {"type": "object"}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the old spelling is read too
        (int | str | None, {"type": ["integer", "string", "null"]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"enum": [1, "x"]}),
        (Literal[Color.RED], {"type": "string", "enum": ["red"]}),
        (Color, {"type": "string", "enum": ["red", "blue"], "description": "A colour of the rainbow."}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Path, {"type": "string"}),
        (datetime.datetime, {"type": "string", "format": "date-time"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (datetime.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (UserId, {"type": "integer"}),
        (
            Annotated[int, "How many.", {"minimum": 1, "maximum": 9}],
            {"type": "integer", "minimum": 1, "maximum": 9, "description": "How many."},
        ),
    ],
)
def test_schema_of_each_supported_annotation(annotation: Any, schema: dict[str, Any]) -> None:
    assert prop(annotation) == schema


def test_optional_object_is_any_of() -> None:
    assert prop(Movie | None) == {
        "anyOf": [
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
                "required": ["title"],
                "additionalProperties": False,
            },
            {"type": "null"},
        ]
    }


# -- objects -------------------------------------------------------------------------------------
def test_dataclass_fields_defaults_and_docstring() -> None:
    assert prop(Point) == {
        "type": "object",
        "description": "A point on the plane.",
        "properties": {
            "x": {"type": "number", "description": "Across."},
            "y": {"type": "number", "description": "Up.", "default": 0.0},
            "tags": {"type": "array", "items": {"type": "string"}},  # a factory is not called to show it
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_typeddict_total_and_not() -> None:
    assert prop(Partial) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "note": {"type": "string"}},
        "required": ["title"],
        "additionalProperties": False,
    }


def test_namedtuple_is_an_object() -> None:
    assert prop(Pair) == {
        "type": "object",
        "properties": {"left": {"type": "integer"}, "right": {"type": "string", "default": "r"}},
        "required": ["left"],
        "additionalProperties": False,
    }


def test_recursive_type_goes_to_defs_and_the_schema_is_valid() -> None:
    def grow(tree: Tree, spare: list[Tree] | None = None) -> None: ...

    schema = params(grow)
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    assert schema["properties"]["spare"] == {
        "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/Tree"}}, {"type": "null"}],
        "default": None,
    }
    assert schema["$defs"] == {
        "Tree": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
            },
            "required": ["value"],
            "additionalProperties": False,
        }
    }
    ToolRegistry().register(tool(grow))  # the registry compiles it


def test_two_recursive_types_with_one_name_get_two_defs() -> None:
    def make() -> type:
        @dataclass
        class Tree:  # another Tree, pointing at itself
            label: str
            parent: Any = None

        Tree.__annotations__["parent"] = Optional[Tree]  # noqa: UP045 - an object, not a postponed string
        return Tree

    other = make()

    def f(a: Tree, b: other) -> None:  # type: ignore[valid-type]
        ...

    schema = ra.tool(f).definition.parameters  # called here, so `other` resolves in this scope
    assert schema["properties"]["a"] == {"$ref": "#/$defs/Tree"}
    assert schema["properties"]["b"] == {"$ref": "#/$defs/Tree2"}
    assert set(schema["$defs"]["Tree2"]["properties"]) == {"label", "parent"}


def test_local_types_resolve_with_postponed_annotations() -> None:
    @dataclass
    class Local:
        n: int

    @ra.tool
    def use(item: Local) -> int:
        return item.n

    assert use.definition.parameters["properties"]["item"]["properties"] == {"n": {"type": "integer"}}


# -- the function itself -------------------------------------------------------------------------
def test_name_description_required_and_defaults() -> None:
    @ra.tool
    def search(query: str, limit: int = 10, exact: bool = False, where: str = None) -> list[str]:  # type: ignore[assignment]  # noqa: RUF013
        """Search the notes.

        Args:
            query: Words to find.
            limit: At most this many.
        """
        return []

    assert isinstance(search, FunctionTool)
    assert search.name == "search"
    assert search.definition.description == "Search the notes."
    assert search.definition.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to find."},
            "limit": {"type": "integer", "description": "At most this many.", "default": 10},
            "exact": {"type": "boolean", "default": False},
            # `= None` on a plain str: null is accepted (it means "the default")
            "where": {"type": ["string", "null"], "default": None},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_overrides_and_annotated_description_wins_over_docstring() -> None:
    @ra.tool(name="find_it", description="Find it.")
    def f(a: Annotated[str, "From Annotated."], b: int) -> str:
        """Ignored.

        :param a: From the docstring.
        :param b: Also from the docstring.
        """
        return a

    assert f.name == "find_it"
    assert f.definition.description == "Find it."
    assert f.definition.parameters["properties"] == {
        "a": {"type": "string", "description": "From Annotated."},
        "b": {"type": "integer", "description": "Also from the docstring."},
    }


def test_injected_parameters_are_not_in_the_schema() -> None:
    from ra.agent.state import RunState
    from ra.env.base import ExecutionEnvironment

    @ra.tool
    def f(ctx: ToolContext, text: str, env: ExecutionEnvironment, state: RunState | None = None) -> str:
        return text

    assert f.definition.parameters == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }


def test_a_default_without_a_json_form_is_left_out_of_the_schema() -> None:
    marker = object()

    @ra.tool
    def f(x: Any = marker, when: datetime.date = datetime.date(2024, 1, 2), c: Color = Color.BLUE) -> None: ...

    assert f.definition.parameters["properties"] == {
        "x": {},
        "when": {"type": "string", "format": "date", "default": "2024-01-02"},
        "c": {"type": "string", "enum": ["red", "blue"], "description": "A colour of the rainbow.", "default": "blue"},
    }


def test_annotated_types_constraints() -> None:
    at = pytest.importorskip("annotated_types")
    assert prop(Annotated[int, at.Ge(0), at.Lt(10)]) == {"type": "integer", "minimum": 0, "exclusiveMaximum": 10}
    assert prop(Annotated[str, at.MaxLen(5)]) == {"type": "string", "maxLength": 5}
    assert prop(Annotated[list[int], at.Len(1, 3)]) == {
        "type": "array",
        "items": {"type": "integer"},
        "minItems": 1,
        "maxItems": 3,
    }


# -- refusals ------------------------------------------------------------------------------------
class Opaque:
    pass


def refusal(fn: Any, **options: Any) -> str:
    with pytest.raises(ToolDefinitionError) as info:
        tool(**options)(fn) if options else tool(fn)
    return str(info.value)


def test_unannotated_parameter_is_refused() -> None:
    def f(a, b: int) -> None: ...  # type: ignore[no-untyped-def]

    assert "parameter 'a': has no type annotation" in refusal(f)

    class C:
        def method(self, a: int) -> None: ...

    assert "ra.tool(obj.method)" in refusal(C.method)
    bound = tool(C().method)  # the bound method works
    assert list(bound.definition.parameters["properties"]) == ["a"]


@pytest.mark.parametrize(
    ("annotation", "words"),
    [
        (bytes, "bytes have no JSON form"),
        (Opaque, "unsupported type"),
        (dict[int, str], "JSON object keys are strings"),
        (set[Point], "set items must be hashable"),
        (T, "type variable"),
        (Box[int], "generic"),
        (Annotated[int, object()], "Annotated metadata"),
        (list[ToolContext], "injected only as a parameter of its own"),
    ],
)
def test_unsupported_annotations_are_refused(annotation: Any, words: str) -> None:
    def f(x): ...  # type: ignore[no-untyped-def]

    f.__annotations__ = {"x": annotation}
    message = refusal(f)
    assert words in message
    assert "parameter 'x'" in message


def test_refusals_name_the_path_inside_a_type() -> None:
    @dataclass
    class Holder:
        blob: bytes

    def f(h: list[Holder]) -> None: ...

    with pytest.raises(ToolDefinitionError, match="parameter 'h' item field 'blob': bytes have no JSON form"):
        ra.tool(f)  # here, where Holder is in scope


def test_enum_without_json_values_is_refused() -> None:
    class Odd(enum.Enum):
        A = (1, 2)

    def f(x: Odd) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"enum Odd.A has the value \(1, 2\), which has no JSON form"):
        ra.tool(f)


def test_unresolvable_annotation_names_the_cause() -> None:
    def f(x: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    assert "cannot resolve its annotations" in refusal(f)


def test_other_refusals() -> None:
    def star(*items: int) -> None: ...

    def stars(**items: int) -> None: ...

    def gen(n: int):  # type: ignore[no-untyped-def]
        yield n

    async def coro(n: int) -> None: ...

    assert "*items" in refusal(star)
    assert "**items" in refusal(stars)
    assert "generators are not supported" in refusal(gen)
    assert "blocking=True is for sync functions" in refusal(coro, blocking=True)
    assert "not usable" in refusal(lambda n: n)
    assert "not usable" in refusal(coro, name="has space")
    assert "it is a tool already" in refusal(tool(coro))
    with pytest.raises(ToolDefinitionError, match="takes a function"):
        tool(Opaque)
    with pytest.raises(ValueError, match="effect must be one of"):
        tool(effect="everything")(coro)

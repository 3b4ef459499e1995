"""Python type hints -> JSON Schema, and JSON values -> the Python values the hints promise.

``@ra.tool`` reads each parameter's annotation once, at decoration, into a small tree of nodes.
Each node knows three things about its type: the JSON Schema the model is shown, whether a JSON
value fits it (to pick the member of a union), and how to turn a JSON value that passed the
schema into the Python value the function expects (a dict into a dataclass, a string into an
enum member or a ``Path``, a list into a tuple or a set, an integral float into an ``int``).

Supported: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``; ``list`` / ``Sequence``,
``tuple`` (fixed and ``tuple[T, ...]``), ``set`` / ``frozenset`` (of hashable scalars),
``dict`` / ``Mapping`` with ``str`` keys; ``Optional`` / ``Union`` / ``X | Y``; ``Literal``;
``Enum`` (by value); dataclasses, ``TypedDict`` (``total``, ``Required`` / ``NotRequired``) and
``NamedTuple`` as objects; ``pathlib.Path``, ``datetime``, ``date``, ``time`` and ``UUID`` as
strings; ``NewType``; ``Annotated[T, "description", {"minimum": 0}]`` (a string describes, a
dict adds JSON Schema keywords, and ``annotated_types`` constraints such as ``Ge(0)`` or
``MaxLen(5)`` are read when that package is in use). A recursive type becomes a ``$defs`` entry
referenced by ``$ref``; everything else is inlined, which models read more reliably.

Anything else is refused when the function is decorated, with the parameter, the path inside it
and the reason: a schema that silently says something other than the function means would
send the model wrong arguments on every call.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any

__all__ = [
    "ArgumentError",
    "Field",
    "SchemaBuilder",
    "ToolDefinitionError",
    "TypeNode",
    "explain_errors",
    "has_description",
    "injected_kind",
    "nullable",
    "parameters_schema",
    "to_jsonable",
]


class ToolDefinitionError(TypeError):
    """A function cannot become a tool as written (raised at decoration, never during a run)."""


class ArgumentError(ValueError):
    """A value passed the schema but cannot become what the function asked for."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"parameter '{path}': {message}" if path else message)
        self.path = path


_ABC = {
    "collections.abc.Sequence": list,
    "collections.abc.MutableSequence": list,
    "collections.abc.Iterable": list,
    "collections.abc.Collection": list,
    "collections.abc.Set": frozenset,
    "collections.abc.MutableSet": set,
    "collections.abc.Mapping": dict,
    "collections.abc.MutableMapping": dict,
}
_WRAPPERS = tuple(w for w in (typing.Required, typing.NotRequired, getattr(typing, "ReadOnly", None)) if w)
_JSON_SCALARS = (str, int, float, bool, type(None))


# -- nodes ---------------------------------------------------------------------------------------
class TypeNode:
    """One annotation, read. ``converts`` is False when JSON values are already the right ones."""

    __slots__ = ("converts",)

    def __init__(self, converts: bool = False) -> None:
        self.converts = converts

    def schema(self, defs: _Defs) -> dict[str, Any]:
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        return True

    def convert(self, value: Any, path: str) -> Any:
        return value

    def hashable(self) -> bool:
        return False


class _Any(TypeNode):
    __slots__ = ()

    def schema(self, defs: _Defs) -> dict[str, Any]:
        return {}


def _is_int(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Scalar(TypeNode):
    __slots__ = ("kind",)
    _CHECKS: typing.ClassVar[dict[str, Callable[[Any], bool]]] = {
        "string": lambda v: isinstance(v, str),
        "integer": _is_int,
        "number": _is_number,
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }

    def __init__(self, kind: str) -> None:
        super().__init__(converts=kind in ("integer", "number"))
        self.kind = kind

    def schema(self, defs: _Defs) -> dict[str, Any]:
        return {"type": self.kind}

    def accepts(self, value: Any) -> bool:
        return self._CHECKS[self.kind](value)

    def convert(self, value: Any, path: str) -> Any:
        if self.kind == "integer" and isinstance(value, float):
            return int(value)  # 3.0 passes "integer" in JSON Schema; the function asked for an int
        if self.kind == "number" and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    def hashable(self) -> bool:
        return True


class _Parsed(TypeNode):
    """A string the function wants as an object: ``Path``, ``datetime``, ``UUID``..."""

    __slots__ = ("fmt", "label", "parse")

    def __init__(self, parse: Callable[[str], Any], fmt: str | None, label: str) -> None:
        super().__init__(converts=True)
        self.parse, self.fmt, self.label = parse, fmt, label

    def schema(self, defs: _Defs) -> dict[str, Any]:
        return {"type": "string", "format": self.fmt} if self.fmt else {"type": "string"}

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str)

    def convert(self, value: Any, path: str) -> Any:
        try:
            return self.parse(value)
        except ValueError as exc:
            raise ArgumentError(path, f"expected {self.label}, got {_show(value)} ({exc})") from None

    def hashable(self) -> bool:
        return True


class _Choice(TypeNode):
    """``Literal[...]`` and ``Enum``: a fixed set of JSON values, each standing for a Python one."""

    __slots__ = ("by_value", "description", "values")

    def __init__(self, pairs: list[tuple[Any, Any]], description: str = "") -> None:
        super().__init__(converts=any(json_value is not py for json_value, py in pairs))
        self.values = [json_value for json_value, _ in pairs]
        self.by_value = {(type(v), v): py for v, py in pairs}
        self.description = description

    def schema(self, defs: _Defs) -> dict[str, Any]:
        out: dict[str, Any] = {}
        kinds = {_json_type(v) for v in self.values}
        if len(kinds) == 1:
            out["type"] = kinds.pop()
        out["enum"] = list(self.values)
        if self.description:
            out["description"] = self.description
        return out

    def accepts(self, value: Any) -> bool:
        return (type(value), value) in self.by_value

    def convert(self, value: Any, path: str) -> Any:
        found = self.by_value.get((type(value), value), _MISSING)
        if found is _MISSING:  # an int for a float-valued enum, say: the schema let it through
            for (_, v), py in self.by_value.items():
                if v == value and not isinstance(v, bool) and not isinstance(value, bool):
                    return py
            raise ArgumentError(path, f"expected one of {_values(self.values)}, got {_show(value)}")
        return found

    def hashable(self) -> bool:
        return True


class _Array(TypeNode):
    """``list[T]`` / ``Sequence[T]`` / ``tuple[T, ...]`` / ``set[T]`` / ``frozenset[T]``."""

    __slots__ = ("container", "item")

    def __init__(self, item: TypeNode, container: type) -> None:
        super().__init__(converts=item.converts or container is not list)
        self.item, self.container = item, container

    def schema(self, defs: _Defs) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array", "items": self.item.schema(defs)}
        if self.container in (set, frozenset):
            out["uniqueItems"] = True
        return out

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list) and all(self.item.accepts(v) for v in value)

    def convert(self, value: Any, path: str) -> Any:
        item = self.item
        items = [item.convert(v, f"{path}[{i}]") for i, v in enumerate(value)] if item.converts else value
        return items if self.container is list else self.container(items)


class _Tuple(TypeNode):
    """``tuple[A, B]``: exactly these items, in this order."""

    __slots__ = ("items",)

    def __init__(self, items: list[TypeNode]) -> None:
        super().__init__(converts=True)
        self.items = items

    def schema(self, defs: _Defs) -> dict[str, Any]:
        n = len(self.items)
        out: dict[str, Any] = {"type": "array", "minItems": n, "maxItems": n}
        if n:
            out["prefixItems"] = [node.schema(defs) for node in self.items]
        return out

    def accepts(self, value: Any) -> bool:
        return (
            isinstance(value, list)
            and len(value) == len(self.items)
            and all(n.accepts(v) for n, v in zip(self.items, value, strict=True))
        )

    def convert(self, value: Any, path: str) -> Any:
        return tuple(n.convert(v, f"{path}[{i}]") for i, (n, v) in enumerate(zip(self.items, value, strict=True)))

    def hashable(self) -> bool:
        return all(n.hashable() for n in self.items)


class _Map(TypeNode):
    """``dict[str, T]``: any keys, each value a T."""

    __slots__ = ("value",)

    def __init__(self, value: TypeNode) -> None:
        super().__init__(converts=value.converts)
        self.value = value

    def schema(self, defs: _Defs) -> dict[str, Any]:
        if isinstance(self.value, _Any):
            return {"type": "object"}
        return {"type": "object", "additionalProperties": self.value.schema(defs)}

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict) and all(self.value.accepts(v) for v in value.values())

    def convert(self, value: Any, path: str) -> Any:
        if not self.value.converts:
            return value
        return {k: self.value.convert(v, f"{path}.{k}" if path else k) for k, v in value.items()}


class _Union(TypeNode):
    """``A | B | None``: the first member whose shape the value has is the one it becomes."""

    __slots__ = ("members",)

    def __init__(self, members: list[TypeNode]) -> None:
        super().__init__(converts=any(m.converts for m in members))
        self.members = members

    def schema(self, defs: _Defs) -> dict[str, Any]:
        if all(type(m) is _Scalar for m in self.members):  # int | str | None: the compact form
            return {"type": [m.kind for m in self.members]}  # type: ignore[attr-defined]
        return {"anyOf": [m.schema(defs) for m in self.members]}

    def accepts(self, value: Any) -> bool:
        return any(m.accepts(value) for m in self.members)

    def convert(self, value: Any, path: str) -> Any:
        for member in self.members:
            if member.accepts(value):
                return member.convert(value, path)
        return value  # the schema passed it; nothing here claims it

    def hashable(self) -> bool:
        return all(m.hashable() for m in self.members)


@dataclasses.dataclass(slots=True)
class Field:
    """One property of an object (or one parameter of the function)."""

    name: str
    node: TypeNode
    required: bool
    default: Any = dataclasses.field(default=None)
    has_default: bool = False
    description: str = ""

    def schema(self, defs: _Defs) -> dict[str, Any]:
        out = dict(self.node.schema(defs))
        if self.description:  # the parameter's own text says more than its type's docstring
            out["description"] = self.description
        if self.has_default:
            encoded = _json_default(self.default)
            if encoded is not _MISSING:
                out["default"] = encoded
        return out


class _Object(TypeNode):
    """A dataclass, TypedDict or NamedTuple: an object with named, typed fields."""

    __slots__ = ("build", "description", "fields", "name", "recursive")

    def __init__(self, name: str, build: Callable[[dict[str, Any]], Any], description: str) -> None:
        super().__init__(converts=True)
        self.name = name
        self.build = build
        self.description = description
        self.fields: list[Field] = []
        self.recursive = False  # set when the type refers to itself: then it lives in $defs

    def body(self, defs: _Defs) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object"}
        if self.description:
            out["description"] = self.description
        out["properties"] = {f.name: f.schema(defs) for f in self.fields}
        required = [f.name for f in self.fields if f.required]
        if required:
            out["required"] = required
        out["additionalProperties"] = False
        return out

    def schema(self, defs: _Defs) -> dict[str, Any]:
        if not self.recursive:
            return self.body(defs)
        return {"$ref": f"#/$defs/{defs.define(self)}"}

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        known = {f.name: f for f in self.fields}
        if any(k not in known for k in value):
            return False
        return all((f.name in value and f.node.accepts(value[f.name])) or (f.name not in value and not f.required)
                   for f in self.fields)  # fmt: skip

    def convert(self, value: Any, path: str) -> Any:
        converted = {}
        for f in self.fields:
            if f.name in value:
                v = value[f.name]
                converted[f.name] = f.node.convert(v, f"{path}.{f.name}" if path else f.name) if f.node.converts else v
        try:
            return self.build(converted)
        except (TypeError, ValueError) as exc:  # the type's own checks (__post_init__) said no
            raise ArgumentError(path, f"could not make a {self.name}: {exc}") from None


class _Defs:
    """The ``$defs`` of one schema: recursive types by a unique name."""

    __slots__ = ("names", "schemas")

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.schemas: dict[str, dict[str, Any]] = {}

    def define(self, node: _Object) -> str:
        name = self.names.get(id(node))
        if name is None:
            name, n = node.name, 2
            while name in self.schemas:
                name, n = f"{node.name}{n}", n + 1
            self.names[id(node)] = name
            self.schemas[name] = {}  # reserved: a reference from inside the body finds the name
            self.schemas[name] = node.body(self)
        return name


class _Constrained(TypeNode):
    """``Annotated[T, ...]``: T with a description and extra JSON Schema keywords."""

    __slots__ = ("description", "inner", "keywords")

    def __init__(self, inner: TypeNode, description: str, keywords: dict[str, Any]) -> None:
        super().__init__(converts=inner.converts)
        self.inner, self.description, self.keywords = inner, description, keywords

    def schema(self, defs: _Defs) -> dict[str, Any]:
        out = {**self.inner.schema(defs), **self.keywords}
        if self.description:
            out["description"] = self.description
        return out

    def accepts(self, value: Any) -> bool:
        return self.inner.accepts(value)

    def convert(self, value: Any, path: str) -> Any:
        return self.inner.convert(value, path)

    def hashable(self) -> bool:
        return self.inner.hashable()


def parameters_schema(fields: list[Field]) -> dict[str, Any]:
    """The schema of a function's parameters: a closed object, with ``$defs`` for recursive types."""
    defs = _Defs()
    schema: dict[str, Any] = {"type": "object", "properties": {f.name: f.schema(defs) for f in fields}}
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    if defs.schemas:
        schema["$defs"] = defs.schemas
    return schema


def nullable(node: TypeNode) -> TypeNode:
    """``node`` that also accepts null (for ``x: str = None``)."""
    members = node.members if isinstance(node, _Union) else [node]
    return _Union([*members, _Scalar("null")])


def has_description(node: TypeNode) -> bool:
    """Whether the annotation carries its own text (``Annotated[T, "text"]``)."""
    return isinstance(node, _Constrained) and bool(node.description)


# -- reading annotations -------------------------------------------------------------------------
class SchemaBuilder:
    """Reads the annotations of one function (its parameters and the types they name)."""

    def __init__(self, owner: str, localns: Mapping[str, Any] | None = None) -> None:
        self.owner = owner
        self.localns = dict(localns or {})
        self._objects: dict[Any, _Object] = {}
        self._building: set[Any] = set()

    def fail(self, where: str, problem: str) -> ToolDefinitionError:
        return ToolDefinitionError(f"@ra.tool {self.owner}: {where}: {problem}")

    def read(self, tp: Any, where: str) -> TypeNode:
        """The node for annotation ``tp`` (``where`` names it in errors: "parameter 'x'")."""
        if tp is Any or tp is object:
            return _Any()
        if isinstance(tp, (str, typing.ForwardRef)):
            name = tp if isinstance(tp, str) else tp.__forward_arg__
            raise self.fail(
                where, f"the annotation {name!r} could not be resolved; define or import it at module level"
            )
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            return self._annotated(args[0], tp.__metadata__, where)
        if origin in _WRAPPERS:
            return self.read(args[0], where)
        if tp is None or tp is type(None):
            return _Scalar("null")
        if injected_kind(tp) is not None:
            raise self.fail(where, f"{_name(tp)} is injected only as a parameter of its own, not inside another type")
        simple = _SIMPLE.get(tp)
        if simple is not None:
            return simple()
        if isinstance(tp, type) and issubclass(tp, PurePath):
            return _Parsed(tp, None, "a path")
        if origin is typing.Union or origin is types.UnionType:
            return self._union(args, where)
        if origin is typing.Literal:
            return self._literal(args, where)
        if isinstance(tp, typing.TypeVar):
            raise self.fail(where, f"type variable {tp} has no JSON Schema; annotate with a concrete type")
        if hasattr(tp, "__supertype__"):  # NewType
            return self.read(tp.__supertype__, where)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._enum(tp, where)
        container = origin if origin is not None else tp
        if isinstance(container, type):
            abc = _ABC.get(f"{container.__module__}.{container.__qualname__}")
            container = abc or container
        if container in (list, set, frozenset) and (origin is not None or tp in (list, set, frozenset)):
            item = self.read(args[0], f"{where} item") if args else _Any()
            if container is not list and not item.hashable():
                raise self.fail(where, "set items must be hashable (str, int, float, bool, enums, literals)")
            return _Array(item, container)
        if container is tuple and (origin is not None or tp is tuple):
            if not args:
                return _Array(_Any(), tuple)
            if len(args) == 2 and args[1] is Ellipsis:
                return _Array(self.read(args[0], f"{where} item"), tuple)
            if args == ((),):
                return _Tuple([])
            return _Tuple([self.read(a, f"{where} item {i}") for i, a in enumerate(args)])
        if container is dict and (origin is not None or tp is dict):
            if not args:
                return _Map(_Any())
            if args[0] is not str:
                raise self.fail(where, f"JSON object keys are strings; use dict[str, ...], not {_name(tp)}")
            return _Map(self.read(args[1], f"{where} value"))
        if origin is not None and (dataclasses.is_dataclass(origin) or _is_typeddict(origin)):
            raise self.fail(where, f"generic {_name(tp)} is not supported; use a non-generic type")
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self._object(tp, where, self._dataclass_fields)
        if _is_typeddict(tp):
            return self._object(tp, where, self._typeddict_fields)
        if isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):
            return self._object(tp, where, self._namedtuple_fields)
        if tp in (bytes, bytearray, memoryview):
            raise self.fail(where, "bytes have no JSON form; take a str (base64 or text) and decode it yourself")
        raise self.fail(
            where,
            f"unsupported type {_name(tp)}; use str, int, float, bool, None, list, tuple, set, dict[str, T], "
            "Literal, an Enum, a dataclass, a TypedDict, a NamedTuple, Optional/Union, Path, datetime or UUID",
        )

    def _annotated(self, base: Any, metadata: tuple[Any, ...], where: str) -> TypeNode:
        inner = self.read(base, where)
        description = ""
        keywords: dict[str, Any] = {}
        for item in metadata:
            if isinstance(item, str):
                description = item.strip()
            elif isinstance(item, Mapping):
                keywords.update(item)
            elif type(item).__module__ == "annotated_types":
                keywords.update(_annotated_types(item, inner, self.fail(where, f"unsupported constraint {item!r}")))
            else:
                raise self.fail(
                    where,
                    f"Annotated metadata {item!r} is not understood; @ra.tool reads a str (the description), "
                    "a dict of JSON Schema keywords, or annotated_types constraints",
                )
        return _Constrained(inner, description, keywords)

    def _union(self, args: tuple[Any, ...], where: str) -> TypeNode:
        members: list[TypeNode] = []
        for arg in args:
            node = self.read(arg, where)
            members.extend(node.members if isinstance(node, _Union) else [node])
        return _Union(members) if len(members) > 1 else members[0]

    def _literal(self, args: tuple[Any, ...], where: str) -> TypeNode:
        pairs: list[tuple[Any, Any]] = []
        for value in args:
            json_value = value.value if isinstance(value, enum.Enum) else value
            if not isinstance(json_value, _JSON_SCALARS) or (
                isinstance(json_value, float) and json_value != json_value
            ):
                raise self.fail(where, f"Literal value {value!r} has no JSON form")
            pairs.append((json_value, value))
        return _Choice(pairs)

    def _enum(self, cls: type[enum.Enum], where: str) -> TypeNode:
        pairs: list[tuple[Any, Any]] = []
        for member in cls:
            if not isinstance(member.value, _JSON_SCALARS) or member.value is None:
                raise self.fail(
                    where,
                    f"enum {cls.__name__}.{member.name} has the value {member.value!r}, which has no JSON form "
                    "(enums are sent by value: use str or int values)",
                )
            pairs.append((member.value, member))
        if not pairs:
            raise self.fail(where, f"enum {cls.__name__} has no members")
        return _Choice(pairs, _own_doc(cls))

    def _object(self, cls: Any, where: str, fields: Callable[[Any, _Object, str], None]) -> TypeNode:
        node = self._objects.get(cls)
        if node is not None:
            if cls in self._building:
                node.recursive = True
            return node
        if isinstance(cls, type) and issubclass(cls, tuple):
            build: Callable[[dict[str, Any]], Any] = lambda values: cls(**values)  # noqa: E731
        elif _is_typeddict(cls):
            build = dict
        else:
            build = lambda values: cls(**values)  # noqa: E731
        node = _Object(cls.__name__, build, "")
        self._objects[cls] = node
        self._building.add(cls)
        try:
            fields(cls, node, where)
        finally:
            self._building.discard(cls)
        return node

    def _hints(self, cls: Any, where: str) -> dict[str, Any]:
        try:
            return typing.get_type_hints(cls, localns=self.localns or None, include_extras=True)
        except Exception as exc:  # NameError for a name only imported under TYPE_CHECKING, ...
            raise self.fail(where, f"cannot resolve the annotations of {_name(cls)}: {exc}") from None

    def _fill(self, cls: Any, node: _Object, where: str, spec: list[tuple[str, bool, Any, bool]]) -> None:
        doc = _class_doc(cls)
        node.description = doc.description
        hints = self._hints(cls, where)
        for name, required, default, has_default in spec:
            tp = hints.get(name)
            if tp is None:
                raise self.fail(f"{where} field '{name}'", "has no type annotation")
            field_node = self.read(tp, f"{where} field '{name}'")
            description = (
                "" if isinstance(field_node, _Constrained) and field_node.description else doc.params.get(name, "")
            )
            node.fields.append(Field(name, field_node, required, default, has_default, description))

    def _dataclass_fields(self, cls: Any, node: _Object, where: str) -> None:
        hints = self._hints(cls, where)
        for name, tp in hints.items():
            if isinstance(tp, dataclasses.InitVar):
                raise self.fail(f"{where} field '{name}'", "InitVar fields are not supported")
        spec = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            has_default = f.default is not dataclasses.MISSING
            required = not has_default and f.default_factory is dataclasses.MISSING
            spec.append((f.name, required, f.default if has_default else None, has_default))
        self._fill(cls, node, where, spec)

    def _typeddict_fields(self, cls: Any, node: _Object, where: str) -> None:
        # __required_keys__ misses Required/NotRequired written as strings (postponed annotations,
        # Python < 3.14), so the resolved hints have the last word.
        required_keys = set(cls.__required_keys__)
        hints = self._hints(cls, where)
        for name, hint in hints.items():
            wrapper = typing.get_origin(hint)
            if wrapper is typing.NotRequired:
                required_keys.discard(name)
            elif wrapper is typing.Required:
                required_keys.add(name)
        spec = [(name, name in required_keys, None, False) for name in hints]
        self._fill(cls, node, where, spec)

    def _namedtuple_fields(self, cls: Any, node: _Object, where: str) -> None:
        defaults = cls._field_defaults
        spec = [(n, n not in defaults, defaults.get(n), n in defaults) for n in cls._fields]
        self._fill(cls, node, where, spec)


_SIMPLE: dict[Any, Callable[[], TypeNode]] = {
    str: lambda: _Scalar("string"),
    int: lambda: _Scalar("integer"),
    float: lambda: _Scalar("number"),
    bool: lambda: _Scalar("boolean"),
    _dt.datetime: lambda: _Parsed(_dt.datetime.fromisoformat, "date-time", "an ISO 8601 date and time"),
    _dt.date: lambda: _Parsed(_dt.date.fromisoformat, "date", "an ISO 8601 date (YYYY-MM-DD)"),
    _dt.time: lambda: _Parsed(_dt.time.fromisoformat, "time", "an ISO 8601 time (HH:MM[:SS])"),
    uuid.UUID: lambda: _Parsed(uuid.UUID, "uuid", "a UUID"),
}


def _annotated_types(item: Any, inner: TypeNode, refusal: ToolDefinitionError) -> dict[str, Any]:
    """``annotated_types`` constraints (Gt, Ge, Lt, Le, MultipleOf, MinLen, MaxLen, Len, Interval)."""
    base = inner.inner if isinstance(inner, _Constrained) else inner
    sized = "Items" if isinstance(base, (_Array, _Tuple)) else "Properties" if isinstance(base, _Map) else "Length"
    out: dict[str, Any] = {}
    for attr, key in (
        ("gt", "exclusiveMinimum"),
        ("ge", "minimum"),
        ("lt", "exclusiveMaximum"),
        ("le", "maximum"),
        ("multiple_of", "multipleOf"),
        ("min_length", f"min{sized}"),
        ("max_length", f"max{sized}"),
    ):
        value = getattr(item, attr, None)
        if value is not None and not (attr == "min_length" and value == 0):
            out[key] = value
    if not out:
        raise refusal
    return out


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def injected_kind(tp: Any) -> str | None:
    """What an injected annotation stands for: the ToolContext, an execution environment (the
    protocol, or any class that implements it), or - for ra's classes above ra.tools, matched by
    qualified name so this layer never imports them - the run state or the session."""
    from ra.env.base import ExecutionEnvironment

    from .registry import ToolContext

    if tp is ToolContext:
        return "context"
    if not isinstance(tp, type):
        return None
    if tp is ExecutionEnvironment or (not dataclasses.is_dataclass(tp) and _implements(tp, ExecutionEnvironment)):
        return "env"
    for klass in tp.__mro__:
        qualified = f"{klass.__module__}.{klass.__qualname__}"
        kind = _INJECTED_NAMES.get(qualified)
        if kind is not None:
            return kind
    return None


def _implements(cls: type, protocol: type) -> bool:
    try:
        return issubclass(cls, protocol)
    except TypeError:
        return False


_INJECTED_NAMES = {
    "ra.agent.state.RunState": "run_state",
    "ra.agent.session.Session": "session",
}


def _own_doc(cls: type) -> str:
    doc = cls.__dict__.get("__doc__")
    if not doc:
        return ""
    from .docstrings import parse_docstring

    return parse_docstring(doc).description


def _class_doc(cls: type) -> Any:
    from .docstrings import Docstring, parse_docstring

    doc = cls.__dict__.get("__doc__") or ""
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return Docstring("", {})  # the text dataclass() makes up when there is no docstring
    if isinstance(cls, type) and issubclass(cls, tuple) and doc.startswith(f"{cls.__name__}("):
        return Docstring("", {})  # likewise namedtuple's
    return parse_docstring(doc)


def _name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return re.sub(r"\btyping\.", "", repr(tp))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


class _Missing:
    __slots__ = ()


_MISSING: Any = _Missing()


def _json_default(value: Any) -> Any:
    """A default as the schema shows it, or _MISSING when it has no faithful JSON form."""
    value = to_jsonable(value, strict=True)
    if value is _MISSING:
        return _MISSING
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _MISSING
    return value


def to_jsonable(value: Any, *, strict: bool = False) -> Any:
    """``value`` as plain JSON data: dataclasses and NamedTuples as objects, enums by value, sets
    and tuples as arrays, paths, dates and UUIDs as strings. Anything else: ``str(value)`` - or,
    with ``strict``, _MISSING."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, strict=strict)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            item = to_jsonable(v, strict=strict)
            if item is _MISSING:
                return _MISSING
            out[str(k.value if isinstance(k, enum.Enum) else k)] = item
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, strict=strict)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return to_jsonable(value._asdict(), strict=strict)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            try:
                items.sort()
            except TypeError:
                pass
        out_list = [to_jsonable(v, strict=strict) for v in items]
        return _MISSING if any(v is _MISSING for v in out_list) else out_list
    if isinstance(value, (PurePath, uuid.UUID)):
        return str(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    return _MISSING if strict else str(value)


# -- explaining schema errors --------------------------------------------------------------------
def explain_errors(errors: list[Any], root: Mapping[str, Any], *, limit: int = 8) -> list[str]:
    """One line per problem that a model can act on: which parameter, what it should be, what it was."""
    lines: list[str] = []
    for error in sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        lines.extend(_explain(error, root))
    lines = list(dict.fromkeys(lines))  # jsonschema reports each missing name once per required list
    if len(lines) > limit:
        lines = [*lines[:limit], f"({len(lines) - limit} further problems not listed)"]
    return lines


def _where(error: Any) -> str:
    from ra.llm.schema import field_path

    return field_path(error.absolute_path)


def _explain(error: Any, root: Mapping[str, Any]) -> list[str]:
    where = _where(error)
    kind = error.validator
    if kind == "required":
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        properties = error.schema.get("properties", {})
        out = []
        for name in error.validator_value:
            if name not in instance:
                full = f"{where}.{name}" if where else name
                expected = _describe(properties.get(name, {}), root)
                out.append(f"missing required parameter '{full}' ({expected})")
        return out
    if kind == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = list(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        known = ", ".join(allowed) or "none"
        inside = f" in '{where}'" if where else ""
        return [f"unknown parameter '{k}'{inside}; the known ones are: {known}" for k in extra]
    if kind == "anyOf" and error.context:
        # When exactly one branch has the value's shape (an object for a dataclass | None), its
        # own complaints are what to fix; say those rather than "not valid under any schema".
        branches: dict[int, list[Any]] = {}
        for sub in error.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        shaped = [
            subs
            for subs in branches.values()
            if not any(s.validator in ("type", "const", "enum") and not list(s.relative_path) for s in subs)
        ]
        if len(shaped) == 1:
            return [line for sub in shaped[0] for line in _explain(sub, root)]
    label = f"parameter '{where}'" if where else "arguments"
    if kind in ("type", "anyOf", "enum", "const") or (
        kind in ("minItems", "maxItems") and "prefixItems" in error.schema
    ):
        return [f"{label}: expected {_describe(error.schema, root)}, got {_show(error.instance)}"]
    return [f"{label}: {error.message}"]


def _describe(schema: Any, root: Mapping[str, Any], depth: int = 0) -> str:
    """A schema in a few words: "an integer", "one of 'a', 'b'", "an array of strings"."""
    if not isinstance(schema, Mapping) or depth > 3:
        return "a value"
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        target = root.get("$defs", {}).get(name, {})
        return f"a {name} object" if depth else _describe(target, root, depth + 1)
    if "enum" in schema:
        return f"one of {_values(schema['enum'])}"
    if "const" in schema:
        return _show(schema["const"])
    if "anyOf" in schema:
        return " or ".join(_describe(s, root, depth + 1) for s in schema["anyOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(_describe({**schema, "type": k}, root, depth + 1) for k in kind)
    if kind == "array":
        if "prefixItems" in schema:
            inner = ", ".join(_describe(s, root, depth + 1) for s in schema["prefixItems"])
            return f"an array of exactly {len(schema['prefixItems'])} items [{inner}]"
        items = schema.get("items")
        unique = "distinct " if schema.get("uniqueItems") else ""
        return f"an array of {unique}{_plural(_describe(items, root, depth + 1))}" if items else "an array"
    if kind == "object":
        props = schema.get("properties")
        if props:
            required = set(schema.get("required", ()))
            names = ", ".join(f"{n}" if n in required else f"{n}?" for n in props)
            return f"an object with fields {names}"
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and extra:
            return f"an object whose values are {_plural(_describe(extra, root, depth + 1))}"
        return "an object"
    fmt = schema.get("format")
    base = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "null": "null",
    }.get(kind or "", "any value")
    return f"{base} ({fmt})" if fmt and kind == "string" else base


def _plural(phrase: str) -> str:
    for article in ("an ", "a "):
        if phrase.startswith(article):
            rest = phrase[len(article) :]
            head, sep, tail = rest.partition(" ")
            return f"{head}s{sep}{tail}" if not head.endswith("s") else rest
    return phrase


def _values(values: Any) -> str:
    return ", ".join(_show(v, 40) for v in values)


def _show(value: Any, limit: int = 60) -> str:
    """A value the model sent, short, as JSON (``"abc"``, ``12``, ``null``, ``{"x": 1}``)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."

"""JSON Schema checks shared by every tool runner and object parser in ra.

One way to compile a schema (the schema's own ``$schema`` draft, Draft 2020-12 when it names
none; the schema itself checked first), one way to say what is wrong with a value (a line per
problem, each naming the field, in a stable order), and one way to put an exception into words.
The agent's tool registry, ``generate()``'s tool runner and ``generate_object()`` all use these,
each framing the lines as its caller expects. ``jsonschema`` is imported on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "SchemaProblem",
    "compact_error_lines",
    "compile_schema",
    "describe_exception",
    "field_path",
    "schema_error_lines",
]


class SchemaProblem(ValueError):
    """The schema itself is invalid (raised by :func:`compile_schema`)."""


def compile_schema(schema: Mapping[str, Any], what: str) -> Any:
    """A validator for ``schema``; SchemaProblem (naming ``what`` and where) when it is invalid."""
    from jsonschema import Draft202012Validator, SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise SchemaProblem(f"{what} has an invalid JSON schema at {where}: {exc.message}") from None
    return cls(schema)


def field_path(parts: Any) -> str:
    """``a.b[0].c`` for a jsonschema path; "" for the root."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def schema_error_lines(errors: list[Any], *, limit: int = 8, schema_name: str = "the schema") -> list[str]:
    """One line per problem, each naming the field: missing and unexpected fields by name, the
    rest with jsonschema's message; at most ``limit`` lines (then a line saying there are more)."""
    lines: list[str] = []
    for error in sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        where = field_path(error.absolute_path)
        if error.validator == "required":
            instance = error.instance if isinstance(error.instance, Mapping) else {}
            missing = [name for name in error.validator_value if name not in instance]
            lines.extend(f"missing required field '{f'{where}.{n}' if where else n}'" for n in missing)
            continue
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            allowed = set(error.schema.get("properties", {}))
            extra = [k for k in error.instance if k not in allowed]
            lines.extend(f"unexpected field '{f'{where}.{n}' if where else n}' (not in {schema_name})" for n in extra)
            if extra:
                continue
        label = f"field '{where}'" if where else "arguments"
        lines.append(f"{label}: {error.message}")
    if len(lines) > limit:
        lines = [*lines[:limit], "(further problems not listed)"]
    return lines


def compact_error_lines(errors: list[Any], *, limit: int = 5) -> list[str]:
    """``path: message`` per problem (``(root)`` for the value itself), for one-line reports."""
    ordered = sorted(errors, key=lambda e: list(map(str, e.absolute_path)))
    lines = [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in ordered[:limit]]
    if len(ordered) > limit:
        lines.append(f"... and {len(ordered) - limit} more")
    return lines


def describe_exception(exc: BaseException) -> str:
    """An exception in words for a model or a person: its message (``missing key 'x'`` for a
    KeyError), or its type's name when it has none."""
    if isinstance(exc, KeyError) and exc.args:
        return f"missing key {exc.args[0]!r}"
    return str(exc) or type(exc).__name__

"""Pieces every built-in tool shares: schema helpers, error results, parameter aliases.

Expected failures (a missing file, a bad regex, a patch that does not apply) come back as
``ToolOutput(is_error=True)`` with a message written for the model, rather than as exceptions:
the pipeline would prefix an exception's text with "Tool error (name):", which adds nothing when
the message already says what went wrong and what to do instead. Anything unexpected still raises
and the pipeline turns it into an error result.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolContext, ToolOutput

__all__ = [
    "AliasedTool",
    "config_value",
    "define",
    "display_path",
    "error",
    "integer",
    "optional_int",
    "os_error_message",
]


def define(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> ToolDefinition:
    """A ToolDefinition whose parameters are a plain JSON Schema object."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return ToolDefinition(name, description, schema)


def integer(description: str, *, minimum: int | None = None, maximum: int | None = None) -> dict[str, Any]:
    """An integer property. Bounds are stated in the schema so the pipeline's validation rejects
    a bad value with a message naming the field, before the tool runs."""
    prop: dict[str, Any] = {"type": "integer", "description": description}
    if minimum is not None:
        prop["minimum"] = minimum
    if maximum is not None:
        prop["maximum"] = maximum
    return prop


def optional_int(arguments: Mapping[str, Any], name: str) -> int | None:
    """The argument as an int (JSON Schema lets ``5.0`` pass as an integer), or None when absent."""
    value = arguments.get(name)
    if value is None:
        return None
    return int(value)


def error(message: str, **metadata: Any) -> ToolOutput:
    return ToolOutput(message, is_error=True, metadata=metadata or None)


def config_value(ctx: ToolContext, name: str, default: int) -> int:
    """A numeric SessionConfig field, or ``default`` outside a session (``ctx.config`` is None)."""
    value = getattr(ctx.config, name, None)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def display_path(ctx: ToolContext, path: str) -> str:
    """The absolute form of ``path`` in the environment (what error messages should name)."""
    try:
        return ctx.env.resolve(path)
    except (TypeError, ValueError):
        return path


def os_error_message(exc: OSError, path: str) -> str:
    """A one-line message for a failed file operation, naming the path.

    Environments raise with messages of their own ("Write operations are disabled in read-only
    mode ..."); those are kept. A bare OS error (errno and strerror only) gets a message here.
    """
    if exc.strerror is None and str(exc):
        return str(exc)
    if isinstance(exc, PermissionError):
        return f"Permission denied: {path}"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a directory, not a file."
    if isinstance(exc, NotADirectoryError):
        return f"{path}: a parent of this path is a file, not a directory."
    if isinstance(exc, FileNotFoundError):
        return f"File not found: {path}"
    text = exc.strerror or str(exc) or type(exc).__name__
    return f"{text}: {path}"


def parent_and_name(path: str) -> tuple[str, str]:
    parent, name = posixpath.split(path.rstrip("/") or "/")
    return parent or "/", name


class AliasedTool(RegisteredTool):
    """A tool that also accepts other names for some of its parameters.

    The model sees only the canonical names; a call that uses an alias (codex's ``input`` for
    apply_patch's ``patch``) is validated as if it had used the canonical name, and the executor
    reads whichever was sent. Without this, the schema's ``required`` would reject the alias
    before the executor could accept it.
    """

    __slots__ = ("aliases",)

    def __init__(
        self, definition: ToolDefinition, executor: Any, *, aliases: Mapping[str, str], **options: Any
    ) -> None:
        super().__init__(definition, executor, **options)
        #: alias -> canonical parameter name
        self.aliases = dict(aliases)

    def validate(self, arguments: Mapping[str, Any]) -> str | None:
        return super().validate(resolve_aliases(arguments, self.aliases))


def resolve_aliases(arguments: Mapping[str, Any], aliases: Mapping[str, str]) -> dict[str, Any]:
    """``arguments`` with each alias renamed to its canonical name (the canonical name wins)."""
    out = dict(arguments)
    for alias, canonical in aliases.items():
        if alias in out:
            value = out.pop(alias)
            out.setdefault(canonical, value)
    return out

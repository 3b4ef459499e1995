"""``@ra.tool``: a typed Python function as a tool the model can call.

    @ra.tool
    def add(a: int, b: int = 0) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

``add`` is now a :class:`FunctionTool` - a :class:`~ra.tools.registry.RegisteredTool`, so
``registry.register(add)`` takes it - and still a function: ``add(2, 3) == 5``.

What the model sees comes from the function: the name, the description (the docstring's prose
before its first section), the JSON Schema of the parameters (:mod:`ra.tools.function_schema`,
from the type hints) with each parameter's text from the docstring (Google, NumPy or Sphinx) or
from ``Annotated[T, "text"]``. What the function gets is checked and converted first: the
arguments are validated against that schema, with one line per problem that names the
parameter, says what was expected and shows what came; then they become the Python values the
hints promise (dataclasses, enum members, tuples, sets, paths, dates). A function that cannot be
described faithfully is refused when it is decorated, never at the first call.

Besides its arguments a function may ask for what ra has, by annotating a parameter (such
parameters never appear in the schema): ``ToolContext`` (the call's context), an
``ExecutionEnvironment`` (``ctx.env``; a subclass annotation is checked at the call),
``ra.agent.state.RunState`` (the session's run state, ``ctx.run_state``) or
``ra.agent.session.Session`` (``ctx.session``). The last two live above this layer, so they are
recognised by qualified name and never imported here. ``X | None`` gets None where there is none.

Results: a ``str`` goes to the model as is, a :class:`ToolOutput` as it says; ``None`` becomes
``null`` and any other value JSON (dataclasses and NamedTuples as objects, enums by value, sets
and tuples as arrays); ``bytes`` holding a PNG, JPEG, GIF or WebP image become an image result.
A :class:`ToolError` the function raises becomes an error result with exactly its message; any
other exception an error result naming the exception's type and message (``show_errors=False``
keeps the message back), never a traceback: the traceback goes to the host in the result's
metadata (TOOL_CALL_END), not to the model.

Sync functions run in a worker thread by default (``blocking=True``): a tool function may read
files or call a web service, and done inline that would freeze the event loop - no streamed
events, no abort, no other call of a parallel round - for as long as it takes. The thread costs
well under a millisecond; a function known to be quick can say ``blocking=False``. A thread
cannot be cancelled: on abort the session stops waiting and the function runs to its end.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from ra.llm.schema import describe_exception
from ra.llm.types import ToolDefinition

from .docstrings import parse_docstring
from .function_schema import (
    ArgumentError,
    Field,
    SchemaBuilder,
    ToolDefinitionError,
    explain_errors,
    has_description,
    injected_kind,
    nullable,
    parameters_schema,
    to_jsonable,
)
from .registry import RegisteredTool, ToolContext, ToolEffect, ToolError, ToolOutput

__all__ = ["FunctionTool", "ToolDefinitionError", "tool"]

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True, slots=True)
class _Param:
    """How one parameter of the function is filled: from the arguments, or injected."""

    name: str
    kind: Any  # inspect.Parameter kind
    field: Field | None  # None when injected
    inject: str | None = None  # "context" | "env" | "run_state" | "session"
    inject_type: Any = None
    optional: bool = False  # the injected annotation allows None
    default: Any = inspect.Parameter.empty


@dataclass(eq=False, repr=False)
class FunctionTool(RegisteredTool):
    """A :class:`RegisteredTool` made from a Python function by :func:`tool`; calling it calls
    the function. ``fn`` is the function; the executor validates, converts, injects and calls."""

    fn: Callable[..., Any] = field(default=None, kw_only=True)  # type: ignore[assignment]
    #: Whether an exception's message (not only its type) reaches the model.
    show_errors: bool = field(default=True, kw_only=True)
    params: tuple[_Param, ...] = field(default=(), kw_only=True)
    is_async: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        # RegisteredTool keeps the compiled validator in a slot whose default a subclass's
        # generated __init__ does not set.
        self._validator = None
        owner = getattr(self.executor, "__self__", None)
        if self.fn is not None and (self.executor is _placeholder or isinstance(owner, FunctionTool)):
            # Built by tool(), or copied by dataclasses.replace() (a renamed tool): the executor
            # is this tool's own, so its messages name this tool and validate against its schema.
            self.executor = self._run_async if self.is_async else self._run_sync
        super().__post_init__()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself, as if it had not been decorated."""
        return self.fn(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)!r})"

    def validate(self, arguments: Mapping[str, Any]) -> str | None:
        """``None`` when ``arguments`` match the schema, else one line per problem, each naming
        the parameter, what it should be and what came."""
        if not isinstance(arguments, Mapping):
            return f"Invalid arguments for tool {self.name}: expected a JSON object, got {type(arguments).__name__}"
        try:
            errors = list(self.validator.iter_errors(arguments))
        except RecursionError:
            return f"Invalid arguments for tool {self.name}: the arguments are nested too deeply"
        if not errors:
            return None
        lines = explain_errors(errors, self.definition.parameters)
        return f"Invalid arguments for tool {self.name}:\n" + "\n".join(f"- {line}" for line in lines)

    # -- running ---------------------------------------------------------------------------------
    def _prepare(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> tuple[list[Any], dict[str, Any]]:
        """The call's positional and keyword arguments; raises _Refusal with the model's message."""
        problem = self.validate(arguments)  # again: the executor may be called without the pipeline
        if problem is not None:
            raise _Refusal(problem)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for param in self.params:
            if param.inject is not None:
                value = self._injected(param, ctx)
            elif param.name in arguments:
                value = arguments[param.name]
                node = param.field.node  # type: ignore[union-attr]
                if node.converts:
                    try:
                        value = node.convert(value, param.name)
                    except ArgumentError as exc:
                        raise _Refusal(f"Invalid arguments for tool {self.name}:\n- {exc}") from None
                    except RecursionError:
                        raise _Refusal(f"Invalid arguments for tool {self.name}: nested too deeply") from None
            elif param.kind is inspect.Parameter.POSITIONAL_ONLY:
                value = param.default  # a later positional argument may follow: pass the default
            else:
                continue  # the function's own default applies
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[param.name] = value
        return args, kwargs

    def _injected(self, param: _Param, ctx: ToolContext | None) -> Any:
        if param.inject == "context":
            value: Any = ctx
        elif ctx is None:
            value = None
        elif param.inject == "env":
            value = ctx.env
        elif param.inject == "run_state":
            value = ctx.run_state
        else:
            value = ctx.session
        if value is None:
            if param.optional:
                return None
            what = {"context": "a tool context", "env": "an execution environment", "run_state": "a run state"}
            raise _Refusal(
                f"Tool {self.name} cannot run here: it needs {what.get(param.inject or '', 'a session')} "
                f"(parameter '{param.name}') and none is available."
            )
        wanted = param.inject_type
        # The protocol itself is whatever env the session has; a concrete class is checked.
        concrete = isinstance(wanted, type) and not getattr(wanted, "_is_protocol", False)
        if param.inject in ("env", "run_state", "session") and concrete and not isinstance(value, wanted):
            raise _Refusal(
                f"Tool {self.name} cannot run here: parameter '{param.name}' needs a {wanted.__name__}, "
                f"and this session has a {type(value).__name__}."
            )
        return value

    def _run_sync(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            args, kwargs = self._prepare(arguments, ctx)
        except _Refusal as refusal:
            return ToolOutput(str(refusal), is_error=True)
        try:
            value = self.fn(*args, **kwargs)
        except (Exception, SystemExit) as exc:  # a tool calling sys.exit() must not end the session
            return self._failure(exc)
        if inspect.isawaitable(value):  # a sync callable that hands back a coroutine
            return self._finish_awaitable(value)
        return self._result(value)

    async def _run_async(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            args, kwargs = self._prepare(arguments, ctx)
        except _Refusal as refusal:
            return ToolOutput(str(refusal), is_error=True)
        try:
            value = await self.fn(*args, **kwargs)
        except (Exception, SystemExit) as exc:
            return self._failure(exc)
        return self._result(value)

    async def _finish_awaitable(self, awaitable: Any) -> Any:
        try:
            value = await awaitable
        except (Exception, SystemExit) as exc:
            return self._failure(exc)
        return self._result(value)

    def _result(self, value: Any) -> str | ToolOutput:
        if isinstance(value, (str, ToolOutput)):
            return value
        if value is None:
            return "null"
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self._bytes(bytes(value))
        try:
            return json.dumps(to_jsonable(value), ensure_ascii=False)
        except (TypeError, ValueError, RecursionError) as exc:  # a structure that contains itself
            return self._failure(exc)

    def _bytes(self, data: bytes) -> str | ToolOutput:
        media = _image_type(data)
        if media is not None:
            return ToolOutput(f"[{media} image, {len(data)} bytes]", image_data=data, image_media_type=media)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolOutput(
                f"{self.name} returned {len(data)} bytes of binary data that is neither text nor an image.",
                is_error=True,
            )

    def _failure(self, exc: BaseException) -> ToolOutput:
        import traceback

        kind = type(exc)
        detail = {
            "type": f"{kind.__module__}.{kind.__qualname__}",
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        }
        if isinstance(exc, ToolError):
            content = str(exc) or f"{self.name} failed."
        elif self.show_errors:
            content = f"{self.name} failed with {kind.__name__}: {describe_exception(exc)}"
        else:
            content = f"{self.name} failed with {kind.__name__}."
        return ToolOutput(content, is_error=True, metadata={"error": detail})


class _Refusal(Exception):
    """The call cannot be made; the message is the error result the model reads."""


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | str | None = None,
    blocking: bool | None = None,
    show_errors: bool = True,
    output_limit: int | None = None,
    truncation_mode: str | None = None,
    line_limit: int | None = None,
    tags: frozenset[str] | set[str] | tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | str | None = None,
    blocking: bool | None = None,
    show_errors: bool = True,
    output_limit: int | None = None,
    truncation_mode: str | None = None,
    line_limit: int | None = None,
    tags: frozenset[str] | set[str] | tuple[str, ...] = (),
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make ``fn`` a :class:`FunctionTool` (``@tool`` or ``@tool(name=..., ...)``).

    ``name`` / ``description`` replace the function's name and docstring prose. ``effect``
    declares what the tool changes (:class:`ToolEffect`; undeclared is treated as "may change
    anything"). ``blocking`` runs a sync function in a worker thread (the default for sync
    functions; async functions run on the event loop and refuse ``blocking=True``).
    ``show_errors=False`` tells the model only an exception's type, not its message.
    ``output_limit`` / ``truncation_mode`` / ``line_limit`` / ``tags`` are the
    :class:`RegisteredTool` options of the same names. Raises :class:`ToolDefinitionError`
    (a ``TypeError``) when the function cannot be described faithfully.
    """
    # Names a local class the annotations mention resolve in the caller's scope (a tool defined
    # inside a function, with `from __future__ import annotations`).
    caller = sys._getframe(1)
    localns = caller.f_locals if caller.f_locals is not caller.f_globals else None

    def build(function: Callable[..., Any]) -> FunctionTool:
        return _build(
            function,
            localns=localns,
            name=name,
            description=description,
            effect=effect,
            blocking=blocking,
            show_errors=show_errors,
            output_limit=output_limit,
            truncation_mode=truncation_mode,
            line_limit=line_limit,
            tags=frozenset(tags),
        )

    return build(fn) if fn is not None else build


def _build(
    fn: Callable[..., Any],
    *,
    localns: Mapping[str, Any] | None,
    name: str | None,
    description: str | None,
    blocking: bool | None,
    **options: Any,
) -> FunctionTool:
    owner = getattr(fn, "__qualname__", None) or repr(fn)
    if isinstance(fn, RegisteredTool):
        raise ToolDefinitionError(f"@ra.tool {owner}: it is a tool already")
    if inspect.isclass(fn) or not callable(fn):
        raise ToolDefinitionError(f"@ra.tool takes a function, got {fn!r}")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ToolDefinitionError(f"@ra.tool {owner}: generators are not supported; return a list or a string")
    call_method = vars(type(fn)).get("__call__")  # an object whose __call__ is async
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call_method)
    if is_async and blocking:
        raise ToolDefinitionError(
            f"@ra.tool {owner}: blocking=True is for sync functions; an async one runs on the loop"
        )
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    try:
        ToolDefinition(tool_name, "", {"type": "object"})  # ra's rule for names (what model APIs accept)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"@ra.tool {owner}: the tool name is not usable ({exc}); pass name=...") from None
    definition, params = _definition(fn, owner, tool_name, description, localns)
    tool = FunctionTool(
        definition,
        _placeholder,
        blocking=(not is_async) if blocking is None else blocking,
        fn=fn,
        params=params,
        is_async=is_async,
        show_errors=options.pop("show_errors"),
        **options,
    )
    try:
        functools.update_wrapper(tool, fn)  # type: ignore[arg-type]
    except AttributeError:  # a callable without __name__/__doc__: nothing to copy
        pass
    tool.validator  # noqa: B018 - a schema jsonschema rejects is a decoration error, not a registration one
    return tool


def _placeholder(arguments: dict[str, Any], ctx: ToolContext) -> Any:  # replaced at once by _build
    raise AssertionError("unreachable")


def _definition(
    fn: Callable[..., Any], owner: str, tool_name: str, description: str | None, localns: Mapping[str, Any] | None
) -> tuple[ToolDefinition, tuple[_Param, ...]]:
    """The tool's definition and how each parameter is filled."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"@ra.tool {owner}: cannot read its signature ({exc})") from None
    try:
        hints = typing.get_type_hints(fn, localns=dict(localns) if localns else None, include_extras=True)
    except Exception as exc:  # NameError: a name imported only under TYPE_CHECKING, ...
        raise ToolDefinitionError(
            f"@ra.tool {owner}: cannot resolve its annotations ({type(exc).__name__}: {exc}); "
            "the types a tool names must be importable at run time, not only under TYPE_CHECKING"
        ) from None
    doc = parse_docstring(inspect.getdoc(fn))
    builder = SchemaBuilder(owner, localns)
    params: list[_Param] = []
    fields: list[Field] = []
    for index, p in enumerate(signature.parameters.values()):
        where = f"parameter '{p.name}'"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise builder.fail(
                f"{star}{p.name}", "a JSON object of arguments cannot fill it; take a list or dict[str, T] parameter"
            )
        tp = hints.get(p.name, inspect.Parameter.empty)
        if tp is inspect.Parameter.empty:
            hint = (
                " (a method? make the tool from the bound method: ra.tool(obj.method))"
                if index == 0
                and p.name
                in (
                    "self",
                    "cls",
                )
                else ""
            )
            raise builder.fail(where, f"has no type annotation; annotate it so the model knows what to send{hint}")
        inject = _injection(tp)
        if inject is not None:
            kind, inject_type, optional = inject
            params.append(_Param(p.name, p.kind, None, kind, inject_type, optional, p.default))
            continue
        node = builder.read(tp, where)
        has_default = p.default is not inspect.Parameter.empty
        if has_default and p.default is None and not node.accepts(None):
            node = nullable(node)  # `x: str = None`: null is how the model says "the default"
        text = "" if has_description(node) else doc.params.get(p.name, "")
        f = Field(p.name, node, not has_default, p.default, has_default, text)
        fields.append(f)
        params.append(_Param(p.name, p.kind, f, default=p.default))
    text = doc.description if description is None else description
    return ToolDefinition(tool_name, text, parameters_schema(fields)), tuple(params)


def _injection(tp: Any) -> tuple[str, Any, bool] | None:
    """``(kind, class, optional)`` when ``tp`` asks for something ra injects (``X | None`` too)."""
    optional = False
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) != 1 or len(members) == len(typing.get_args(tp)):
            return None
        optional, tp = True, members[0]
    kind = injected_kind(tp)
    return None if kind is None else (kind, tp, optional)


def _image_type(data: bytes) -> str | None:
    for magic, media in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None

"""The high-level API's tool runner: one step's calls - lookup, argument checks, repair, the call.

Failures never escape: an unknown tool, malformed or schema-invalid arguments, or a handler that
raises each become an ``is_error`` result the model can react to. Schemas are compiled and
problems described by :mod:`ra.llm.schema`, as the agent's tool registry does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from typing import Any

from .abort import AbortSignal
from .errors import InvalidToolCallError
from .results import RepairToolCall
from .schema import SchemaProblem, compact_error_lines, compile_schema, describe_exception
from .types import Message, Response, ToolCall, ToolDefinition, ToolResult

__all__ = ["ToolRunner"]


_INJECTABLE = ("messages", "abort_signal", "tool_call_id")
_KW_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_POS_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _is_async_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        try:
            return json.loads(json.dumps(value, default=str))
        except (TypeError, ValueError):
            return str(value)


def _result_from_value(call_id: str, value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return dataclasses.replace(value, tool_call_id=call_id)
    if isinstance(value, str):
        return ToolResult(call_id, value)
    if isinstance(value, (dict, list)):
        return ToolResult(call_id, _jsonable(value))
    if isinstance(value, tuple):
        return ToolResult(call_id, _jsonable(list(value)))
    try:
        return ToolResult(call_id, json.dumps(value))
    except (TypeError, ValueError):
        return ToolResult(call_id, str(value))


class ToolRunner:
    """Runs one step's tool calls: lookup, argument checks, optional repair, handler call."""

    __slots__ = ("_validators", "repair", "tools", "validate")

    def __init__(self, tools: dict[str, ToolDefinition], validate: bool, repair: RepairToolCall | None) -> None:
        self.tools = tools
        self.validate = validate
        self.repair = repair
        self._validators: dict[str, Any] = {}

    @property
    def active(self) -> bool:
        return any(getattr(t, "execute", None) is not None for t in self.tools.values())

    def should_execute(self, response: Response) -> bool:
        calls = response.tool_calls
        if not calls or response.finish_reason.reason != "tool_calls" or not self.active:
            return False
        for call in calls:
            tool = self.tools.get(call.name)
            if tool is not None and getattr(tool, "execute", None) is None:
                return False  # a passive tool: the caller answers this turn
        return True

    async def run_all(self, calls: list[ToolCall], messages: list[Message], signal: AbortSignal) -> list[ToolResult]:
        if len(calls) == 1:
            return [await self.run_one(calls[0], messages, signal)]
        return list(await asyncio.gather(*(self.run_one(c, messages, signal) for c in calls)))

    async def run_one(self, call: ToolCall, messages: list[Message], signal: AbortSignal) -> ToolResult:
        tool = self.tools.get(call.name)
        handler = getattr(tool, "execute", None)
        if tool is None or handler is None:
            known = ", ".join(sorted(n for n, t in self.tools.items() if getattr(t, "execute", None))) or "none"
            return ToolResult(call.id, f"Unknown tool '{call.name}'. Available tools: {known}.", is_error=True)
        try:
            args, kwargs = await self._checked_arguments(tool, call, messages, signal)
        except InvalidToolCallError as exc:
            return ToolResult(call.id, exc.message, is_error=True)
        try:
            if _is_async_callable(handler):
                value = await handler(*args, **kwargs)
            else:
                value = await asyncio.to_thread(handler, *args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return ToolResult(call.id, f"Tool '{call.name}' failed: {_named(exc)}", is_error=True)
        return _result_from_value(call.id, value)

    async def _checked_arguments(
        self, tool: ToolDefinition, call: ToolCall, messages: list[Message], signal: AbortSignal
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        try:
            return self._bind(tool, call, messages, signal)
        except InvalidToolCallError as first:
            if self.repair is None:
                raise
            try:
                repaired = self.repair(call, first, tool)
                if inspect.isawaitable(repaired):
                    repaired = await repaired
            except Exception as exc:
                raise InvalidToolCallError(f"{first.message} (repair failed: {_named(exc)})", cause=exc) from exc
            if repaired is None:
                raise
            if not isinstance(repaired, ToolCall):
                raise InvalidToolCallError(
                    f"{first.message} (repair_tool_call returned {type(repaired).__name__}, not a ToolCall)"
                ) from None
            fixed = dataclasses.replace(repaired, id=call.id, name=call.name)
            return self._bind(tool, fixed, messages, signal)

    def _bind(
        self, tool: ToolDefinition, call: ToolCall, messages: list[Message], signal: AbortSignal
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Parse check, schema check and the handler's calling convention, as one validation."""
        prefix = f"Invalid arguments for tool '{call.name}'"
        if call.arguments_error is not None:
            raise InvalidToolCallError(f"{prefix}: {call.arguments_error}")
        arguments = call.arguments
        if self.validate:
            problem = self._schema_errors(tool, arguments)
            if problem:
                raise InvalidToolCallError(f"{prefix}: {problem}")
        handler = getattr(tool, "execute", None)
        assert handler is not None
        try:
            signature = inspect.signature(handler)
        except (TypeError, ValueError):
            return (), dict(arguments)  # builtins and the like: keyword arguments, nothing injected
        params = signature.parameters
        properties = tool.parameters.get("properties") or {}
        context = {"messages": messages, "abort_signal": signal, "tool_call_id": call.id}
        injected = {
            name: context[name]
            for name in _INJECTABLE
            if name in params and name not in properties and params[name].kind in _KW_KINDS
        }
        rest = [
            p
            for p in params.values()
            if p.name not in injected
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
        if (
            not var_kw
            and len(rest) == 1
            and rest[0].kind in _POS_KINDS
            and rest[0].default is inspect.Parameter.empty
            and rest[0].name not in properties
        ):
            args: tuple[Any, ...] = (dict(arguments),)
            kwargs = injected
        else:
            args, kwargs = (), {**arguments, **injected}
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidToolCallError(f"{prefix}: {exc}") from None
        return args, kwargs

    def _schema_errors(self, tool: ToolDefinition, arguments: dict[str, Any]) -> str | None:
        validator = self._validators.get(tool.name)
        if validator is None:
            try:
                validator = compile_schema(tool.parameters, f"tool '{tool.name}'")
            except SchemaProblem as exc:
                validator = exc
            self._validators[tool.name] = validator
        if isinstance(validator, SchemaProblem):
            return str(validator)
        errors = list(validator.iter_errors(arguments))
        if not errors:
            return None
        return "; ".join(compact_error_lines(errors))


def _named(exc: BaseException) -> str:
    """``Type: message`` (the handler's failure as the model reads it)."""
    text = describe_exception(exc)
    return text if text == type(exc).__name__ else f"{type(exc).__name__}: {text}"

"""The registered hooks: matching a hook to an event, calling it with a bound, combining results.

Hooks of one event run in registration order; the first ``deny`` (or ``stop``) ends the chain and
the stricter decision stands (see :mod:`ra.agent.hooks` for what each result does).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..aio import maybe_await
from ..events import HookRan, WarningEvent
from .types import HookCallable, HookEvent, HookInput, HookResult, PostToolUseInput, _ToolInput

if TYPE_CHECKING:
    from ..state import RunState

__all__ = ["Hook", "HookFailed", "Hooks"]


@dataclass(frozen=True, slots=True)
class Hook:
    """One registered hook: the callable, its matcher and its timeout in seconds."""

    event: HookEvent
    callback: HookCallable
    matcher: str | None = None
    timeout: float = 60.0
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def matches(self, subject: tuple[str, ...]) -> bool:
        if self._pattern is None or not subject:
            return True
        return any(self._pattern.fullmatch(s) is not None for s in subject)

    @property
    def name(self) -> str:
        return getattr(self.callback, "__name__", None) or type(self.callback).__name__


class Hooks:
    """The registered hooks, by event, in registration order."""

    __slots__ = ("_by_event", "_matching")

    def __init__(self) -> None:
        self._by_event: dict[HookEvent, list[Hook]] = {}
        #: (event, subject) -> the hooks whose matcher accepts it: matching is paid once per tool.
        self._matching: dict[tuple[HookEvent, tuple[str, ...]], list[Hook]] = {}

    def on(
        self,
        event: HookEvent | str,
        callback: HookCallable | None = None,
        *,
        matcher: str | None = None,
        timeout: float = 60.0,
    ) -> Any:
        """Register ``callback`` for ``event``; without ``callback``, a decorator."""
        kind = HookEvent(event)
        if timeout <= 0:
            raise ValueError(f"hook timeout must be > 0 seconds, got {timeout}")
        pattern = None
        if matcher not in (None, "", "*"):
            try:
                pattern = re.compile(matcher)  # type: ignore[arg-type]
            except re.error as exc:
                raise ValueError(f"hook matcher {matcher!r} is not a valid regular expression: {exc}") from None

        def register(fn: HookCallable) -> HookCallable:
            if not callable(fn):
                raise TypeError(f"a hook must be callable, got {type(fn).__name__}")
            self._by_event.setdefault(kind, []).append(Hook(kind, fn, matcher, float(timeout), pattern))
            self._matching.clear()
            return fn

        return register if callback is None else register(callback)

    def for_event(self, event: HookEvent) -> list[Hook]:
        return self._by_event.get(event, [])

    def matching(self, event: HookEvent, subject: tuple[str, ...]) -> list[Hook]:
        """The hooks of ``event`` whose matcher accepts ``subject``, in order (cached)."""
        key = (event, subject)
        found = self._matching.get(key)
        if found is None:
            found = self._matching[key] = [h for h in self._by_event.get(event, ()) if h.matches(subject)]
        return found

    def __bool__(self) -> bool:
        return any(self._by_event.values())

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_event.values())

    async def run(self, run: RunState, data: HookInput) -> HookResult | None:
        """Run the hooks of ``data.event`` that match, in order; combine their results.

        The first ``deny`` (or ``stop``) ends the chain. ``updated_input`` / ``updated_output``
        pass on to the next hook; ``additional_context`` strings are joined. A hook that fails
        raises :class:`HookFailed` for PreToolUse (the caller denies) and is reported as a
        WARNING otherwise.
        """
        hooks = self.matching(data.event, data.matcher_subject)
        if not hooks:
            return None
        combined: HookResult | None = None
        for hook in hooks:
            started = time.perf_counter()
            try:
                result = await _call(hook, data)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                message = _failure(hook, exc)
                run.emit(HookRan(data.event.value, hook.name, None, None, None, _ms(started), message))
                if data.event is HookEvent.PRE_TOOL_USE:
                    raise HookFailed(message) from exc
                run.emit(WarningEvent("hook_failed", message, {"hook": hook.name, "event": data.event.value}))
                continue
            if result is None:
                continue
            shown = None if result.suppress_output else result.output
            if result.error is not None:
                # A non-blocking error (Claude Code's exit status other than 0 and 2): the user is
                # told, and the hook has no say.
                message = f"hook {hook.name} ({data.event.value}) {result.error}"
                run.emit(HookRan(data.event.value, hook.name, None, None, None, _ms(started), message, shown))
                run.emit(WarningEvent("hook_error", message, {"hook": hook.name, "event": data.event.value}))
                continue
            if result.problems:
                effect = "the call is denied" if data.event is HookEvent.PRE_TOOL_USE else "those fields are ignored"
                run.emit(
                    WarningEvent(
                        "hook_unreadable",
                        f"hook {hook.name} ({data.event.value}) answered what ra cannot read: "
                        f"{'; '.join(result.problems)}; {effect}",
                        {"hook": hook.name, "event": data.event.value, "problems": list(result.problems)},
                    )
                )
            run.emit(
                HookRan(
                    data.event.value,
                    hook.name,
                    result.decision,
                    result.reason if result.reason is not None else result.stop_reason,
                    result.system_message,
                    _ms(started),
                    None,
                    shown,
                )
            )
            combined = result if combined is None else _merge(combined, result)
            if result.decision == "deny" or result.stop:
                break
            if result.updated_input is not None and isinstance(data, _ToolInput):
                data = replace(data, tool_input=result.updated_input)
            if result.updated_output is not None and isinstance(data, PostToolUseInput):
                text = result.updated_output
                data = replace(data, output=text, tool_response=_rewritten(data, text))
        return combined


def _rewritten(data: PostToolUseInput, output: str) -> str | dict[str, Any]:
    """The next hook's ``tool_response`` once a hook replaced the output: a shell tool's object
    keeps its shape, with the new text as its stdout."""
    if isinstance(data.tool_response, Mapping):
        return {**data.tool_response, "stdout": output, "stderr": ""}
    return output


class HookFailed(Exception):
    """A PreToolUse hook raised or timed out: the call is denied (fail closed)."""


async def _call(hook: Hook, data: HookInput) -> HookResult | None:
    async with asyncio.timeout(hook.timeout):
        value = await maybe_await(hook.callback(data))
    if value is None or isinstance(value, HookResult):
        return value
    if isinstance(value, Mapping):
        return HookResult.from_json(data.event, value)
    raise TypeError(f"a hook returns None, a HookResult or a dict, got {type(value).__name__}")


def _failure(hook: Hook, exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"hook {hook.name} ({hook.event.value}) {str(exc) or f'timed out after {hook.timeout:g}s'}"
    return f"hook {hook.name} ({hook.event.value}) failed: {type(exc).__name__}: {exc}"


#: When hooks disagree, the stricter decision stands: a later "allow" never undoes an "ask".
_STRICTNESS = {None: 0, "allow": 1, "ask": 2, "deny": 3}


def _merge(a: HookResult, b: HookResult) -> HookResult:
    context = "\n\n".join(c for c in (a.additional_context, b.additional_context) if c) or None
    stricter = b if _STRICTNESS[b.decision] >= _STRICTNESS[a.decision] else a
    return HookResult(
        decision=stricter.decision,
        reason=stricter.reason if stricter.decision else (b.reason or a.reason),
        updated_input=b.updated_input if b.updated_input is not None else a.updated_input,
        updated_output=b.updated_output if b.updated_output is not None else a.updated_output,
        additional_context=context,
        stop=a.stop or b.stop,
        stop_reason=b.stop_reason or a.stop_reason,
        system_message="\n".join(m for m in (a.system_message, b.system_message) if m) or None,
    )


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)

"""The high-level API (unified-llm-spec layer 4): ``generate``, ``stream``, ``generate_object``,
``stream_object``, with the tool loop, retries, timeouts and cancellation.

What this layer adds over ``Client.complete()`` / ``Client.stream()``:

* Prompt standardisation: ``prompt`` XOR ``messages``; ``system`` is prepended.
* The tool loop (spec 5.6): active tools (those with ``execute``) are run when the model asks for
  them and the loop goes on for at most ``max_tool_rounds`` rounds (so at most
  ``max_tool_rounds + 1`` model calls) or until ``stop_when(steps)`` says stop. A step's calls run
  concurrently and their results go back together, in call order. Failures never escape the loop:
  an unknown tool, malformed or schema-invalid arguments, or a handler that raises each become an
  ``is_error`` result the model can react to. When the model calls a *passive* tool (defined
  without ``execute``) the loop stops and hands the calls back, because the caller must answer all
  of them in one continuation.
* Retries per model call (never across the loop; a stream only until its first event).
* ``timeout``: a number is the total budget; :class:`TimeoutConfig` adds a per-call budget.
* ``abort_signal``: aborting cancels the work in flight - which closes the HTTP connection - and
  raises :class:`~ra.llm.errors.AbortError`. It may be triggered from another thread.

Tool handlers get their arguments as keyword arguments, or as one dict when their only parameter
is a required parameter that is not a schema property. They may also declare ``messages`` (the conversation so far, the
assistant turn with the calls included), ``abort_signal`` (fires when the operation is aborted or
fails, so long-running handlers can stop) and ``tool_call_id``; these are injected by name unless
the tool's schema has a property of that name. Sync handlers run in a worker thread, so a slow one
does not stall the event loop (or the other calls of its step).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from .abort import AbortController, AbortScope, AbortSignal, Deadline, TimeoutConfig
from .accumulator import StreamAccumulator
from .client import Client, get_default_client
from .errors import (
    ConfigurationError,
    NoObjectGeneratedError,
    SDKError,
)
from .partial_json import NOTHING, PartialJSONError, PartialJSONParser, parse_json_output
from .results import GenerateResult, RepairToolCall, StepResult, StopCondition, has_tool_call, step_count_is
from .retrying import RetryPolicy, retry, retry_stream
from .schema import SchemaProblem, compact_error_lines, compile_schema
from .tool_runner import ToolRunner
from .types import (
    Message,
    Request,
    Response,
    ResponseFormat,
    StreamEvent,
    StreamEventType,
    Tool,
    ToolChoice,
    ToolDefinition,
    ToolResult,
)

__all__ = [
    "AbortController",
    "AbortSignal",
    "GenerateResult",
    "StepResult",
    "StopCondition",
    "StreamObjectResult",
    "StreamResult",
    "TimeoutConfig",
    "generate",
    "generate_object",
    "generate_object_sync",
    "generate_sync",
    "has_tool_call",
    "step_count_is",
    "stream",
    "stream_object",
]

P = ParamSpec("P")
T = TypeVar("T")
_T = StreamEventType


# ==================================================================================================
# Shared set-up of generate() and stream()
# ==================================================================================================


@dataclass(slots=True)
class _Plan:
    client: Client
    base: Request
    conversation: list[Message]
    runner: ToolRunner
    max_tool_rounds: int
    stop_when: StopCondition | None
    policy: RetryPolicy
    timeout: TimeoutConfig
    signal: AbortSignal | None
    #: What tool handlers see as ``abort_signal``: fires on abort and on any failure of the run.
    tool_controller: AbortController = field(default_factory=AbortController)
    _unlink: Callable[[], None] | None = None

    def request(self) -> Request:
        return dataclasses.replace(self.base, messages=list(self.conversation))

    def link(self) -> None:
        if self.signal is not None and self._unlink is None:
            self._unlink = self.signal.add_listener(
                lambda: self.tool_controller.abort(self.signal.reason if self.signal else None)
            )

    def finish(self, failed: bool) -> None:
        if self._unlink is not None:
            self._unlink()
            self._unlink = None
        if failed:
            self.tool_controller.abort("the operation failed")

    async def complete(self, request: Request) -> Response:
        per_step = self.timeout.per_step

        async def attempt() -> Response:
            when = asyncio.get_running_loop().time() + per_step if per_step else None
            async with Deadline(when, per_step, "per-step"):
                return await self.client.complete(request)

        return await retry(attempt, self.policy)

    async def stop(self, steps: list[StepResult]) -> bool:
        if self.stop_when is None:
            return False
        verdict = self.stop_when(steps)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)

    async def after_response(self, response: Response, round_num: int) -> tuple[StepResult, bool]:
        """Record the step, run its tools if the loop goes on; return (step, continue?)."""
        execute = round_num < self.max_tool_rounds and self.runner.should_execute(response)
        self.conversation.append(response.message)
        results: list[ToolResult] = []
        if execute:
            snapshot = list(self.conversation)
            results = await self.runner.run_all(response.tool_calls, snapshot, self.tool_controller.signal)
            names = {c.id: c.name for c in response.tool_calls}
            self.conversation.extend(
                Message.tool_result(
                    r.tool_call_id,
                    r.content,
                    r.is_error,
                    name=names.get(r.tool_call_id),
                    image_data=r.image_data,
                    image_media_type=r.image_media_type,
                )
                for r in results
            )
        return StepResult.of(response, results), execute


def _build_messages(prompt: str | None, messages: Sequence[Message] | None, system: str | None) -> list[Message]:
    if prompt is not None and messages is not None:
        raise ValueError("pass either prompt or messages, not both")
    if prompt is None and messages is None:
        raise ValueError("pass a prompt or a list of messages")
    out: list[Message] = [Message.system(system)] if system else []
    if prompt is not None:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string, got {type(prompt).__name__} (use messages= for a conversation)")
        out.append(Message.user(prompt))
    else:
        assert messages is not None
        for m in messages:
            if not isinstance(m, Message):
                raise TypeError(f"messages must be Message objects, got {type(m).__name__}")
        out.extend(messages)
    return out


def _coerce_tool_choice(choice: ToolChoice | str | None) -> ToolChoice | None:
    if choice is None or isinstance(choice, ToolChoice):
        return choice
    if choice in ("auto", "none", "required"):
        return ToolChoice(choice)
    return ToolChoice.named(choice)


def _resolve_model(model: str | None, provider: str | None, client: Client) -> str:
    if model:
        return model
    name = provider or client.default_provider
    if name is None:
        raise ConfigurationError("no model and no provider: pass model=, or configure a default provider")
    from .catalog import get_latest_model

    info = get_latest_model(name)
    if info is None:
        raise ConfigurationError(f"no model given and the catalog knows no model for provider {name!r}; pass model=")
    return info.id


def _plan(
    *,
    model: str | None,
    prompt: str | None,
    messages: Sequence[Message] | None,
    system: str | None,
    tools: Sequence[ToolDefinition] | None,
    tool_choice: ToolChoice | str | None,
    max_tool_rounds: int,
    stop_when: StopCondition | None,
    response_format: ResponseFormat | None,
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    stop_sequences: list[str] | None,
    reasoning_effort: str | None,
    provider: str | None,
    provider_options: dict[str, Any] | None,
    metadata: dict[str, str] | None,
    max_retries: int,
    retry_policy: RetryPolicy | None,
    timeout: float | TimeoutConfig | None,
    abort_signal: AbortSignal | None,
    client: Client | None,
    validate_tool_arguments: bool,
    repair_tool_call: RepairToolCall | None,
) -> _Plan:
    if max_tool_rounds < 0:
        raise ValueError(f"max_tool_rounds must be >= 0, got {max_tool_rounds}")
    conversation = _build_messages(prompt, messages, system)
    by_name: dict[str, ToolDefinition] = {}
    for tool in tools or ():
        if not isinstance(tool, ToolDefinition):
            raise TypeError(f"tools must be Tool or ToolDefinition objects, got {type(tool).__name__}")
        if tool.name in by_name:
            raise ValueError(f"two tools are named {tool.name!r}")
        by_name[tool.name] = tool
    client = client or get_default_client()
    definitions = [t.definition() if isinstance(t, Tool) else t for t in by_name.values()]
    base = Request(
        model=_resolve_model(model, provider, client),
        messages=[],
        provider=provider,
        tools=definitions or None,
        tool_choice=_coerce_tool_choice(tool_choice),
        response_format=response_format,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop_sequences=stop_sequences,
        reasoning_effort=reasoning_effort,
        metadata=metadata,
        provider_options=provider_options,
    )
    return _Plan(
        client=client,
        base=base,
        conversation=conversation,
        runner=ToolRunner(by_name, validate_tool_arguments, repair_tool_call),
        max_tool_rounds=max_tool_rounds,
        stop_when=stop_when,
        policy=retry_policy if retry_policy is not None else RetryPolicy(max_retries=max_retries),
        timeout=TimeoutConfig.coerce(timeout),
        signal=abort_signal,
    )


def _total_deadline(plan: _Plan) -> float | None:
    total = plan.timeout.total
    return asyncio.get_running_loop().time() + total if total else None


# ==================================================================================================
# generate()
# ==================================================================================================


async def generate(
    model: str | None = None,
    prompt: str | None = None,
    *,
    messages: Sequence[Message] | None = None,
    system: str | None = None,
    tools: Sequence[ToolDefinition] | None = None,
    tool_choice: ToolChoice | str | None = None,
    max_tool_rounds: int = 1,
    stop_when: StopCondition | None = None,
    response_format: ResponseFormat | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    stop_sequences: list[str] | None = None,
    reasoning_effort: str | None = None,
    provider: str | None = None,
    provider_options: dict[str, Any] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 2,
    retry_policy: RetryPolicy | None = None,
    timeout: float | TimeoutConfig | None = None,
    abort_signal: AbortSignal | None = None,
    client: Client | None = None,
    validate_tool_arguments: bool = True,
    repair_tool_call: RepairToolCall | None = None,
) -> GenerateResult:
    """Generate a response, running active tools in a loop (see the module docstring).

    ``model`` defaults to the catalog's preferred model of the provider. ``retry_policy``, when
    given, replaces the plain ``max_retries`` count. ``repair_tool_call(call, error, tool)`` may
    return a corrected ToolCall for arguments that failed to parse or validate (or None to give
    up, which sends the error to the model).
    """
    plan = _plan(
        model=model,
        prompt=prompt,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        max_tool_rounds=max_tool_rounds,
        stop_when=stop_when,
        response_format=response_format,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop_sequences=stop_sequences,
        reasoning_effort=reasoning_effort,
        provider=provider,
        provider_options=provider_options,
        metadata=metadata,
        max_retries=max_retries,
        retry_policy=retry_policy,
        timeout=timeout,
        abort_signal=abort_signal,
        client=client,
        validate_tool_arguments=validate_tool_arguments,
        repair_tool_call=repair_tool_call,
    )
    return await _run_generate(plan)


async def _run_generate(plan: _Plan) -> GenerateResult:
    plan.link()
    failed = True
    try:
        async with AbortScope(plan.signal), Deadline(_total_deadline(plan), plan.timeout.total, "total"):
            steps: list[StepResult] = []
            for round_num in range(plan.max_tool_rounds + 1):
                response = await plan.complete(plan.request())
                step, go_on = await plan.after_response(response, round_num)
                steps.append(step)
                if not go_on or await plan.stop(steps):
                    break
        failed = False
        return GenerateResult.from_steps(steps, list(plan.conversation))
    finally:
        plan.finish(failed)


# ==================================================================================================
# stream()
# ==================================================================================================


class StreamResult:
    """The events of a streaming generation, across tool-loop steps.

    Iterate it once (``async for event in result``). Every event of every model call comes
    through, FINISH included; between steps - after the tools ran, before the next call - a
    STEP_FINISH event carries that step's response (``raw["step"]`` is its index into
    :attr:`steps`). If the operation fails, an ERROR event carrying the error is yielded and then
    the error is raised. Leaving the loop early? Call :meth:`aclose` (or use ``async with``) to close
    the connection at once.
    """

    def __init__(self, plan: _Plan) -> None:
        self._plan = plan
        self._iterator: AsyncIterator[StreamEvent] | None = None
        self._acc: StreamAccumulator | None = None
        self._final: Response | None = None
        self._error: BaseException | None = None
        self._done = False
        #: The steps finished so far (each with its tool results).
        self.steps: list[StepResult] = []

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        if self._iterator is not None:
            raise RuntimeError("a StreamResult can be iterated only once")
        self._iterator = self._iterate()
        return self._iterator

    async def __aenter__(self) -> StreamResult:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the operation and close its connection (a no-op once it has ended)."""
        if self._iterator is None:
            self._iterator = self._iterate()
        close = getattr(self._iterator, "aclose", None)
        if close is not None:
            await close()
        self._done = True

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """Only the text deltas (iterates this result, so use one or the other)."""

        async def texts() -> AsyncIterator[str]:
            async for event in self:
                if event.type == _T.TEXT_DELTA and event.delta:
                    yield event.delta

        return texts()

    @property
    def partial_response(self) -> Response | None:
        """What the current step has produced so far (the final response once done)."""
        if self._final is not None:
            return self._final
        return self._acc.response() if self._acc is not None else None

    async def response(self) -> Response:
        """The final step's response. Consumes the rest of the stream if it is still running."""
        await self._drain()
        if self._error is not None:
            raise self._error
        if self._final is None:
            raise SDKError("the stream was closed before it finished")
        return self._final

    async def result(self) -> GenerateResult:
        """The whole operation as ``generate()`` would have returned it."""
        await self.response()
        return GenerateResult.from_steps(self.steps, list(self._plan.conversation))

    async def _drain(self) -> None:
        if self._done:
            return
        iterator = self._iterator if self._iterator is not None else self.__aiter__()
        try:
            async for _ in iterator:
                pass
        except Exception:
            if self._error is None:
                raise

    async def _iterate(self) -> AsyncIterator[StreamEvent]:
        plan = self._plan
        producer = self._produce()
        plan.link()
        failed = True
        try:
            deadline = _total_deadline(plan)
            while True:
                try:
                    async with AbortScope(plan.signal), Deadline(deadline, plan.timeout.total, "total"):
                        event = await anext(producer)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    self._error = exc
                    await producer.aclose()
                    yield StreamEvent(_T.ERROR, error=exc)
                    raise
                yield event
            failed = False
        finally:
            self._done = True
            await producer.aclose()
            plan.finish(failed)

    async def _produce(self) -> AsyncIterator[StreamEvent]:
        plan = self._plan
        per_step = plan.timeout.per_step
        loop = asyncio.get_running_loop()
        for round_num in range(plan.max_tool_rounds + 1):
            request = plan.request()
            acc = StreamAccumulator(
                provider=request.provider or plan.client.default_provider or "", model=request.model
            )
            self._acc = acc
            when = loop.time() + per_step if per_step else None
            inner = retry_stream(functools.partial(plan.client.stream, request), plan.policy)
            try:
                while True:
                    try:
                        async with Deadline(when, per_step, "per-step"):
                            event = await anext(inner)
                    except StopAsyncIteration:
                        break
                    acc.process(event)
                    yield event
            finally:
                await inner.aclose()
            response = acc.response()
            step, go_on = await plan.after_response(response, round_num)
            self.steps.append(step)
            if not go_on or await plan.stop(self.steps):
                break
            yield StreamEvent(
                _T.STEP_FINISH,
                finish_reason=response.finish_reason,
                usage=response.usage,
                response=response,
                raw={"step": len(self.steps) - 1},
            )
        self._final = self.steps[-1].response


def stream(
    model: str | None = None,
    prompt: str | None = None,
    *,
    messages: Sequence[Message] | None = None,
    system: str | None = None,
    tools: Sequence[ToolDefinition] | None = None,
    tool_choice: ToolChoice | str | None = None,
    max_tool_rounds: int = 1,
    stop_when: StopCondition | None = None,
    response_format: ResponseFormat | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    stop_sequences: list[str] | None = None,
    reasoning_effort: str | None = None,
    provider: str | None = None,
    provider_options: dict[str, Any] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 2,
    retry_policy: RetryPolicy | None = None,
    timeout: float | TimeoutConfig | None = None,
    abort_signal: AbortSignal | None = None,
    client: Client | None = None,
    validate_tool_arguments: bool = True,
    repair_tool_call: RepairToolCall | None = None,
) -> StreamResult:
    """Like :func:`generate`, but streaming. Arguments are checked now; nothing is sent until
    the result is iterated. Only the opening of each model call is retried."""
    plan = _plan(
        model=model,
        prompt=prompt,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        max_tool_rounds=max_tool_rounds,
        stop_when=stop_when,
        response_format=response_format,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop_sequences=stop_sequences,
        reasoning_effort=reasoning_effort,
        provider=provider,
        provider_options=provider_options,
        metadata=metadata,
        max_retries=max_retries,
        retry_policy=retry_policy,
        timeout=timeout,
        abort_signal=abort_signal,
        client=client,
        validate_tool_arguments=validate_tool_arguments,
        repair_tool_call=repair_tool_call,
    )
    return StreamResult(plan)


# ==================================================================================================
# Structured output
# ==================================================================================================


def _object_format(schema: dict[str, Any] | None, name: str, strict: bool) -> ResponseFormat:
    if schema is None:
        return ResponseFormat("json")
    if not isinstance(schema, dict):
        raise TypeError(f"schema must be a JSON Schema dict, got {type(schema).__name__}")
    return ResponseFormat("json_schema", schema, strict=strict, name=name)


def _parse_object(response: Response, schema: dict[str, Any] | None) -> Any:
    text = response.text
    if not text.strip():
        raise NoObjectGeneratedError(
            f"the model returned no text to parse (finish reason: {response.finish_reason.reason})", text=text
        )
    try:
        value = parse_json_output(text)
    except ValueError as exc:
        raise NoObjectGeneratedError(f"the model's answer is not valid JSON: {exc}", text=text, cause=exc) from exc
    if schema is not None:
        try:
            validator = compile_schema(schema, "the output schema")
        except SchemaProblem as exc:
            raise NoObjectGeneratedError(str(exc), text=text) from None
        errors = list(validator.iter_errors(value))
        if errors:
            details = "; ".join(compact_error_lines(errors))
            raise NoObjectGeneratedError(f"the model's answer does not match the schema: {details}", text=text)
    return value


async def generate_object(
    model: str | None = None,
    prompt: str | None = None,
    *,
    schema: dict[str, Any] | None,
    schema_name: str = "response",
    strict: bool = True,
    **options: Any,
) -> GenerateResult:
    """Generate a JSON value that matches ``schema``; the parsed value is ``result.output``.

    The request asks for ``ResponseFormat("json_schema", schema, strict=strict)``, which each
    adapter maps natively. ``options`` are those of :func:`generate`. Raises
    NoObjectGeneratedError (never retried: the call worked, the answer did not) when the final
    text is not JSON or does not validate. ``schema=None`` asks for any JSON value.
    """
    fmt = _object_format(schema, schema_name, strict)
    result = await generate(model, prompt, response_format=fmt, **options)
    result.output = _parse_object(result.response, schema)
    return result


class _FenceStripper:
    """Drops a leading Markdown code fence line from streamed text (the parser ignores the tail)."""

    __slots__ = ("_deciding", "_head")

    def __init__(self) -> None:
        self._head = ""
        self._deciding = True

    def feed(self, text: str) -> str:
        if not self._deciding:
            return text
        self._head += text
        head = self._head.lstrip()
        if not head:
            return ""
        if head.startswith("```"):
            newline = head.find("\n")
            if newline < 0:
                return ""
            self._deciding = False
            return head[newline + 1 :]
        if "```".startswith(head):
            return ""
        self._deciding = False
        return self._head


class StreamObjectResult:
    """Partial objects as the JSON arrives (``async for partial in result``), then
    :meth:`object` for the complete, validated value. A new partial is yielded only when the
    parsed value changed; each one is a fresh object the consumer may keep."""

    def __init__(self, stream: StreamResult, schema: dict[str, Any] | None) -> None:
        self.stream = stream
        self.schema = schema
        self._iterator: AsyncIterator[Any] | None = None
        self._partial: Any = None
        self._object: Any = NOTHING
        #: Why partial parsing stopped, if the text stopped being a JSON prefix.
        self.parse_error: PartialJSONError | None = None

    def __aiter__(self) -> AsyncIterator[Any]:
        if self._iterator is not None:
            raise RuntimeError("a StreamObjectResult can be iterated only once")
        self._iterator = self._iterate()
        return self._iterator

    async def __aenter__(self) -> StreamObjectResult:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._iterator is not None and hasattr(self._iterator, "aclose"):
            await self._iterator.aclose()
        await self.stream.aclose()

    @property
    def partial_object(self) -> Any:
        """The latest partial object (None before the first one)."""
        return self._partial

    async def _iterate(self) -> AsyncIterator[Any]:
        parser = PartialJSONParser()
        fence = _FenceStripper()
        last: Any = NOTHING
        async for event in self.stream:
            if event.type == _T.TEXT_DELTA and event.delta:
                if self.parse_error is not None:
                    continue
                try:
                    parser.feed(fence.feed(event.delta))
                    value = parser.value()
                except PartialJSONError as exc:
                    self.parse_error = exc
                    continue
                if value is not NOTHING and (last is NOTHING or value != last or type(value) is not type(last)):
                    last = value
                    self._partial = value
                    yield value
            elif event.type == _T.STEP_FINISH:  # a tool step's text is not the object
                parser, fence, last, self.parse_error = PartialJSONParser(), _FenceStripper(), NOTHING, None

    async def object(self) -> Any:
        """The complete object, validated against the schema (consumes the rest of the stream)."""
        if self._object is NOTHING:
            if self._iterator is None:
                async for _ in self:
                    pass
            elif not self.stream._done:
                async for _ in self._iterator:
                    pass
            response = await self.stream.response()
            self._object = _parse_object(response, self.schema)
        return self._object

    async def response(self) -> Response:
        await self.object()
        return await self.stream.response()


def stream_object(
    model: str | None = None,
    prompt: str | None = None,
    *,
    schema: dict[str, Any] | None,
    schema_name: str = "response",
    strict: bool = True,
    **options: Any,
) -> StreamObjectResult:
    """Stream a JSON value that matches ``schema``: iterate for partial objects, then
    ``await result.object()`` for the validated whole. ``options`` are those of :func:`stream`."""
    fmt = _object_format(schema, schema_name, strict)
    return StreamObjectResult(stream(model, prompt, response_format=fmt, **options), schema)


# ==================================================================================================
# Sync wrappers
# ==================================================================================================


async def _release_loop_connections(client: Client | None) -> None:
    """HTTP pools are bound to the loop that opened them; a sync call's loop dies with the call."""
    http = sys.modules.get("ra.llm.http")
    from . import client as client_module

    target = client or client_module._default_client
    if http is None or target is None:
        return
    for adapter in target.providers.values():
        if isinstance(adapter, http.HTTPAdapter):
            await adapter.close()


def _sync(fn: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"{name}_sync() cannot run inside a running event loop; use 'await {name}(...)' there instead"
            )

        async def run() -> T:
            try:
                return await fn(*args, **kwargs)
            finally:
                await _release_loop_connections(kwargs.get("client"))  # type: ignore[arg-type]

        return asyncio.run(run())

    wrapper.__name__ = wrapper.__qualname__ = f"{name}_sync"
    wrapper.__doc__ = f"Blocking form of :func:`{name}` (runs its own event loop).\n\n{fn.__doc__ or ''}"
    return wrapper


generate_sync = _sync(generate)
generate_object_sync = _sync(generate_object)

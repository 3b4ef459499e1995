"""OpenTelemetry spans for a session, with the GenAI semantic conventions (docs/tracing.md).

Off unless asked: a session gets spans only when it is given a :class:`Tracing`
(``Session(..., tracing=Tracing())``); nothing else imports this module, so ``import ra`` and an
untraced session never load ``opentelemetry`` and pay nothing per step.

What a traced session emits, each span a child of the one above it:

    invoke_agent {agent}     one per input (a ``submit()``, and each follow-up it runs); INTERNAL
      chat {model}           one per model call attempt, current while the request is sent; CLIENT
      execute_tool {tool}    one per tool call (parallel calls each their own), current while the
                             tool runs, so a subagent's ``invoke_agent`` nests under the call that
                             started it; INTERNAL

:meth:`Tracing.attach` plugs one session in, at the seams the session already has: a control that
is asked first (the input's span), the run's model client (the chat spans), and the tool
pipeline's sink and execution scope (the tool spans). Message content (prompts, answers, tool
arguments and results) is recorded only with ``capture_content=True``, and then redacted like the
session's records (:func:`ra.llm.redaction.redact`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the message is what matters
    raise ImportError(
        "ra.agent.tracing needs the OpenTelemetry API: pip install 'ra-agent[otel]' (and an SDK, e.g. "
        "opentelemetry-sdk, to send the spans somewhere)"
    ) from exc

from ra.llm.accumulator import StreamAccumulator
from ra.llm.redaction import redact, secret_values
from ra.llm.types import ContentKind, Message, Request, Response, StreamEvent, StreamEventType, ToolCall

from .config import StopReason
from .controls.chain import Control
from .errors import SessionError
from .events import ErrorEvent

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

    from ra.llm.client import Client
    from ra.tools.pipeline import ToolCallOutcome, ToolEventSink

    from .events import SessionEvent
    from .state import RunState

__all__ = ["Tracing"]

_SCOPE = "ra"
_log = logging.getLogger("ra.agent.tracing")

#: ra's provider names -> ``gen_ai.provider.name`` well-known values; others are reported as named.
_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: How much of a tool name the registry does not know is recorded.
_UNKNOWN_NAME_LIMIT = 64


class Tracing:
    """Turn on OpenTelemetry spans for the sessions it is given to.

    ``tracer_provider``: where spans go (None: the global provider, ``opentelemetry.trace``'s,
    which the OpenTelemetry SDK or ``opentelemetry-instrument`` sets up). ``capture_content``:
    also record prompts, answers, system instructions and tool arguments and results on the spans
    (off by default: they hold the user's code and data); secrets are redacted from them as from
    session records. ``agent_name``: the ``gen_ai.agent.name`` of a top-level session (default
    "ra"; a subagent's is its type). One ``Tracing`` may serve many sessions; a subagent's
    session uses its parent's.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        capture_content: bool = False,
        agent_name: str = "ra",
    ) -> None:
        if not isinstance(capture_content, bool):
            raise TypeError("capture_content is True or False")
        if not isinstance(agent_name, str) or not agent_name.strip():
            raise ValueError("agent_name is a non-empty string")
        self.capture_content = capture_content
        self.agent_name = agent_name
        from ra import __version__

        self.tracer: Tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)

    def attach(self, session: Any) -> None:
        """Trace ``session`` (a :class:`~ra.agent.session.Session`) from its next input on. The
        Session calls this when it is built with ``tracing=``; a host may call it on a session built
        without (before ``submit()``). A session is traced by one ``Tracing`` at most: a second
        raises SessionError."""
        if getattr(session, "tracing", None) is not None:
            raise SessionError(f"session {session.id} is already traced")
        session.tracing = self
        run = session._run
        spans = _SessionSpans(self, session.id, run)
        session.controls.add(spans, first=True)  # first: it sees every input, even a refused one
        inner_client = run.client
        traced = _TracedClient(spans, inner_client)
        run.client = lambda: traced  # type: ignore[assignment,return-value]
        pipeline = run.pipeline
        pipeline.sink = _TracedSink(spans, pipeline.sink)
        pipeline.execution_scope = spans.tool_scope
        session.add_listener(spans.on_event, replay=False)


class _SessionSpans(Control):
    """One session's spans: the input's span (a control), and the model and tool spans under it."""

    def __init__(self, tracing: Tracing, session_id: str, run: RunState) -> None:
        self.tracing = tracing
        self.tracer = tracing.tracer
        self.content = tracing.capture_content
        self.session_id = session_id
        self.run = run
        self.agent_name = run.agent_type or tracing.agent_name
        self.input_span: Span | None = None
        self.input_token: Any = None
        self.input_error: str | None = None
        self.input_usage = (0, 0)
        self.tools: dict[str, Span] = {}
        self.cancelled: set[str] = set()
        self.messages = _MessageCache()

    def provider(self, name: str | None = None) -> str:
        profile = self.run.profile
        raw = name or profile.provider or profile.id or "_OTHER"
        return _PROVIDERS.get(raw, raw)

    def parent(self) -> otel_context.Context | None:
        """The context new model and tool spans go under: the input's span, else the current one
        (a ``compact()`` between inputs)."""
        span = self.input_span
        return trace.set_span_in_context(span) if span is not None else None

    # -- invoke_agent: the control points -----------------------------------------------------------
    async def input_start(self, run: RunState, text: str) -> None:
        self._end_input(None, detach=False)  # an input that never ended (cannot happen; never leak a span)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.provider(),
            "gen_ai.agent.name": self.agent_name,
            "gen_ai.conversation.id": self.session_id,
            "gen_ai.request.model": run.model,
        }
        if run.agent_id is not None:
            attributes["gen_ai.agent.id"] = run.agent_id
        # The caller's context is the parent: the host's span, or the tool call that started a subagent.
        span = self.tracer.start_span(f"invoke_agent {self.agent_name}", kind=SpanKind.INTERNAL, attributes=attributes)
        if self.content:
            span.set_attribute("gen_ai.input.messages", _json([_message_json("user", [_text_part(text)])]))
        self.input_span = span
        self.input_error = None
        # The run's tally counts the whole submit (follow-ups included): the input's share is the difference.
        self.input_usage = (run.tally.usage.input_tokens, run.tally.usage.output_tokens)
        # Current for the rest of the input: controls are awaited in the input's own task, so this
        # reaches what runs in it (a host's permission callback, a hook) until input_end detaches it.
        self.input_token = otel_context.attach(trace.set_span_in_context(span))
        return None

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        # Called from the loop's ``finally`` (also on abort): nothing here may await.
        if run.abort.aborted:
            reason = StopReason.ABORTED
        elif run.stop_requested is not None and reason is StopReason.ERROR and self.input_error is None:
            reason = run.stop_requested
        self._end_input(reason)

    def _end_input(self, reason: StopReason | None, *, detach: bool = True) -> None:
        span = self.input_span
        if span is None:
            return
        self.input_span = None
        token, self.input_token = self.input_token, None
        if token is not None and detach:  # only in the task that attached it
            otel_context.detach(token)
        tally = self.run.tally.usage
        before_in, before_out = self.input_usage
        span.set_attribute("gen_ai.usage.input_tokens", tally.input_tokens - before_in)
        span.set_attribute("gen_ai.usage.output_tokens", tally.output_tokens - before_out)
        span.set_attribute("ra.steps", self.run.input_steps)
        if reason is not None:
            span.set_attribute("ra.stop_reason", reason.value)
        if reason is StopReason.ERROR:
            kind = self.input_error or "_OTHER"
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, kind))
        span.end()

    def on_event(self, event: SessionEvent) -> None:
        """The input's error type, from the session's ERROR event (the loop reports each once)."""
        data = event.payload
        if isinstance(data, ErrorEvent) and self.input_span is not None:
            self.input_error = data.error_type

    # -- chat: one model call ------------------------------------------------------------------------------
    def start_chat(self, request: Request, client: Any) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider(request.provider),
            "gen_ai.request.model": request.model,
            "gen_ai.conversation.id": self.session_id,
        }
        settings = {
            "gen_ai.request.max_tokens": request.max_tokens,
            "gen_ai.request.temperature": request.temperature,
            "gen_ai.request.top_p": request.top_p,
        }
        attributes.update({key: value for key, value in settings.items() if value is not None})
        attributes.update(_server(client, request))
        span = self.tracer.start_span(
            f"chat {request.model}", context=self.parent(), kind=SpanKind.CLIENT, attributes=attributes
        )
        if self.content:
            try:
                system, messages = self.messages.encode(request.messages)
            except Exception:  # tracing never fails a model call
                _log.exception("tracing: encoding the request's messages failed")
            else:
                if system:
                    span.set_attribute("gen_ai.system_instructions", system)
                span.set_attribute("gen_ai.input.messages", messages)
        return span

    def end_chat(self, span: Span, response: Response | None, error: BaseException | None) -> None:
        if response is not None:
            usage = response.usage
            attributes: dict[str, Any] = {
                "gen_ai.response.finish_reasons": [response.finish_reason.reason],
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
            }
            if response.id:
                attributes["gen_ai.response.id"] = response.id
            if response.model:
                attributes["gen_ai.response.model"] = response.model
            details = {
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
                "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
            }
            attributes.update({key: value for key, value in details.items() if value is not None})
            span.set_attributes(attributes)
            if self.content:
                try:
                    span.set_attribute("gen_ai.output.messages", _json([_output_message(response)]))
                except Exception:
                    _log.exception("tracing: encoding the response failed")
        if error is not None:
            _fail(span, error)
        span.end()

    # -- execute_tool: one tool call --------------------------------------------------------------------
    def tool_started(self, call: ToolCall) -> None:
        tool = self.run.profile.tool_registry.get(call.name)
        # A name the registry does not know is the model's own text: redacted, cut short, and kept
        # out of the span name (which backends group by).
        name = call.name if tool is not None else redact(call.name)[:_UNKNOWN_NAME_LIMIT]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": self.session_id,
        }
        if tool is not None and tool.definition.description:
            attributes["gen_ai.tool.description"] = tool.definition.description
        span_name = f"execute_tool {call.name}" if tool is not None else "execute_tool"
        span = self.tracer.start_span(span_name, context=self.parent(), kind=SpanKind.INTERNAL, attributes=attributes)
        if self.content:
            arguments = call.arguments if call.arguments_error is None else call.raw_arguments
            span.set_attribute("gen_ai.tool.call.arguments", redact(_json(arguments)))
        self.tools[call.id] = span

    def tool_ended(self, outcome: ToolCallOutcome) -> None:
        call_id = outcome.call.id
        span = self.tools.pop(call_id, None)
        if span is None:
            return
        cancelled = call_id in self.cancelled
        self.cancelled.discard(call_id)
        if self.content:
            span.set_attribute("gen_ai.tool.call.result", redact(outcome.content))
        if cancelled:
            state, kind = "cancelled", "cancelled"
        elif outcome.denied:
            state, kind = "denied", "denied"
        elif outcome.skipped:
            state, kind = "skipped", None
        elif outcome.is_error:
            state, kind = "error", "tool_error"
        else:
            state, kind = "ok", None
        span.set_attribute("ra.tool.outcome", state)
        if kind is not None:
            span.set_attribute("error.type", kind)
            # The error text (a denial's reason, a failing command's output) can quote the
            # arguments or the files: it is content, recorded only when content is.
            why = redact(_first_line(outcome.full_output)) if self.content else kind
            span.set_status(Status(StatusCode.ERROR, why))
        span.end()

    @contextmanager
    def tool_scope(self, call: ToolCall) -> Iterator[None]:
        """The pipeline's execution scope: the call's span is current while the tool runs, so the
        spans of whatever it does (a subagent, an HTTP request) nest under it."""
        span = self.tools.get(call.id)
        if span is None:
            yield
            return
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self.cancelled.add(call.id)
            raise
        finally:
            otel_context.detach(token)


class _TracedClient:
    """The run's model client with a chat span around each call (the span is current while the
    adapter sends the request, so HTTP instrumentation nests under it)."""

    __slots__ = ("_inner", "_spans")

    def __init__(self, spans: _SessionSpans, inner: Callable[[], Client]) -> None:
        self._spans = spans
        self._inner = inner

    async def complete(self, request: Request) -> Response:
        client = self._inner()
        span = self._spans.start_chat(request, client)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            response = await client.complete(request)
        except BaseException as exc:
            otel_context.detach(token)
            self._spans.end_chat(span, None, exc)
            raise
        otel_context.detach(token)
        self._spans.end_chat(span, response, None)
        return response

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        return _TracedStream(self._spans, self._inner(), request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner(), name)


class _TracedStream:
    """A streamed model call with its chat span: current during each step of the stream (where
    the adapter reads the wire), ended with the rebuilt response or the error."""

    __slots__ = ("_acc", "_client", "_error", "_events", "_request", "_span", "_spans")

    def __init__(self, spans: _SessionSpans, client: Client, request: Request) -> None:
        self._spans = spans
        self._client = client
        self._request = request
        self._span: Span | None = None
        self._events: AsyncIterator[StreamEvent] | None = None
        self._acc = StreamAccumulator(provider=request.provider or "", model=request.model)
        self._error: BaseException | None = None

    def __aiter__(self) -> _TracedStream:
        return self

    async def __anext__(self) -> StreamEvent:
        span = self._span
        if span is None:
            span = self._span = self._spans.start_chat(self._request, self._client)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            if self._events is None:
                self._events = self._client.stream(self._request)
            event = await self._events.__anext__()
        except StopAsyncIteration:
            otel_context.detach(token)
            self._finish()
            raise
        except BaseException as exc:
            otel_context.detach(token)
            self._error = exc
            self._finish()
            raise
        otel_context.detach(token)
        if event.type == StreamEventType.ERROR:
            self._error = event.error or RuntimeError("the provider reported an error in the stream")
        else:
            self._acc.process(event)
        return event

    async def aclose(self) -> None:
        events = self._events
        try:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            self._finish()

    def _finish(self) -> None:
        span = self._span
        if span is None or not span.is_recording():
            return
        if self._error is not None:
            self._spans.end_chat(span, None, self._error)
            return
        try:
            response = self._acc.response()
        except Exception as exc:  # the stream ended without a usable response
            self._spans.end_chat(span, None, exc)
            return
        self._spans.end_chat(span, response, None)


class _TracedSink:
    """The pipeline's event sink, starting and ending each call's span around the session's own."""

    __slots__ = ("_inner", "_spans")

    def __init__(self, spans: _SessionSpans, inner: ToolEventSink) -> None:
        self._spans = spans
        self._inner = inner

    def tool_start(self, call: ToolCall) -> None:
        try:
            self._spans.tool_started(call)
        except Exception:  # tracing never breaks a tool call
            _log.exception("tracing: starting the span of tool call %s failed", call.id)
        self._inner.tool_start(call)

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None:
        self._inner.tool_output(call, stream, chunk)

    def tool_end(self, outcome: ToolCallOutcome) -> None:
        self._inner.tool_end(outcome)
        try:
            self._spans.tool_ended(outcome)
        except Exception:
            _log.exception("tracing: ending the span of tool call %s failed", outcome.call.id)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _fail(span: Span, error: BaseException) -> None:
    """Mark ``span`` failed: ``error.type`` is the exception's class (low cardinality), the status
    its message with secrets redacted (provider errors redact their own; this covers the rest)."""
    if isinstance(error, Exception):
        kind = type(error).__name__
        message = redact(_first_line(str(error)))
    else:
        kind, message = "cancelled", "cancelled"
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, message))


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _server(client: Any, request: Request) -> dict[str, Any]:
    """``server.address``/``server.port`` of the adapter that serves ``request``, when known."""
    adapter_for = getattr(client, "adapter_for", None)
    if adapter_for is None:
        return {}
    try:
        base = getattr(adapter_for(request), "base_url", None)
    except Exception:
        return {}
    if not isinstance(base, str) or not base:
        return {}
    parts = urlsplit(base)
    if not parts.hostname:
        return {}
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    return {"server.address": parts.hostname, "server.port": port} if port else {"server.address": parts.hostname}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": redact(text)}


def _message_json(role: str, parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"role": role, "parts": parts, **extra}


def _parts(message: Message) -> list[dict[str, Any]]:
    """A message's parts in the GenAI input/output message shape, secrets redacted."""
    parts: list[dict[str, Any]] = []
    for part in message.content:
        kind = part.kind
        if kind == ContentKind.TEXT and part.text:
            parts.append(_text_part(part.text))
        elif kind == ContentKind.THINKING and part.thinking is not None and part.thinking.text:
            if not part.thinking.redacted:
                parts.append({"type": "reasoning", "content": redact(part.thinking.text)})
        elif kind == ContentKind.TOOL_CALL and part.tool_call is not None:
            call = part.tool_call
            arguments = call.arguments if isinstance(call.arguments, dict) else redact(call.arguments)
            name = redact(call.name)  # the model's text, like the arguments
            parts.append({"type": "tool_call", "id": call.id, "name": name, "arguments": _redacted_json(arguments)})
        elif kind == ContentKind.TOOL_RESULT and part.tool_result is not None:
            result = part.tool_result
            content = result.content if isinstance(result.content, str) else _json(result.content)
            parts.append({"type": "tool_call_response", "id": result.tool_call_id, "response": redact(content)})
        elif kind in (ContentKind.IMAGE, ContentKind.AUDIO, ContentKind.DOCUMENT):
            parts.append({"type": str(kind)})  # the medium only, never its bytes or URL
    return parts


def _redacted_json(value: Any) -> Any:
    """``value`` with secrets redacted in its JSON text, decoded again (stays structured)."""
    text = _json(value)
    cleaned = redact(text)
    if cleaned == text:
        return value
    try:
        return json.loads(cleaned)
    except ValueError:
        return cleaned


class _MessageCache:
    """Each message of the history encoded (and redacted) once, not at every call.

    A request carries the whole history, and the history's messages are the same objects from
    call to call (:class:`~ra.agent.history.History` builds them incrementally), so each call
    encodes only the messages that are new and joins the rest. Entries are kept for the messages
    of the last request only (compaction and pruning drop the others), and all are dropped when
    the set of secrets to redact changes.
    """

    __slots__ = ("_entries", "_secrets")

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Message, str, bool]] = {}
        self._secrets: tuple[str, ...] | None = None

    def encode(self, messages: list[Message]) -> tuple[str, str]:
        """(``gen_ai.system_instructions``, ``gen_ai.input.messages``) as JSON text ("" for no
        system instructions)."""
        secrets = secret_values()
        old = self._entries if secrets is self._secrets else {}
        self._secrets = secrets
        entries: dict[int, tuple[Message, str, bool]] = {}
        system: list[str] = []
        chat: list[str] = []
        for message in messages:
            key = id(message)
            entry = old.get(key)
            if entry is None or entry[0] is not message:
                role = str(message.role)
                if role in ("system", "developer"):
                    entry = (message, _json(_parts(message))[1:-1], True)  # parts, joined below
                else:
                    entry = (message, _json(_message_json(role, _parts(message))), False)
            entries[key] = entry
            if entry[1]:
                (system if entry[2] else chat).append(entry[1])
        self._entries = entries
        return (f"[{', '.join(system)}]" if system else ""), f"[{', '.join(chat)}]"


def _output_message(response: Response) -> dict[str, Any]:
    return _message_json("assistant", _parts(response.message), finish_reason=response.finish_reason.reason)

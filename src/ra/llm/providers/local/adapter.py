"""The local provider's adapter: :class:`LocalLlamaAdapter` and the job its worker thread runs.

Everything that needs the loaded model lives here: turning a request into a job (prompt tokens,
mode, grammars, token budget) under the model's lock, sampling on a worker thread with a stop flag
checked between tokens, and handing the results to the event loop through a queue. The pieces it
composes (loading, prompt rendering, grammars, output scanning, event building) are its sibling
modules; the design as a whole is described in :mod:`ra.llm.providers.local`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import (
    ConfigurationError,
    ContextLengthError,
    InvalidRequestError,
    ProviderError,
    SDKError,
    StreamError,
)
from ...types import (
    TOOL_CHOICE_MODES,
    Message,
    Request,
    Response,
    StreamEvent,
    StreamEventType,
    ToolChoice,
    ToolDefinition,
    Warning,
)
from .events import EventBuilder
from .grammar import (
    answer_grammar,
    calls_grammar,
    example_block,
    format_grammar,
    required_only,
    tool_block,
    trimmed_strings,
    union_grammar,
)
from .loading import (
    INSTALL_HINT,
    MODEL_ENV,
    PROVIDER,
    default_model_path,
    default_threads,
    import_llama_cpp,
    llama_cpp_available,
    open_llama,
)
from .prompt import Prompt, Turn, render_chatml, render_gemma, render_plain, render_template, to_turns
from .scanning import CallScanner, StructuredReply, TextFilter, parse_tool_turn

__all__ = [
    "AUTO_MODES",
    "BASE_MODEL_MAX_TOKENS",
    "CHAT_FORMATS",
    "DEFAULT_CONTEXT",
    "DEFAULT_MAX_TOKENS",
    "TOOL_PROMPTS",
    "LocalLlamaAdapter",
]

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
#: How ``tool_choice="auto"`` is generated (see :mod:`ra.llm.providers.local`).
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


@dataclass(slots=True)
class _Job:
    """The job a worker runs: one call, prepared under the lock by :meth:`LocalLlamaAdapter._prepare`."""

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
    """Runs a GGUF model in this process with llama-cpp-python (provider ``local``); see
    :mod:`ra.llm.providers.local` for the model, prompt, tool-calling and threading design."""

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
        if not llama_cpp_available():
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
        #: A demonstration conversation shown with the tools (see :func:`example_block`).
        self.examples = list(examples or [])
        if self.examples:
            to_turns(self.examples, None)  # refuse non-text content now rather than on every call
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
        return mode in TOOL_CHOICE_MODES

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
            tools = [required_only(t) for t in tools]
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
    ) -> tuple[Prompt, list[str]]:
        llm = self._llm
        structured, compact = self._style(request)
        fmt = request.response_format
        plain_reply = fmt is None or fmt.type == "text"
        structured = structured and choice.mode == "auto" and bool(tools) and plain_reply
        block = tool_block(tools, choice, max_calls, structured=structured, compact=compact) if tools else None
        example = example_block(self.examples, tools, structured) if tools and self.examples else None
        if block and example:
            block = f"{block}\n{example}"
        turns = to_turns(request.messages, block, structured=structured)
        add_bos = bool(llm._model.add_bos_token()) and llm.token_bos() >= 0
        if self._format == "plain":
            prompt = render_plain(turns, add_bos)
        elif self._format == "gemma":
            prompt = render_gemma(turns, add_bos)
        elif self._format == "chatml":
            prompt = render_chatml(turns, add_bos)
        else:
            prompt = self._render_template(turns, add_bos)
        stops = prompt.stops + [s for s in (request.stop_sequences or []) if s]
        return prompt, stops

    def _render_template(self, turns: list[Turn], add_bos: bool) -> Prompt:
        return render_template(self._template, turns, add_bos)

    def _tokenize(self, prompt: Prompt) -> list[int]:
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
        text_grammar = format_grammar(request)
        if not tools:
            mode = "text"
        elif text_grammar:
            mode = "call" if choice.mode != "auto" else "auto_format"
        elif choice.mode == "auto":
            mode = "structured" if self._style(request)[0] else "auto"
        else:
            mode = "call"
        allowed = [t for t in tools if choice.mode != "named" or t.name == choice.tool_name]
        call_grammar = calls_grammar(allowed, max_calls, warnings) if allowed else None
        if call_grammar and self._format == "plain":
            call_grammar = trimmed_strings(call_grammar)
        if mode == "auto_format":
            # One grammar for "a tool turn or an answer in the requested format"; the reply is
            # classified once complete (the two cannot be told apart from the first character).
            text_grammar = union_grammar(call_grammar or "", text_grammar or "")
        elif mode == "structured":
            # One grammar for "a tool turn or {"answer": ...}"; the first key routes the reply.
            call_grammar = union_grammar(call_grammar or "", answer_grammar())
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
        text = TextFilter(job.stops)
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
        structured = StructuredReply(emit, job.stops) if job.mode == "structured" else None
        scanner = structured.calls if structured is not None else CallScanner(emit)
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
        if not hit_limit and parse_tool_turn(reply, job.tool_names):
            scanner = CallScanner(emit)
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
        builder = EventBuilder(self.name, request.model or "", self)
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


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None

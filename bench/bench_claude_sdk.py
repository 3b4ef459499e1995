"""The Claude Agent SDK's ``query()`` over ``ra`` against a one-shot ``ra "task"``, on the same task.

    python bench/bench_claude_sdk.py [--repeat 15] [--tool]

A Chat Completions server on 127.0.0.1 (a thread; every request gets the same streamed answer,
or with ``--tool`` a ``read_file`` call first and the answer second) stands in for the model.
Both sides start a fresh ``ra`` process per run, as a program does:

* ``one-shot``: ``ra --model m "TASK"`` as a subprocess, timed from spawn to exit;
* ``sdk query()``: ``async for message in claude_agent_sdk.query(prompt=TASK, options=...)`` with
  ``cli_path`` the same ``ra``, timed from the call to the end of the iteration (the SDK has
  closed stdin and reaped the process by then).

The goal (issue 20) is ``query()`` within 50 ms of the one-shot run. Reported: the median and the
best of each, and the difference of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = "Say done."


def _sse(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body: dict = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": []}
    if delta is not None:
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _answer(tool: bool) -> bytes:
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
    if tool:
        call = {
            "index": 0,
            "id": "c1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"file_path": "a.txt"}'},
        }
        parts = [_sse({"role": "assistant", "tool_calls": [call]}), _sse({}, "tool_calls"), _sse(None, usage=usage)]
    else:
        parts = [_sse({"role": "assistant", "content": "done"}), _sse({}, "stop"), _sse(None, usage=usage)]
    return b"".join(parts) + b"data: [DONE]\n\n"


class _Model(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    tool = False

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        has_result = any(m.get("role") == "tool" for m in body.get("messages", []))
        data = _answer(self.tool and not has_result)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _ra() -> str:
    found = Path(sys.executable).with_name("ra")
    if found.exists():
        return str(found)
    return shutil.which("ra") or sys.exit("the `ra` command is not installed next to this interpreter")


def _env(base_url: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("RA_")}
    env.update(
        OPENAI_COMPATIBLE_BASE_URL=base_url,
        RA_MODEL="m",
        HOME=home,
        XDG_CONFIG_HOME=f"{home}/.config",
        XDG_STATE_HOME=f"{home}/.state",
        PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    )
    return env


def one_shot(ra: str, env: dict[str, str], cwd: str, mode: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([ra, *mode, TASK], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"ra failed: {done.stderr}")
    return elapsed


async def sdk_query(ra: str, env: dict[str, str], cwd: str, mode: str | None) -> float:
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

    options = ClaudeAgentOptions(cli_path=ra, env=env, cwd=cwd, permission_mode=mode)
    started = time.perf_counter()
    result = None
    async with asyncio.timeout(120):
        async for message in query(prompt=TASK, options=options):
            if isinstance(message, ResultMessage):
                result = message
    elapsed = time.perf_counter() - started
    if result is None or result.is_error:
        sys.exit(f"query() failed: {result}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--tool", action="store_true", help="a read_file call before the answer")
    args = parser.parse_args()
    _Model.tool = args.tool
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    ra = _ra()
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "a.txt").write_text("hello\n")
        env = _env(base_url, home)
        # Both sides read the file without a question: the SDK's default mode asks about nothing
        # that reads, and the one-shot run checks nothing.
        one, sdk = [], []
        one_shot(ra, env, cwd, [])  # warm the file cache
        for _ in range(args.repeat):
            one.append(one_shot(ra, env, cwd, []))
            sdk.append(asyncio.run(sdk_query(ra, env, cwd, None)))
    server.shutdown()
    task = "read_file, then the answer" if args.tool else "one answer"
    print(f"{args.repeat} runs each, {task}; fresh ra process per run")
    for name, values in (("one-shot ra TASK", one), ("sdk query()", sdk)):
        print(f"  {name:18} median {statistics.median(values) * 1000:7.1f} ms   best {min(values) * 1000:7.1f} ms")
    gap = (statistics.median(sdk) - statistics.median(one)) * 1000
    print(f"  query() - one-shot: {gap:+.1f} ms (goal: within 50 ms)")


if __name__ == "__main__":
    main()

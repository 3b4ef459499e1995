"""``ra acp``: time from a prompt to the editor's first ``session/update``, against a local server.

Starts the real ``ra acp`` (the ``agent-client-protocol`` package's client side, as an editor
would), points it at the scripted Chat Completions server on 127.0.0.1 and, for ``--prompts``
prompts in one session, measures from sending ``session/prompt`` to the first update received
(the first streamed text chunk), and to the prompt's response. The model is the replay server, so
what is measured is ra: the JSON-RPC hop, the session, the model request and the first streamed
event on their way back. Goal (issue 20): first update under 100 ms.

Run: ``python bench/bench_acp.py [--prompts 20]``. Nothing is asserted; figures move by ±20%
between runs on a shared 2-core VM.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.acp.support import Editor, running_agent  # noqa: E402
from tests.cli.support import enqueue_text  # noqa: E402
from tests.support.replay import ReplayServer  # noqa: E402

import acp  # noqa: E402


class TimingEditor(Editor):
    def __init__(self) -> None:
        super().__init__()
        self.first: asyncio.Future[float] | None = None

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        if self.first is not None and not self.first.done():
            self.first.set_result(time.perf_counter())
        await super().session_update(session_id, update, **kw)


async def main(prompts: int) -> None:
    server = ReplayServer().start()
    editor = TimingEditor()
    first_ms: list[float] = []
    total_ms: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with running_agent(Path(tmp), server, editor=editor) as agent:
                sid = await agent.new_session()
                for i in range(prompts + 1):
                    enqueue_text(server, f"answer number {i}, in a few streamed pieces")
                    editor.first = asyncio.get_running_loop().create_future()
                    started = time.perf_counter()
                    response = await asyncio.wait_for(
                        agent.conn.prompt(session_id=sid, prompt=[acp.text_block(f"question {i}")]), 30
                    )
                    done = time.perf_counter()
                    first = await asyncio.wait_for(editor.first, 5)
                    assert response.stop_reason == "end_turn"
                    if i == 0:
                        continue  # the first prompt warms up imports and the connection pool
                    first_ms.append((first - started) * 1000)
                    total_ms.append((done - started) * 1000)
    finally:
        server.close()
    print(f"ra acp, {prompts} prompts in one session against the local scripted server")
    for name, values in (("prompt -> first session/update", first_ms), ("prompt -> response", total_ms)):
        values.sort()
        p90 = values[int(len(values) * 0.9) - 1] if len(values) >= 10 else values[-1]
        print(f"  {name:32} median {statistics.median(values):6.1f} ms   p90 {p90:6.1f} ms   max {values[-1]:6.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20)
    asyncio.run(main(parser.parse_args().prompts))

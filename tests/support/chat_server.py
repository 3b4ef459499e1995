"""A scripted Chat Completions server on 127.0.0.1 for many concurrent sessions (asyncio, HTTP/1.1
keep-alive, listen backlog 4096), that counts what it serves.

The model name ``steps-N`` scripts a session of N model calls: while the request holds fewer than
N-1 assistant messages the answer is a call of the request's first tool, then a final text; so a
session that loses or repeats history gets a different answer, as with a real model. Every
request is held ``hold`` seconds before its answer (to make concurrency visible), and the server
records the most requests it had in flight at once (``peak``), the requests it saw and their
order (``seen``: the ``"tag"`` field of each body, when there is one); a body's ``"hold"`` field
overrides ``hold`` for that request. ``"stream": true`` gets SSE:
the role chunk, then (``stall`` > 0) a text chunk and a wait of ``stall`` seconds, then the answer
and ``[DONE]``. Closing the server ends the connections it still serves.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

FINAL = "done"


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The assistant message the script gives for ``request``."""
    model = str(request.get("model", "steps-1"))
    total = int(model.rsplit("-", 1)[-1]) if model.rsplit("-", 1)[-1].isdigit() else 1
    step = sum(1 for m in request.get("messages", ()) if m.get("role") == "assistant") + 1
    tools = request.get("tools") or []
    if step >= total or not tools:
        return {"role": "assistant", "content": FINAL}
    name = tools[0]["function"]["name"]
    call = {"id": f"call_{step}", "type": "function", "function": {"name": name, "arguments": json.dumps({"i": step})}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class ChatServer:
    def __init__(self, *, hold: float = 0.0, stall: float = 0.0) -> None:
        self.hold = hold
        self.stall = stall
        self.in_flight = 0
        self.peak = 0
        self.requests = 0
        self.seen: list[Any] = []
        self.connections = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> ChatServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        async with asyncio.timeout(5):
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length))
                self.requests += 1
                self.seen.append(body.get("tag"))
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                try:
                    hold = body.get("hold", self.hold)
                    if hold:
                        await asyncio.sleep(hold)
                    await self._answer(body, writer)
                finally:
                    self.in_flight -= 1
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # a cancellation comes from __aexit__ only: the task ends quietly
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _answer(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        message = answer(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        head = {"id": "chatcmpl-1", "created": 1700000000, "model": body.get("model", "")}
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        if not body.get("stream"):
            reply = {
                **head,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            payload = json.dumps(reply).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(payload), payload)
            )
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

        async def event(data: str) -> None:
            piece = f"data: {data}\n\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()

        chunk = {**head, "object": "chat.completion.chunk"}
        await event(json.dumps({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
        if self.stall:
            await event(json.dumps({**chunk, "choices": [{"index": 0, "delta": {"content": "thinking "}}]}))
            await asyncio.sleep(self.stall)
        delta: dict[str, Any] = {"content": message["content"]} if message["content"] else {}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
        await event(json.dumps({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
        await event("[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

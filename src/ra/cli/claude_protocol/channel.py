"""The stdio channel of Claude Code's SDK protocol: JSON lines in on stdin, JSON lines out on stdout.

One reader (a thread: stdin may be a pipe, a file or a terminal, and a blocking read there must
not hold the event loop) sorts what arrives:

* ``user`` messages go to :attr:`Channel.inputs`, in order (``None`` marks the end of stdin);
* ``control_request``\\ s from the SDK go to the ``on_request`` handler, each in its own task, and
  are answered with one ``control_response`` (``success`` or ``error``: an unknown subtype, a
  malformed request and a handler that raises all get an ``error``, never a crash);
* ``control_response``\\ s settle the requests ra sent (:meth:`Channel.request`).

Every request ra sends waits a bounded time; past it ra sends ``control_cancel_request`` (the SDK
then stops working on it) and the caller gets :class:`ControlTimeout`. When stdin ends, every
request still waiting fails with :class:`ControlClosed`: nobody is left to answer it.

Lines go out whole, one ``write`` each, from the event loop's thread, so two writers never
interleave inside a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import IO, Any

__all__ = ["Channel", "ControlClosed", "ControlError", "ControlTimeout"]

#: The longest input line read (a user message with images inline can be large).
MAX_LINE = 64 * 1024 * 1024


class ControlError(Exception):
    """The SDK answered a control request with ``subtype: error``."""


class ControlTimeout(ControlError, TimeoutError):
    """The SDK did not answer a control request in time."""


class ControlClosed(ControlError):
    """stdin ended (or the channel closed) before the SDK answered."""


RequestHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]


class Channel:
    """Both directions of the control protocol over one pair of streams."""

    def __init__(
        self,
        stdin: IO[bytes] | None = None,
        stdout: IO[str] | None = None,
        *,
        on_request: RequestHandler | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._stdout = stdout if stdout is not None else sys.stdout
        self.on_request = on_request
        self._notice = notice or (lambda text: None)
        #: User messages as they arrive; ``None`` once stdin has ended.
        self.inputs: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        #: Set when the SDK's ``initialize`` request has been answered.
        self.initialized = asyncio.Event()

    # -- output ---------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line (ignored once stdout is gone)."""
        line = json.dumps(message, ensure_ascii=False, default=str) + "\n"
        try:
            self._stdout.write(line)
            self._stdout.flush()
        except (OSError, ValueError):
            self.closed = True

    async def request(self, subtype: str, payload: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        """Send a control request to the SDK and return its ``response`` object.

        Raises :class:`ControlError` (the SDK answered with an error), :class:`ControlTimeout`
        (no answer within ``timeout`` seconds: the request is cancelled on the SDK's side) or
        :class:`ControlClosed` (stdin ended first)."""
        if self.closed:
            raise ControlClosed(f"{subtype}: the SDK's input has ended; nobody can answer")
        request_id = f"ra_req_{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self.send({"type": "control_request", "request_id": request_id, "request": {"subtype": subtype, **payload}})
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            self.send({"type": "control_cancel_request", "request_id": request_id})
            raise ControlTimeout(f"{subtype}: the SDK did not answer within {timeout:g}s") from None
        finally:
            self._pending.pop(request_id, None)

    # -- input ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start reading stdin (a daemon thread; it ends with stdin)."""
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, name="ra-sdk-stdin", daemon=True).start()

    def _read(self) -> None:
        loop = self._loop
        assert loop is not None
        try:
            while True:
                line = self._stdin.readline(MAX_LINE)
                if not line:
                    break
                with contextlib.suppress(RuntimeError):  # the loop closed under us
                    loop.call_soon_threadsafe(self._line, line)
        except (OSError, ValueError):
            pass
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._ended)

    def _ended(self) -> None:
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ControlClosed("the SDK's input ended before it answered"))
        self.inputs.put_nowait(None)

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            self._notice(f"stdin: a line that is not JSON was ignored: {text[:80]!r}")
            return
        if not isinstance(message, dict):
            self._notice(f"stdin: a line that is not a JSON object was ignored: {text[:80]!r}")
            return
        kind = message.get("type")
        if kind == "user":
            self.inputs.put_nowait(message)
        elif kind == "control_request":
            self._spawn(self._answer(message))
        elif kind == "control_response":
            self._settle(message.get("response"))
        elif kind == "control_cancel_request":
            pass  # ra answers the SDK's requests at once; there is nothing long-running to cancel
        elif kind == "keep_alive":
            pass
        else:
            self._notice(f"stdin: a message of type {kind!r} was ignored")

    def _settle(self, response: Any) -> None:
        if not isinstance(response, dict):
            self._notice("stdin: a control_response without a response object was ignored")
            return
        future = self._pending.get(str(response.get("request_id")))
        if future is None or future.done():
            return  # late (after its timeout) or unknown: nobody waits for it
        if response.get("subtype") == "success":
            body = response.get("response")
            future.set_result(body if isinstance(body, dict) else {})
        else:
            future.set_exception(ControlError(str(response.get("error") or "the SDK answered with an error")))

    async def _answer(self, message: dict[str, Any]) -> None:
        request_id = message.get("request_id")
        request = message.get("request")
        try:
            if not isinstance(request_id, str) or not request_id:
                raise ValueError("a control_request needs a request_id")
            if not isinstance(request, dict) or not isinstance(request.get("subtype"), str):
                raise ValueError("a control_request needs a request object with a subtype")
            if self.on_request is None:
                raise ValueError(f"unsupported control request subtype: {request['subtype']}")
            body = await self.on_request(request["subtype"], request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(request_id, str) or not request_id:
                self._notice(f"stdin: {exc}; ignored")
                return
            self.send(
                {
                    "type": "control_response",
                    "response": {"subtype": "error", "request_id": request_id, "error": str(exc) or type(exc).__name__},
                }
            )
            return
        self.send(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": body or {}},
            }
        )

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Cancel the handlers still running and fail the requests still waiting."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ControlClosed("ra is shutting down"))

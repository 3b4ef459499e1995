"""A test MCP server written with the ``mcp`` package: every kind of result, and every way to fail.

Run as ``python kit.py [options]`` over stdio, or with ``--http`` over streamable HTTP on
127.0.0.1 (it binds a free port itself and prints ``PORT <n>`` on stdout when it listens).

Tools: echo, image, images, resource, structured, fail, crash (exits mid-call), hang (blocks the
whole server), slow (sleeps without blocking), add_tool (adds ``extra`` and sends
tools/list_changed), env, cwd, header, pid, read_only / destructive (annotated), ``dotted.name``,
and ``--tools N`` more (t0000...) served ``--page-size`` to a page.
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server

#: A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def schema(**props: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}, "required": list(props)}


def base_tools() -> list[types.Tool]:
    return [
        types.Tool(name="echo", description="Echo the text back.", input_schema=schema(text="string")),
        types.Tool(name="image", description="One image.", input_schema=OBJ),
        types.Tool(name="images", description="Text and two images.", input_schema=OBJ),
        types.Tool(name="resource", description="Embedded resources and a link.", input_schema=OBJ),
        types.Tool(name="structured", description="Structured content only.", input_schema=OBJ),
        types.Tool(name="fail", description="An error result.", input_schema=OBJ),
        types.Tool(name="crash", description="Exit mid-call.", input_schema=OBJ),
        types.Tool(name="hang", description="Block the whole server.", input_schema=OBJ),
        types.Tool(name="slow", description="Sleep a while.", input_schema=schema(seconds="number")),
        types.Tool(name="add_tool", description="Add a tool.", input_schema=OBJ),
        types.Tool(name="env", description="An environment variable.", input_schema=schema(name="string")),
        types.Tool(name="cwd", description="The working directory.", input_schema=OBJ),
        types.Tool(name="header", description="An HTTP request header.", input_schema=schema(name="string")),
        types.Tool(name="pid", description="The server's process id.", input_schema=OBJ),
        types.Tool(name="progress", description="Reports progress twice.", input_schema=OBJ),
        types.Tool(
            name="read_only",
            description="Reads only.",
            input_schema=OBJ,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="destructive",
            description="Deletes things.",
            input_schema=OBJ,
            annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
        ),
        types.Tool(name="dotted.name", description="A name with a dot.", input_schema=OBJ),
    ]


def text(value: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=value)], is_error=error)


def build(opts: argparse.Namespace) -> Server[Any]:
    tools = base_tools() + [
        types.Tool(name=f"t{i:04d}", description=f"Tool number {i}.", input_schema=OBJ) for i in range(opts.tools)
    ]
    if opts.bad_schema:
        bad = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}
        tools.append(types.Tool(name="bad_schema", description="Its schema is not JSON Schema.", input_schema=bad))

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if not opts.page_size:
            return types.ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + opts.page_size
        return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        if name == "echo":
            return text(str(args.get("text", "")))
        if name == "image":
            return types.CallToolResult(content=[types.ImageContent(data=PNG_B64, mime_type="image/png")])
        if name == "images":
            return types.CallToolResult(
                content=[
                    types.TextContent(text="two pictures"),
                    types.ImageContent(data=PNG_B64, mime_type="image/png"),
                    types.ImageContent(data=base64.b64encode(b"GIF89a-second").decode(), mime_type="image/gif"),
                ]
            )
        if name == "resource":
            return types.CallToolResult(
                content=[
                    types.EmbeddedResource(
                        resource=types.TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="hi")
                    ),
                    types.EmbeddedResource(
                        resource=types.BlobResourceContents(
                            uri="file:///data.bin",
                            mime_type="application/octet-stream",
                            blob=base64.b64encode(b"\x00" * 12).decode(),
                        )
                    ),
                    types.ResourceLink(
                        name="report", uri="https://example.com/r.pdf", mime_type="application/pdf", description="Q3"
                    ),
                ]
            )
        if name == "structured":
            return types.CallToolResult(content=[], structured_content={"temperature": 21.5, "unit": "C"})
        if name == "fail":
            return text("it broke", error=True)
        if name == "crash":
            sys.stderr.write("crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if name == "hang":
            time.sleep(3600)  # blocks the event loop: the server answers nothing, not even a ping
        if name == "slow":
            await anyio.sleep(float(args.get("seconds", 1)))
            return text("done")
        if name == "add_tool":
            if not any(t.name == "extra" for t in tools):
                tools.append(types.Tool(name="extra", description="Added later.", input_schema=OBJ))
            await ctx.session.send_tool_list_changed()
            return text("added")
        if name == "env":
            return text(os.environ.get(str(args.get("name")), "<unset>"))
        if name == "cwd":
            return text(os.getcwd())
        if name == "header":
            request = ctx.request
            value = request.headers.get(str(args.get("name"))) if request is not None else None
            return text(value if value is not None else "<none>")
        if name == "progress":
            meta = ctx.meta or {}
            token = meta.get("progress_token", meta.get("progressToken"))
            if token is not None:
                for step in (1, 2):
                    await ctx.session.send_progress_notification(token, step, 2, f"step {step}", ctx.request_id)
            return text("progressed")
        if name == "pid":
            return text(str(os.getpid()))
        if name in ("read_only", "destructive", "dotted.name", "extra") or name.startswith("t"):
            return text(f"ran {name}")
        return text(f"unknown tool {name}", error=True)

    return Server(opts.name, version="1.2.3", on_list_tools=list_tools, on_call_tool=call_tool)


def spawn_child(pidfile: str) -> None:
    """A grandchild that ignores SIGTERM and sleeps: it must not outlive the server's close."""
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    with open(pidfile, "w") as fh:
        fh.write(str(child.pid))


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


async def serve_http(server: Server[Any], opts: argparse.Namespace) -> None:
    import uvicorn

    app = server.streamable_http_app()
    if opts.token_env:
        expected = f"Bearer {os.environ[opts.token_env]}"
        inner = app

        async def app(scope: Any, receive: Any, send: Any) -> None:  # type: ignore[no-redef]
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                if headers.get(b"authorization", b"").decode() != expected:
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"unauthorized"})
                    return
            await inner(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", opts.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    print(f"PORT {port}", flush=True)
    await userver.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="kit")
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--spawn-child", metavar="PIDFILE")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--token-env")
    parser.add_argument("--bad-schema", action="store_true")
    opts = parser.parse_args()
    if opts.exit_at_start:
        sys.stderr.write("kit: refusing to start (--exit-at-start)\n")
        sys.exit(2)
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if opts.spawn_child:
        spawn_child(opts.spawn_child)
    if opts.start_delay:
        time.sleep(opts.start_delay)
    server = build(opts)
    if opts.http:
        anyio.run(serve_http, server, opts)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()

"""ra's tools served to other agents as a Model Context Protocol server.

Any :class:`~ra.tools.registry.RegisteredTool` - an ``@ra.tool`` function, a hand-written tool, a
whole :class:`~ra.tools.registry.ToolRegistry` - can be offered to another agent (Claude Code,
codex, another ra) over stdio or streamable HTTP::

    ra.mcp.serve(add, search_docs)                      # python my_tools.py: serves over stdio
    ra.mcp.serve(add, transport="http", port=8765)      # http://127.0.0.1:8765/mcp
    server = ra.mcp.create_server(add)                  # the mcp Server, to embed or test in-process

A call runs exactly as it would in a session: through ra's tool pipeline (the arguments are
validated against the tool's schema first and a bad call gets ra's message naming each field; an
executor that raises or returns ``ToolOutput(is_error=True)`` gives an error result; the output is
bounded by the same limits the model would get), with a real :class:`~ra.tools.registry.ToolContext`
whose environment is a :class:`~ra.env.local.LocalExecutionEnvironment` at ``cwd`` - so commands a
tool runs inherit the environment minus secret-looking variables, as in a session. What leaves the
server is text (and an image when the tool returned one); ``ToolOutput.metadata`` is for ra's own
host and is never sent, and the values of the server's secret-looking environment variables are
masked in every text sent.

Two things are refused unless asked for explicitly, because they hand this machine to whoever
connects: serving ra's own tools (shell, read_file, edit_file, apply_patch, subagents, tools that
ra itself proxies from MCP servers: ``allow_builtin_tools=True``), and listening on anything but
the loopback interface (``allow_remote=True``; the server has no authentication of its own).

The ``mcp`` package is imported when a server is built, never by ``import ra.mcp``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import sys
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from ra.llm.redaction import redact
from ra.llm.types import ToolCall
from ra.tools.registry import RegisteredTool, ToolEffect, ToolRegistry

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from ra.env.base import ExecutionEnvironment
    from ra.tools.pipeline import ToolCallOutcome

__all__ = ["LOOPBACK_HOSTS", "create_server", "is_builtin_tool", "serve", "serve_async", "tool_annotations"]

#: Hosts that only this machine can reach; any other needs ``allow_remote=True``.
LOOPBACK_HOSTS: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1"})

_TRANSPORTS = ("stdio", "http")

#: How long an HTTP server being stopped (SIGINT/SIGTERM) lets calls in flight finish before it
#: cancels them: without a bound, one long call (or a client holding its event stream open) keeps
#: the server alive forever.
_GRACEFUL_SHUTDOWN_S = 3

#: The longest the server waits, when it stops, for the environment to stop the commands still
#: running (the environment itself gives each process tree 2 s between SIGTERM and SIGKILL).
_CLEANUP_S = 10

ToolsArg = RegisteredTool | ToolRegistry | Iterable[RegisteredTool]


# -- what is served --------------------------------------------------------------------------------


def is_builtin_tool(tool: RegisteredTool) -> bool:
    """True for a tool whose code is ra's own (the shell, file and search tools, subagents, web
    tools, MCP tools ra proxies): serving one hands this machine to the caller, so it needs an
    explicit opt-in. An ``@ra.tool`` function is the user's code even though ra wraps it."""
    function_tools = sys.modules.get("ra.tools.function")
    function_tool_type = getattr(function_tools, "FunctionTool", None)
    if isinstance(function_tool_type, type) and isinstance(tool, function_tool_type):
        return False
    module = _defining_module(tool.executor)
    return module == "ra" or module.startswith("ra.")


def _defining_module(executor: Any) -> str:
    target = executor
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)  # a bound method: its function
    module = getattr(target, "__module__", None)
    if not isinstance(module, str):
        module = type(target).__module__  # a callable object: its class
    return module


def _collect(tools: tuple[ToolsArg, ...], allow_builtin_tools: bool) -> ToolRegistry:
    """The served tools, in the order given; refuses what cannot or must not be served."""
    registry = ToolRegistry()
    for item in tools:
        if isinstance(item, RegisteredTool):
            batch: Iterable[Any] = (item,)
        elif isinstance(item, ToolRegistry | list | tuple | set | frozenset):
            batch = item
        else:
            raise TypeError(_not_a_tool(item))
        for tool in batch:
            if not isinstance(tool, RegisteredTool):
                raise TypeError(_not_a_tool(tool))
            existing = registry.get(tool.name)
            if existing is tool:
                continue
            if existing is not None:
                raise ValueError(f"two different tools are named {tool.name!r}: a served tool's name must be unique")
            registry.register(tool)  # checks the schema now, not at the first call
    if not len(registry):
        raise ValueError("nothing to serve: pass at least one tool (an @ra.tool function or a RegisteredTool)")
    if not allow_builtin_tools:
        builtin = [tool.name for tool in registry if is_builtin_tool(tool)]
        if builtin:
            names = ", ".join(repr(name) for name in builtin)
            raise PermissionError(
                f"refusing to serve ra's own tool(s) {names}: they read, change or run things on this machine "
                "for whoever connects to the server. Pass allow_builtin_tools=True to serve them anyway."
            )
    return registry


def _not_a_tool(value: object) -> str:
    what = getattr(value, "__name__", None) or type(value).__name__
    hint = " (decorate the function with @ra.tool)" if callable(value) else ""
    return f"serve() takes RegisteredTools or a ToolRegistry, got {what!r}{hint}"


def tool_annotations(effect: ToolEffect | None) -> dict[str, bool] | None:
    """MCP tool annotations (``readOnlyHint``, ...) for what a tool declares it does.

    ``NONE`` / ``READ`` are read-only; ``NETWORK`` is read-only but reaches the open world; ``EDIT``
    is destructive within the workspace; ``EXECUTE`` is destructive and open-world (a command may
    do anything). A tool that declares nothing gets no annotations: MCP's defaults (not read-only,
    destructive, open-world) are then what a client assumes, which is how ra treats it too.
    """
    if effect is None:
        return None
    if effect in (ToolEffect.NONE, ToolEffect.READ):
        return {"readOnlyHint": True, "openWorldHint": False}
    if effect is ToolEffect.NETWORK:
        return {"readOnlyHint": True, "openWorldHint": True}
    if effect is ToolEffect.EDIT:
        return {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}
    return {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True}


# -- the server ------------------------------------------------------------------------------------


class _NoEvents:
    """The pipeline's event sink: a served call has no session to report to."""

    def tool_start(self, call: ToolCall) -> None:
        pass

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None:
        pass

    def tool_end(self, outcome: ToolCallOutcome) -> None:
        pass


class _Environment:
    """The one execution environment the served tools share, initialised when the server starts
    and cleaned up (its commands stopped, its spill files removed) when the last run of it ends."""

    def __init__(self, env: ExecutionEnvironment, owned: bool) -> None:
        self.env = env
        self._owned = owned
        self._users = 0
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ExecutionEnvironment]:
        async with self._lock:
            if self._users == 0:
                await self.env.initialize()
            self._users += 1
        try:
            yield self.env
        finally:
            import anyio  # the mcp package's own dependency: the server runs on it

            # Shielded, so a server being cancelled still stops the commands its tools started;
            # bounded, so a cleanup that hangs cannot keep the server from exiting.
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_S):
                async with self._lock:
                    self._users -= 1
                    if self._users == 0 and self._owned:
                        await self.env.cleanup()


def create_server(
    *tools: ToolsArg,
    name: str = "ra",
    version: str | None = None,
    instructions: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    environment: ExecutionEnvironment | None = None,
    allow_builtin_tools: bool = False,
) -> Server[Any]:
    """The MCP server (the ``mcp`` package's low-level ``Server``) offering ``tools``.

    Run it yourself (``server.run(read, write, server.create_initialization_options())``, or mount
    ``server.streamable_http_app()``), connect to it in-process (``mcp.Client(server)``), or let
    :func:`serve` do it. Commands the tools run execute in ``cwd`` (the current directory when
    omitted) through a :class:`~ra.env.local.LocalExecutionEnvironment` with ra's default
    environment rules, unless ``environment`` is given (then the host owns it: it is initialised
    but never cleaned up here).
    """
    registry = _collect(tools, allow_builtin_tools)
    if environment is None:
        from ra.env.local import LocalExecutionEnvironment

        shared = _Environment(LocalExecutionEnvironment(os.getcwd() if cwd is None else cwd), owned=True)
    else:
        if cwd is not None:
            raise ValueError("pass cwd or environment, not both (the environment has its own working directory)")
        shared = _Environment(environment, owned=False)
    if version is None:
        from ra import __version__ as version

    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    listed = types.ListToolsResult(
        tools=[
            types.Tool(
                name=tool.name,
                description=tool.definition.description,
                input_schema=tool.definition.parameters,
                annotations=_annotations(types, tool.effect),
            )
            for tool in registry
        ]
    )
    call_ids = itertools.count(1)

    @contextlib.asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with shared.running() as env:
            yield {"env": env}

    async def list_tools(ctx: Any, params: Any) -> Any:
        return listed

    async def call_tool(ctx: Any, params: Any) -> Any:
        from ra.tools.pipeline import ToolPipeline

        if params.name not in registry:
            available = ", ".join(registry.names())
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}. Available tools: {available}.")
        call = ToolCall(f"mcp-{next(call_ids)}", params.name, dict(params.arguments or {}))
        pipeline = ToolPipeline(registry, ctx.lifespan_context["env"], _NoEvents())
        outcome = await pipeline.run(call)
        return _result(types, outcome)

    return Server(
        name,
        version=version,
        instructions=instructions,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _annotations(types: Any, effect: ToolEffect | None) -> Any:
    hints = tool_annotations(effect)
    return None if hints is None else types.ToolAnnotations.model_validate(hints)


def _result(types: Any, outcome: ToolCallOutcome) -> Any:
    """What the client gets: the text the model would read (secrets masked) and the image, if any.
    Never the metadata, which is for ra's own host."""
    import base64

    content: list[Any] = []
    if outcome.content or outcome.image_data is None:
        content.append(types.TextContent(text=redact(outcome.content)))
    if outcome.image_data is not None:
        content.append(
            types.ImageContent(
                data=base64.b64encode(outcome.image_data).decode("ascii"),
                mime_type=outcome.image_media_type or "image/png",
            )
        )
    return types.CallToolResult(content=content, is_error=outcome.is_error)


# -- running it ------------------------------------------------------------------------------------


async def serve_async(
    *tools: ToolsArg,
    name: str = "ra",
    version: str | None = None,
    instructions: str | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    cwd: str | os.PathLike[str] | None = None,
    environment: ExecutionEnvironment | None = None,
    allow_builtin_tools: bool = False,
    allow_remote: bool = False,
) -> None:
    """Serve ``tools`` until the client goes away (stdio: its end of stdin closes) or the task is
    cancelled (http: also SIGINT/SIGTERM). See :func:`create_server` for the tool options."""
    if transport not in _TRANSPORTS:
        raise ValueError(f"transport must be one of {', '.join(map(repr, _TRANSPORTS))}, got {transport!r}")
    if transport == "http":
        _check_http(host, port, path, allow_remote)
    server = create_server(
        *tools,
        name=name,
        version=version,
        instructions=instructions,
        cwd=cwd,
        environment=environment,
        allow_builtin_tools=allow_builtin_tools,
    )
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return

    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_S
    )
    await uvicorn.Server(config).serve()


def serve(
    *tools: ToolsArg,
    name: str = "ra",
    version: str | None = None,
    instructions: str | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    cwd: str | os.PathLike[str] | None = None,
    environment: ExecutionEnvironment | None = None,
    allow_builtin_tools: bool = False,
    allow_remote: bool = False,
) -> None:
    """Blocking :func:`serve_async`, for a script: ``python my_tools.py`` serves over stdio."""
    asyncio.run(
        serve_async(
            *tools,
            name=name,
            version=version,
            instructions=instructions,
            transport=transport,
            host=host,
            port=port,
            path=path,
            cwd=cwd,
            environment=environment,
            allow_builtin_tools=allow_builtin_tools,
            allow_remote=allow_remote,
        )
    )


def _check_http(host: str, port: int, path: str, allow_remote: bool) -> None:
    if host not in LOOPBACK_HOSTS and not allow_remote:
        raise PermissionError(
            f"refusing to listen on {host!r}: the server has no authentication, so every machine that can "
            "reach that address could call the tools. Serve on 127.0.0.1 (the default), or pass "
            "allow_remote=True and put authentication in front of it."
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an integer from 0 to 65535, got {port!r}")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")

"""``ra --input-format stream-json --output-format stream-json``: a session driven as the Claude Agent
SDK drives ``claude``.

The order of things, as the SDK expects it:

1. the SDK sends ``initialize`` (its hook callbacks, its agents); ra registers them and answers;
2. ra opens the session the flags chose (``--resume``, ``--continue``, ``--fork-session``, a new
   one), starting its MCP servers - the SDK's in-process ones over the channel;
3. each ``user`` line on stdin is one query: ``system``/``init``, the ``assistant``/``user``
   messages (and ``stream_event``\\ s with ``--include-partial-messages``), one ``result``. Lines
   that arrive while a query runs wait their turn (the SDK's streaming mode sends several);
4. stdin ends: ra finishes the query under way and exits - 0, or 1 when the last result was an
   error (as ``claude`` does; the SDK then raises its ``ResultError``).

Meanwhile the SDK may send ``interrupt`` (the query ends with ``error_during_execution``, the
session stays), ``set_permission_mode``, ``set_model``, ``set_max_thinking_tokens``,
``mcp_status``, ``mcp_reconnect``,
``mcp_toggle``, ``get_context_usage`` (:mod:`.context`) and ``stop_task`` (a subagent, by the
``agent_id`` ``spawn_agent`` gave); ``rewind_files`` gets an error that says why (ra keeps no file
checkpoints); ra sends it
``can_use_tool`` (with ``--permission-prompt-tool stdio``), ``hook_callback`` and
``mcp_message`` requests (:mod:`.permission`, :mod:`.hooks`, :mod:`.sdk_mcp`).

Without a ``--permission-mode`` the mode is ``default``, as in Claude Code: reads run, edits and
commands go to ``can_use_tool`` (and are denied when the SDK has none) - a program written for
Claude's defaults gets no more on ra.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .channel import Channel
from .wire import ModelFacts, claude_lines, idle_state

if TYPE_CHECKING:
    from ra.agent.session import Session

    from ..config import Settings

__all__ = ["INITIALIZE_WAIT_S", "serve"]

#: How long ra waits for the SDK's ``initialize`` before it takes the first user message without one.
INITIALIZE_WAIT_S = 60.0
#: How long a request that needs the session waits for it to open (its MCP servers start first).
SESSION_WAIT_S = 60.0
#: How long stop_task waits for a subagent to close.
STOP_TASK_WAIT_S = 30.0
#: Claude's model aliases that mean nothing to another provider: an agent naming one uses the parent's model.
_CLAUDE_ALIASES = ("sonnet", "opus", "haiku", "inherit")


class _Protocol:
    """The SDK's requests to ra, and the state they change."""

    def __init__(self, settings: Settings, channel: Channel, hooks: Any, notice: Any, sdk_servers: list[str]) -> None:
        self.settings = settings
        self.channel = channel
        self.hooks = hooks
        self.notice = notice
        #: The SDK's in-process MCP servers: those in ``--mcp-config`` (the Python SDK), then those
        #: ``initialize`` names in ``sdkMcpServers`` (the TypeScript SDK).
        self.sdk_servers = list(sdk_servers)
        #: ``initialize``'s ``systemPrompt`` (joined) and ``appendSystemPrompt`` (the TypeScript SDK
        #: sends the prompt there, not as flags); None: not given.
        self.system_prompt: str | None = None
        self.append_system_prompt: str | None = None
        #: Set when ``initialize`` showed that the session cannot start (the reason): ra exits with it.
        self.startup_error: Exception | None = None
        self.session: Session | None = None
        #: Set once the session is open (after its MCP servers started).
        self.session_open = asyncio.Event()
        self.initialize_seen = asyncio.Event()
        self.agent_names: list[str] = []
        self.pending_mode: str | None = None
        self.pending_model: str | None = None

    async def handle(self, subtype: str, request: dict[str, Any]) -> dict[str, Any] | None:
        handler = getattr(self, f"_on_{subtype}", None)
        if handler is None:
            raise ValueError(f"unsupported control request subtype: {subtype} (ra does not implement it)")
        return await handler(request)

    async def _on_initialize(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.initialize_seen.is_set():
            raise ValueError("initialize: already initialized")
        try:
            self._initialize(request)
        except Exception as exc:
            # What the program asked for cannot be set up: ra does not run without it (it exits
            # with this reason once the answer is out), even for a host that ignores the error.
            text = str(exc)
            self.startup_error = ValueError(text if text.startswith("initialize") else f"initialize: {text}")
            raise self.startup_error from None
        finally:
            self.initialize_seen.set()
        return {
            "commands": [],
            "agents": [{"name": n} for n in self.agent_names],
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [],
            "account": {},
            # Every onFailure that registered is honoured (hooks.py refuses the others): the
            # TypeScript SDK sends no prompt for a program with 'block' hooks without this.
            "hook_on_failure_supported": True,
        }

    def _initialize(self, request: dict[str, Any]) -> None:
        from .hooks import register_sdk_hooks

        for key, delivery in _NOT_READ_IN_INITIALIZE.items():
            if request.get(key) is not None:
                raise ValueError(
                    f"initialize: ra does not read {key!r} from the initialize request; send it on the command line "
                    f"(the TypeScript SDK's {delivery}: 'argv', its default)"
                )
        servers = _names(request.get("sdkMcpServers"), "sdkMcpServers")
        system_prompt = _system_prompt(request.get("systemPrompt"))
        append = request.get("appendSystemPrompt")
        if append is not None and not isinstance(append, str):
            raise ValueError("initialize: 'appendSystemPrompt' must be text")
        if system_prompt is not None and self.settings.system_prompt is not None:
            raise ValueError("initialize: a system prompt was given both here and by --system-prompt; give one")
        if append and self.settings.append_system_prompt:
            raise ValueError("initialize: 'appendSystemPrompt' and --append-system-prompt were both given; give one")
        for text in register_sdk_hooks(request.get("hooks"), self.hooks, self.channel):
            self.notice(text)
        self._agents(request.get("agents"))
        if request.get("plugins"):
            self.notice("warning: initialize: the plugins are ignored: Claude Code plugins are not loaded")
        self.sdk_servers.extend(name for name in servers if name not in self.sdk_servers)
        self.system_prompt = system_prompt
        self.append_system_prompt = append or None
        self.check_mcp_rules()

    def check_mcp_rules(self) -> None:
        """Rules naming an MCP server that is not configured: refused for a flag's rule, a notice
        for a file's. Done once the SDK's in-process servers are known (after ``initialize``)."""
        from ..config import ConfigError
        from ..mcp_config import check_mcp_rules

        if self.settings.mcp is None or self.settings.policy is None:
            return
        for name in self.sdk_servers:
            if name in self.settings.mcp.servers:
                where = self.settings.mcp.sources.get(name, "the configuration")
                raise ConfigError(
                    f"MCP server {name!r} is both one of the SDK program's in-process servers and configured in "
                    f"{where}; rename one"
                )
        for text in check_mcp_rules(self.settings.policy, self.settings.mcp, self.sdk_servers):
            self.notice(text)

    def _agents(self, agents: Any) -> None:
        if agents is None:
            return
        if not isinstance(agents, Mapping):
            raise ValueError("initialize: 'agents' must be an object of name to agent definition")
        from ra.agent.subagents.definitions import AgentDefinition

        policy = self.settings.policy
        assert policy is not None
        for name, spec in agents.items():
            if not isinstance(spec, Mapping):
                raise ValueError(f"initialize: agents.{name} must be an object")
            model = spec.get("model")
            if model in _CLAUDE_ALIASES:
                model = None  # Claude's aliases name Anthropic models: the parent's model is used
            tools = spec.get("tools")
            try:
                policy.agents[name] = AgentDefinition(
                    description=str(spec.get("description", "")),
                    prompt=str(spec.get("prompt", "")),
                    tools=tuple(tools) if isinstance(tools, list) else None,
                    disallowed_tools=tuple(spec.get("disallowedTools") or ()),
                    model=model,
                    max_turns=spec.get("maxTurns"),
                    permission_mode=spec.get("permissionMode"),
                )
            except (TypeError, ValueError) as exc:
                raise ValueError(f"initialize: agents.{name}: {exc}") from None
            self.agent_names.append(name)

    async def _on_interrupt(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.session is not None:
            self.session.interrupt()
        return {}

    async def _on_set_permission_mode(self, request: dict[str, Any]) -> dict[str, Any]:
        from ra.agent.permissions.rules import normalize_mode

        mode = request.get("mode")
        if not isinstance(mode, str):
            raise ValueError("set_permission_mode: 'mode' must be a string")
        mode = normalize_mode(mode)  # ValueError names the modes
        if self.session is not None:
            self.session.set_permission_mode(mode)
        else:
            self.pending_mode = mode
        return {}

    async def _on_set_model(self, request: dict[str, Any]) -> dict[str, Any]:
        model = request.get("model")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ValueError("set_model: 'model' must be a model name or null (the default)")
        target = model or self.settings.model
        if self.session is not None and target:
            self.session.set_model(target)
        else:
            self.pending_model = target
        return {}

    async def _on_set_max_thinking_tokens(self, request: dict[str, Any]) -> dict[str, Any]:
        tokens = request.get("max_thinking_tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
            raise ValueError("set_max_thinking_tokens: 'max_thinking_tokens' must be an integer or null (the default)")
        session = await self._open_session("set_max_thinking_tokens")
        session.set_max_thinking_tokens(tokens)
        return {}

    async def _open_session(self, what: str) -> Session:
        """The session, waiting (bounded) for it to open: the SDK may ask right after ``initialize``."""
        if self.session is None:
            try:
                await asyncio.wait_for(self.session_open.wait(), SESSION_WAIT_S)
            except TimeoutError:
                raise ValueError(f"{what}: the session did not open within {SESSION_WAIT_S:g}s") from None
        assert self.session is not None
        return self.session

    async def _on_get_context_usage(self, request: dict[str, Any]) -> dict[str, Any]:
        from .context import context_usage_response

        session = await self._open_session("get_context_usage")
        return context_usage_response(await session.context_usage(), session.config.agents, self.agent_names)

    def _server_name(self, what: str, request: dict[str, Any]) -> str:
        name = request.get("serverName")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{what}: 'serverName' must be the name of an MCP server")
        return name

    async def _on_mcp_reconnect(self, request: dict[str, Any]) -> dict[str, Any]:
        from ra.tools.sources import UnknownServer

        name = self._server_name("mcp_reconnect", request)
        session = await self._open_session("mcp_reconnect")
        try:
            await session.reconnect_mcp_server(name)
        except UnknownServer as exc:
            raise ValueError(f"mcp_reconnect: {exc.args[0] if exc.args else exc}") from None
        except ValueError as exc:
            raise ValueError(f"mcp_reconnect: {exc}") from None
        return {}

    async def _on_mcp_toggle(self, request: dict[str, Any]) -> dict[str, Any]:
        from ra.tools.sources import UnknownServer

        name = self._server_name("mcp_toggle", request)
        enabled = request.get("enabled")
        if not isinstance(enabled, bool):
            raise ValueError("mcp_toggle: 'enabled' must be true or false")
        session = await self._open_session("mcp_toggle")
        try:
            await session.toggle_mcp_server(name, enabled)
        except UnknownServer as exc:
            raise ValueError(f"mcp_toggle: {exc.args[0] if exc.args else exc}") from None
        except ValueError as exc:
            raise ValueError(f"mcp_toggle: {exc}") from None
        return {}

    async def _on_rewind_files(self, request: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("rewind_files: ra keeps no file checkpoints, so there is nothing to rewind to")

    async def _on_stop_task(self, request: dict[str, Any]) -> dict[str, Any]:
        """ra's background tasks are the subagents ``spawn_agent`` starts: the id is the
        ``agent_id`` its tool result gives. Stopping one closes it (its commands stop); the
        parent's ``wait`` then reads it as closed."""
        from ra.agent.aio import maybe_await

        task = request.get("task_id")
        if not isinstance(task, str) or not task:
            raise ValueError("stop_task: 'task_id' must be the agent_id of a subagent")
        session = await self._open_session("stop_task")
        close = getattr(session.subagents.get(task), "close", None)
        if close is None:
            known = ", ".join(session.subagents) or "none"
            raise ValueError(
                f"stop_task: no such task: {task!r} (ra's tasks are the subagents spawn_agent starts, by their "
                f"agent_id; this session's: {known})"
            )
        try:
            await asyncio.wait_for(maybe_await(close()), STOP_TASK_WAIT_S)
        except TimeoutError:
            raise ValueError(f"stop_task: {task} did not stop within {STOP_TASK_WAIT_S:g}s") from None
        return {}

    async def _on_mcp_status(self, request: dict[str, Any]) -> dict[str, Any]:
        statuses = self.session.mcp_servers if self.session is not None else ()
        servers = []
        for s in statuses:
            entry: dict[str, Any] = {"name": s.name, "status": s.state}
            if s.error:
                entry["error"] = s.error
            if s.server:
                entry["serverInfo"] = {"name": s.server}
            servers.append(entry)
        return {"mcpServers": servers}


#: What the TypeScript SDK can send in ``initialize`` instead of on the command line, which ra does
#: not read there -> the SDK option that sends it as a flag. Refused: running without settings,
#: rules or servers the program gave would quietly do something else than it asked.
_NOT_READ_IN_INITIALIZE = {
    "settings": "settingsDelivery",
    "disallowedTools": "disallowedToolsDelivery",
    "managedSettings": "managedSettingsDelivery",
    "mcpServers": "mcpServersDelivery",
}


def _names(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"initialize: {key!r} must be a list of names")
    return value


def _system_prompt(value: Any) -> str | None:
    """``initialize``'s ``systemPrompt``: a list of sections (the TypeScript SDK sends ``[""]``
    when the program gave none: the profile's own prompt, as an empty ``--system-prompt``)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("initialize: 'systemPrompt' must be a list of text sections")
    text = "\n\n".join(v for v in value if v.strip())
    return text or None


def _model_facts(session: Session | None) -> ModelFacts | None:
    """The model a result is reported under: the session's, with its window and output limit (0
    where ra does not know one)."""
    if session is None:
        return None
    from ra.llm.catalog import get_model_info

    info = get_model_info(session.model)
    window = session.profile.context_window_size or 0
    return ModelFacts(session.model, window, (info.max_output if info is not None else None) or 0)


def _prompt(message: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The text and images of a ``user`` line; ValueError for one ra cannot read."""
    body = message.get("message")
    if not isinstance(body, Mapping):
        raise ValueError("a user message needs a 'message' object")
    content = body.get("content")
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise ValueError("a user message's content must be text or a list of content blocks")
    import base64

    from ra.llm.types import ImageData

    texts: list[str] = []
    images: list[ImageData] = []
    for block in content:
        if not isinstance(block, Mapping):
            raise ValueError("a content block must be an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image" and isinstance(block.get("source"), Mapping):
            source = block["source"]
            if source.get("type") == "base64":
                images.append(
                    ImageData(data=base64.b64decode(source.get("data", "")), media_type=source.get("media_type"))
                )
            elif source.get("type") == "url":
                images.append(ImageData(url=str(source.get("url"))))
            else:
                raise ValueError(f"an image source of type {source.get('type')!r} cannot be read")
        else:
            raise ValueError(f"a content block of type {kind!r} cannot be sent to the model")
    return "\n\n".join(texts), tuple(images)


async def serve(settings: Settings, *, sdk_servers: list[str], prompt_tool: str | None, include_partial: bool) -> int:
    """Run the protocol until stdin ends; returns the exit code."""
    from ra.agent.hooks import Hooks
    from ra.sdk.messages import MessageStream

    from ..ask import NoTerminalDenier
    from ..runner import as_run_error, prepare
    from .permission import SdkPermissionPrompt
    from .sdk_mcp import SdkMcpServers, ToolSources

    def notice(text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"ra: {text}\n")
            sys.stderr.flush()

    channel = Channel(notice=notice)
    policy = settings.policy
    assert policy is not None
    hooks = policy.build_hooks(settings.cwd if settings.ssh is not None else None) or Hooks()
    protocol = _Protocol(settings, channel, hooks, notice, sdk_servers)
    channel.on_request = protocol.handle
    channel.start()
    reads_state = os.environ.get("CLAUDE_CODE_SDK_READS_SESSION_STATE") not in (None, "", "0")
    stream: list[MessageStream] = []

    def emit(message: Any) -> None:
        data = message.to_json()
        model = _model_facts(protocol.session) if data.get("type") == "result" else None
        for line in claude_lines(data, agents=protocol.agent_names, model=model):
            channel.send(line)
        if reads_state and data.get("type") == "result":
            channel.send(idle_state(data.get("session_id", "")))

    def on_event(event: Any) -> None:
        if stream:
            stream[0](event)

    try:
        ctx = await prepare(settings, [on_event])
    except Exception as exc:
        await channel.aclose()
        raise as_run_error(exc, settings, False) from exc
    last_error = False
    try:
        # The SDK's initialize comes first; a host that sends a user message without it still runs.
        first: dict[str, Any] | None = None
        waiter = asyncio.ensure_future(protocol.initialize_seen.wait())
        getter = asyncio.ensure_future(channel.inputs.get())
        done, _ = await asyncio.wait({waiter, getter}, timeout=INITIALIZE_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if getter in done:
            first = getter.result()
            if first is None:
                return 0  # stdin ended before anything was asked
        else:
            getter.cancel()
        if protocol.startup_error is not None:
            from ..errors import UsageError

            raise UsageError(f"the SDK's {protocol.startup_error}")
        if not protocol.initialize_seen.is_set():
            protocol.check_mcp_rules()  # no initialize: the servers are the command line's
        if protocol.system_prompt is not None:
            ctx.profile.base_instructions = protocol.system_prompt  # type: ignore[attr-defined]
        if protocol.append_system_prompt is not None:
            ctx.profile.user_instructions = protocol.append_system_prompt  # type: ignore[attr-defined]
        ctx.hooks = hooks
        if prompt_tool == "stdio":
            ctx.can_use_tool = SdkPermissionPrompt(channel)
        else:
            ctx.can_use_tool = NoTerminalDenier(notice)
        if protocol.sdk_servers:
            sdk = SdkMcpServers(protocol.sdk_servers, channel)
            ctx.mcp_servers = sdk if ctx.mcp_servers is None else ToolSources([ctx.mcp_servers, sdk])
        try:
            session = await ctx.open_chosen()
        except Exception as exc:
            raise as_run_error(exc, settings, False) from exc
        protocol.session = session
        protocol.session_open.set()
        if protocol.pending_mode is not None:
            session.set_permission_mode(protocol.pending_mode)
        if protocol.pending_model:
            session.set_model(protocol.pending_model)
        for note in ctx.session_notes(session):
            notice(note)
        stream.append(MessageStream(session, emit, include_partial=include_partial))
        while True:
            message = first if first is not None else await channel.inputs.get()
            first = None
            if message is None:
                break
            try:
                text, images = _prompt(message)
            except ValueError as exc:
                notice(f"stdin: {exc}; the message was not sent to the model")
                # The SDK waits for this query's result: it gets one, an error that says why.
                stream[0].start()
                emit(stream[0].refused(f"the message was not sent to the model: {exc}"))
                last_error = True
                continue
            stream[0].start()
            outcome = await ctx.run_input(session, text, images=images)
            last_error = outcome.reason != "completed"
            if session.closing:
                break
    finally:
        try:
            await ctx.aclose()  # SessionEnd hooks may still reach the SDK
        finally:
            await channel.aclose()
    return 1 if last_error else 0

"""Tool sources in a session: the control that keeps a session's registry in step with its
:class:`~ra.tools.sources.ToolSource`\\ s (MCP servers, a host's own providers).

The session owns a copy of its profile's registry (so two sessions on one profile never see
each other's tools). :class:`SourceTools` fills it:

* ``start`` - the sources start together, each within ``start_timeout``; their tools are
  registered; a server that failed is one WARNING (``tool_source_failed``) and the session goes on;
* ``input_start`` / ``before_step`` - when a source says its list changed, its tools are
  registered again (added, changed, removed). These are the only points: between model calls,
  never during one or during a tool round, so a round runs against the tools its model call was
  offered;
* ``close`` - the sources the session owns are closed (bounded); a source the host passed in is
  the host's to close.

What a source may not do: take a name the session already has (a built-in such as ``shell``, a
host's ``tools=``) or one of Claude Code's tool names (``Bash``, ``Read``...). Rules, hooks and
plan mode read a tool by its name, so such a tool would inherit the built-in's rules (an allow
rule for ``Bash(git status)`` would let a server's ``Bash`` run); it is left out, with a WARNING.
Two sources offering one name: the first in order keeps it.

A source's ``changed()`` is a flag that its ``tools()`` call clears, so one source shared by
several sessions (a host's server set, a parent and its subagents) is watched through one
:class:`_Feed` per source object: whichever session sees the flag first moves the feed's
generation on, and every session reads the list again when the generation moved since it last
read it. The check at a model call is one ``changed()`` per source.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ra.tools.sources import ToolSourceStatus

from .controls.chain import Control
from .events import WarningEvent
from .permissions.tool_names import CLAUDE_TOOL_NAMES, RULE_ALIASES

if TYPE_CHECKING:
    from ra.tools.registry import RegisteredTool, ToolRegistry
    from ra.tools.sources import ToolSource

    from .controls.decisions import Admit, Stop
    from .events import EventData
    from .state import RunState

__all__ = ["SOURCE_CLOSE_TIMEOUT_S", "SOURCE_START_TIMEOUT_S", "SourceTools", "reserved_names"]

#: How long the sources of a session may take to start, all together (MCP servers have their own,
#: shorter, per-server timeouts; this bounds a host's source that has none).
SOURCE_START_TIMEOUT_S = 120.0
#: How long closing one source may take before the session gives up on it (with a WARNING).
SOURCE_CLOSE_TIMEOUT_S = 15.0

Emit = Callable[["EventData"], Any]


def reserved_names(registry: ToolRegistry) -> frozenset[str]:
    """The names no source may register in a session with ``registry``: its tools' names and
    Claude Code's tool names, which rules and hooks read as ra's built-ins."""
    covered = {name for names in RULE_ALIASES.values() for name in names}
    return frozenset({*registry.names(), *CLAUDE_TOOL_NAMES, *CLAUDE_TOOL_NAMES.values(), *RULE_ALIASES, *covered})


class _Feed:
    """How far one source's tool list has moved, as every session that uses the source sees it.

    It holds nothing of the source - no tools either, whose executors reach the source: it is the
    value of a weak mapping keyed by the source, and a reference would keep the source alive for
    good. The sessions pass the source in and keep their own lists."""

    __slots__ = ("generation", "lock", "pinned", "started", "starting")

    def __init__(self) -> None:
        self.generation = 0
        self.lock = threading.Lock()
        self.started = False
        self.starting: asyncio.Task[None] | None = None
        #: A source that cannot be weakly referenced, kept so that its id is not reused.
        self.pinned: Any = None

    def poll(self, source: ToolSource) -> int:
        """The generation, moved on when the source says its list changed since it was read."""
        with self.lock:
            if source.changed():
                self.generation += 1
            return self.generation

    def take(self, source: ToolSource) -> tuple[list[RegisteredTool], int]:
        """The source's list and the generation it belongs to. Reading the list clears the source's
        flag, so a change it held is counted first (the other sessions then read it too)."""
        with self.lock:
            if source.changed():
                self.generation += 1
            return list(source.tools()), self.generation


_feeds: weakref.WeakKeyDictionary[Any, _Feed] = weakref.WeakKeyDictionary()
_by_id: dict[int, _Feed] = {}  # sources that cannot be weakly referenced (kept for the process's life)


def _feed_of(source: ToolSource) -> _Feed:
    try:
        feed = _feeds.get(source)
        if feed is None:
            feed = _feeds[source] = _Feed()
        return feed
    except TypeError:
        feed = _by_id.get(id(source))
        if feed is None or feed.pinned is not source:
            feed = _by_id[id(source)] = _Feed()
            feed.pinned = source
        return feed


class SourceTools(Control):
    """Registers the tools of a session's sources in its registry (see the module doc).

    ``sources`` are ``(source, owned)`` pairs in order; ``owned`` ones are closed with the session.
    ``reserved``: names sources may not take. ``keep(name)``: whether this session takes a tool
    (a typed subagent takes only what its definition allows); None takes all.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        sources: Sequence[tuple[ToolSource, bool]],
        *,
        reserved: Iterable[str] = (),
        keep: Callable[[str], bool] | None = None,
        start_timeout: float | None = None,
        close_timeout: float | None = None,
        warn: bool = True,
    ) -> None:
        self.registry = registry
        self.sources = [(source, bool(owned)) for source, owned in sources]
        self.reserved = frozenset(reserved)
        self.keep = keep
        #: None: the module's SOURCE_START_TIMEOUT_S / SOURCE_CLOSE_TIMEOUT_S, read when used.
        self.start_timeout = start_timeout
        self.close_timeout = close_timeout
        self._feeds = [_feed_of(source) for source, _ in self.sources]
        #: The generation of each feed last read here (-1: never), and the list read then.
        self._seen = [-1] * len(self._feeds)
        self._lists: list[list[RegisteredTool]] = [[] for _ in self._feeds]
        #: The tools this control registered, by name (what a later change may remove or replace).
        self._mine: dict[str, RegisteredTool] = {}
        #: Names already warned about (a refused name, a failing source): said once per session.
        self._warned: set[str] = set()
        #: Whether this session's events about failed servers are its to emit (not a subagent's).
        self._warn_failures = warn
        self._closed = False

    # -- what the session shows ------------------------------------------------------------------
    def statuses(self) -> tuple[ToolSourceStatus, ...]:
        """Every source's servers, in order (a source whose ``statuses()`` fails is one failed entry)."""
        out: list[ToolSourceStatus] = []
        for source, _ in self.sources:
            try:
                out.extend(source.statuses())
            except Exception as exc:
                out.append(ToolSourceStatus(type(source).__name__, "in-process", "failed", 0, _describe(exc)))
        return tuple(out)

    def follower(self, registry: ToolRegistry, keep: Callable[[str], bool] | None = None) -> SourceTools:
        """The control of a subagent: the same sources (started, not owned: the parent closes
        them), registering into the child's own ``registry``, which holds the parent's source
        tools that the child was given when it was spawned."""
        child = SourceTools(
            registry,
            [(source, False) for source, _ in self.sources],
            reserved=self.reserved,
            keep=keep,
            start_timeout=self.start_timeout,
            close_timeout=self.close_timeout,
            warn=False,
        )
        for name, tool in self._mine.items():
            if registry.get(name) is tool:
                child._mine[name] = tool
        child._seen = list(self._seen)
        child._lists = [list(tools) for tools in self._lists]
        return child

    # -- start -------------------------------------------------------------------------------------
    async def start(self, emit: Emit) -> tuple[ToolSourceStatus, ...]:
        """Start every source not started yet (together, bounded), register their tools, and
        return the statuses. Never raises for a source's failure or a timeout."""
        pending = [(feed, feed.starting, s) for feed, (s, _) in zip(self._feeds, self.sources, strict=True)]
        pending = [(feed, task, source) for feed, task, source in pending if not feed.started]
        for index, (feed, task, source) in enumerate(pending):
            if task is None:
                task = feed.starting = asyncio.get_running_loop().create_task(_start(feed, source))
                pending[index] = (feed, task, source)
        tasks = {task for _, task, _ in pending if task is not None}
        limit = SOURCE_START_TIMEOUT_S if self.start_timeout is None else self.start_timeout
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=limit)
            for feed, task, source in pending:
                if task in late:
                    task.cancel()
                    feed.starting = None
                    self._warn(
                        emit,
                        f"start:{id(feed)}",
                        "tool_source_failed",
                        f"a tool source ({type(source).__name__}) did not start within "
                        f"{limit:g}s; the session goes on without its tools",
                        {"source": type(source).__name__},
                    )
                elif task is not None and task.done() and not task.cancelled() and task.exception() is not None:
                    error = task.exception()
                    self._warn(
                        emit,
                        f"start:{id(feed)}",
                        "tool_source_failed",
                        f"a tool source ({type(source).__name__}) failed to start: {_describe(error)}; "
                        "the session goes on without its tools",
                        {"source": type(source).__name__},
                    )
        self.refresh(emit, sync=False)
        self._sync(emit)
        statuses = self.statuses()
        if self._warn_failures:
            for status in statuses:
                if status.state == "failed":
                    self._warn(
                        emit,
                        f"server:{status.name}",
                        "tool_source_failed",
                        f"MCP server {status.name!r} ({status.transport}) is not available: "
                        f"{status.error or 'it failed to start'}; the session goes on without its tools",
                        {"server": status.name, "transport": status.transport, "error": status.error},
                    )
        return statuses

    # -- the control points --------------------------------------------------------------------------
    async def input_start(self, run: RunState, text: str) -> Stop | Admit | None:
        self.refresh(run.emit)  # before the input's system prompt lists the tools
        return None

    async def before_step(self, run: RunState) -> Stop | None:
        self.refresh(run.emit)
        return None

    def refresh(self, emit: Emit, *, sync: bool = True) -> bool:
        """Read again the lists that moved since this session last read them and register what
        changed; True when anything did."""
        stale = False
        for index, (feed, (source, _)) in enumerate(zip(self._feeds, self.sources, strict=True)):
            if not feed.started:
                continue
            try:
                if feed.poll(source) == self._seen[index]:
                    continue
                self._lists[index], self._seen[index] = feed.take(source)
            except Exception as exc:
                self._warn(
                    emit,
                    f"poll:{id(feed)}",
                    "tool_source_failed",
                    f"a tool source ({type(source).__name__}) failed to report its tools: {_describe(exc)}; "
                    "its last list stays",
                    {"source": type(source).__name__},
                )
                continue
            stale = True
        if stale and sync:
            self._sync(emit)
        return stale

    # -- close ----------------------------------------------------------------------------------------
    async def close(self, emit: Emit) -> None:
        """Close the owned sources (together, each within ``close_timeout``); idempotent."""
        if self._closed:
            return
        self._closed = True
        owned = [(feed, source) for feed, (source, own) in zip(self._feeds, self.sources, strict=True) if own]
        for feed, _ in owned:
            task = feed.starting
            if task is not None and not task.done():
                task.cancel()
        results = await asyncio.gather(*(self._close_one(s) for _, s in owned), return_exceptions=True)
        for (_, source), result in zip(owned, results, strict=True):
            if isinstance(result, BaseException):
                limit = SOURCE_CLOSE_TIMEOUT_S if self.close_timeout is None else self.close_timeout
                what = (
                    f"did not close within {limit:g}s"
                    if isinstance(result, TimeoutError)
                    else f"failed to close: {_describe(result)}"
                )
                emit(WarningEvent("tool_source_close_failed", f"a tool source ({type(source).__name__}) {what}", {}))

    async def _close_one(self, source: ToolSource) -> None:
        async with asyncio.timeout(SOURCE_CLOSE_TIMEOUT_S if self.close_timeout is None else self.close_timeout):
            await source.close()

    # -- registering -----------------------------------------------------------------------------------
    def _sync(self, emit: Emit) -> None:
        """Make the registry hold exactly the feeds' tools this session takes (besides its own)."""
        wanted: dict[str, RegisteredTool] = {}
        for tools in self._lists:
            for tool in tools:
                name = getattr(tool, "name", None)
                if not isinstance(name, str):
                    continue
                if name in self.reserved:
                    self._warn(
                        emit,
                        f"name:{name}",
                        "tool_name_taken",
                        f"a tool source offers a tool named {name!r}, a name this session's own tools (or Claude "
                        "Code's tool names) use: it is left out, so that the rules and hooks written for that "
                        "name keep meaning the built-in",
                        {"tool": name},
                    )
                    continue
                if name in wanted:
                    self._warn(
                        emit,
                        f"dup:{name}",
                        "tool_name_taken",
                        f"two tool sources offer a tool named {name!r}: the first one's is used",
                        {"tool": name},
                    )
                    continue
                if self.keep is not None and not self.keep(name):
                    continue
                wanted[name] = tool
        registry = self.registry
        gone = [n for n in self._mine if n not in wanted]
        reasons = self._reasons() if gone else {}
        for name in gone:
            tool = self._mine.pop(name)
            server = next((t[4:] for t in getattr(tool, "tags", ()) if t.startswith("mcp:")), None)
            registry.unregister(name, reason=reasons.get(server) if server is not None else None)
        for name, tool in wanted.items():
            if self._mine.get(name) is tool:
                continue
            try:
                registry.register(tool)
            except (TypeError, ValueError) as exc:
                if self._mine.pop(name, None) is not None:
                    registry.unregister(name)
                self._warn(
                    emit,
                    f"bad:{name}:{id(tool)}",
                    "tool_source_failed",
                    f"a tool source's tool {name!r} cannot be registered: {exc}; it is left out",
                    {"tool": name},
                )
                continue
            self._mine[name] = tool

    def _reasons(self) -> dict[str, str]:
        """Why each server that offers no tools now does not (disabled, failed, closed): what a
        call to one of its withdrawn tools is told."""
        out: dict[str, str] = {}
        for status in self.statuses():
            if status.state == "disabled":
                out[status.name] = f"MCP server {status.name} is disabled"
            elif status.state == "failed":
                out[status.name] = f"MCP server {status.name} failed ({status.error or 'no reason given'})"
            elif status.state == "closed":
                out[status.name] = f"MCP server {status.name} is closed"
        return out

    def _warn(self, emit: Emit, key: str, code: str, message: str, details: dict[str, Any]) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        emit(WarningEvent(code, message, details))


async def _start(feed: _Feed, source: ToolSource) -> None:
    try:
        await source.start()
        feed.started = True
    finally:
        if feed.started:
            feed.starting = None


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

"""Running inputs: build the session from settings, run one input under the limits, map the outcome.

Shared by the one-shot command and the interactive session. One input runs as a task on the
event loop. The limits are the session's own settings (``--max-steps`` is
``max_turns_per_input``, ``--time-limit`` is ``time_limit_s``); Ctrl-C is a signal handler that
calls ``Session.interrupt()`` (the in-flight model call is cancelled, running commands get SIGTERM
then SIGKILL, tool calls cut short get an "interrupted" result). The session stays usable, which
is what lets the interactive session go on after Ctrl-C or a time limit.

SIGTERM and SIGHUP stop the input the same way - a command ra started runs in its own process
group, so a signal meant for ra never reaches it, and ra dying on the default action would leave
that command's whole tree running - and then ``ra`` exits with 128 + the signal's number (the
outcome's reason is ``terminated``), interactive session or not.

A fatal error (credentials, configuration) closes a Session; the interactive session keeps the
conversation anyway: :meth:`RunContext.continue_session` starts a new Session on the old history
(resuming its record when the run is recorded).

Sessions are recorded to the store of :mod:`ra.cli.resume`'s choice (``default_store()`` unless
``--no-session-persistence``); :meth:`RunContext.open_session` opens the one the flags name.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ExitCode, RunError, describe_error, exit_code_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from ra.agent.events import SessionEvent
    from ra.agent.history import History
    from ra.agent.profile import ProviderProfile
    from ra.agent.session import Session
    from ra.llm.client import Client

    from .config import Settings
    from .resume import SessionChoice

__all__ = [
    "LOCAL_DEMO_MAX_STEPS",
    "Outcome",
    "RunContext",
    "as_run_error",
    "confine",
    "error_record",
    "header",
    "open_trajectory",
    "prepare",
    "run_start_record",
]

#: Step limit for runs on the bundled local model when none is configured (see :func:`_local_defaults`).
LOCAL_DEMO_MAX_STEPS = 12


@dataclass(slots=True)
class Outcome:
    """How one input ended."""

    text: str
    #: completed | turn_limit | round_limit | time_limit | budget_limit | interrupted | terminated |
    #: context_overflow | error | aborted
    reason: str
    code: ExitCode
    #: The one-line message for stderr when the input did not complete.
    message: str | None = None
    error: BaseException | None = None
    steps: int = 0
    tool_calls: int = 0


@dataclass
class RunContext:
    """Everything that outlives one Session: settings, client, profile, environment, listeners."""

    settings: Settings
    client: Client
    profile: ProviderProfile
    env: Any
    listeners: list[Callable[[SessionEvent], None]] = field(default_factory=list)
    session: Session | None = None
    started: float = field(default_factory=time.monotonic)
    #: Where the step limit came from when ra chose it (for the message when it is reached).
    step_limit_source: str = "--max-steps"
    #: The config file's command hooks, and who answers permission questions (:mod:`ra.cli.ask`).
    hooks: Any = None
    can_use_tool: Any = None
    #: Where each model's price came from (USAGE events): for the summary and the result record.
    price_sources: dict[str, str] = field(default_factory=dict)
    #: The session flags (:mod:`ra.cli.resume`); None: nothing is recorded.
    sessions: SessionChoice | None = None
    #: The run's MCP servers (``ra.mcp.McpServers``, a ToolSource), or None when none are configured.
    #: One set for the whole run: every session of it (``/new``, ``/resume``, a session carried over
    #: after a fatal error) uses the same servers, started once and closed by :meth:`aclose`.
    mcp_servers: Any = None
    #: Whether :meth:`aclose` cleans up :attr:`env` (``--ssh``: its commands stopped, the connection closed).
    owns_env: bool = False

    @property
    def store(self) -> Any:
        """Where sessions are recorded, or None (``--no-session-persistence``)."""
        return self.sessions.store if self.sessions is not None else None

    # -- sessions --------------------------------------------------------------------------------
    def session_config(self) -> Any:
        from ra.llm.retrying import RetryPolicy

        s = self.settings
        values: dict[str, Any] = {
            # The command compacts (a summary that keeps the task) where the ra profile's library
            # default prunes: a long interactive session must not forget what it was asked.
            "context_overflow": "compact",
            "max_tool_rounds_per_input": 0,
            "max_turns_per_input": s.max_steps or 0,
            "time_limit_s": s.time_limit or None,
            "reasoning_effort": s.reasoning_effort,
            "retry_policy": RetryPolicy(max_retries=s.max_retries),
            "detect_questions": False,
        }
        if s.policy is not None:
            values.update(s.policy.session_values())
        if s.profile == "ra":
            from ra.profiles.ra import ra_session_config

            return ra_session_config(**values)
        from ra.agent.config import SessionConfig

        return SessionConfig(**values)

    def new_session(self, history: History | None = None) -> Session:
        """A new session (recorded to :attr:`store`), optionally on an earlier ``history``."""
        from ra.agent.session import Session

        config = self.session_config()
        session = Session(
            self.profile,
            self.env,
            llm_client=self.client,
            config=config,
            history=history,
            hooks=self.hooks,
            can_use_tool=self.can_use_tool,
            store=self.store,
            **self._session_extras(),
        )
        return self._attach(session)

    def _session_extras(self) -> dict[str, Any]:
        """What a session of this run gets besides the profile's tools: the run's MCP servers and
        ``--otel``'s tracing (the one place both :meth:`new_session` and :meth:`open_session`
        take them from)."""
        extras: dict[str, Any] = {} if self.mcp_servers is None else {"mcp_servers": self.mcp_servers}
        if self.settings.tracing is not None:
            extras["tracing"] = self.settings.tracing
        return extras

    async def open_session(self, **choice: Any) -> Session:
        """``Session.open`` with this run's profile, client, config, hooks and ``choice``
        (``store``, ``resume``, ``continue_conversation``, ``fork_session``, ``session_id``)."""
        from ra.agent.session import Session

        session = await Session.open(
            self.profile,
            self.env,
            self.client,
            self.session_config(),
            hooks=self.hooks,
            can_use_tool=self.can_use_tool,
            **self._session_extras(),
            **choice,
        )
        return self._attach(session)

    async def open_chosen(self) -> Session:
        """The session the command line chose (``--resume``, ``--continue``, ...; a new one
        without them); errors about the choice are RunErrors (:func:`ra.cli.resume.open_error`)."""
        if self.sessions is None:
            session = self.new_session()
        else:
            from .resume import open_session

            session = await open_session(self.sessions, self.open_session)
        # The MCP servers start now, not at the first input: their tools are in /tools and their
        # statuses in SESSION_START (stream-json's init) before anything is asked.
        await session.start()
        return session

    def session_notes(self, session: Session) -> list[str]:
        """What to tell the user about the session the flags opened (one line each)."""
        choice = self.sessions
        if choice is None or choice.store is None:
            return []
        if choice.continue_conversation and not session.history.turns:
            return [f"--continue: no session is recorded for {self.settings.cwd} yet; this one is new"]
        if choice.resume is not None or choice.continue_conversation:
            what = "forked into a new session" if choice.fork_session else "resumed"
            turns = len(session.history.turns)
            return [f"session {session.id}: {what} ({turns} turns, {session.turn_count} model calls so far)"]
        return []

    @staticmethod
    def recorded(session: Session) -> bool:
        """Whether ``session`` is being recorded (so ``--resume`` can go on with it)."""
        if session.store is None:
            return False
        from ra.agent.store import Recorder

        recorders = [c for c in session.controls if isinstance(c, Recorder)]
        return all(r.persisting for r in recorders)

    def _attach(self, session: Session) -> Session:
        listeners = list(self.listeners)
        sources = self.price_sources

        def fan_out(event: SessionEvent) -> None:
            # One subscription for all of them, so every listener gets the backlog (SESSION_START).
            if event.kind.value == "usage":
                payload = event.payload
                sources[payload.model or "?"] = payload.price_source
            for listener in listeners:
                listener(event)

        session.add_listener(fan_out)
        self.session = session
        return session

    async def continue_session(self, old: Session) -> Session:
        """A new Session with ``old``'s conversation (after a fatal error closed it): its record
        resumed when it is recorded, else its history carried over."""
        store = old.store
        if store is not None and await store.load(old.id) is not None:
            return await self.open_session(store=store, resume=old.id)
        return self.new_session(history=old.history)

    async def aclose(self) -> None:
        try:
            if self.session is not None:
                await self.session.close()
        finally:
            try:
                if self.mcp_servers is not None:
                    await self.mcp_servers.close()  # the run owns them: no server outlives it
            finally:
                await self._close_rest()

    async def _close_rest(self) -> None:
        """After the session and the MCP servers: the environment ``--ssh`` opened, the client,
        the traces (each even when the one before failed)."""
        try:
            if self.owns_env:
                await self.env.cleanup()  # the remote commands stopped, the connection closed
        finally:
            try:
                await self.client.close()
            finally:
                flush, self.settings.flush_traces = self.settings.flush_traces, None
                if flush is not None:
                    # The batched spans go out now (bounded by the exporter's own timeout).
                    await asyncio.to_thread(flush)

    # -- one input -------------------------------------------------------------------------------
    async def run_input(
        self,
        session: Session,
        text: str,
        *,
        on_interrupt: Callable[[], None] | None = None,
        images: tuple[Any, ...] = (),
    ) -> Outcome:
        """Process ``text``; never raises for model, tool or provider errors (they become the
        outcome). The step and time limits are the session's (``max_turns_per_input``,
        ``time_limit_s``). Ctrl-C interrupts the input; a second Ctrl-C while it stops exits at once."""
        loop = asyncio.get_running_loop()
        received: list[int] = []

        def on_signal(signum: int) -> None:
            if received:  # a second signal while the input stops: the user means it
                os._exit(128 + signum)
            received.append(signum)
            if on_interrupt is not None and signum == signal.SIGINT:
                on_interrupt()
            session.interrupt()

        handled = _add_handlers(loop, on_signal)
        try:
            result = await session.submit(text, images=images)
        finally:
            for signum in handled:
                loop.remove_signal_handler(signum)
        outcome = self._outcome(result)
        if received and received[0] != signal.SIGINT:
            signum = received[0]
            name = signal.Signals(signum).name
            outcome.reason = "terminated"
            outcome.code = ExitCode(128 + signum)
            outcome.message = f"terminated by {name}: the input was stopped and its running commands with it"
        return outcome

    def _outcome(self, result: Any) -> Outcome:
        from ra.agent.config import StopReason

        s = self.settings
        counts = {"steps": result.steps, "tool_calls": result.tool_calls}
        reason = result.stop_reason
        if reason is StopReason.TIME_LIMIT:
            msg = f"time limit reached: {s.time_limit:g}s (--time-limit) after {result.steps} step(s)"
            return Outcome(result.text, "time_limit", ExitCode.FAILED, msg, **counts)
        if reason is StopReason.COMPLETED:
            return Outcome(result.text, "completed", ExitCode.DONE, **counts)
        if reason is StopReason.TURN_LIMIT:
            msg = f"step limit reached: {s.max_steps} step(s) ({self.step_limit_source}) without a final answer"
            return Outcome(result.text, "turn_limit", ExitCode.FAILED, msg, **counts)
        if reason is StopReason.INTERRUPTED:
            return Outcome(result.text, "interrupted", ExitCode.INTERRUPTED, "interrupted", **counts)
        if reason is StopReason.BUDGET_LIMIT:
            limit = s.policy.max_budget_usd if s.policy is not None else None
            spent = self.session.total_cost_usd if self.session is not None else 0.0
            of = f" of ${limit:g}" if limit is not None else ""
            msg = f"budget reached: ${spent:.4f} spent{of} (--max-budget-usd)"
            return Outcome(result.text, "budget_limit", ExitCode.FAILED, msg, **counts)
        if reason is StopReason.ROUND_LIMIT:
            return Outcome(result.text, "round_limit", ExitCode.FAILED, "tool round limit reached", **counts)
        if reason is StopReason.CONTEXT_OVERFLOW:
            msg = describe_error(result.error, s) if result.error else "the context is too long for the model"
            return Outcome(result.text, "context_overflow", ExitCode.FAILED, msg, result.error, **counts)
        if reason is StopReason.MAX_TOKENS:
            cap = f"{s.max_tokens} tokens, --max-tokens" if s.max_tokens is not None else "the model's default"
            msg = f"output token limit reached ({cap}): the answer was cut and its tool calls did not run"
            return Outcome(result.text, "max_tokens", ExitCode.FAILED, msg, **counts)
        if reason is StopReason.ERROR and result.error is not None:
            error = result.error
            return Outcome(result.text, "error", exit_code_for(error), describe_error(error, s), error, **counts)
        return Outcome(result.text, str(reason), ExitCode.FAILED, f"the run stopped: {reason}", **counts)

    def price_source(self) -> str | None:
        """Where the prices of the run's calls came from: one source, or ``mixed``; None before
        any call was priced."""
        found = set(self.price_sources.values())
        if not found:
            return None
        return found.pop() if len(found) == 1 else "mixed"

    def unpriced_models(self) -> list[str]:
        return sorted(m for m, source in self.price_sources.items() if source == "unknown")

    @staticmethod
    def cost(session: Session) -> float | None:
        """What the session spent (the library's own accounting), or None when a call's price
        was unknown (a total would then understate it)."""
        if session.unpriced_calls:
            return None
        return session.total_cost_usd


#: The signals that stop an input: Ctrl-C, a polite kill, the terminal closing.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _add_handlers(loop: asyncio.AbstractEventLoop, callback: Callable[[int], None]) -> list[int]:
    """Install ``callback(signum)`` for :data:`STOP_SIGNALS`; returns those installed."""
    handled: list[int] = []
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # ignored on purpose (`nohup ra ...`): it stays ignored
        try:
            loop.add_signal_handler(signum, callback, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            break  # not the main thread, or no signal support: Ctrl-C raises KeyboardInterrupt
        handled.append(signum)
    return handled


def make_profile(settings: Settings, model: str) -> ProviderProfile:
    profile = _base_profile(settings, model)
    if settings.system_prompt is not None:
        profile.base_instructions = settings.system_prompt  # type: ignore[attr-defined]
    if settings.append_system_prompt:
        profile.user_instructions = settings.append_system_prompt  # type: ignore[attr-defined]
    return profile


def _base_profile(settings: Settings, model: str) -> ProviderProfile:
    s = settings
    if s.profile == "ra":
        from ra.profiles.ra import create_ra_profile

        return create_ra_profile(model, submit=s.submit, web=s.web, provider=s.provider)
    import ra.profiles as profiles

    options: dict[str, Any] = {"provider": s.provider}
    if s.profile == "gemini":
        options["enable_web"] = s.web
    elif s.web:
        raise RunError(
            f"--web is not available with --profile {s.profile} (use the ra or gemini profile)", ExitCode.USAGE
        )
    factory = getattr(profiles, f"create_{s.profile}_profile")
    profile = factory(model, **options)
    if s.submit:
        from ra.profiles.ra import SubmitMode
        from ra.tools.builtin.submit import submit_tool

        profile.tool_registry.register(submit_tool())
        profile.add_control(SubmitMode())
    return profile


def confine(sandbox: Any, local: Any) -> Any:
    """``local`` under ``sandbox`` (a :class:`ra.env.sandbox.SandboxPolicy`; None or
    danger-full-access: ``local`` itself). A sandbox that cannot run here is a ConfigError (exit 2)
    saying what to install or enable - one function, so ``ra`` and ``ra replay`` say the same."""
    if sandbox is None or not sandbox.confined:
        return local
    from ra.env.sandbox import SandboxedExecutionEnvironment, SandboxUnavailable

    from .config import ConfigError

    try:
        return SandboxedExecutionEnvironment(local, sandbox)
    except SandboxUnavailable as exc:
        raise ConfigError(f"--sandbox {sandbox.mode}: {exc}") from None


async def prepare(settings: Settings, listeners: list[Callable[[SessionEvent], None]]) -> RunContext:
    """Adapter, client, model, profile and environment for ``settings`` (may contact the server
    to list its models when none is configured)."""
    from ra.env.local import LocalExecutionEnvironment

    from .budget_prices import check_budget_prices
    from .providers import build_adapter, build_client, resolve_model

    limit_source = _local_defaults(settings)
    adapter = build_adapter(settings)
    client = build_client(settings, adapter)
    try:
        model = await resolve_model(settings, adapter)
        settings.model = model
        check_budget_prices(settings, model)  # a budget that cannot be priced: exit 2, before anything runs
        profile = make_profile(settings, model)
        if settings.policy is not None:
            settings.policy.check_flag_rules(profile.tool_registry.names())
            if settings.offered_tools is not None:
                from .claude_protocol.flags import withheld_tools

                # Claude's --tools: what it leaves out is denied outright (taken off the list and never run).
                withheld = withheld_tools(profile.tool_registry.names(), settings.offered_tools)
                settings.policy.disallowed_tools = (*settings.policy.disallowed_tools, *withheld)
        if settings.ssh is not None:
            from .ssh import check_ssh_settings, open_ssh_environment

            check_ssh_settings(settings, profile.tool_registry)  # before connecting: nothing half applied
            env = await open_ssh_environment(settings.ssh, settings)
        else:
            env = confine(settings.sandbox, LocalExecutionEnvironment(settings.cwd))
    except BaseException:
        await client.close()
        raise
    context = RunContext(settings, client, profile, env, listeners)
    context.owns_env = settings.ssh is not None
    context.step_limit_source = limit_source or settings.max_steps_source
    context.sessions = settings.sessions
    if settings.policy is not None:
        # Hooks run here: under --ssh in ra's own directory (the session's is on the remote).
        context.hooks = settings.policy.build_hooks(settings.cwd if settings.ssh is not None else None)
    context.mcp_servers = mcp_servers(settings)
    return context


def mcp_servers(settings: Settings) -> Any:
    """The run's MCP servers, not started yet (the first session starts them), or None."""
    if settings.mcp is None or not settings.mcp.servers:
        return None
    from ra.mcp import McpServers

    return McpServers(settings.mcp.servers, cwd=settings.cwd)


def _local_defaults(settings: Settings) -> str | None:
    """Conservative limits for the bundled local model (Gemma 3 270M, a base model), which is
    what ``ra`` runs when nothing is configured. It can call tools but rarely finishes a task, and
    without a limit it would go on until the context is full. When ``--max-steps`` /
    ``RA_MAX_STEPS`` / ``max_steps`` are unset, the run stops after
    :data:`LOCAL_DEMO_MAX_STEPS` steps with a final line that says how to raise it. A model
    chosen with ``RA_LOCAL_MODEL`` gets no such limit. Returns how to describe the limit."""
    if settings.provider != "local" or settings.max_steps is not None or os.environ.get("RA_LOCAL_MODEL"):
        return None
    settings.max_steps = LOCAL_DEMO_MAX_STEPS
    return "the default for the bundled local model; raise it with --max-steps"


# -- what the one-shot run and the interactive session share ------------------------------------


def open_trajectory(path: str | None) -> Any:
    from .records import JsonlWriter

    if not path:
        return None
    try:
        stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by the writer
    except OSError as exc:
        raise RunError(f"cannot write the trajectory file {path}: {exc.strerror or exc}", ExitCode.USAGE) from None
    return JsonlWriter(stream, close=True)


def run_start_record(settings: Any, task: str | None, profile: Any) -> dict[str, Any]:
    from ra import __version__

    return {
        "type": "run_start",
        "timestamp": time.time(),
        "ra_version": __version__,
        "task": task,
        "provider": settings.provider,
        "model": settings.model,
        "base_url": settings.base_url,
        "profile": settings.profile,
        "cwd": settings.cwd,
        # ``--ssh``: the tools ran on this host, in ``ssh_dir`` (``cwd`` is where ra ran).
        **(
            {"ssh": settings.ssh.destination, "ssh_dir": settings.ssh.directory}
            if getattr(settings, "ssh", None) is not None
            else {}
        ),
        "submit": settings.submit,
        "web": settings.web,
        "max_steps": settings.max_steps,
        "time_limit": settings.time_limit,
        "sampling": {
            k: v
            for k, v in (
                ("temperature", settings.temperature),
                ("top_p", settings.top_p),
                ("max_tokens", settings.max_tokens),
                ("reasoning_effort", settings.reasoning_effort),
            )
            if v is not None
        },
        "tools": profile.tool_registry.names(),
        # Names and where each was configured (never a server's env or headers); their tools and
        # statuses follow in the session_start event.
        "mcp_servers": dict(settings.mcp.sources) if settings.mcp is not None else {},
    }


def header(settings: Any) -> str:
    where = f" at {settings.base_url}" if settings.base_url else ""
    mode = " · submit mode" if settings.submit else ""
    ssh = getattr(settings, "ssh", None)
    cwd = settings.cwd if ssh is None else f"{ssh.destination}:{ssh.directory} (over SSH)"
    return f"{settings.model} via {settings.provider}{where} · {cwd}{mode}"


def error_record(exc: BaseException, settings: Any) -> dict[str, Any]:
    return {
        "type": "result",
        "timestamp": time.time(),
        "status": "error",
        "exit_code": int(exit_code_for(exc)),
        "text": None,
        "error": describe_error(exc, settings),
    }


def as_run_error(exc: BaseException, settings: Any, debug: bool) -> RunError:
    if isinstance(exc, RunError):
        return exc
    if debug:
        traceback.print_exception(exc)
    return RunError(describe_error(exc, settings), exit_code_for(exc))

"""``ra [OPTIONS] [TASK]``: parse the command line, run one task or an interactive session.

Exit codes: 0 done, 1 failed or a limit hit, 2 usage error, 3 provider or authentication error,
130 interrupted. Every error is one line on stderr (``ra: error: ...``); ``--debug`` adds the
traceback and ra's log messages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
import traceback
from typing import IO, Any, NoReturn

from .argtypes import positive_float as _positive_float
from .argtypes import positive_int as _positive_int
from .errors import ExitCode, RunError, UsageError, describe_error, exit_code_for

__all__ = ["build_parser", "run"]

_EPILOG = """\
examples:
  ra "Add a --verbose flag to cli.py"                run a task in the current directory
  ra                                                 an interactive session (a terminal)
  git diff | ra "review this"                        the task, then what was piped (up to 256 KiB)
  ra --base-url http://127.0.0.1:8000/v1 "..."       any OpenAI-compatible server (vLLM, llama.cpp)
  ra --permission-mode plan "how would you ...?"     read and plan only: no edits, no commands
  ra --output-format stream-json "..." | jq .        SDK messages, as `claude -p` writes them
  ra -c "go on"                                      continue this directory's newest session
  ra --resume ID --fork-session "try another way"    a new session from a copy of session ID

commands:
  ra models                                          ra's model catalogue (prices, context, defaults)
                                                     and what the configured server lists (GET /models)
  ra replay ID|RECORD.jsonl                          re-run a recorded session's tool calls on this tree and
                                                     report every result that differs (exit 1; see --help)
  ra sessions [--all] [--json]                       the recorded sessions of this directory (--all: all)
  ra sessions show ID | delete ID                    print a session's conversation, or delete it
  ra batch TASKS.jsonl [--out DIR] [--concurrency N] run a file of tasks, each in its own working copy
                                                     (--backend ray [--address ADDR]: on a Ray cluster);
                                                     a result line per task in DIR/results.jsonl
  ra mcp list [--tools] [--json]                     start the configured MCP servers and show each one's
                                                     status and tools (exit 1 when one failed)
  ra acp                                             an Agent Client Protocol agent for editors (Zed,
                                                     JetBrains, Neovim, Emacs) on stdio; see ra acp --help
  ra completion bash|zsh|fish                        a completion script: eval "$(ra completion bash)"
                                                     in ~/.bashrc (zsh alike); fish: ra completion fish | source
  ra -- models                                       the task "models" (not the command)

interactive commands: /help, /new, /clear, /resume [ID], /fork, /label NAME, /compact [TEXT], /model [NAME],
/cost, /tools, /exit

sessions: every run is recorded (one JSONL file per session under $RA_SESSIONS_DIR, else the
user state directory, e.g. ~/.local/state/ra/sessions) as each step completes, so a run that was
killed can go on with --continue; the summary line names the session. --no-session-persistence
records nothing.

exit codes:
  0    the task is done (the answer is on stdout)
  1    the run failed or hit a limit (--max-steps, --time-limit, --max-budget-usd, context)
  2    usage error (bad flag or config value)
  3    provider or authentication error (missing key, unreachable server, unknown model)
  130  interrupted (Ctrl-C)
  143  stopped by SIGTERM (129: SIGHUP); running commands are stopped first

provider selection (first that applies): --provider, RA_PROVIDER, `provider` in the config file;
otherwise Chat Completions (openai-compatible) when --base-url, OPENAI_COMPATIBLE_BASE_URL or
OPENAI_API_KEY is set, then anthropic (ANTHROPIC_API_KEY), gemini (GEMINI_API_KEY), then the local
model when installed (pip install 'ra-agent[local]').

permissions: with no --permission-mode and no allow rules every tool call runs (deny rules still
apply). A mode or allow rules turn checks on ('default' mode: reads run, edits and commands are
asked about): an interactive session asks (y once, a always, n or a reason to deny); a run with a
task denies and says on stderr which --allowed-tools rule would allow the call. Rules are TOOL or
TOOL(SPEC), with the profile's tool names or Claude Code's (on every profile): Bash(git diff:*)
matches commands starting with those words, Edit(src/**) the files every editing tool writes,
Read(./.env) what every reading tool reads, WebFetch(domain:example.com) hosts. A flag's rule that
names no tool of the session is an error (exit 2); the config file's, a warning.

config file: config.toml in the user config directory (e.g. ~/.config/ra/config.toml), or RA_CONFIG.
Flags win; rule lists from the file and the flags are used together. Keys:
  provider, model, base_url, profile, submit, web, max_steps, time_limit, temperature, top_p,
  max_tokens, reasoning_effort, max_retries     as the flags of the same names
  max_budget_usd = 2.5, permission_mode = "accept_edits", fallback_models = ["m2"]
  allowed_tools / disallowed_tools / ask_tools = ["Bash(git diff:*)", "Edit(src/**)", ...]
  [providers.NAME]       api_key, base_url, model for one provider (openai, anthropic, gemini, ...)
  [prices."MODEL"]       input, output (USD per million tokens), cache_read, cache_write; 0 = free
  [[hooks.PreToolUse]]   matcher = "Bash|shell.*", hooks = [{ type = "command", command = "..." }]
                         (Claude Code's hook format: the event as JSON on stdin; exit 2 denies)
  [agents.NAME]          description, prompt, tools, disallowed_tools, model, max_turns,
                         permission_mode; also agent files in Claude Code's format (YAML front
                         matter + prompt) in ~/.claude/agents, .claude/agents and .ra/agents
  [mcp_servers.NAME]     command, args, env, cwd (a server ra starts) or url, headers, type
                         ("http" or "sse"): an MCP server, as in .mcp.json
  trusted_mcp_projects = ["~/src/app"]   directories whose .mcp.json ra reads (see below)
  sandbox_mode = "workspace-write"       as --sandbox (read-only, workspace-write, danger-full-access)
  [sandbox_workspace_write]  network_access = true, writable_roots = ["~/.cache/pip"] (that mode only)

MCP servers: their tools are named mcp__SERVER__TOOL (rules: mcp__SERVER, mcp__SERVER__TOOL). Read
in this order, a later one replacing a server of the same name: the config file's [mcp_servers],
the working directory's .mcp.json when that directory is in trusted_mcp_projects (a cloned
repository's file could start any command, so an untrusted one is not read: a notice says so), then
each --mcp-config. --strict-mcp-config: only the --mcp-config ones. A server that cannot start is a
warning; the run goes on without it.

environment: RA_PROVIDER, RA_MODEL, RA_CONFIG, RA_MAX_STEPS, RA_TIME_LIMIT, RA_HISTORY_FILE, RA_SESSIONS_DIR,
RA_LOCAL_MODEL (a GGUF file for the local provider), OPENAI_API_KEY, OPENAI_BASE_URL,
ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, GEMINI_API_KEY (or GOOGLE_API_KEY), GEMINI_BASE_URL,
OPENAI_COMPATIBLE_BASE_URL, OPENAI_COMPATIBLE_API_KEY, BRAVE_SEARCH_API_KEY (web_search), NO_COLOR.
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors stay one line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    from ra import __version__

    from .claude_protocol.flags import add_arguments as add_claude_arguments
    from .policy import add_arguments as add_policy_arguments
    from .resume import PICK
    from .run_settings import SANDBOX_HELP, add_mcp_arguments, add_model_arguments
    from .ssh import add_ssh_arguments

    p = _Parser(
        prog="ra",
        usage="ra [OPTIONS] [TASK ...]\n"
        "       ra models [--provider P] [--base-url URL] [--json]\n"
        "       ra replay RECORD [--ignore REGEX]... [--stop-at-first] [--steps A-B] [--sandbox MODE] [--json]\n"
        "       ra sessions [--all] [--json] | ra sessions show ID | ra sessions delete ID\n"
        "       ra batch TASKS.jsonl [--out DIR] [--concurrency N] [--backend local|ray] [...]\n"
        "       ra mcp list [--tools] [--json] [--mcp-config FILE|JSON]... [--strict-mcp-config]\n"
        "       ra acp [OPTIONS]\n"
        "       ra completion {bash,zsh,fish}",
        description="ra: a coding agent. With a TASK it runs it and prints the answer; "
        "without one it opens an interactive session.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("task", nargs="*", metavar="TASK", help="the task; '-' reads it from stdin")
    add_model_arguments(p)
    p.add_argument("--effort", metavar="LEVEL", help="Claude Code's spelling of --reasoning-effort")
    g = p.add_argument_group("run")
    g.add_argument(
        "--submit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run until the model calls submit(answer) (--no-submit: not, whatever the config file says)",
    )
    g.add_argument("--max-steps", type=_positive_int, metavar="N", help="stop after N model steps (exit 1)")
    g.add_argument("--time-limit", type=_positive_float, metavar="SECONDS", help="stop after SECONDS (exit 1)")
    g.add_argument(
        "--web", action=argparse.BooleanOptionalAction, default=None, help="enable web_search, web_open, web_find"
    )
    g.add_argument("--system-prompt", metavar="TEXT", help="base instructions in place of the profile's own")
    g.add_argument("--append-system-prompt", metavar="TEXT", help="instructions added at the end of the system prompt")
    g.add_argument(
        "--image",
        action="append",
        metavar="FILE",
        help="send an image (png, jpeg, gif, webp) with the task (repeatable)",
    )
    g.add_argument("-C", "--cwd", metavar="DIR", help="working directory (default: the current one)")
    g.add_argument("--sandbox", metavar="MODE", help=SANDBOX_HELP)
    add_ssh_arguments(p)
    add_policy_arguments(p)
    add_mcp_arguments(p)
    g = p.add_argument_group("sessions")
    g.add_argument(
        "-r",
        "--resume",
        nargs="?",
        const=PICK,
        metavar="ID",
        help="go on with session ID (`ra sessions` lists them); without ID, pick one on the terminal",
    )
    g.add_argument(
        "-c", "--continue", dest="continue_", action="store_true", help="go on with this directory's newest session"
    )
    g.add_argument(
        "--resume-session-at",
        metavar="ENTRY",
        help="with --resume/--continue: go on from this entry id or label (`ra sessions show ID` lists labels) "
        "instead of the last one; without --fork-session the next entries start a branch",
    )
    g.add_argument(
        "--fork-session",
        action="store_true",
        help="with --resume/--continue: go on in a new session (a copy); the old one stays as it was",
    )
    g.add_argument(
        "--session-id", metavar="ID", help="the new session's id (e.g. a UUID); an id already recorded is refused"
    )
    g.add_argument(
        "--no-session-persistence", action="store_true", help="record nothing (the session cannot be resumed)"
    )
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print one JSON event per line on stdout")
    g.add_argument(
        "--output-format",
        choices=("text", "json", "stream-json"),
        default="text",
        help="stream-json: the SDK messages (system init, assistant, user tool results, result) one JSON "
        "object per line, with the field names `claude -p --output-format stream-json` uses; json: only "
        "the final result message",
    )
    g.add_argument(
        "--include-partial-messages",
        action="store_true",
        help="with --output-format stream-json: also write a stream_event message for every event of a "
        "streamed response (as `claude -p --include-partial-messages` does)",
    )
    g.add_argument("--output-trajectory", metavar="FILE", help="write every event (full tool outputs) as JSONL")
    g.add_argument(
        "--otel",
        action="store_true",
        help="send OpenTelemetry traces (GenAI semantic conventions) to the exporter OTEL_TRACES_EXPORTER "
        "names (default otlp); needs opentelemetry-sdk. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true "
        "also records messages, secrets redacted",
    )
    g.add_argument("-q", "--quiet", action="store_true", help="print only the answer (and errors)")
    g.add_argument("-v", "--verbose", action="store_true", help="show failed tool calls' results and diffs in full")
    g.add_argument("--debug", action="store_true", help="show tracebacks and log messages")
    g.add_argument("-V", "--version", action="version", version=f"ra {__version__}")
    add_claude_arguments(p)
    return p


def _setup_logging(debug: bool) -> None:
    if debug:
        from .debuglog import RedactingFilter

        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s", stream=sys.stderr)
        # On the handler, so that records of every logger (httpcore's response headers) pass it.
        for handler in logging.getLogger().handlers:
            handler.addFilter(RedactingFilter())
        return
    # Without a handler Python prints warnings and errors (with tracebacks) through its "last
    # resort" handler; ra reports errors itself, in one line.
    for name in ("ra", "asyncio", "httpx"):
        logging.getLogger(name).addHandler(logging.NullHandler())


def _print_error(text: str, stream: IO[str] | None = None) -> None:
    stream = stream or sys.stderr
    try:
        stream.write(f"ra: error: {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass


_IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def _images(paths: list[str], cwd: str) -> tuple[Any, ...]:
    """``--image`` files as ImageData (the adapters inline them), checked before anything runs."""
    from ra.llm.types import ImageData

    images = []
    for path in paths:
        full = os.path.join(cwd, os.path.expanduser(path))
        kind = _IMAGE_TYPES.get(os.path.splitext(full)[1].lower())
        if kind is None:
            raise UsageError(f"--image {path}: not a png, jpeg, gif or webp file")
        if not os.path.isfile(full):
            raise UsageError(f"--image {path}: no such file")
        images.append(ImageData(url=os.path.abspath(full), media_type=kind))
    return tuple(images)


def _print_notice(text: str) -> None:
    try:
        sys.stderr.write(f"ra: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def run(argv: list[str]) -> int:
    """Run the command; always returns an exit code (never raises, never prints a traceback
    unless ``--debug``)."""
    debug = "--debug" in argv
    _setup_logging(debug)
    try:
        return _run(argv, debug)
    except KeyboardInterrupt:
        _print_error("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`ra models | head`): nothing left to tell it, and nothing to say
        # on stderr about it. Later writes (at exit) go nowhere instead of failing again.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.FAILED
    except UsageError as exc:
        _print_error(f"{exc} (see `ra --help`)")
        return ExitCode.USAGE
    except SystemExit as exc:  # argparse's --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except BaseException as exc:
        if debug:
            traceback.print_exception(exc)
        code = exit_code_for(exc)
        if not isinstance(exc, Exception):
            raise
        text = describe_error(exc, None)
        if code is ExitCode.FAILED and not isinstance(exc, RunError):
            text = f"{text} (internal error; run with --debug for details)"
        _print_error(text)
        return code


def _run(argv: list[str], debug: bool) -> int:
    from .completion import complete, is_completing, shell_script

    if is_completing():
        complete(build_parser())
    # A first word that names a command runs it (`ra -- models` runs the task "models").
    if argv and argv[0] == "models":
        from .models import run_models

        return run_models(argv[1:])
    if argv and argv[0] == "replay":
        from .replay import run_replay

        return run_replay(argv[1:])
    if argv and argv[0] == "sessions":
        from .sessions import run_sessions

        return run_sessions(argv[1:])
    if argv and argv[0] == "batch":
        from .batch_command import run_batch

        return run_batch(argv[1:])
    if argv and argv[0] == "mcp":
        from .mcp_command import run_mcp

        return run_mcp(argv[1:])
    if argv and argv[0] == "acp":
        from .acp_command import run_acp

        return run_acp(argv[1:])
    if argv and argv[0] == "completion":
        sys.stdout.write(shell_script(argv[1:]))
        return 0
    args = build_parser().parse_args(argv)
    if not args.json:
        return _run_args(args, debug)
    try:
        return _run_args(args, debug)
    except Exception as exc:
        # --json readers get the outcome as a record even when the run never started.
        from .records import JsonlWriter
        from .runner import error_record

        JsonlWriter(sys.stdout).write(error_record(exc, None))
        raise


def _with_added_dirs(sandbox: Any, dirs: list[str], cwd: str, notices: list[str]) -> Any:
    """Claude's ``--add-dir`` under a sandbox: in workspace-write each directory becomes writable
    too (it is what the flag grants); read-only stays read-only, with a notice."""
    import dataclasses

    if sandbox.mode != "workspace-write":
        notices.append(f"--add-dir: the {sandbox.mode} sandbox makes nothing writable; the directories stay read-only")
        return sandbox
    added = tuple(os.path.realpath(os.path.join(cwd, os.path.expanduser(d))) for d in dirs)
    return dataclasses.replace(sandbox, writable_roots=(*sandbox.writable_roots, *added))


def _run_args(args: argparse.Namespace, debug: bool) -> int:
    from .claude_protocol.flags import apply as apply_claude_flags
    from .claude_protocol.flags import offered_tools
    from .render import choose_renderer
    from .resume import choose, pick
    from .run_settings import settings_from_args

    sessions = choose(args)  # the session flags' contradictions: before anything is read
    task = " ".join(args.task).strip()
    stream_input = args.input_format == "stream-json"
    if stream_input:
        # Claude Code's SDK mode: the messages (and control requests) come as JSON lines on stdin.
        if task:
            raise UsageError("--input-format stream-json reads the messages from stdin; give no TASK")
        if args.output_format != "stream-json":
            raise UsageError("--input-format stream-json needs --output-format stream-json")
    # No task (none given, or an empty one) and no terminal: the task comes from stdin, and an
    # empty stdin is a usage error - interactive mode needs a terminal to talk to.
    elif task == "-" or (not task and not sys.stdin.isatty()):
        task = sys.stdin.read().strip()
        if not task:
            raise UsageError(
                "no task: stdin was empty; give the task as an argument or on stdin (interactive mode needs a terminal)"
            )
    elif task and sys.stdin is not None and not sys.stdin.isatty():
        from .piped import MAX_PIPED_BYTES, read_piped, with_piped_input

        piped, dropped = read_piped(notice=lambda text: _print_notice(text))
        if piped.strip():
            task = with_piped_input(task, piped, dropped)
            if dropped:
                _print_notice(f"standard input was cut to its first {MAX_PIPED_BYTES // 1024} KiB")
    interactive = not task and not stream_input
    claude_notices, sdk_servers = apply_claude_flags(args, args.cwd, stream_input=stream_input)
    for text in claude_notices:
        _print_notice(text)
    if interactive and (args.json or args.output_format != "text"):
        raise UsageError("--json and --output-format need a TASK (interactive sessions print to the terminal)")
    if args.json and args.output_format != "text":
        raise UsageError("--json and --output-format are two different outputs; choose one")
    if args.include_partial_messages and args.output_format != "stream-json":
        raise UsageError("--include-partial-messages needs --output-format stream-json")

    # With --input-format stream-json the SDK may name more MCP servers in its initialize request:
    # serve() checks the rules that name servers once it has read it.
    settings = settings_from_args(args, sdk_servers=sdk_servers, check_mcp_rules_now=not stream_input)
    if stream_input and settings.policy.permission_mode is None:
        settings.policy.permission_mode = "default"  # Claude Code's default: edits and commands are asked about
    if args.otel:
        from .otel import cli_tracing

        settings.tracing, settings.flush_traces = cli_tracing(os.environ)
    pick(sessions, settings.cwd)  # --resume without an id: the user picks one (a terminal only)
    settings.sessions = sessions
    settings.system_prompt = args.system_prompt
    settings.append_system_prompt = args.append_system_prompt
    settings.offered_tools = offered_tools(args.claude_tools)
    if args.add_dir and settings.sandbox is not None and settings.sandbox.confined:
        settings.sandbox = _with_added_dirs(settings.sandbox, args.add_dir, settings.cwd, settings.notices)
    if args.image:
        if interactive:
            raise UsageError("--image needs a TASK (it is sent with the task)")
        settings.images = _images(args.image, settings.cwd)
    if stream_input:
        from .claude_protocol.serve import serve

        for notice in settings.notices:
            _print_notice(notice)
        return asyncio.run(
            serve(
                settings,
                sdk_servers=sdk_servers,
                prompt_tool=args.permission_prompt_tool,
                include_partial=args.include_partial_messages,
            )
        )
    renderer: Any
    if args.output_format != "text":
        from .sdk_output import MessageOutput

        renderer = MessageOutput(args.output_format, include_partial=args.include_partial_messages)
    else:
        renderer = choose_renderer(
            json_mode=args.json, quiet=args.quiet, submit_mode=settings.submit, verbose=args.verbose, cwd=settings.cwd
        )
    for notice in settings.notices:
        renderer.notice(notice)
    if settings.web and not os.environ.get("BRAVE_SEARCH_API_KEY") and not args.quiet and not args.json:
        renderer.notice("--web: web_search needs BRAVE_SEARCH_API_KEY; web_open and web_find work without it")
    if interactive:
        from .interactive import run_interactive

        return run_interactive(settings, renderer, trajectory=args.output_trajectory, debug=debug)
    return asyncio.run(_one_shot(settings, task, renderer, args.output_trajectory, debug, args.output_format))


async def _one_shot(
    settings: Any, task: str, renderer: Any, trajectory_path: str | None, debug: bool, output_format: str = "text"
) -> int:
    from .ask import NoTerminalDenier
    from .render import RunSummary
    from .runner import as_run_error, error_record, header, open_trajectory, prepare, run_start_record
    from .sdk_output import MessageOutput

    trajectory = open_trajectory(trajectory_path)
    listeners = [renderer] + ([trajectory.event] if trajectory else [])
    try:
        try:
            ctx = await prepare(settings, listeners)
        except Exception as exc:
            # Failures before the session starts (listing models, building the profile).
            error = as_run_error(exc, settings, debug)
            if trajectory is not None:
                trajectory.write(error_record(error, settings))
            raise error from exc
        if trajectory is not None:
            trajectory.write(run_start_record(settings, task, ctx.profile))
        ctx.can_use_tool = NoTerminalDenier(renderer.notice)
        try:
            session = await ctx.open_chosen()
        except Exception as exc:
            await ctx.aclose()
            error = as_run_error(exc, settings, debug)
            if trajectory is not None:
                trajectory.write(error_record(error, settings))
            raise error from exc
        renderer.start(header(settings))
        for note in ctx.session_notes(session):
            renderer.notice(note)
        if isinstance(renderer, MessageOutput):
            renderer.attach(session)
        # A resumed session starts with the record's usage and spend: the summary is this run's.
        usage_before, spent_before, unpriced_before = session.usage, session.total_cost_usd, session.unpriced_calls
        try:
            outcome = await ctx.run_input(session, task, images=settings.images)
        finally:
            await ctx.aclose()
        usage = _usage_since(session.usage, usage_before)
        cost = None if session.unpriced_calls > unpriced_before else session.total_cost_usd - spent_before
        elapsed = time.monotonic() - ctx.started
        summary = RunSummary(
            outcome.steps,
            outcome.tool_calls,
            usage,
            cost,
            elapsed,
            price_source=ctx.price_source(),
            unpriced=ctx.unpriced_models(),
            session_id=session.id,
            recorded=ctx.recorded(session),
        )
        if outcome.code is ExitCode.DONE:
            renderer.answer(outcome.text)
        else:
            if debug and outcome.error is not None:
                traceback.print_exception(outcome.error)
            renderer.error(outcome.message or outcome.reason)
        renderer.summary(summary)
        record = {
            "type": "result",
            "timestamp": time.time(),
            "status": outcome.reason,
            "exit_code": int(outcome.code),
            "text": outcome.text if outcome.code is ExitCode.DONE else None,
            "error": outcome.message if outcome.code is not ExitCode.DONE else None,
            **summary.record(),
        }
        renderer.result(record)
        if trajectory is not None:
            trajectory.write({**record, "system_prompt": session.system_prompt})
        return int(outcome.code)
    finally:
        renderer.close()
        if trajectory is not None:
            trajectory.close()


def _usage_since(now: Any, before: Any) -> Any:
    """The tokens used since ``before`` (both cumulative :class:`~ra.llm.types.Usage`)."""
    import dataclasses

    def minus(a: int | None, b: int | None) -> int | None:
        return None if a is None else a - (b or 0)

    return dataclasses.replace(
        now,
        input_tokens=now.input_tokens - before.input_tokens,
        output_tokens=now.output_tokens - before.output_tokens,
        total_tokens=now.total_tokens - before.total_tokens,
        reasoning_tokens=minus(now.reasoning_tokens, before.reasoning_tokens),
        cache_read_tokens=minus(now.cache_read_tokens, before.cache_read_tokens),
        cache_write_tokens=minus(now.cache_write_tokens, before.cache_write_tokens),
    )

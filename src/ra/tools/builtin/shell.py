"""Command tools: ``shell`` (coding-agent-loop-spec 3.3) and ``shell_command`` (ra-spec).

Both run one ``bash -c`` command through ``ctx.env.exec_command``, which owns the process group,
the SIGTERM/SIGKILL timeout sequence, environment filtering and bounded output capture. What the
tools add:

* the timeout: the call's ``timeout_ms``, else the tool's own default (the Anthropic profile's
  120 s), else the session's ``default_command_timeout_ms``; never above the session's
  ``max_command_timeout_ms`` (the model is told when its request was capped);
* live output: ``ctx.on_output`` goes to the environment, so every chunk becomes a
  TOOL_CALL_OUTPUT_DELTA event while the command runs;
* the result text: exit code and duration first, then the combined output, so head/tail
  truncation can never cut the exit code away; the spec 5.4 timeout message when it fired; where
  the full output went when the environment spilled it to a file.

A non-zero exit or a timeout marks the result as an error (spec Appendix B: ShellExitError,
ShellTimeout); the output is still all there for the model to read.
"""

from __future__ import annotations

from typing import Any

from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from ._common import config_value, define, error, integer, optional_int

__all__ = ["format_exec_result", "shell_command_tool", "shell_tool"]

SPEC_DEFAULT_TIMEOUT_MS = 10_000
SPEC_MAX_TIMEOUT_MS = 600_000


def shell_tool(name: str = "shell", default_timeout_ms: int | None = None) -> RegisteredTool:
    """``shell(command, timeout_ms?, description?, workdir?)``.

    ``default_timeout_ms`` replaces the session's default for this tool (Claude Code's 120 s for the
    Anthropic profile); the session's maximum still applies.
    """
    if default_timeout_ms is not None and default_timeout_ms < 1:
        raise ValueError(f"default_timeout_ms must be positive, got {default_timeout_ms}")
    default_text = (
        f"{default_timeout_ms} ms" if default_timeout_ms is not None else "the session default, usually 10000 ms"
    )
    definition = define(
        name,
        "Run a command with bash and return its exit code, duration and combined stdout/stderr. "
        f"The command is stopped after timeout_ms (default: {default_text}); give a longer "
        "timeout_ms for slow builds or test suites. Output is streamed while it runs.",
        {
            "command": {"type": "string", "description": "The bash command line to run."},
            "timeout_ms": integer("Timeout for this command in milliseconds.", minimum=1),
            "description": {
                "type": "string",
                "description": "A few words saying what the command does, shown to the user.",
            },
            "workdir": {
                "type": "string",
                "description": "Directory to run in (default: the working directory).",
            },
        },
        ["command"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await _run(arguments, ctx, default_timeout_ms, None)

    return RegisteredTool(definition, execute, effect=ToolEffect.EXECUTE)


def shell_command_tool(name: str = "shell_command", default_timeout_ms: int | None = None) -> RegisteredTool:
    """ra-spec's ``shell_command(command, workdir?, timeout_ms?, max_output_chars?)``.

    It gets the shell tool's output limits (30 000 characters, head and tail kept, 256 lines), and
    ``max_output_chars`` lets the model ask for less on a call it knows will be noisy.
    """
    if default_timeout_ms is not None and default_timeout_ms < 1:
        raise ValueError(f"default_timeout_ms must be positive, got {default_timeout_ms}")
    definition = define(
        name,
        "Run a bash command and return its exit code, duration and combined stdout/stderr. "
        "Use workdir rather than `cd`; raise timeout_ms for slow commands; set max_output_chars to "
        "keep only the beginning and end of a long output.",
        {
            "command": {"type": "string", "description": "The bash command line to run."},
            "workdir": {
                "type": "string",
                "description": "Directory to run in (default: the working directory).",
            },
            "timeout_ms": integer("Timeout for this command in milliseconds.", minimum=1),
            "max_output_chars": integer(
                "Keep at most this many characters of output (its beginning and end).", minimum=1
            ),
        },
        ["command"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await _run(arguments, ctx, default_timeout_ms, optional_int(arguments, "max_output_chars"))

    return RegisteredTool(
        definition,
        execute,
        output_limit=30_000,
        truncation_mode="head_tail",
        line_limit=256,
        effect=ToolEffect.EXECUTE,
    )


async def _run(
    arguments: dict[str, Any], ctx: ToolContext, tool_default: int | None, max_chars: int | None
) -> ToolOutput:
    command = arguments["command"]
    if not command.strip():
        return error("command is empty; give the command line to run.")
    maximum = config_value(ctx, "max_command_timeout_ms", SPEC_MAX_TIMEOUT_MS)
    default = tool_default if tool_default is not None else config_value(ctx, "default_command_timeout_ms", 0)
    if default <= 0:
        default = SPEC_DEFAULT_TIMEOUT_MS
    requested = optional_int(arguments, "timeout_ms")
    timeout = requested if requested is not None else default
    notes: list[str] = []
    if timeout > maximum:
        if requested is not None:
            notes.append(f"[timeout_ms {requested} is above the maximum of {maximum} ms; {maximum} ms was used.]")
        timeout = maximum
    workdir = arguments.get("workdir") or None
    try:
        result = await ctx.env.exec_command(command, timeout_ms=timeout, working_dir=workdir, on_output=ctx.on_output)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if workdir is not None:
            return error(f"Cannot run the command: {exc}. Check workdir ({workdir!r}).")
        return error(f"Cannot run the command: {exc}")
    except (OSError, ValueError) as exc:
        return error(f"Cannot run the command: {exc}")
    # The host gets all of the output (TOOL_CALL_END, trajectories); only the model's copy is
    # cut to max_output_chars.
    stopped = _stopped_because(ctx)
    text = format_exec_result(result, timeout, notes=notes, stopped=stopped)
    for_model = (
        format_exec_result(result, timeout, max_chars=max_chars, notes=notes, stopped=stopped) if max_chars else None
    )
    metadata: dict[str, Any] = {
        "exit_code": result.exit_code,
        # Kept apart for the host (a PostToolUse hook's ``tool_response`` has them, as Claude
        # Code's Bash tool reports them); the model reads them combined.
        "stdout": result.stdout,
        "stderr": result.stderr,
        "aborted": result.aborted,
        "timed_out": result.timed_out,
        "duration_ms": result.duration_ms,
        "timeout_ms": timeout,
    }
    if result.full_output_path:
        metadata["full_output_path"] = result.full_output_path
    if arguments.get("description"):
        metadata["description"] = arguments["description"]
    return ToolOutput(
        text,
        is_error=result.exit_code != 0 or result.timed_out,
        metadata=metadata,
        for_model=for_model if for_model != text else None,
    )


#: What the model is told about a command the run stopped, by why the input was stopped.
_STOPPED = {
    "interrupted": "stopped: the user interrupted the run",
    "time_limit": "stopped: the run's time limit was reached",
}


def _stopped_because(ctx: ToolContext) -> str:
    if ctx.aborted:
        return "stopped: the session was aborted"
    reason = ctx.stopping() if ctx.stopping is not None else None
    return _STOPPED.get(reason or "", "stopped before it finished")


def format_exec_result(
    result: Any,
    timeout_ms: int,
    *,
    max_chars: int | None = None,
    notes: list[str] | None = None,
    stopped: str = "stopped before it finished",
) -> str:
    """The text the model reads for one finished command (an ``ExecResult``)."""
    from ra.env.local import timeout_message
    from ra.tools.truncation import truncate_output

    output = result.output
    if result.timed_out and "Command timed out" not in output:
        output = f"{output.rstrip(chr(10))}\n{timeout_message(timeout_ms)}" if output else timeout_message(timeout_ms)
    if max_chars is not None and len(output) > max_chars:
        output = truncate_output(output, max_chars, "head_tail")
    status = f"Exit code: {result.exit_code}"
    if result.timed_out:
        status += f" (timed out after {timeout_ms} ms)"
    elif result.aborted:
        status += f" ({stopped})"
    lines = [status, f"Duration: {result.duration_ms} ms"]
    lines.extend(notes or ())
    if result.full_output_path:
        lines.append(
            f"[The output was too large to keep in memory ({result.total_bytes} bytes); the full output "
            f"is in {result.full_output_path}. Search it with grep or page through it with read_file.]"
        )
    lines.append("Output:" if output else "Output: (none)")
    if output:
        lines.append(output.rstrip("\n"))
    return "\n".join(lines)

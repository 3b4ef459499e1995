"""Command hooks: shell commands that receive a hook's input as JSON and answer with JSON.

The convention is Claude Code's, so existing hook scripts work with ra:

* the command runs with ``bash -c`` in the session's working directory, with the hook input as
  one JSON object on stdin (``session_id``, ``cwd``, ``hook_event_name``, ``tool_name`` (Claude
  Code's name for the tool; ra's is ``ra_tool_name``), ``tool_input``, ``tool_use_id``, ...) and
  ``CLAUDE_PROJECT_DIR`` / ``RA_PROJECT_DIR`` set to the working directory;
* **exit 0**: stdout, when it is a JSON object, is the answer (``decision``, ``reason``,
  ``continue``, ``stopReason``, ``systemMessage``, ``hookSpecificOutput``); for SessionStart and
  UserPromptSubmit, plain text on stdout is added to the conversation as context;
* **exit 2**: a blocking answer, with stderr as the reason: PreToolUse denies the call (the model
  reads the reason), Stop and SubagentStop send the model on, UserPromptSubmit refuses the input,
  PreCompact cancels the compaction, PostToolUse shows the reason to the model; elsewhere it is
  only reported;
* **any other exit** is Claude Code's *non-blocking error*: a WARNING (with stderr) for the user,
  and the hook has no say - the call runs, the prompt goes in;
* a hook that **cannot be run or times out**, or answers JSON whose decision cannot be read,
  denies a PreToolUse call (ra cannot know what it decided; Claude Code lets a timed-out hook
  pass) and is a WARNING anywhere else.

The hook is finished when its process exits, even if a background job it started still holds
stdout open; whatever it left running - in its process group or moved out of it with
``setsid`` (found by the :mod:`ra.env.proctree` cookie) - is stopped then, and a command past
its timeout is stopped the same way (SIGTERM, then SIGKILL), so a hook never outlives its call.

Configuration, as in Claude Code's settings (what :func:`hooks_from_config` reads)::

    {"hooks": {"PreToolUse": [{"matcher": "Bash|shell",
                               "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .registry import Hooks
from .types import HookEvent, HookInput, HookResult

__all__ = ["CommandHook", "CommandHookError", "hooks_from_config"]

#: Claude Code's default timeout for a command hook, in seconds.
DEFAULT_TIMEOUT_S = 60.0
#: Most bytes of stdout/stderr kept from a hook (a runaway script must not fill memory).
_OUTPUT_CAP = 1024 * 1024
_PLAIN_TEXT_CONTEXT = (HookEvent.SESSION_START, HookEvent.USER_PROMPT_SUBMIT)
#: Events where exit status 2 refuses what is about to happen (PreCompact: the compaction).
_BLOCKING = (
    HookEvent.PRE_TOOL_USE,
    HookEvent.STOP,
    HookEvent.SUBAGENT_STOP,
    HookEvent.USER_PROMPT_SUBMIT,
    HookEvent.PRE_COMPACT,
)


class CommandHookError(Exception):
    """A command hook exited with an error other than 2, or wrote unreadable JSON."""


class CommandHook:
    """A hook callable that runs ``command``; register it with ``Hooks.on`` like any hook."""

    __slots__ = ("__name__", "command", "cwd", "env", "timeout")

    def __init__(
        self,
        command: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ):
        """``cwd``: the local directory the command runs in and ``CLAUDE_PROJECT_DIR`` names;
        None: the session's working directory. Set when the tools run elsewhere (``ra --ssh``:
        the session's directory is on another machine, the hook runs on this one)."""
        if not isinstance(command, str) or not command.strip():
            raise ValueError("a command hook needs a non-empty command")
        self.command = command
        self.timeout = float(timeout)
        self.env = dict(env or {})
        self.cwd = cwd
        self.__name__ = f"command:{command if len(command) <= 60 else command[:57] + '...'}"

    async def __call__(self, data: HookInput) -> HookResult | None:
        from ra.env.proctree import COOKIE_VAR, new_cookie

        payload = json.dumps(data.to_json(), ensure_ascii=False, default=str).encode("utf-8")
        cookie = new_cookie()
        where = self.cwd if self.cwd is not None else data.cwd
        env = {
            **os.environ,
            "CLAUDE_PROJECT_DIR": where,
            "RA_PROJECT_DIR": where,
            **self.env,
            # Marks everything the hook starts, also what leaves its process group (setsid).
            COOKIE_VAR: cookie,
        }
        process = await asyncio.create_subprocess_exec(
            "/bin/bash",
            "-c",
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=where or None,
            env=env,
            start_new_session=True,
        )
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            async with asyncio.timeout(self.timeout):
                await _communicate(process, payload, out, err)
        except TimeoutError:
            await _stop(process, cookie)
            raise TimeoutError(f"timed out after {self.timeout:g}s") from None
        except BaseException:
            await _stop(process, cookie)
            raise
        # The hook is done when its process exits: whatever it left running (a background job
        # still holding stdout, a setsid daemon) is stopped with it.
        await _stop(process, cookie)
        return _answer(data.event, process.returncode, b"".join(out), b"".join(err))


#: How long stdout and stderr are still read once the hook's process has exited (what its last
#: writes left in the pipes); a background child that keeps a pipe open is not waited for.
_DRAIN_S = 0.25


async def _communicate(process: asyncio.subprocess.Process, payload: bytes, out: list[bytes], err: list[bytes]) -> None:
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin = process.stdin

    async def feed() -> None:
        # Written while stdout and stderr are read: a script that prints a lot before it reads
        # a large input must not wait on us while we wait on it.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(payload)
            await stdin.drain()
        stdin.close()

    readers = [
        asyncio.ensure_future(feed()),
        asyncio.ensure_future(_read_capped(process.stdout, out)),
        asyncio.ensure_future(_read_capped(process.stderr, err)),
    ]
    try:
        await _exited(process)
        # The pipes reach EOF at once unless something the hook started still holds them.
        await asyncio.wait(readers, timeout=_DRAIN_S)
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


async def _exited(process: asyncio.subprocess.Process) -> None:
    """Until the hook's own process has exited. (``Process.wait()`` also waits for its pipes to
    close, which a background child of the hook can put off until the timeout.)"""
    delay = 0.002
    while process.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


async def _read_capped(stream: asyncio.StreamReader, chunks: list[bytes]) -> None:
    size = 0
    while chunk := await stream.read(65536):
        if size < _OUTPUT_CAP:
            chunks.append(chunk[: _OUTPUT_CAP - size])
        size += len(chunk)


async def _stop(process: asyncio.subprocess.Process, cookie: str) -> None:
    """Stop the hook and everything it started - its process group and every process with its
    cookie (:mod:`ra.env.proctree`) - and return once they are gone (bounded)."""
    from ra.env.proctree import _any_alive, stop_tree

    if process.returncode is not None and not await asyncio.to_thread(_any_alive, process.pid, cookie):
        return  # the usual case: the hook exited and left nothing behind
    await stop_tree(process.pid, cookie, _GRACE_S)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_GRACE_S):
            await process.wait()


#: Seconds between SIGTERM and SIGKILL for what a hook leaves running.
_GRACE_S = 1.0


def _answer(event: HookEvent, code: int | None, stdout: bytes, stderr: bytes) -> HookResult | None:
    # A byte-order mark is not part of the answer (a JSON parser in another language skips it).
    out = stdout.decode("utf-8", "replace").lstrip("\ufeff").strip()
    err = stderr.decode("utf-8", "replace").strip()
    if code == 2:
        reason = err or f"the {event.value} hook blocked this (exit 2) without saying why"
        if event in _BLOCKING:
            return HookResult("deny", reason)
        if event in (HookEvent.POST_TOOL_USE, HookEvent.POST_TOOL_USE_FAILURE):
            return HookResult(additional_context=reason)
        return HookResult(system_message=reason)
    if code != 0:
        # Claude Code's "non-blocking error": the user is told (stderr), the run goes on.
        detail = f": {_clip(err)}" if err else ""
        status = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        return HookResult(error=f"{status}{detail} (a non-blocking error: only exit 2 blocks)")
    if not out:
        return None
    if out.startswith("{"):
        try:
            data = json.loads(out)
        except ValueError as exc:
            if event is HookEvent.PRE_TOOL_USE:
                # What it decided cannot be known: the call is not run.
                raise CommandHookError(f"wrote invalid JSON on stdout ({exc})") from None
            return HookResult(output=out, problems=(f"stdout is not valid JSON ({exc})",))
        if isinstance(data, dict):
            return replace(HookResult.from_json(event, data), output=out)
    if event is HookEvent.PRE_TOOL_USE and any(line.lstrip().startswith("{") for line in out.splitlines()):
        # Text with a JSON object among it ("checking...\n{"decision": "block"}"): the answer is
        # meant to be read, and cannot be.
        raise CommandHookError(
            "wrote text with a JSON object inside it on stdout; an answer must be the only thing on stdout"
        )
    if event in _PLAIN_TEXT_CONTEXT:
        return HookResult(additional_context=out, output=out)
    return HookResult(output=out)


def _clip(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def hooks_from_config(config: Mapping[str, Any], hooks: Hooks | None = None, *, cwd: str | None = None) -> Hooks:
    """Command hooks from a Claude Code-style ``{"hooks": {...}}`` mapping (or the inner mapping);
    ``cwd`` as for :class:`CommandHook`.

    Every event name Claude Code has is accepted (those ra never fires are reported once by the
    session that has them: :data:`~ra.agent.hooks.types.UNFIRED_EVENTS`); an unknown name and
    malformed entries raise ValueError naming the place, so a typo in a settings file is found
    at start-up and not when the hook should have run.
    """
    hooks = hooks if hooks is not None else Hooks()
    section = config.get("hooks", config) if isinstance(config, Mapping) else None
    if not isinstance(section, Mapping):
        raise ValueError("hooks configuration must be a mapping of event name to a list of matchers")
    for event_name, matchers in section.items():
        try:
            event = HookEvent(event_name)
        except ValueError:
            # Every name Claude Code has is an event here, so this one is a typo.
            known = ", ".join(e.value for e in HookEvent)
            raise ValueError(f"unknown hook event {event_name!r}; expected one of {known}") from None
        if not isinstance(matchers, list):
            raise ValueError(f"hooks.{event_name} must be a list of {{matcher, hooks}} entries")
        for i, entry in enumerate(matchers):
            where = f"hooks.{event_name}[{i}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("hooks"), list):
                raise ValueError(f"{where} must be an object with a 'hooks' list")
            matcher = entry.get("matcher")
            if matcher is not None and not isinstance(matcher, str):
                raise ValueError(f"{where}.matcher must be a string")
            for j, spec in enumerate(entry["hooks"]):
                place = f"{where}.hooks[{j}]"
                if not isinstance(spec, Mapping) or spec.get("type", "command") != "command":
                    raise ValueError(f"{place}: only hooks of type 'command' can be configured")
                command = spec.get("command")
                if not isinstance(command, str) or not command.strip():
                    raise ValueError(f"{place}.command must be a non-empty string")
                timeout = spec.get("timeout", DEFAULT_TIMEOUT_S)
                if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                    raise ValueError(f"{place}.timeout must be a positive number of seconds")
                hook = CommandHook(command, timeout=float(timeout), cwd=cwd)
                # The command stops itself at its timeout; the Hooks timeout is a little longer
                # so that the process group is killed by the hook, not orphaned by a cancel.
                hooks.on(event, hook, matcher=matcher, timeout=float(timeout) + 3.0)
    return hooks

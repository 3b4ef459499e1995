"""``ra replay RECORD``: re-run a recorded session's tool calls against this tree (ra.agent.replay).

Exit codes: 0 every tool result matches the record, 1 something differs, 2 a usage error (a
missing or malformed record file, named with its line; a bad option; a sandbox that cannot run
here).

The session is rebuilt from the record's header (profile, model) and from today's settings,
resolved by the code ``ra`` uses: the config file's and the flags' permission mode, rules and
hooks (:func:`ra.cli.policy.resolve_policy`), and the sandbox of ``--sandbox`` or the config
file's ``sandbox_mode`` (:func:`ra.cli.config.sandbox_policy`, :func:`ra.cli.runner.confine`).
Nobody is asked during a replay: a call the rules would ask about is denied. The model is never
called, so the provider needs no key and the config file's budget and fallback models do not
apply. The tools write to the working directory as the recorded run did: replay from the tree the
session started from (a clean checkout of the same commit). Subagents are replayed from their own
records, looked up in the session store by the recorded session's id.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .errors import ExitCode, UsageError

if TYPE_CHECKING:
    from ra.agent.history import Turn

__all__ = ["load_record", "run_replay"]

#: Tools that exist only when the ra profile is built with ``submit`` or ``web``.
_SUBMIT_TOOLS = frozenset({"submit"})
_WEB_TOOLS = frozenset({"web_search", "web_open", "web_find"})


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    from .config import PROFILES
    from .policy import PERMISSION_MODES
    from .run_settings import SANDBOX_HELP

    p = _Parser(
        prog="ra replay",
        description="Re-run the tool calls of a recorded session against the current code and working tree, "
        "answering each model call with the recorded reply, and report every step whose tool result differs. "
        "Run it from the tree the session started from (the tools write to it as the recorded run did). "
        "A subagent the session spawned is replayed from its own record in the session store; a spawn "
        "that no record answers is refused and reported.",
        epilog="Permissions and sandbox are resolved as for ra, flags over the config file. Without a permission "
        "mode and without allow or ask rules every recorded call runs (mode bypass; deny rules and hooks still "
        "apply). Nobody is asked during a replay: a call that needs permission is denied and reported as "
        "'denied'. Without --sandbox or sandbox_mode the recorded commands run unconfined, as you: replay a "
        "record from elsewhere with --sandbox workspace-write or read-only (or --permission-mode plan).",
    )
    p.add_argument(
        "record",
        metavar="RECORD",
        help="a session id (as `ra sessions` lists them) or a record file (.jsonl: a header line, then entries)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="REGEX",
        help="mask what this regular expression matches in both results before comparing (repeatable)",
    )
    p.add_argument(
        "--no-default-ignores",
        action="store_true",
        help="compare the shell tools' 'Duration: N ms' line too (masked by default)",
    )
    p.add_argument("--stop-at-first", action="store_true", help="stop at the first difference")
    p.add_argument("--steps", metavar="A-B", type=_step_range, help="compare steps A to B only (A-, -B or N work)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("-C", "--cwd", metavar="DIR", help="the working directory to replay in (default: the current one)")
    p.add_argument("--profile", choices=PROFILES, help="the profile (default: the record's)")
    p.add_argument(
        "--permission-mode",
        metavar="MODE",
        help=f"{' | '.join(PERMISSION_MODES)} (as for ra; default: the config file's, else bypass unless rules "
        "are given; what would be asked is denied)",
    )
    p.add_argument("--allowed-tools", action="append", metavar="RULES", help="as for ra (repeatable)")
    p.add_argument("--disallowed-tools", action="append", metavar="RULES", help="as for ra (repeatable)")
    p.add_argument("--settings", metavar="FILE", help="a Claude Code settings.json (hooks, permissions), as for ra")
    p.add_argument(
        "--sandbox", metavar="MODE", help=SANDBOX_HELP + "; the recorded commands and file tools run in it, as for ra"
    )
    return p


def _step_range(text: str) -> tuple[int | None, int | None]:
    first, sep, last = text.partition("-")
    try:
        start = int(first) if first.strip() else None
        end = (int(last) if last.strip() else None) if sep else start
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A-B, A-, -B or N (step numbers), got {text!r}") from None
    if start is None and end is None:
        raise argparse.ArgumentTypeError(f"expected A-B, A-, -B or N (step numbers), got {text!r}")
    if any(n is not None and n < 1 for n in (start, end)) or (start and end and start > end):
        raise argparse.ArgumentTypeError(f"step numbers start at 1 and A <= B, got {text!r}")
    return start, end


def run_replay(argv: list[str]) -> int:
    from ra.agent.config import SessionConfig
    from ra.env.local import LocalExecutionEnvironment

    from .config import config_path, load_config_file, sandbox_policy, working_directory
    from .runner import confine

    args = _parser().parse_args(argv)
    header, turns = _find_record(args.record)
    cwd = working_directory(args.cwd)
    if not os.path.isdir(cwd):
        raise UsageError(f"working directory {cwd} does not exist or is not a directory")
    recorded_cwd = header.get("cwd")
    if isinstance(recorded_cwd, str) and recorded_cwd and os.path.normpath(recorded_cwd) != cwd:
        _notice(f"the record was made in {recorded_cwd}; replaying in {cwd}")
    path = config_path(os.environ)
    file = load_config_file(path, required=bool(os.environ.get("RA_CONFIG")))
    policy = _policy(args, file, cwd, str(path) if file else "config")
    notices = list(policy.notices)
    # The workspace is the directory replayed in, never the record's cwd (a record says what it likes).
    sandbox = sandbox_policy(args.sandbox, file, str(path), cwd, notices)
    profile = _profile(args, header, turns)
    policy.check_flag_rules(profile.tool_registry.names())
    config = SessionConfig(**{**policy.session_values(), "max_budget_usd": None, "fallback_models": ()})
    env = confine(sandbox, LocalExecutionEnvironment(cwd))  # checked here: a sandbox that cannot run is exit 2
    for text in notices:
        _notice(text)
    session_id = header.get("id") if isinstance(header.get("id"), str) and header.get("id") else None
    return asyncio.run(_replay(args, turns, profile, env, config, policy.build_hooks(), session_id))


async def _replay(
    args: argparse.Namespace, turns: list[Turn], profile: Any, env: Any, config: Any, hooks: Any, session_id: str | None
) -> int:
    from ra.agent.replay import ReplayError, replay
    from ra.agent.store import StoreError

    from .replay_store import subagent_store

    # The subagents' records are looked up by the recorded session's id (``spawned_by`` in their
    # headers): in the session store, and for a record file also beside it.
    store = await subagent_store(args.record) if session_id is not None else None
    try:
        report = await replay(
            turns,
            profile=profile,
            execution_env=env,
            config=config,
            hooks=hooks,
            ignore=args.ignore,
            default_ignores=not args.no_default_ignores,
            stop_at_first=args.stop_at_first,
            steps=args.steps,
            store=store,
            session_id=session_id,
        )
    except ReplayError as exc:
        raise UsageError(f"{args.record}: {exc}") from None
    except StoreError as exc:  # the session store could not be listed for the subagents' records
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # a bad --ignore pattern
        raise UsageError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(report.to_text())
    return int(ExitCode.DONE if report.ok else ExitCode.FAILED)


def _policy(args: argparse.Namespace, file: dict[str, Any], cwd: str, source: str) -> Any:
    from .policy import resolve_policy

    # What the replay has no use for (no model is called): left unset, so the file's values stand
    # unused rather than a flag being accepted and ignored.
    args.max_budget_usd = None
    args.fallback_model = None
    return resolve_policy(args, file, cwd, source=source)


def _profile(args: argparse.Namespace, header: dict[str, Any], turns: list[Turn]) -> Any:
    from ra.agent.history import AssistantTurn

    from .config import PROFILES, PROVIDERS, Settings
    from .runner import make_profile

    name = args.profile or header.get("profile") or "ra"
    if name not in PROFILES:
        raise UsageError(
            f"the record's profile {name!r} is not one of ra's ({', '.join(PROFILES)}); choose one with --profile"
        )
    model = header.get("model")
    if not isinstance(model, str) or not model:
        raise UsageError(f"{args.record}: the header names no model")
    provider = header.get("provider")
    called = {c.name for t in turns if isinstance(t, AssistantTurn) for c in t.tool_calls}
    settings = Settings(
        provider=provider if provider in PROVIDERS else "",
        model=model,
        base_url=None,
        api_key=None,
        key_source="",
        profile=name,
        # The ra profile's optional tools, when the recorded session had them.
        submit=bool(called & _SUBMIT_TOOLS),
        web=bool(called & _WEB_TOOLS) and name in ("ra", "gemini"),
    )
    return make_profile(settings, model)


def _notice(text: str) -> None:
    sys.stderr.write(f"ra replay: {text}\n")


# -- the record ------------------------------------------------------------------------------------------------


def _find_record(name: str) -> tuple[dict[str, Any], list[Turn]]:
    """A record file's header and turns; a name that is no file but a session id is looked up in
    the session store (``RA_SESSIONS_DIR`` or the state directory, as ``ra sessions`` does)."""
    if os.path.exists(name) or os.sep in name or name.endswith(".jsonl"):
        return load_record(name, notice=_notice)
    from ra.agent.store import SessionNotFoundError, StoreError, default_store
    from ra.agent.store import load_record as load_stored
    from ra.agent.store.format import RecordFormatError

    try:
        record = asyncio.run(load_stored(default_store(), name))
    except ValueError as exc:  # not a session id, or a record that is not the documented shape
        if isinstance(exc, RecordFormatError):
            raise UsageError(f"session {name}: {exc}") from None
        raise UsageError(f"no such record file or session: {name}") from None
    except SessionNotFoundError:
        raise UsageError(f"no such record file or session: {name} (see `ra sessions --all`)") from None
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    return record.header, list(record.turns)


def load_record(path: str, *, notice: Any = None) -> tuple[dict[str, Any], list[Turn]]:
    """The header and the turns of the record at ``path``: the entries on the path from the root
    to the last entry of the file (following ``parent_id`` back from it), as turns.

    A torn last line (a crash mid-write: no newline at the end) is skipped with a notice; any other
    problem is a :class:`UsageError` naming the file and line.
    """
    from ra.agent.store.format import FORMAT_VERSION, RecordFormatError, is_turn_entry, turn_from_entry

    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such record file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a record file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    lines = text.split("\n")
    numbered: list[tuple[int, dict[str, Any]]] = []
    last_line = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == last_line and not text.endswith("\n"):
                if notice is not None:
                    notice(f"{path}:{number}: skipped a torn last line (the session was cut off while writing it)")
                continue
            raise UsageError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise UsageError(f"{path}:{number}: not valid JSON (nested too deeply to read)") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{path}:{number}: expected a JSON object, got {type(obj).__name__}")
        numbered.append((number, obj))
    if not numbered:
        raise UsageError(f"{path}: the record is empty")
    first_line, header = numbered[0]
    if header.get("type") != "session":
        raise UsageError(f"{path}:{first_line}: the first line is not a session header (type 'session')")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise UsageError(f"{path}:{first_line}: the header has no format version")
    if version > FORMAT_VERSION:
        raise UsageError(
            f"{path}: written in record format {version}; this ra reads format {FORMAT_VERSION} (update ra)"
        )
    by_id: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, entry in numbered[1:]:
        entry_id = entry.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            raise UsageError(f"{path}:{number}: an entry without an id")
        if entry_id in by_id:
            raise UsageError(f"{path}:{number}: entry id {entry_id!r} is used twice (also line {by_id[entry_id][0]})")
        by_id[entry_id] = (number, entry)
    chain: list[tuple[int, dict[str, Any]]] = []
    current = numbered[-1] if len(numbered) > 1 else None
    while current is not None:
        if len(chain) > len(by_id):
            raise UsageError(f"{path}:{current[0]}: the entries' parent_id links form a cycle")
        chain.append(current)
        number, entry = current
        parent = entry.get("parent_id")
        if parent is None:
            break
        if parent not in by_id:
            raise UsageError(f"{path}:{number}: parent_id {parent!r} names no entry of the record")
        current = by_id[parent]
    chain.reverse()
    try:
        turns = [turn_from_entry(entry, f"{path}:{number}") for number, entry in chain if is_turn_entry(entry)]
    except RecordFormatError as exc:
        raise UsageError(str(exc)) from None
    return header, turns

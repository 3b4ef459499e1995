"""The Recorder: the control that writes a session's record as it happens.

It is the last control of a session that has a store (``Session(store=...)``): it writes the
header when the session starts, and at each ``after_model``, ``after_step``, ``input_end`` and
``session_end`` the turns added since its last write - one ``append`` per point with something
new, so a crash loses at most the step in flight, and a step whose tools were running when the
process died is recorded with its calls (a resume answers them as interrupted). It keeps an
index into the history and never serialises a turn twice, so a step costs the same at turn 10
and at turn 10,000.

What it adds to the turns: on each assistant entry the model and provider that answered, the
call's ``cost_usd`` (null when the price is unknown) and ``total_cost_usd`` (the session's spend
so far, its subagents' included), and ``total_cost_usd`` on each ``tool_results`` entry too
(what the tools spent - a subagent's calls - is then on disk before the next model call); a
``config`` entry before a step whose model or provider differs from the last one recorded; an
``input_end`` entry with the stop reason and the spend. Every entry's ``parent_id`` is the entry
written before it, so the record is one chain until a rewind (``resume_at``) starts a branch.

**Labels and custom entries** (``Session.label``, ``Session.record_custom``) are queued with the
number of turns the history held when they were given, and written right after that turn (or
first, when it is already written): a label names the entry that was last when it was asked for,
even when the loop added turns before the next write. The Session writes them at once between
inputs (:meth:`Recorder.flush`); a lock keeps two writes from interleaving.

**Granted rules.** An "always allow" answer (``run.granted_rules``, appended by the permission
check) is written as a ``permission_rule`` entry at the next write - after the assistant entry
whose call it answered, before that step's results - so a resume can give it back (:mod:`.grants`).

**Secrets.** Before a batch is written, every string in it is redacted against the values of
the process's secret-looking environment variables and the keys given to adapters in code
(:mod:`ra.llm.redaction`), so a key a tool printed never reaches the store. The batch is
encoded to JSON lines once - a step's turns straight from their fields (:mod:`.lines`) - and
checked for secrets on the encoded text (:mod:`.encoding`); a file store writes those lines as
they are (``append_lines``), any other store gets them decoded as dicts.

**The per-step write.** A step adds one turn at ``after_model`` (the answer) and one at
``after_step`` (the results). When that turn is all there is to write (no header, label, model
change or input end; no flush under way), no secret is in its line and the file store can write
at once, it is written with ``append_lines_now`` - one append, no await, no dict; no file lock
either, the session holding its record's lease - the cheapest write the guarantees above allow.
Anything else takes the general way, which writes the same lines.

**Failures.** When the store cannot keep a batch (a read-only or full disk, a host store that
raises), the session emits one WARNING (``code="session_not_persisted"``) and goes on without
recording: the record keeps what was written before, which is a valid record to resume from.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from random import getrandbits as _getrandbits
from typing import TYPE_CHECKING, Any

from ..controls.chain import Control
from ..events import WarningEvent
from ..history import AssistantTurn, CompactionTurn, ToolResultsTurn
from .base import acquire_lease
from .encoding import EntryEncodeError, encode_entry, lines_bytes, redact_entries, redact_lines, secret_forms
from .format import header, iso_time
from .lines import extra_json, turn_line, value_json

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ra.llm.types import Response
    from ra.tools.pipeline import ToolCallOutcome

    from ..config import StopReason
    from ..state import RunState
    from .base import Lease, SessionStore

__all__ = ["Recorder", "record_path", "redact_entries"]

_UNSET: Any = object()


class Recorder(Control):
    """Writes one session's record to ``store`` (see the module doc).

    ``header_extra`` is None for a record that already exists (a resume appends to it); else the
    header is written at ``session_start`` with these extra fields (``parent_session`` for a fork,
    ``agent_id`` for a subagent), followed by ``copied`` (a fork's copy of its parent's path).
    ``written``, ``last_id``, ``turn_ids``, ``model`` and ``provider`` continue a record: how many
    of the history's turns it holds, the id its next entry follows, the entry id of each turn it
    holds, and the model and provider last recorded.
    """

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        header_extra: dict[str, Any] | None = None,
        copied: Iterable[dict[str, Any]] = (),
        written: int = 0,
        last_id: str | None = None,
        turn_ids: Iterable[str] = (),
        used_ids: Iterable[str] = (),
        model: str | None = None,
        provider: str | None = None,
        lease: Lease | None = None,
    ) -> None:
        self.store = store
        #: The session's hold on its record (``store.acquire``): taken by ``Session.open`` for a
        #: resume or fork, else at ``session_start``; released when the session ends.
        self.lease = lease
        self._leased = lease is not None
        self.session_id = session_id
        self._header_extra = header_extra
        self._copied = list(copied)
        self._written = written
        self._last_id = last_id
        self._turn_ids = list(turn_ids)
        self._used = set(used_ids)
        #: Entry ids drawn ahead (see _next_id).
        self._fresh: list[str] = []
        self._model = model
        self._provider = provider
        #: False once a write failed: the session goes on unpersisted.
        self.persisting = True
        #: ``label`` and ``custom`` entries not yet written: (how many turns precede it, (type, fields)).
        self._pending: list[tuple[int, tuple[str, dict[str, Any]]]] = []
        #: How many of the session's "always" answers (``run.granted_rules``) are written.
        self._grants = 0
        self._lock = asyncio.Lock()
        self._path_known = False
        #: A store that takes encoded lines (FileSessionStore.append_lines): no dicts to hand over.
        append_lines = getattr(store, "append_lines", None)
        self._append_lines = append_lines if callable(append_lines) else None
        #: Its append that does not wait for another writer (FileSessionStore.append_lines_now).
        write_now = getattr(store, "append_lines_now", None)
        self._write_now = write_now if callable(write_now) and self._append_lines is not None else None
        #: (model, provider, their part of an assistant line) for the last answered call.
        self._tail: tuple[Any, Any, str] = (_UNSET, _UNSET, "")

    # -- labels and custom entries --------------------------------------------------------------------
    def has_entry(self, run: RunState) -> bool:
        """Whether there is an entry for a label to name (one written, or a turn or entry to come)."""
        return self._last_id is not None or bool(run.history.turns) or bool(self._pending)

    def queue(self, run: RunState, kind: str, fields: dict[str, Any]) -> None:
        """Write a ``kind`` entry with ``fields`` after the history's current last turn, at the next flush.

        The entry follows the turn that was last when it was queued (or, when that turn is already
        written, the entry last written), whatever turns the loop adds before the flush."""
        self._pending.append((len(run.history.turns), (kind, fields)))

    async def flush(self, run: RunState) -> None:
        """Write what is queued now (the Session calls it between inputs)."""
        await self._flush(run)

    # -- the control points -----------------------------------------------------------------------
    async def session_start(self, run: RunState) -> None:
        if not self._leased:
            self._leased = True
            try:
                self.lease = await acquire_lease(self.store, self.session_id)
            except Exception as exc:
                # Not held, so not written: another live session owns the id, or the lease
                # cannot be made (the store's folder is read-only). The session goes on.
                self._stop_persisting(run, exc, "It goes on unrecorded.")
                return
        await self._flush(run)

    async def after_model(self, run: RunState, response: Response) -> None:
        # The calls are on disk before their tools run: a crash while they run leaves them
        # unanswered in the record, and a resume answers them as interrupted - the model is told
        # they may have run, rather than not seeing that it asked for them.
        if not self._write_step(run, response):
            await self._flush(run, response)

    async def after_step(self, run: RunState, response: Response, outcomes: list[ToolCallOutcome]) -> None:
        if not self._write_step(run, None):
            await self._flush(run, response)

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        await self._flush(run, end=reason.value)

    async def session_end(self, run: RunState, reason: str) -> None:
        await self._flush(run)
        release = getattr(self.store, "release", None)  # a store that keeps files open for appends
        if callable(release):
            release(self.session_id)
        self.release_lease()

    def release_lease(self) -> None:
        """Let the record go (idempotent): another session may now resume it."""
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.release()

    # -- writing --------------------------------------------------------------------------------------
    def _next_id(self) -> str:
        used, fresh = self._used, self._fresh
        while True:
            if not fresh:
                # new_entry_id's shape, 64 at a time: one random draw and one hex conversion for them all.
                text = f"{_getrandbits(2048):0512x}"
                fresh.extend(text[i : i + 8] for i in range(0, 512, 8))
            eid = fresh.pop()
            if eid not in used:
                used.add(eid)
                return eid

    def _entry(self, kind: str, now: float, fields: dict[str, Any]) -> str:
        """The line of a new entry that holds no turn (config, input_end, label, custom,
        permission_rule), chained after the last."""
        entry = {"type": kind, "id": self._next_id(), "parent_id": self._last_id, "timestamp": iso_time(now)}
        entry.update(fields)
        self._last_id = entry["id"]
        return encode_entry(entry)

    def _stop_persisting(self, run: RunState, exc: BaseException, after: str) -> None:
        """Stop recording for good, with one WARNING that says why (``after``: what happens next)."""
        self.persisting = False
        run.emit(
            WarningEvent(
                "session_not_persisted",
                f"The session is no longer being recorded: {type(exc).__name__}: {exc}. {after}",
                {"session_id": self.session_id, "error": exc},
            )
        )

    async def _flush(self, run: RunState, response: Response | None = None, end: str | None = None) -> None:
        if not self.persisting:
            return
        async with self._lock:  # a flush between inputs (label, custom) never interleaves with another
            await self._flush_locked(run, response, end)

    def _take_pending(self, lines: list[str], upto: int, now: float) -> None:
        """Add the queued entries that follow turn number ``upto`` (or an earlier one) to ``lines``."""
        pending = self._pending
        while pending and pending[0][0] <= upto:
            _, (kind, fields) = pending.pop(0)
            lines.append(self._entry(kind, now, fields))

    async def _flush_locked(self, run: RunState, response: Response | None, end: str | None) -> None:
        if not self.persisting:
            return
        turns = run.history.turns
        if (
            len(turns) == self._written
            and end is None
            and not self._pending
            and self._header_extra is None
            and len(run.granted_rules) == self._grants
        ):
            return  # nothing to write (a flush between inputs with nothing queued)
        last_id, turn_ids, grants = self._last_id, len(self._turn_ids), self._grants
        model, provider = self._model, self._provider
        pending = list(self._pending)
        head: dict[str, Any] | None = None
        try:
            if self._header_extra is not None:
                head = self._header(run, time.time())
            lines = self._lines(run, turns, response, end, head)
            if not lines:
                return
            # Every write goes through here: header, copied entries, turns, labels, input ends.
            lines = redact_lines(lines)
            if self._append_lines is not None:
                await self._append_lines(self.session_id, lines_bytes(lines), head)
            else:
                await self.store.append(self.session_id, [json.loads(line) for line in lines])
        except Exception as exc:
            # Nothing of this batch counts as written; the session goes on without a record.
            self._last_id, self._model, self._provider = last_id, model, provider
            self._grants = grants
            del self._turn_ids[turn_ids:]
            self._pending = pending
            self._stop_persisting(run, exc, "It goes on; what was recorded before stays resumable.")
            return
        self._header_extra = None
        self._copied = []
        self._written = len(turns)
        if not self._path_known:  # once: hooks get the file as transcript_path from now on
            self._path_known = True
            run.transcript_path = record_path(self.store, self.session_id)

    def _lines(
        self, run: RunState, turns: list[Any], response: Response | None, end: str | None, head: dict[str, Any] | None
    ) -> list[str]:
        """The lines of what is new since the last write, chained (raises EntryEncodeError for
        an entry that cannot be JSON; the caller then forgets the ids it took)."""
        now = time.time()
        lines: list[str] = []
        if head is not None:
            lines.append(encode_entry(head))
            lines.extend(encode_entry(entry) for entry in self._copied)
        written = self._written
        if self._pending:
            self._take_pending(lines, written, now)
        granted = run.granted_rules
        if len(granted) > self._grants:
            # "Always" answers given since the last write: after the call they answered (its
            # assistant entry was written before its tools were checked), before its results.
            for rule, call_id in granted[self._grants :]:
                fields = {"behavior": "allow", "rule": rule, "tool_use_id": call_id}
                lines.append(self._entry("permission_rule", now, fields))
            self._grants = len(granted)
        new = turns[written:]
        current = run.model
        current_provider = run.profile.provider or None
        if new and (current != self._model or current_provider != self._provider):
            lines.append(self._entry("config", now, {"model": current, "provider": current_provider}))
            self._model, self._provider = current, current_provider
        answered = _last_assistant(new) if response is not None else None
        for number, turn in enumerate(new, written + 1):
            eid = self._next_id()
            kind = type(turn)
            if kind is AssistantTurn:
                if turn is answered and response is not None:
                    line = turn_line(turn, eid, self._last_id, {}, self._call_tail(run, response, turn))
                else:
                    line = turn_line(turn, eid, self._last_id, {"model": current, "provider": current_provider})
            elif kind is ToolResultsTurn:
                # What the tools spent (a subagent's calls) is on disk before the next model call.
                line = turn_line(turn, eid, self._last_id, {"total_cost_usd": run.meter.total_cost_usd})
            elif isinstance(turn, CompactionTurn) and 0 <= turn.first_kept < len(self._turn_ids):
                line = turn_line(turn, eid, self._last_id, {"first_kept_id": self._turn_ids[turn.first_kept]})
            else:
                line = turn_line(turn, eid, self._last_id, {})
            lines.append(line)
            self._last_id = eid
            self._turn_ids.append(eid)
            if self._pending:
                self._take_pending(lines, number, now)
        if end is not None:
            lines.append(self._entry("input_end", now, {"reason": end, "total_cost_usd": run.meter.total_cost_usd}))
        return lines

    def _write_step(self, run: RunState, response: Response | None) -> bool:
        """The common case of a step, written at once: the one turn added since the last write,
        an assistant turn (with ``response``: the call just answered) or tool results, with
        nothing else to write (no header, label, model change or input end), no flush under way,
        no secret in the line, and the file store able to write at once. Its line goes to the file
        with one append (no lock under the lease) and no await; False (nothing written, nothing
        changed but a spent entry id) sends the step the general way (:meth:`_flush`), which handles everything else."""
        write = self._write_now
        if write is None or not self._path_known or self._header_extra is not None or self._pending:
            return False
        if len(run.granted_rules) != self._grants:
            return False  # a permission_rule entry comes first
        turns = run.history.turns
        if len(turns) != self._written + 1 or not self.persisting or self._lock.locked():
            return False
        if run.model != self._model or (run.profile.provider or None) != self._provider:
            return False  # a config entry comes first
        turn = turns[-1]
        kind = type(turn)
        if kind is AssistantTurn:
            if response is None:
                return False
            tail = self._call_tail(run, response, turn)  # type: ignore[arg-type]
        elif kind is ToolResultsTurn:
            tail = f',"total_cost_usd":{value_json(run.meter.total_cost_usd)}}}'
        else:
            return False
        eid = self._next_id()
        try:
            line = turn_line(turn, eid, self._last_id, {}, tail)
        except EntryEncodeError:
            return False  # the general way reports it
        forms = secret_forms()
        if forms and any(form in line for form in forms):
            return False  # the general way redacts it
        try:
            if not write(self.session_id, (line + "\n").encode("utf-8", "surrogatepass")):
                return False  # another writer wrote since, or holds the lock: the general way waits
        except Exception as exc:
            self._stop_persisting(run, exc, "It goes on; what was recorded before stays resumable.")
            return True
        self._last_id = eid
        self._turn_ids.append(eid)
        self._written += 1
        return True

    def _call_tail(self, run: RunState, response: Response, turn: AssistantTurn) -> str:
        """The end of the answered call's line: model, provider, cost_usd, total_cost_usd. The
        model and provider part is encoded once and kept while they stay the same."""
        model, provider, cost = _call_fields(run, response, turn)
        cached = self._tail
        if cached[0] is _UNSET or cached[0] != model or cached[1] != provider:
            cached = self._tail = (model, provider, extra_json({"model": model, "provider": provider})[:-1])
        return f'{cached[2]},"cost_usd":{value_json(cost)},"total_cost_usd":{value_json(run.meter.total_cost_usd)}}}'

    def _header(self, run: RunState, now: float) -> dict[str, Any]:
        from ra import __version__

        extra = dict(self._header_extra or {})
        parent = extra.pop("parent_session", None)
        try:
            cwd = str(run.env.working_directory())
        except Exception:
            cwd = ""
        from ra.env.wrappers import ssh_destination_of

        remote = ssh_destination_of(run.env)
        if remote is not None:
            extra.setdefault("ssh", remote)  # ``cwd`` is a directory on that host, not on this one
        head = header(
            self.session_id,
            cwd=cwd,
            model=run.model,
            provider=run.profile.provider or None,
            profile=run.profile.id,
            ra_version=__version__,
            timestamp=now,
            parent_session=parent,
            **extra,
        )
        if self._model is None:
            self._model, self._provider = head["model"], head["provider"]
        return head


def record_path(store: Any, session_id: str) -> str | None:
    """The file of a session's record in a store that keeps files (``path_of``), else None."""
    path_of = getattr(store, "path_of", None)
    if path_of is None:
        return None
    try:
        path = path_of(session_id)
    except Exception:  # a host store's own method failing must not stop the session
        return None
    return str(path) if path is not None else None


def _last_assistant(turns: list[Any]) -> AssistantTurn | None:
    for turn in reversed(turns):
        if isinstance(turn, AssistantTurn):
            return turn
    return None


def _call_fields(run: RunState, response: Response, turn: AssistantTurn) -> tuple[str, str | None, float | None]:
    """model, provider and cost_usd of the call that produced ``turn``."""
    model = response.model or run.model
    provider = response.provider or run.profile.provider or None
    last = run.meter.last_call
    if last is not None and last.model == model:
        # The loop priced this call a moment ago (after_model follows it): the same figure, no lookup.
        return model, provider, last.cost_usd
    price, _ = run.meter.price(model, provider)
    cost: float | None = None
    if price is not None:
        try:
            value = price.cost(turn.usage)
        except Exception:
            value = None
        if isinstance(value, int | float) and math.isfinite(value) and value >= 0:
            cost = float(value)
    return model, provider, cost

"""A record read back: the tree of entries, the path to a leaf, and the turns and totals on it.

A record can hold branches (a rewind starts a new child of an older entry), so reading one means
choosing a *leaf* - the last entry written unless one is named - and walking ``parent_id`` links
from it back to the root. The turns on that path, in order, are the conversation; the totals
(usage, spend, turn counts) are summed from it, so a branch that was abandoned costs nothing in
the branch that goes on (its spend happened, but it is in the other branch's entries).

Spend: every assistant entry carries ``total_cost_usd``, the session's running total including
its subagents', and every ``input_end`` entry too. The spend a resumed session starts from is the
money the record says was spent, on every branch: a rewind to an early (cheaper) entry must not
give back a budget that was really used. It is the largest ``total_cost_usd`` in the record (the
totals only grow: a branch started by a rewind continues from the largest), and never less than
the sum of the entries' own ``cost_usd``, so a total lowered or broken by hand (negative, NaN,
infinite, a string) falls back on what the calls cost. Unpriced calls are counted on every branch
for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ra.llm.types import Usage

from ..history import AssistantTurn, Turn
from .base import SessionNotFoundError, shorten_title
from .format import FORMAT_VERSION, RecordFormatError, entry_type, is_turn_entry, turn_from_entry

if TYPE_CHECKING:
    from .base import SessionStore

__all__ = ["SessionRecord", "load_record"]


@dataclass(slots=True)
class SessionRecord:
    """A record with a leaf chosen: build with :meth:`from_entries` (or :func:`load_record`)."""

    header: dict[str, Any]
    #: Every entry after the header, in record order (all branches).
    entries: list[dict[str, Any]]
    #: The entry the path ends at (None for a record with no entries yet).
    leaf_id: str | None
    #: The entries from the root to the leaf.
    path: list[dict[str, Any]]
    #: The turns on the path, oldest first, and the id of the entry each came from.
    turns: list[Turn]
    turn_ids: list[str]
    #: Tokens of this session's own model calls on the path.
    usage: Usage = field(default_factory=Usage)
    #: USD this record's session has spent, subagents included, on every branch (see the module
    #: doc: a rewind or fork does not give back money spent after its entry).
    total_cost_usd: float = 0.0
    #: Model calls of the record, on every branch, whose price was unknown (``cost_usd`` null).
    unpriced_calls: int = 0
    #: Assistant turns (model calls) on the path.
    turn_count: int = 0
    #: The model and provider in force at the leaf: the header's, as changed by ``config`` entries.
    model: str = ""
    provider: str | None = None
    #: The first user message on the path, shortened.
    title: str = ""
    _by_id: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        return self.header["id"]

    @property
    def cwd(self) -> str:
        cwd = self.header.get("cwd")
        return cwd if isinstance(cwd, str) else ""

    @property
    def parent_session(self) -> dict[str, Any] | None:
        """``{"id", "entry_id"}`` of the record this one was forked from, or None."""
        parent = self.header.get("parent_session")
        return parent if isinstance(parent, dict) else None

    @property
    def agent_id(self) -> str | None:
        agent = self.header.get("agent_id")
        return agent if isinstance(agent, str) else None

    def entry(self, entry_id: str) -> dict[str, Any] | None:
        """The entry with ``entry_id`` (on any branch), or None."""
        return self._by_id.get(entry_id)

    @property
    def labels(self) -> dict[str, str]:
        """Label name -> the id of the entry it names, on every branch; a name given twice names
        the entry of its latest ``label`` entry. ``resume_at=`` takes these names."""
        return _labels(self.entries, self._by_id)

    @property
    def custom(self) -> list[dict[str, Any]]:
        """The ``custom`` entries (``{"key", "data", ...}``), on every branch, in record order."""
        return [entry for entry in self.entries if entry_type(entry) == "custom"]

    def leaves(self) -> list[str]:
        """Ids of the entries no other entry follows (one per branch), in record order."""
        followed = {e.get("parent_id") for e in self.entries}
        return [e["id"] for e in self.entries if isinstance(e.get("id"), str) and e["id"] not in followed]

    def with_leaf(self, leaf_id: str | None) -> SessionRecord:
        """The same record read along the path to another leaf."""
        return SessionRecord.from_entries([self.header, *self.entries], leaf_id)

    @classmethod
    def from_entries(cls, entries: Sequence[dict[str, Any]], leaf_id: str | None = None) -> SessionRecord:
        """Read a record (header first). ``leaf_id`` picks the path's end (default: the last entry).

        Raises RecordFormatError for a record that is not the documented shape (no header, a
        newer format version, a broken ``parent_id`` chain, a malformed turn entry) and
        SessionNotFoundError when ``leaf_id`` names no entry.
        """
        if not entries or entry_type(entries[0]) != "session":
            raise RecordFormatError("record: the first entry is not a session header")
        header = dict(entries[0])
        sid = header.get("id")
        if not isinstance(sid, str) or not sid:
            raise RecordFormatError("header.id: expected a non-empty string")
        version = header.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise RecordFormatError(f"header.version: expected an integer, got {version!r}")
        if version > FORMAT_VERSION:
            raise RecordFormatError(
                f"session {sid}: the record is format version {version}; this ra reads up to {FORMAT_VERSION}"
            )
        body = [entry for entry in entries[1:] if isinstance(entry, dict)]
        by_id: dict[str, dict[str, Any]] = {}
        last: str | None = None
        for entry in body:
            eid = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(eid, str):
                by_id[eid] = entry
                last = eid
        if leaf_id is None:
            leaf_id = last
        elif leaf_id not in by_id:
            # A label names its entry (an entry id wins over a label of the same name).
            target = _labels(body, by_id).get(leaf_id)
            if target is None:
                raise SessionNotFoundError(f"session {sid} has no entry {leaf_id!r} (and no label of that name)")
            leaf_id = target

        path: list[dict[str, Any]] = []
        seen: set[str] = set()
        cursor = leaf_id
        while cursor is not None:
            if cursor in seen:
                raise RecordFormatError(f"session {sid}: entry {cursor} is its own ancestor (a parent_id cycle)")
            seen.add(cursor)
            entry = by_id.get(cursor)
            if entry is None:
                raise RecordFormatError(f"session {sid}: parent_id {cursor!r} names no entry of the record")
            path.append(entry)
            parent = entry.get("parent_id")
            if parent is not None and not isinstance(parent, str):
                raise RecordFormatError(f"session {sid}: entry {cursor}.parent_id: expected a string or null")
            cursor = parent
        path.reverse()

        record = cls(header, body, leaf_id, path, [], [], _by_id=by_id)
        record._read_path()
        return record

    def _read_path(self) -> None:
        model = self.header.get("model")
        self.model = model if isinstance(model, str) else ""
        provider = self.header.get("provider")
        self.provider = provider if isinstance(provider, str) else None
        usage = Usage()
        self._read_spend()
        for entry in self.path:
            kind = entry_type(entry)
            if kind == "config":
                if isinstance(entry.get("model"), str):
                    self.model = entry["model"]
                if "provider" in entry and (entry["provider"] is None or isinstance(entry["provider"], str)):
                    self.provider = entry["provider"]
            if not is_turn_entry(entry):
                continue
            turn = turn_from_entry(entry, f"session {self.id} entry {entry.get('id')}")
            self.turns.append(turn)
            self.turn_ids.append(entry["id"])
            if isinstance(turn, AssistantTurn):
                self.turn_count += 1
                usage = usage + turn.usage
            elif kind == "user" and not self.title:
                self.title = shorten_title(entry.get("content") or "")
        self.usage = usage

    def _read_spend(self) -> None:
        """``total_cost_usd`` and ``unpriced_calls`` over every entry (all branches)."""
        largest = 0.0
        summed = 0.0
        unpriced = 0
        for entry in self.entries:
            total = _money(entry.get("total_cost_usd"))
            if total is not None and total > largest:
                largest = total
            if entry_type(entry) == "assistant" and "cost_usd" in entry:
                cost = entry["cost_usd"]
                if cost is None:
                    unpriced += 1
                else:
                    summed += _money(cost) or 0.0
        self.total_cost_usd = max(largest, summed)
        self.unpriced_calls = unpriced


def _labels(entries: Sequence[dict[str, Any]], by_id: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Label name -> named entry id; labels whose name or entry is broken are skipped."""
    found: dict[str, str] = {}
    for entry in entries:
        if entry_type(entry) != "label":
            continue
        name, target = entry.get("label"), entry.get("parent_id")
        if isinstance(name, str) and isinstance(target, str) and target in by_id:
            found[name] = target
    return found


def _money(value: Any) -> float | None:
    """An amount in USD read from a record: a finite number >= 0, else None (not a number)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


async def load_record(store: SessionStore, session_id: str, leaf_id: str | None = None) -> SessionRecord:
    """Load and read a session's record; SessionNotFoundError when the store has none."""
    entries = await store.load(session_id)
    if not entries:
        raise SessionNotFoundError(f"no session {session_id!r} in {store!r}")
    return SessionRecord.from_entries(entries, leaf_id)

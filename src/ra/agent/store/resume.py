"""A Session from a record: resume, continue, fork and rewind (``Session.open``).

``Session.open`` delegates here. Resuming rebuilds the history from the turns on the record's
path (the context the model sees comes from ``context_from_turns``, the function compaction uses,
so a resumed session sends what the live one would have), and the counters from the record:
turn counts and usage from its turns, the spend from its last ``total_cost_usd`` - the cost meter
starts there, so a budget holds across resumes. Limits come from the new config. No tool runs
again; calls the record left unanswered get the "interrupted" result.

A record made with another provider is carried over without what only that provider can read
(thinking blocks and their signatures, encrypted reasoning, provider item ids on tool calls),
and the session says in one WARNING (``code="provider_change"``) what was dropped.

The rules a user granted with "always allow" answers on the path are given back (checked against
the calls they answered: :mod:`.grants`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ra.llm.types import ContentKind, ContentPart

from ..compaction import context_from_turns
from ..errors import SessionError
from ..events import WarningEvent
from ..history import AssistantTurn, History, Turn, message_chars
from .base import acquire_lease, check_session_id
from .grants import restore_grants
from .record import SessionRecord, load_record
from .recorder import Recorder

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client

    from ..config import SessionConfig
    from ..profile import ProviderProfile
    from .base import Lease, SessionStore

__all__ = ["carry_over", "open_session", "recorder_for", "restore"]

_THINKING = (ContentKind.THINKING, ContentKind.REDACTED_THINKING)


def history_from(turns: Sequence[Turn]) -> History:
    """A History holding ``turns`` with the context rebuilt from them."""
    history = History()
    history.turns.extend(turns)
    history.messages = context_from_turns(turns)
    history.chars = sum(message_chars(m) for m in history.messages)
    return history


# -- another provider ----------------------------------------------------------------------------------


def carry_over(turns: Sequence[Turn]) -> tuple[list[Turn], dict[str, int]]:
    """``turns`` without provider-only data, and counts of what was dropped (empty: nothing).

    Kept: text, tool calls (name, id, arguments) and results, images, and each turn's reasoning
    text in the record. Dropped from assistant messages: thinking blocks (their signatures and
    redacted or encrypted reasoning only the provider that wrote them can read) and the
    provider data of tool calls (item ids, thought signatures); also response ids.
    """
    dropped = {"thinking blocks": 0, "signed or encrypted reasoning": 0, "provider data on tool calls": 0}
    out: list[Turn] = []
    for turn in turns:
        if not isinstance(turn, AssistantTurn):
            out.append(turn)
            continue
        calls = []
        for call in turn.tool_calls:
            if call.provider_data is not None:
                dropped["provider data on tool calls"] += 1
                call = dataclasses.replace(call, provider_data=None)
            calls.append(call)
        message = turn.message
        if message is not None:
            parts: list[ContentPart] = []
            for part in message.content:
                if part.kind in _THINKING:
                    dropped["thinking blocks"] += 1
                    thinking = part.thinking
                    if thinking is not None and (thinking.signature or thinking.redacted or thinking.provider_data):
                        dropped["signed or encrypted reasoning"] += 1
                    continue
                if part.tool_call is not None and part.tool_call.provider_data is not None:
                    part = dataclasses.replace(part, tool_call=dataclasses.replace(part.tool_call, provider_data=None))
                parts.append(part)
            message = dataclasses.replace(message, content=parts)
        out.append(dataclasses.replace(turn, tool_calls=calls, message=message, response_id=None))
    return out, {k: v for k, v in dropped.items() if v}


def _carry_warning(old: str | None, new: str | None, dropped: dict[str, int]) -> WarningEvent:
    what = ", ".join(f"{count} {name}" for name, count in dropped.items())
    return WarningEvent(
        "provider_change",
        f"The session was recorded with provider {old or 'unknown'} and continues with {new or 'unknown'}: "
        f"dropped what only {old or 'that provider'} can read ({what}). Text, tool calls, tool results "
        "and images are carried; the record keeps the dropped data.",
        {"from_provider": old, "to_provider": new, "dropped": dict(dropped)},
    )


# -- Session.open ---------------------------------------------------------------------------------------


def recorder_for(
    record: SessionRecord, store: SessionStore, *, fork_id: str | None = None, lease: Lease | None = None
) -> Recorder:
    """The recorder that continues ``record`` (appending to it), or with ``fork_id`` writes a new
    record that names it as parent and starts with a copy of its path."""
    common: dict[str, Any] = {
        "written": len(record.turns),
        "last_id": record.leaf_id,
        "turn_ids": record.turn_ids,
        "model": record.model,
        "provider": record.provider,
        "lease": lease,
    }
    if fork_id is None:
        return Recorder(store, record.id, used_ids=[e["id"] for e in record.entries if "id" in e], **common)
    parent = {"id": record.id, "entry_id": record.leaf_id}
    return Recorder(
        store,
        fork_id,
        header_extra={"parent_session": parent},
        copied=record.path,
        used_ids=[e["id"] for e in record.path],
        **common,
    )


def restore(session: Any, record: SessionRecord) -> None:
    """Seed a new session's spend from ``record`` (its counters come from the history)."""
    meter = session.cost_meter
    meter.total_cost_usd = record.total_cost_usd
    meter.unpriced_calls = record.unpriced_calls
    meter.total_usage = meter.total_usage + record.usage


async def open_session(
    cls: Any,
    profile: ProviderProfile,
    execution_env: ExecutionEnvironment,
    llm_client: Client | None,
    config: SessionConfig | None,
    *,
    store: SessionStore | None,
    resume: str | None,
    continue_conversation: bool,
    fork_session: bool,
    resume_at: str | None,
    session_id: str | None,
    session_kwargs: dict[str, Any],
) -> Any:
    """``Session.open`` (see its docstring); ``cls`` is the Session class (not imported here:
    the session module imports this one)."""
    if resume is not None and continue_conversation:
        raise ValueError("give resume=SESSION_ID or continue_conversation=True, not both")
    resuming = resume is not None or continue_conversation
    if fork_session and not resuming:
        raise ValueError("fork_session=True forks the session named by resume= (or continue_conversation=True)")
    if resume_at is not None and not resuming:
        raise ValueError("resume_at= names an entry of the session given by resume= (or continue_conversation=True)")
    if resume is not None:
        check_session_id(resume)
    if session_id is not None:
        check_session_id(session_id)
        if resuming and not fork_session:
            raise ValueError("session_id= names a new session: with resume= it needs fork_session=True")
    if resuming and store is None:
        raise ValueError("resuming needs the store that holds the session: pass store=")
    if resuming and "history" in session_kwargs:
        raise TypeError("history= cannot be combined with resume=: the history comes from the record")

    if continue_conversation:
        assert store is not None
        cwd = str(execution_env.working_directory())
        found = [info for info in await store.list(cwd) if info.agent_id is None]
        resume = found[0].id if found else None
    if session_id is not None and store is not None and await store.load(session_id) is not None:
        raise SessionError(f"session {session_id} already exists in {store!r}; resume it with resume=")
    if resume is None:
        return cls(profile, execution_env, llm_client, config, store=store, session_id=session_id, **session_kwargs)

    assert store is not None
    # Before the record is read: a session that goes on from it holds it until it closes (two
    # sessions resuming one record would each start from its spend - together spending the
    # budget twice - and write two branches into it). A fork holds its new record instead.
    new_id = (session_id or str(uuid.uuid4())) if fork_session else resume
    lease = await acquire_lease(store, new_id)
    try:
        return await _resume(
            cls,
            profile,
            execution_env,
            llm_client,
            config,
            store,
            resume,
            resume_at,
            fork_session,
            new_id,
            lease,
            session_kwargs,
        )
    except BaseException:
        if lease is not None:
            lease.release()
        raise


async def _resume(
    cls: Any,
    profile: ProviderProfile,
    execution_env: ExecutionEnvironment,
    llm_client: Client | None,
    config: SessionConfig | None,
    store: SessionStore,
    resume: str,
    resume_at: str | None,
    fork_session: bool,
    new_id: str,
    lease: Lease | None,
    session_kwargs: dict[str, Any],
) -> Any:
    record = await load_record(store, resume, resume_at)
    turns: list[Turn] = list(record.turns)
    new_provider = profile.provider or None
    dropped: dict[str, int] = {}
    if record.provider != new_provider:
        turns, dropped = carry_over(turns)
    session = cls(
        profile, execution_env, llm_client, config, history=history_from(turns), session_id=new_id, **session_kwargs
    )
    if dropped:
        session.emit(_carry_warning(record.provider, new_provider, dropped))
    restore(session, record)
    # The "always allow" answers recorded on the path, checked against the calls they answered.
    restore_grants(session, record, str(execution_env.working_directory()))
    recorder = recorder_for(record, store, fork_id=new_id if fork_session else None, lease=lease)
    session._record_to(store, recorder, "fork" if fork_session else "resume")
    return session

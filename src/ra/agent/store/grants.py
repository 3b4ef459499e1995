"""Rules a user granted during a recorded session, given back when it is resumed or forked.

An "always allow" answer to a permission question adds an allow rule for the rest of the session
(:mod:`ra.agent.permissions`), and the Recorder writes it as a ``permission_rule`` entry right
after the call it answered. A session opened from the record (``Session.open``: resume, rewind,
fork; the ``ra`` command, ``ra.sdk`` and ``ra acp`` all go through it) gets back the rules on the
path it continues, so the user is not asked again about what they already allowed.

A record is a file the user (or anything running as the user) can edit, so what it says is
checked, not trusted. A rule is given back only when

* the entry is ``{"behavior": "allow", "rule": str, "tool_use_id": str}``: ra records nothing
  else, so no other behaviour (a "deny" or "ask" entry, a missing field) means anything;
* the rule parses (:class:`~ra.agent.permissions.rules.Rule`), and
* ``tool_use_id`` names a tool call recorded earlier on the same path, and the rule is exactly
  the one ra offers for that call (``suggested_rule``): a rule ra could not have offered there -
  a bare ``Bash``, a wider pattern, a rule for another tool - is not one a user granted.

Anything else is refused with one WARNING (``code="permission_rule_refused"``) per entry that
names it and says why; nothing is widened or repaired. The rules given back are listed in one
WARNING (``code="permission_rules_restored"``) so the user sees them at the resume. A restored
rule is an allow rule like any "always" answer: the config's deny and ask rules, hooks and plan
mode are checked before it and still win.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..events import WarningEvent
from ..permissions.check import suggested_rule
from ..permissions.rules import CallFacts, Rule
from .format import entry_type, is_turn_entry

if TYPE_CHECKING:
    from ra.llm.types import ToolCall

    from .record import SessionRecord

__all__ = ["ENTRY_TYPE", "granted_rules", "restore_grants"]

#: The entry type of a rule granted by an "always" answer.
ENTRY_TYPE = "permission_rule"


def granted_rules(record: SessionRecord, cwd: str) -> tuple[list[Rule], list[tuple[dict[str, Any], str]]]:
    """The rules the record's path grants, in order (each once), and the entries refused with why."""
    from ..history import AssistantTurn

    calls: dict[str, ToolCall] = {}
    turns = iter(record.turns)
    rules: list[Rule] = []
    seen: set[str] = set()
    refused: list[tuple[dict[str, Any], str]] = []
    for entry in record.path:
        if is_turn_entry(entry):
            turn = next(turns, None)
            if isinstance(turn, AssistantTurn):
                for call in turn.tool_calls:
                    calls[call.id] = call
            continue
        if entry_type(entry) != ENTRY_TYPE:
            continue
        rule, why = _check(entry, calls, cwd)
        if rule is None:
            refused.append((entry, why))
        elif rule.text not in seen:
            seen.add(rule.text)
            rules.append(rule)
    return rules, refused


def _check(entry: dict[str, Any], calls: dict[str, ToolCall], cwd: str) -> tuple[Rule | None, str]:
    behavior, text, call_id = entry.get("behavior"), entry.get("rule"), entry.get("tool_use_id")
    if behavior != "allow":
        return None, f"its behavior is {behavior!r}; ra records only allow rules granted by a user's answer"
    if not isinstance(text, str) or not isinstance(call_id, str):
        return None, "it needs a string rule and a string tool_use_id"
    try:
        rule = Rule.parse(text)
    except ValueError as exc:
        return None, str(exc)
    call = calls.get(call_id)
    if call is None:
        return None, f"it names no tool call recorded before it on this path ({call_id!r})"
    try:
        offered = suggested_rule(call.name, CallFacts.of(call, cwd))
    except Exception as exc:  # a recorded call ra cannot read is no ground for a rule
        return None, f"the call it answers cannot be read ({type(exc).__name__}: {exc})"
    if offered != rule.text:
        what = f"{offered!r}" if offered else "no rule"
        return None, f"ra offered {what} for the call it answers ({call.name}), not this one"
    return rule, ""


def restore_grants(session: Any, record: SessionRecord, cwd: str) -> list[Rule]:
    """Give ``session`` (being opened from ``record``) the rules its path grants, and say so."""
    rules, refused = granted_rules(record, cwd)
    for entry, why in refused:
        rule = entry.get("rule")
        shown = rule if isinstance(rule, str) else repr(rule)
        session.emit(
            WarningEvent(
                "permission_rule_refused",
                f"Not restoring the permission rule {shown} (entry {entry.get('id')} of session {record.id}): "
                f"{why}. Calls it would allow are asked about as usual.",
                {"entry_id": entry.get("id"), "rule": rule, "reason": why},
            )
        )
    if rules:
        session._run.session_rules.extend(rules)
        texts = [rule.text for rule in rules]
        session.emit(
            WarningEvent(
                "permission_rules_restored",
                f"Restored {len(texts)} permission rule{'s' if len(texts) != 1 else ''} allowed earlier in this "
                f'session ("always allow"): {", ".join(texts)}. Deny and ask rules still apply.',
                {"rules": texts},
            )
        )
    return rules

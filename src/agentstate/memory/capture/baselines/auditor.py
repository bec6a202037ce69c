"""The auditor of notebook 06: compare the store with the conversation it should hold.

It opens the server's database read-only (the SQLite file, or the Postgres
database a fleet of replicas shares) and never looks at an agent's state nor
at a server's: what counts is what was persisted. Per thread it checks the entries
(one per message, in order, role and content byte-identical, no system
messages, nothing extra), the flushes (a ``put_context`` after each
msg_idx % 6 == 0, FLUSH_CONTEXT and SESSION_END, each preceded by
``await_consistency`` since the last write) and the bootstrap (one
``get_context`` per SESSION_START, followed by ``list_entries(limit=10)``),
the last two from the server's call log. Writes still queued are reported
too: an audit is only meaningful once the store is consistent.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentstate.memory.capture import calls
from agentstate.memory.capture.conversations import CONTROLS, Conversation, Event
from agentstate.memory.service.stores import decoded, read_memory_rows

KINDS = (
    "missing",
    "duplicated",
    "reordered",
    "wrong_role",
    "content_mismatch",
    "system_persisted",
    "extra_entry",
    "missing_flush",
    "extra_flush",
    "flush_not_awaited",
    "missing_bootstrap",
    "repeated_bootstrap",
    "bootstrap_incomplete",
    "pending_write",
)


@dataclass(frozen=True)
class Violation:
    """One broken capture rule: its kind (one of ``KINDS``), where, and what was found."""

    kind: str
    thread: str
    msg_idx: int | None
    detail: str

    def row(self) -> dict[str, Any]:
        """The violation as a table row."""
        return {
            "kind": self.kind,
            "thread": self.thread,
            "msg_idx": self.msg_idx,
            "detail": self.detail,
        }


def read_memory(db: str | Path, memory_id: str) -> dict[str, list[dict[str, Any]]]:
    """Entries, call log and pending queue of one memory, oldest first (volatile fields dropped).

    ``db`` is the SQLite file or the Postgres URL the servers write to: read
    from the database, never from a server (a fleet's replicas hold nothing of their own).
    """
    stored = decoded(read_memory_rows(db, memory_id))
    entries = [{"raw_entry": e["raw_entry"], "tags": e["tags"]} for e in stored["entries"]]
    ops = stored["ops"]
    for op in ops:
        op.pop("entry_id", None)
    return {
        "entries": entries,
        "ops": ops,
        "contexts": stored["contexts"],
        "pending": stored["pending"],
    }


def audit(db: str | Path, conversation: Conversation, memories: dict[str, str]) -> list[Violation]:
    """Every violation in the store for ``conversation`` (``memories``: thread -> memory_id)."""
    found: list[Violation] = []
    for thread in conversation.threads:
        stored = read_memory(db, memories[thread])
        found += _entries(thread, conversation, stored["entries"])
        found += _flushes(thread, conversation, stored["ops"])
        found += _bootstrap(thread, conversation, stored["ops"])
        if stored["pending"]:
            found.append(
                Violation(
                    "pending_write", thread, None, f"{stored['pending']} write(s) still queued"
                )
            )
    return found


def _entries(thread: str, conversation: Conversation, entries: list[dict]) -> list[Violation]:
    out: list[Violation] = []
    # a message Event's msg_idx is an int (__post_init__ checks it); Event types it int | None
    expected: dict[int, Event] = {e.msg_idx: e for e in conversation.messages(thread)}  # type: ignore[misc]
    by_idx: dict[Any, list[dict]] = {}
    for entry in entries:
        tags = entry["tags"]
        if tags.get("role") == "system" or (
            tags.get("msg_idx") is None and entry["raw_entry"] in CONTROLS
        ):
            out.append(
                Violation(
                    "system_persisted",
                    thread,
                    tags.get("msg_idx"),
                    f"{entry['raw_entry'][:30]!r} stored",
                )
            )
            continue
        by_idx.setdefault(tags.get("msg_idx"), []).append(entry)
    order = {id(e): n for n, e in enumerate(entries)}
    firsts: list[tuple[int, int]] = []  # (store position, msg_idx) of each message's entry
    for idx, message in expected.items():
        group = by_idx.pop(idx, [])
        if not group:
            out.append(Violation("missing", thread, idx, f"{message.role} message not stored"))
            continue
        exact = [e for e in group if e["raw_entry"] == message.content]
        chosen = exact[0] if exact else group[0]
        if len(exact) > 1:
            out.append(Violation("duplicated", thread, idx, f"{len(exact)} entries"))
        if not exact:
            out.append(
                Violation(
                    "content_mismatch",
                    thread,
                    idx,
                    f"stored {len(chosen['raw_entry'])} chars, message has {len(message.content)}",
                )
            )
        if chosen["tags"].get("role") != message.role:
            out.append(
                Violation(
                    "wrong_role",
                    thread,
                    idx,
                    f"stored as {chosen['tags'].get('role')}, was {message.role}",
                )
            )
        for extra in group:
            if extra is not chosen and not (exact and extra in exact[1:]):
                out.append(
                    Violation(
                        "extra_entry",
                        thread,
                        idx,
                        f"{extra['raw_entry'][:40]!r} is not message {idx}",
                    )
                )
        firsts.append((order[id(chosen)], idx))
    for idx, group in by_idx.items():
        for extra in group:
            out.append(
                Violation(
                    "extra_entry",
                    thread,
                    idx if isinstance(idx, int) else None,
                    f"{extra['raw_entry'][:40]!r} matches no message",
                )
            )
    highest = 0
    for _, idx in sorted(firsts):
        if idx < highest:
            out.append(Violation("reordered", thread, idx, f"stored after message {highest}"))
        highest = max(highest, idx)
    return out


PERIODIC = "every 6th message"  # why a flush_points entry is due when no control event asked


def flush_points(conversation: Conversation, thread: str) -> list[tuple[int, str]]:
    """The msg_idx after which a flush must happen, each with why: "every 6th message" or the
    control event (``FLUSH_CONTEXT``, ``SESSION_END``) that asks for it (a position may repeat)."""
    points, last = [], 0
    for event in conversation.thread_events(thread):
        if event.kind == "message":
            last = event.msg_idx  # type: ignore[assignment]  # an int for a message (__post_init__)
            if calls.periodic_flush_due(last):
                points.append((last, PERIODIC))
        elif event.content in ("FLUSH_CONTEXT", "SESSION_END"):
            points.append((last, event.content))
    return points


def expected_flushes(conversation: Conversation, thread: str) -> list[int]:
    """The msg_idx after which a flush must happen (a position may repeat)."""
    return [after for after, _ in flush_points(conversation, thread)]


def actual_flushes(ops: list[dict]) -> list[tuple[int, bool]]:
    """(position, awaited) of every put_context in the call log."""
    out, last, awaited = [], 0, False
    for op in ops:
        if op["tool"] == "add_entry":
            idx = op.get("tags", {}).get("msg_idx")
            last = max(last, idx) if isinstance(idx, int) else last
            awaited = False
        elif op["tool"] == "await_consistency":
            awaited = True
        elif op["tool"] == "put_context":
            out.append((last, awaited))
    return out


def _flushes(thread: str, conversation: Conversation, ops: list[dict]) -> list[Violation]:
    want = Counter(expected_flushes(conversation, thread))
    done = actual_flushes(ops)
    have = Counter(p for p, _ in done)
    out = [
        Violation("missing_flush", thread, p, "no put_context after this message")
        for p in sorted((want - have).elements())
    ]
    out += [
        Violation("extra_flush", thread, p, "put_context not asked for here")
        for p in sorted((have - want).elements())
    ]
    out += [
        Violation("flush_not_awaited", thread, p, "put_context without await_consistency")
        for p, awaited in done
        if not awaited
    ]
    return out


def _bootstrap(thread: str, conversation: Conversation, ops: list[dict]) -> list[Violation]:
    starts = sum(e.content == "SESSION_START" for e in conversation.thread_events(thread))
    gets = [i for i, op in enumerate(ops) if op["tool"] == "get_context"]
    out = []
    if len(gets) > starts:
        out.append(
            Violation(
                "repeated_bootstrap",
                thread,
                None,
                f"get_context {len(gets)}x for {starts} SESSION_START",
            )
        )
    if len(gets) < starts:
        out.append(
            Violation(
                "missing_bootstrap",
                thread,
                None,
                f"get_context {len(gets)}x for {starts} SESSION_START",
            )
        )
    for i in gets:
        nxt = ops[i + 1] if i + 1 < len(ops) else {}
        if nxt.get("tool") != "list_entries" or nxt.get("limit") != calls.BOOTSTRAP_LIMIT:
            out.append(
                Violation(
                    "bootstrap_incomplete",
                    thread,
                    None,
                    "get_context not followed by list_entries(limit=10)",
                )
            )
    return out


def counts(violations: list[Violation]) -> dict[str, int]:
    """Violations per kind, only the kinds that occur, in KINDS order."""
    c = Counter(v.kind for v in violations)
    return {k: c[k] for k in KINDS if c[k]}


def side_by_side(results: dict[str, list[Violation]]) -> list[dict[str, Any]]:
    """One row per kind that occurs anywhere, one column per agent."""
    per = {name: Counter(v.kind for v in vs) for name, vs in results.items()}
    kinds = [k for k in KINDS if any(c[k] for c in per.values())]
    rows = [{"violation": k, **{name: c[k] for name, c in per.items()}} for k in kinds]
    rows.append({"violation": "total", **{name: sum(c.values()) for name, c in per.items()}})
    return rows

"""The memory store over SQL, whatever the database: what SQLite and Postgres share (notebook 06).

:class:`Store` is what the server's tools call; the SQLite
:class:`~agentstate.memory.service.store.MemoryStore` and the Postgres
:class:`~agentstate.memory.service.store_postgres.PostgresMemoryStore` are its
two backends. The rules live here once: which vault a memory belongs to, the
refusal of a ``msg_idx`` no position was assigned for, how a position is
chosen, how entries, pages and their cursors are read and built, what the
auditor reads, and the one-line errors. A backend supplies only what differs:
its SQL dialect, its locking and its connections, through four methods
(``_rows`` reads, ``_write`` commits one statement, ``_atomic`` runs a
transaction, ``_create`` makes a memory) and the writes that differ (``_enqueue``,
``_search``, ``drain``).

The statements here are written once, with ``?`` for each parameter (SQLite's
style); the Postgres store turns each ``?`` into psycopg's ``%s``, so none of
them may hold a literal ``?`` or ``%``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from agentstate.memory.service.checks import (
    LAST_SEQ,
    MAX_MSG_IDX,
    MAX_POSITION,
    MemoryInputError,
    check_after,
    check_id,
    msg_idx_refusal,
    written_msg_idx,
)

T = TypeVar("T")
# run one statement inside a backend's transaction: (sql with ?, parameters) -> a cursor
Execute = Callable[[str, tuple], Any]
Rows = Callable[[str, tuple], list[dict[str, Any]]]

INSERT_QUEUED = (
    "INSERT INTO queue (memory_id, kind, payload, enqueued_at, write_key) VALUES (?, ?, ?, ?, ?)"
)
INSERT_OP = "INSERT INTO ops (memory_id, tool, detail, at) VALUES (?, ?, ?, ?)"


class StoreUnavailableError(RuntimeError):
    """The store's database cannot be reached (Postgres down or restarting), in one line.

    Nothing was acknowledged: a write that got this error is sent again with its
    key, and lands once.
    """


def now() -> str:
    """The current time as RFC3339 UTC with microseconds (``...Z``)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def entry_of(row: dict[str, Any]) -> dict[str, Any]:
    """An entry as the tools return it, from its row (tags parsed from their JSON)."""
    return {
        "seq": row["seq"],
        "entry_id": row["entry_id"],
        "raw_entry": row["raw_entry"],
        "summary": row["summary"],
        "tags": json.loads(row["tags"]),
        "created_at": row["created_at"],
    }


@dataclass(frozen=True)
class QueuedWrite:
    """An ``add_entry`` or ``put_context`` on its way into the queue, as both stores record it."""

    memory_id: str
    kind: str  # "entry" or "context"
    payload: dict[str, Any]
    detail: dict[str, Any]
    key: str | None

    @property
    def msg_idx(self) -> int | None:
        """The entry's integer ``msg_idx`` (None for a context or an entry without one)."""
        return written_msg_idx(self.payload.get("tags", {})) if self.kind == "entry" else None

    @property
    def raises_last_position(self) -> int | None:
        """The ``msg_idx`` every position assigned later must come after, or None.

        A message written with its own ``msg_idx`` (up to :data:`MAX_MSG_IDX`) moves
        the memory's last position up to it; one past that was an assigned position,
        already the memory's last.
        """
        idx = self.msg_idx
        return idx if idx is not None and 0 <= idx <= MAX_MSG_IDX else None

    def rows(self, stamp: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """Its queue row (for :data:`INSERT_QUEUED`) and its call-log row (:data:`INSERT_OP`)."""
        payload = json.dumps({**self.payload, "enqueued_at": stamp}, ensure_ascii=False)
        tool = "add_entry" if self.kind == "entry" else "put_context"
        detail = json.dumps(self.detail, ensure_ascii=False, sort_keys=True)
        return (
            (self.memory_id, self.kind, payload, stamp, self.key),
            (self.memory_id, tool, detail, stamp),
        )


def audit_rows(rows: Rows, memory_id: str) -> dict[str, Any]:
    """Entries (seq, raw_entry, tags), call log (tool, detail), contexts and pending count.

    What the auditor reads of one memory; ``rows`` runs each statement on the
    backend's own read-only connection, never through a replica.
    """
    entries = rows(
        "SELECT seq, raw_entry, tags FROM entries WHERE memory_id = ? ORDER BY seq", (memory_id,)
    )
    ops = rows("SELECT tool, detail FROM ops WHERE memory_id = ? ORDER BY seq", (memory_id,))
    pending = rows(
        "SELECT COUNT(*) AS n FROM queue WHERE memory_id = ? AND applied_at IS NULL", (memory_id,)
    )[0]["n"]
    contexts = rows(
        "SELECT content FROM contexts WHERE memory_id = ? ORDER BY snapshot", (memory_id,)
    )
    return {
        "entries": entries,
        "ops": ops,
        "contexts": [r["content"] for r in contexts],
        "pending": pending,
    }


class Store(ABC):
    """What the memory server's tools call, the same on either backend (see the module)."""

    blocking: bool  # True: call it from a worker thread (a network round trip per call)
    ROW_LOCK = ""  # what locks a memory's row while a position is chosen (Postgres: FOR UPDATE)
    _vaults: dict[str, str]  # memory_id -> vault_id, cached: a memory never changes vault

    # --- what a backend supplies ------------------------------------------------------------

    @abstractmethod
    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        """The rows of one read (``?`` parameters), as dicts."""

    @abstractmethod
    def _write(self, sql: str, params: tuple) -> None:
        """Run one statement (``?`` parameters) and commit it."""

    @abstractmethod
    def _atomic(self, work: Callable[[Execute], T]) -> T:
        """``work(execute)`` in one transaction, committed if it returns, rolled back if not."""

    @abstractmethod
    def _create(self, vault_id: str, memory_id: str, title: str) -> str | None:
        """Create the memory; None if made now, else the vault it already belongs to."""

    @abstractmethod
    def _enqueue(self, write: QueuedWrite) -> int | None:
        """Queue ``write`` and log it in one transaction; None if its key was already used."""

    @abstractmethod
    def _search(self, memory_id: str, terms: list[str], top_ke: int) -> list[dict[str, Any]]:
        """Rows of the entries that hold any of ``terms``, best first."""

    @abstractmethod
    def drain(self) -> int:
        """Apply queued writes; how many were applied."""

    @abstractmethod
    def close(self) -> None:
        """Release the database."""

    # --- memories ---------------------------------------------------------------------------

    def create_memory(self, vault_id: Any, memory_id: Any, title: str = "") -> bool:
        """Create a memory; False if it already exists in this vault (idempotent)."""
        check_id(vault_id, "vault_id"), check_id(memory_id, "memory_id")
        owner = self._create(vault_id, memory_id, title)
        if owner is None:
            return True
        if owner != vault_id:
            raise MemoryInputError(f"memory id {memory_id!r} already belongs to vault {owner!r}")
        return False

    def require_memory(self, vault_id: Any, memory_id: Any) -> None:
        """Raise ``MemoryInputError`` unless ``memory_id`` exists in ``vault_id``."""
        check_id(vault_id, "vault_id")
        if self.vault_of(memory_id) != vault_id:
            raise MemoryInputError(
                f"unknown memory {memory_id!r} in vault {vault_id!r}; create it with create_memory"
            )

    def vault_of(self, memory_id: Any) -> str:
        """The vault of an existing memory (cached: a memory never changes vault)."""
        check_id(memory_id, "memory_id")
        if memory_id in self._vaults:
            return self._vaults[memory_id]
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = ?", (memory_id,))
        if not rows:
            raise MemoryInputError(f"unknown memory {memory_id!r}; create it with create_memory")
        self._vaults[memory_id] = rows[0]["vault_id"]
        return rows[0]["vault_id"]

    # --- queue, positions, call log ---------------------------------------------------------

    def enqueue(
        self,
        memory_id: str,
        kind: str,
        payload: dict[str, Any],
        detail: dict,
        key: str | None = None,
    ) -> int | None:
        """Queue a write and log the call in one transaction; return its queue seq.

        With ``key``: None, and nothing written or logged, if this memory already
        has a write with that key (the backend decides inside its transaction, so
        concurrent sends of one write store it once). An entry's ``msg_idx`` past
        :data:`MAX_MSG_IDX` is refused unless this memory assigned that position
        (positions are never taken back, so the check holds once it passed).
        """
        write = QueuedWrite(memory_id, kind, payload, detail, key)
        idx = write.msg_idx
        if (
            idx is not None
            and idx > MAX_MSG_IDX
            and not self._rows(
                "SELECT 1 FROM positions WHERE memory_id = ? AND position = ?", (memory_id, idx)
            )
        ):
            raise msg_idx_refusal(memory_id, idx)
        return self._enqueue(write)

    def assign_position(self, memory_id: str, message_key: str, after: int = 0) -> int:
        """The position (``msg_idx``) of the message ``message_key`` in ``memory_id``.

        Assigned once, atomically (in one transaction, with the memory's row
        locked first: SQLite's IMMEDIATE transaction, Postgres's ``FOR UPDATE``):
        the same key gets the same position every time, a new key the next free
        one, greater than ``after``, than every position assigned before and than
        every integer ``msg_idx`` this memory was written with. Two writers (or
        replicas) that read the same count at once therefore never give two
        messages one position. An ``after`` past both :data:`MAX_MSG_IDX` and the
        memory's last position is refused: like a huge ``msg_idx``, it would use
        up the positions of the memory.
        """

        def assign(execute: Execute) -> int:
            last = execute(
                "SELECT last_position FROM memories WHERE memory_id = ?" + self.ROW_LOCK,
                (memory_id,),
            ).fetchone()
            if last is None:
                raise MemoryInputError(f"unknown memory {memory_id!r}")
            row = execute(
                "SELECT position FROM positions WHERE memory_id = ? AND message_key = ?",
                (memory_id, message_key),
            ).fetchone()
            if row is not None:
                position, new = int(row[0]), False
            else:
                check_after(memory_id, after, int(last[0]))
                position, new = max(int(last[0]), after) + 1, True
                if position > MAX_POSITION:
                    raise MemoryInputError(f"memory {memory_id!r} has no position left")
                execute(
                    "INSERT INTO positions (memory_id, message_key, position) VALUES (?, ?, ?)",
                    (memory_id, message_key, position),
                )
                execute(
                    "UPDATE memories SET last_position = ? WHERE memory_id = ?",
                    (position, memory_id),
                )
            detail = json.dumps({"position": position, "new": new}, sort_keys=True)
            execute(INSERT_OP, (memory_id, "assign_position", detail, now()))
            return position

        return self._atomic(assign)

    def log_op(self, memory_id: str, tool: str, detail: dict[str, Any] | None = None) -> None:
        """Record a successful read in the call log (the auditor checks bootstraps with it)."""
        self._write(INSERT_OP, (memory_id, tool, json.dumps(detail or {}, sort_keys=True), now()))

    def pending(self) -> list[dict[str, Any]]:
        """Queued writes not applied yet (on Postgres, every replica's), oldest first."""
        return self._rows("SELECT * FROM queue WHERE applied_at IS NULL ORDER BY seq")

    def pending_count(self, memory_id: str) -> int:
        """Queued writes of ``memory_id`` not applied yet, counted in the database."""
        return self._rows(
            "SELECT COUNT(*) AS n FROM queue WHERE memory_id = ? AND applied_at IS NULL",
            (memory_id,),
        )[0]["n"]

    # --- reads ------------------------------------------------------------------------------

    def list_entries(
        self,
        memory_id: str,
        limit: int = 25,
        before: int | str | None = None,
        after: int | str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
        """One page of entries, oldest first, and the cursor of the next page (or None).

        Pages follow ``seq``, the order entries were stored in, and so do the
        cursors: ``after=N`` / ``before=N`` (exclusive) are the ``seq`` of an
        entry, as each entry and each ``next`` carries it, so no entry is
        skipped or repeated whatever the clock did (stepped back, or stamped
        several entries alike). Without ``after`` the page is the newest
        ``limit`` entries (before ``before``) and the next page is older:
        ``{"before": <seq of its first>}``; with ``after`` it is the oldest
        ``limit`` entries after it and the next page is newer. An RFC3339
        timestamp (normalised by :func:`~.checks.parse_time`) is a point in that
        order: ``after=T`` starts at the first entry stamped later than ``T``,
        ``before=T`` ends before the first entry stamped ``T`` or later. On
        Postgres ``seq`` counts the memory's own entries (1, 2, ...) in the order
        they committed.
        """
        if isinstance(after, str):
            after = self._first_seq(memory_id, ">", after) - 1
        if isinstance(before, str):
            before = self._first_seq(memory_id, ">=", before)
        if after is not None:
            rows = self._rows(
                "SELECT * FROM entries WHERE memory_id = ? AND seq > ? ORDER BY seq ASC LIMIT ?",
                (memory_id, after, limit + 1),
            )
            page = [entry_of(r) for r in rows[:limit]]
            return page, ({"after": page[-1]["seq"]} if len(rows) > limit else None)
        rows = self._rows(
            "SELECT * FROM entries WHERE memory_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            (memory_id, LAST_SEQ if before is None else before, limit + 1),
        )
        page = [entry_of(r) for r in reversed(rows[:limit])]
        return page, ({"before": page[0]["seq"]} if len(rows) > limit else None)

    def _first_seq(self, memory_id: str, op: str, stamp: str) -> int:
        """The seq of the first entry (in stored order) stamped ``op stamp``, or ``LAST_SEQ``."""
        assert op in (">", ">=")  # never user text in the statement
        rows = self._rows(
            f"SELECT seq FROM entries WHERE memory_id = ? AND created_at {op} ? "
            "ORDER BY seq LIMIT 1",
            (memory_id, stamp),
        )
        return rows[0]["seq"] if rows else LAST_SEQ

    def get_entry(self, memory_id: str, entry_id: str) -> dict[str, Any]:
        """One entry of ``memory_id``; ``MemoryInputError`` if there is none."""
        rows = self._rows(
            "SELECT * FROM entries WHERE memory_id = ? AND entry_id = ?", (memory_id, entry_id)
        )
        if not rows:
            raise MemoryInputError(f"no entry {entry_id!r} in memory {memory_id!r}")
        return entry_of(rows[0])

    def search(self, memory_id: str, query: str, top_ke: int) -> list[dict[str, Any]]:
        """Full-text search, best first; each word of the query is matched as a term (OR)."""
        terms = re.findall(r"\w+", query, flags=re.UNICODE)
        if not terms or top_ke == 0:
            return []
        return [entry_of(r) for r in self._search(memory_id, terms, top_ke)]

    def contexts(self, memory_id: str, limit: int = 1) -> list[dict[str, Any]]:
        """Latest context snapshots first."""
        return self._rows(
            "SELECT content, created_at FROM contexts WHERE memory_id = ? "
            "ORDER BY snapshot DESC LIMIT ?",
            (memory_id, limit),
        )

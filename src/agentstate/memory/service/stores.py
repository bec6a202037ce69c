"""One store interface, two backends: SQLite embedded, Postgres for a fleet (notebook 06).

``--db memory.sqlite`` opens :class:`~agentstate.memory.service.store.MemoryStore`
(one server process per file, its own :class:`~.writer.Writer`);
``--db postgresql://...`` opens
:class:`~agentstate.memory.service.store_postgres.PostgresMemoryStore` (any
number of replicas on one database, each with a :class:`~.fleet_writer.FleetWriter`).
:class:`Store` is what the server's tools use of either; :func:`read_memory`
is what the auditor reads, from the database itself, never from a replica.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Protocol

from agentstate.memory.service.store import MemoryStore
from agentstate.memory.service.targets import is_postgres


class Store(Protocol):
    """What the memory server's tools call; both backends implement it (see their docs)."""

    blocking: bool  # True: call it from a worker thread (a network round trip per call)

    def create_memory(self, vault_id: Any, memory_id: Any, title: str = "") -> bool:
        """Create a memory; False if it already exists in this vault."""

    def require_memory(self, vault_id: Any, memory_id: Any) -> None:
        """``MemoryInputError`` unless the memory exists in the vault."""

    def vault_of(self, memory_id: Any) -> str:
        """The vault of an existing memory."""

    def enqueue(
        self,
        memory_id: str,
        kind: str,
        payload: dict[str, Any],
        detail: dict,
        key: str | None = None,
    ) -> int | None:
        """Queue a write and log it; None if its key was already used."""

    def assign_position(self, memory_id: str, message_key: str, after: int = 0) -> int:
        """A message's position, assigned once."""

    def log_op(self, memory_id: str, tool: str, detail: dict[str, Any] | None = None) -> None:
        """Record a read in the call log."""

    def pending_count(self, memory_id: str) -> int:
        """Queued writes of the memory not applied yet."""

    def drain(self) -> int:
        """Apply queued writes; how many were applied."""

    def list_entries(
        self,
        memory_id: str,
        limit: int = 25,
        before: int | str | None = None,
        after: int | str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
        """A page of entries, oldest first, and the next page's cursor."""

    def get_entry(self, memory_id: str, entry_id: str) -> dict[str, Any]:
        """One entry."""

    def search(self, memory_id: str, query: str, top_ke: int) -> list[dict[str, Any]]:
        """Full-text search, best first."""

    def contexts(self, memory_id: str, limit: int = 1) -> list[dict[str, Any]]:
        """Latest context snapshots first."""

    def close(self) -> None:
        """Release the database."""


class QueueWriter(Protocol):
    """What the server's tools call of a writer (:class:`~.writer.Writer` or a fleet's)."""

    def submitting(self, memory_id: str) -> Any:
        """A context manager around queueing one write."""

    def withdraw(self, memory_id: str) -> None:
        """A write counted by ``submitting`` was not queued."""

    def wait(self, memory_id: str, timeout: float) -> None:
        """Block until no write of the memory is queued."""

    def close(self, timeout: float = 10.0) -> None:
        """Stop the writer's thread."""


def open_store(db: str | Path, *, retry_for: float = 10.0) -> Store:
    """The store ``db`` names: a Postgres URL, or an SQLite file (created 0600).

    ``retry_for``: Postgres only, how long a call waits for the database to come back.
    """
    if is_postgres(db):
        from agentstate.memory.service.store_postgres import PostgresMemoryStore

        return PostgresMemoryStore(str(db), retry_for=retry_for)
    return MemoryStore(db)


def open_service(
    db: str | Path, write_delay: float = 0.0, *, retry_for: float = 10.0
) -> tuple[Store, QueueWriter]:
    """The store ``db`` names and the writer that drains its queue in this process."""
    store = open_store(db, retry_for=retry_for)
    if is_postgres(db):
        from agentstate.memory.service.fleet_writer import FleetWriter

        return store, FleetWriter(store, delay=write_delay)  # type: ignore[arg-type]
    from agentstate.memory.service.writer import Writer

    assert isinstance(store, MemoryStore)
    return store, Writer(store, delay=write_delay)


def read_memory_rows(db: str | Path, memory_id: str) -> dict[str, Any]:
    """Entries (seq, raw_entry, tags), call log (tool, detail), contexts and pending count.

    Read from the database in a read-only connection of its own: SQLite opened
    ``mode=ro``, Postgres in a ``READ ONLY`` transaction.
    """
    if is_postgres(db):
        from agentstate.memory.service.store_postgres import read_memory_rows as from_postgres

        return from_postgres(str(db), memory_id)
    conn = sqlite3.connect(f"file:{Path(db)}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        entries = [
            dict(r)
            for r in conn.execute(
                "SELECT seq, raw_entry, tags FROM entries WHERE memory_id = ? ORDER BY seq",
                (memory_id,),
            )
        ]
        ops = [
            dict(r)
            for r in conn.execute(
                "SELECT tool, detail FROM ops WHERE memory_id = ? ORDER BY seq", (memory_id,)
            )
        ]
        pending = conn.execute(
            "SELECT COUNT(*) FROM queue WHERE memory_id = ? AND applied_at IS NULL", (memory_id,)
        ).fetchone()[0]
        contexts = [
            r[0]
            for r in conn.execute(
                "SELECT content FROM contexts WHERE memory_id = ? ORDER BY snapshot", (memory_id,)
            )
        ]
    finally:
        conn.close()
    return {"entries": entries, "ops": ops, "contexts": contexts, "pending": pending}


def decoded(rows: dict[str, Any]) -> dict[str, Any]:
    """:func:`read_memory_rows` with tags and details parsed from their JSON."""
    return {
        **rows,
        "entries": [{**e, "tags": json.loads(e["tags"])} for e in rows["entries"]],
        "ops": [{"tool": o["tool"], **json.loads(o["detail"])} for o in rows["ops"]],
    }

"""One store interface, two backends: SQLite embedded, Postgres for a fleet (notebook 06).

``--db memory.sqlite`` opens :class:`~agentstate.memory.service.store.MemoryStore`
(one server process per file, its own :class:`~.writer.Writer`);
``--db postgresql://...`` opens
:class:`~agentstate.memory.service.store_postgres.PostgresMemoryStore` (any
number of replicas on one database, each with a :class:`~.fleet_writer.FleetWriter`).
:class:`~.sql_store.Store` is what the server's tools use of either (what both
keep alike lives there once); :func:`read_memory_rows` is what the auditor
reads, from the database itself, never from a replica.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentstate.memory.service.queue_writer import QueueWriter
from agentstate.memory.service.sql_store import Store
from agentstate.memory.service.store import MemoryStore
from agentstate.memory.service.store import read_memory_rows as from_sqlite
from agentstate.memory.service.targets import is_postgres


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
    return from_sqlite(db, memory_id)


def decoded(rows: dict[str, Any]) -> dict[str, Any]:
    """:func:`read_memory_rows` with tags and details parsed from their JSON."""
    return {
        **rows,
        "entries": [{**e, "tags": json.loads(e["tags"])} for e in rows["entries"]],
        "ops": [{"tool": o["tool"], **json.loads(o["detail"])} for o in rows["ops"]],
    }

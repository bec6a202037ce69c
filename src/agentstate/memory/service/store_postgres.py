"""Postgres storage for the memory service: several server replicas, one database, one truth.

Notebook 06 (the fleet is drawn in going-further 06b). The same
:class:`~agentstate.memory.service.sql_store.Store` as the SQLite
:class:`~agentstate.memory.service.store.MemoryStore`, so the same checks,
position rule, pages and errors; what is here is what changes: any number of
server processes may open one database at once, so nothing here may rely on
one process seeing every write:

- A keyed write is ``INSERT ... ON CONFLICT DO NOTHING`` on the unique
  ``(memory_id, write_key)``, never a read-then-write: two replicas that get
  the same write at once store it once, and the second answers "already
  enqueued" (the capture graph's ``already_stored``). Positions are taken
  under the memory's row lock (``SELECT ... FOR UPDATE``), once per message key.
- The queue is a table every replica's writer drains: a writer claims whole
  memories with ``SELECT ... FOR UPDATE SKIP LOCKED`` on their ``heads`` row,
  applies every queued write of those memories in queue order and marks them
  applied, in one transaction. A replica killed mid-write loses nothing: its
  transaction dies with its connection, the writes stay queued, and the next
  writer (on any replica) applies them once.
- An entry's ``seq`` is its memory's own counter (``heads.last_seq``), taken
  under the same row lock, so a memory's entries commit in ``seq`` order and a
  reader paging ``after=seq`` never skips one. A global sequence would: seq 11
  can commit before seq 10, and a reader that saw 11 moves past 10 for good.
- A lost connection (Postgres restarting) is retried on a fresh connection
  from the pool for up to ``retry_for`` seconds; only operations that are
  idempotent are retried (keyed writes, positions by key, applies by
  ``applied_at``, reads), and past that the caller gets one line,
  :class:`~agentstate.memory.service.sql_store.StoreUnavailableError`, never an
  acknowledgement of a write that was not committed.

Search uses Postgres full-text search (the ``simple`` configuration, each
word of the query OR-ed, ranked by ``ts_rank``); SQLite uses FTS5 and bm25, so
the two may rank equal matches differently. Connections come from a
``psycopg_pool.ConnectionPool`` (psycopg 3, the ``memory`` extra).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agentstate._extras import needs
from agentstate.memory.service.sql_store import (
    INSERT_OP,
    Execute,
    QueuedWrite,
    Store,
    StoreUnavailableError,
    audit_rows,
    now,
)
from agentstate.memory.service.targets import redact

with needs("memory", "agentstate.memory.service.store_postgres"):
    import psycopg
    from psycopg import errors
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout

T = TypeVar("T")
POOL_MAX = 6  # connections per replica: 4 replicas and their writers fit a default server
SCHEMA_LOCK = 0x6D656D6F  # pg_advisory_xact_lock: replicas starting at once create the schema once
RETRY_FOR = 10.0  # seconds an operation waits for the database to come back
SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    memory_id TEXT PRIMARY KEY, vault_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL, last_position BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS heads (
    memory_id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS positions (
    memory_id TEXT NOT NULL, message_key TEXT NOT NULL, position BIGINT NOT NULL,
    PRIMARY KEY (memory_id, message_key), UNIQUE (memory_id, position));
CREATE TABLE IF NOT EXISTS queue (
    seq BIGSERIAL PRIMARY KEY, memory_id TEXT NOT NULL, kind TEXT NOT NULL,
    payload TEXT NOT NULL, enqueued_at TEXT NOT NULL, applied_at TEXT, write_key TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS queue_by_key ON queue (memory_id, write_key)
    WHERE write_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS queue_pending ON queue (memory_id, seq) WHERE applied_at IS NULL;
CREATE TABLE IF NOT EXISTS entries (
    memory_id TEXT NOT NULL, seq BIGINT NOT NULL, entry_id TEXT UNIQUE NOT NULL,
    vault_id TEXT NOT NULL, raw_entry TEXT NOT NULL, summary TEXT NOT NULL,
    tags TEXT NOT NULL, created_at TEXT NOT NULL,
    words TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', raw_entry || ' ' || summary)) STORED,
    PRIMARY KEY (memory_id, seq));
CREATE INDEX IF NOT EXISTS entries_words ON entries USING GIN (words);
CREATE TABLE IF NOT EXISTS contexts (
    snapshot BIGSERIAL PRIMARY KEY, vault_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    content TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS contexts_by_memory ON contexts (memory_id, snapshot);
CREATE TABLE IF NOT EXISTS ops (
    seq BIGSERIAL PRIMARY KEY, memory_id TEXT NOT NULL, tool TEXT NOT NULL,
    detail TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS ops_by_memory ON ops (memory_id, seq);
"""
# what a lost or refused connection raises: retried while the operation is idempotent
TRANSIENT: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,  # connection lost, server shutting down or starting up
    errors.SerializationFailure,
    errors.DeadlockDetected,
    PoolTimeout,
)
log = logging.getLogger(__name__)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def for_psycopg(sql: str) -> str:
    """A shared statement of :mod:`.sql_store` (``?`` parameters) in psycopg's ``%s`` style."""
    assert "%" not in sql  # a literal % would need doubling for psycopg
    return sql.replace("?", "%s")


class PostgresMemoryStore(Store):
    """The memory store over one Postgres database, shared by every replica (see module).

    ``url`` is a ``postgresql://`` URL (its password, if any, is never shown);
    the schema is created if missing, once even when replicas start together.
    Raises :class:`StoreUnavailableError` (one line) if the database cannot be
    reached within ``connect_timeout`` seconds.
    """

    blocking = True  # the server calls it from a worker thread, not its event loop
    ROW_LOCK = " FOR UPDATE"  # replicas choosing positions at once wait for each other

    def __init__(
        self,
        url: str,
        *,
        pool_max: int = POOL_MAX,
        retry_for: float = RETRY_FOR,
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.shown = redact(url)
        self.retry_for = retry_for
        self._vaults = {}
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_max,
            # the replica's pid in pg_stat_activity: an operator (or a test) sees whose it is
            kwargs={
                "autocommit": True,
                "connect_timeout": 5,
                "application_name": f"agentstate-memory-{os.getpid()}",
            },
            timeout=5.0,
            name="agentstate-memory",
            open=False,
        )
        try:
            # one plain connection first: its error says why (refused, wrong password, no such
            # database), where the pool would only say that it timed out
            psycopg.connect(url, connect_timeout=max(1, int(connect_timeout))).close()
            self.pool.open(wait=True, timeout=connect_timeout)
            self._run(self._create_schema, retry=False)
        except (PoolTimeout, psycopg.Error, StoreUnavailableError) as exc:
            self.pool.close()
            raise StoreUnavailableError(
                f"cannot reach the memory database {self.shown}: {_one_line(exc)}"
            ) from None

    @staticmethod
    def _create_schema(conn: psycopg.Connection) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in filter(str.strip, SCHEMA.split(";")):
                conn.execute(statement)

    def close(self) -> None:
        """Close the pool (every connection of this replica)."""
        self.pool.close()

    # --- running an operation, retried while the database comes back ---------------------

    def _run(self, op: Callable[[psycopg.Connection], T], *, retry: bool = True) -> T:
        """``op(conn)`` on a pooled connection; a transient failure retried until ``retry_for``.

        ``retry=False`` for an operation that must not run twice (a write without
        a key): its failure is reported at once, saying the outcome is unknown.
        """
        deadline = time.monotonic() + self.retry_for
        pause = 0.05
        while True:
            try:  # wait for a connection no longer than the operation may take in all
                with self.pool.connection(timeout=max(0.1, deadline - time.monotonic())) as conn:
                    return op(conn)
            except TRANSIENT as exc:
                if not retry or time.monotonic() + pause >= deadline:
                    unknown = (
                        ""
                        if retry
                        else "; the write had no idempotency key, so it may or may "
                        "not have been stored: send writes with a key"
                    )
                    raise StoreUnavailableError(
                        f"the memory database {self.shown} is unavailable ({_one_line(exc)})"
                        f"{unknown}"
                    ) from None
                log.warning("memory database unavailable, retrying: %s", _one_line(exc))
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def _fetch(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        """The rows of one read in psycopg's style (``%s``), retried while the database is back."""

        def op(conn: psycopg.Connection) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(sql, params).fetchall()

        return self._run(op)

    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        return self._fetch(for_psycopg(sql), params)

    def _write(self, sql: str, params: tuple) -> None:
        # autocommit: one statement is its own transaction, one round trip
        self._run(lambda conn: conn.execute(for_psycopg(sql), params))

    def _atomic(self, work: Callable[[Execute], T]) -> T:
        def op(conn: psycopg.Connection) -> T:
            with conn.transaction():
                return work(lambda sql, params: conn.execute(for_psycopg(sql), params))

        return self._run(op)

    # --- memories ---------------------------------------------------------------------------

    def _create(self, vault_id: str, memory_id: str, title: str) -> str | None:
        """``INSERT ... ON CONFLICT DO NOTHING``: replicas asked at once make it once."""

        def op(conn: psycopg.Connection) -> str | None:
            with conn.transaction():
                made = conn.execute(
                    "INSERT INTO memories (memory_id, vault_id, title, created_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (memory_id) DO NOTHING RETURNING 1",
                    (memory_id, vault_id, title, now()),
                ).fetchone()
                if made:
                    conn.execute("INSERT INTO heads (memory_id) VALUES (%s)", (memory_id,))
                    return None
                row = conn.execute(
                    "SELECT vault_id FROM memories WHERE memory_id = %s", (memory_id,)
                ).fetchone()
                return row[0] if row else None

        return self._run(op)

    # --- queue ------------------------------------------------------------------------------

    def _enqueue(self, write: QueuedWrite) -> int | None:
        """``ON CONFLICT DO NOTHING`` on the key: concurrent sends, to any replicas, store once.

        A write without a key is not retried after a lost connection: it may have
        been committed, and a second run would store it twice.
        """
        queued, logged = write.rows(now())
        idx = write.raises_last_position

        def op(conn: psycopg.Connection) -> int | None:
            with conn.transaction():
                row = conn.execute(
                    "INSERT INTO queue (memory_id, kind, payload, enqueued_at, write_key) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (memory_id, write_key) "
                    "WHERE write_key IS NOT NULL DO NOTHING RETURNING seq",
                    queued,
                ).fetchone()
                if row is None:
                    return None
                conn.execute(for_psycopg(INSERT_OP), logged)
                if idx is not None:
                    conn.execute(
                        "UPDATE memories SET last_position = %s "
                        "WHERE memory_id = %s AND last_position < %s",
                        (idx, write.memory_id, idx),
                    )
                return int(row[0])

        return self._run(op, retry=write.key is not None)

    # --- the writer's side: claim whole memories, apply their queued writes -----------------

    def drain(self, memories: int = 16, *, delay: float = 0.0) -> int:
        """Apply the queued writes of up to ``memories`` memories no other writer holds.

        One transaction: ``SELECT ... FOR UPDATE SKIP LOCKED`` claims the
        memories' ``heads`` rows (another replica's writer skips them rather
        than wait), their queued writes are applied in queue order, each entry
        numbered from its memory's counter, and marked applied. With ``delay``
        (tests, the notebook) one write is applied, ``delay`` seconds after its
        claim, holding the claim: a replica killed in that window dies mid-write.
        Returns how many writes were applied.
        """
        return self._run(lambda conn: self.drain_on(conn, memories, delay=delay))

    @staticmethod
    def drain_on(conn: psycopg.Connection, memories: int = 16, *, delay: float = 0.0) -> int:
        """:meth:`drain` on a connection the caller holds (the paging test interleaves two)."""
        with conn.transaction():
            # SKIP LOCKED with LIMIT goes on past the memories other writers hold, so a writer
            # never idles while some memory with queued writes is free
            claimed = [
                r[0]
                for r in conn.execute(
                    "SELECT memory_id FROM heads WHERE memory_id IN "
                    "(SELECT memory_id FROM queue WHERE applied_at IS NULL) "
                    "ORDER BY memory_id LIMIT %s FOR UPDATE SKIP LOCKED",
                    (1 if delay else memories,),
                )
            ]
            if not claimed:
                return 0
            # read after the claim: whatever another writer applied before it is not pending
            with conn.cursor(row_factory=dict_row) as cur:
                items = cur.execute(
                    "SELECT seq, memory_id, kind, payload FROM queue "
                    "WHERE memory_id = ANY(%s) AND applied_at IS NULL ORDER BY seq",
                    (claimed,),
                ).fetchall()
            if delay:
                items = items[:1]
                time.sleep(delay)
            _apply(conn, items)
            return len(items)

    # --- reads ------------------------------------------------------------------------------

    def _search(self, memory_id: str, terms: list[str], top_ke: int) -> list[dict[str, Any]]:
        """Postgres full-text search (``simple``), the terms OR-ed, best ``ts_rank`` first."""
        match = " | ".join(f"'{t}'" for t in terms)  # \\w+ holds no quote or operator
        return self._fetch(
            "SELECT *, ts_rank(words, q) AS rank FROM entries, to_tsquery('simple', %s) q "
            "WHERE memory_id = %s AND words @@ q ORDER BY rank DESC, seq LIMIT %s",
            (match, memory_id, top_ke),
        )


def _apply(conn: psycopg.Connection, items: list[dict[str, Any]]) -> None:
    """Write the entries and contexts of ``items`` (claimed, in queue order) and mark them."""
    by_memory: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_memory.setdefault(item["memory_id"], []).append(item)
    entries, contexts = [], []
    for memory_id, queued in by_memory.items():
        count = sum(item["kind"] == "entry" for item in queued)
        last = 0
        if count:
            row = conn.execute(
                "UPDATE heads SET last_seq = last_seq + %s WHERE memory_id = %s RETURNING last_seq",
                (count, memory_id),
            ).fetchone()
            assert row is not None  # claimed above, so it exists
            last = int(row[0])
        seq = last - count
        for item in queued:
            payload = json.loads(item["payload"])
            stamp = payload["enqueued_at"]
            if item["kind"] == "entry":
                seq += 1
                tags = json.dumps(payload["tags"], ensure_ascii=False, sort_keys=True)
                entries.append(
                    (
                        memory_id,
                        seq,
                        payload["entry_id"],
                        payload["vault_id"],
                        payload["raw_entry"],
                        payload["summary"],
                        tags,
                        stamp,
                    )  # fmt: skip
                )
            else:
                contexts.append((payload["vault_id"], memory_id, payload["content"], stamp))
    with conn.cursor() as cur:
        if entries:
            cur.executemany(
                "INSERT INTO entries (memory_id, seq, entry_id, vault_id, raw_entry, summary, "
                "tags, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                entries,
            )
        if contexts:
            cur.executemany(
                "INSERT INTO contexts (vault_id, memory_id, content, created_at) "
                "VALUES (%s, %s, %s, %s)",
                contexts,
            )
        cur.execute(
            "UPDATE queue SET applied_at = %s WHERE seq = ANY(%s) AND applied_at IS NULL",
            (now(), [item["seq"] for item in items]),
        )


def read_memory_rows(url: str, memory_id: str) -> dict[str, Any]:
    """What the auditor reads of one memory (:func:`~.sql_store.audit_rows`), from the database.

    A read-only transaction of its own, never a replica's memory.
    """
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SET TRANSACTION READ ONLY")
            return audit_rows(
                lambda sql, params: cur.execute(for_psycopg(sql), params).fetchall(), memory_id
            )

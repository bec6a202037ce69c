"""Postgres storage for the memory service: several server replicas, one database, one truth.

Notebook 06 (the fleet is drawn in going-further 06b). The same interface as
the SQLite :class:`~agentstate.memory.service.store.MemoryStore` and the same
input checks; what changes is that any number of server processes may open
one database at once, so nothing here may rely on one process seeing every
write:

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
  :class:`~agentstate.memory.service.store.StoreUnavailableError`, never an
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
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agentstate._extras import needs
from agentstate.memory.service.store import (
    LAST_SEQ,
    MAX_MSG_IDX,
    MAX_POSITION,
    MemoryInputError,
    StoreUnavailableError,
    check_after,
    check_id,
    msg_idx_refusal,
    now,
    written_msg_idx,
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


class PostgresMemoryStore:
    """The memory store over one Postgres database, shared by every replica (see module).

    ``url`` is a ``postgresql://`` URL (its password, if any, is never shown);
    the schema is created if missing, once even when replicas start together.
    Raises :class:`StoreUnavailableError` (one line) if the database cannot be
    reached within ``connect_timeout`` seconds.
    """

    blocking = True  # the server calls it from a worker thread, not its event loop

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
        self._vaults: dict[str, str] = {}
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

    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        def op(conn: psycopg.Connection) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(sql, params).fetchall()

        return self._run(op)

    # --- memories ---------------------------------------------------------------------------

    def create_memory(self, vault_id: Any, memory_id: Any, title: str = "") -> bool:
        """Create a memory; False if it already exists in this vault (idempotent)."""
        check_id(vault_id, "vault_id"), check_id(memory_id, "memory_id")

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

        owner = self._run(op)
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
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = %s", (memory_id,))
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
        has a write with that key (``ON CONFLICT DO NOTHING``: concurrent sends of
        one write, to one replica or several, store it once). An entry's
        ``msg_idx`` past :data:`MAX_MSG_IDX` is refused unless this memory assigned it.
        """
        idx = written_msg_idx(payload.get("tags", {})) if kind == "entry" else None
        if idx is not None and idx > MAX_MSG_IDX:
            known = self._rows(
                "SELECT 1 FROM positions WHERE memory_id = %s AND position = %s", (memory_id, idx)
            )
            if not known:
                raise msg_idx_refusal(memory_id, idx)
        stamp = now()
        text = json.dumps({**payload, "enqueued_at": stamp}, ensure_ascii=False)
        tool = "add_entry" if kind == "entry" else "put_context"
        logged = json.dumps(detail, ensure_ascii=False, sort_keys=True)

        def op(conn: psycopg.Connection) -> int | None:
            with conn.transaction():
                row = conn.execute(
                    "INSERT INTO queue (memory_id, kind, payload, enqueued_at, write_key) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (memory_id, write_key) "
                    "WHERE write_key IS NOT NULL DO NOTHING RETURNING seq",
                    (memory_id, kind, text, stamp, key),
                ).fetchone()
                if row is None:
                    return None
                conn.execute(
                    "INSERT INTO ops (memory_id, tool, detail, at) VALUES (%s, %s, %s, %s)",
                    (memory_id, tool, logged, stamp),
                )
                if idx is not None and 0 <= idx <= MAX_MSG_IDX:
                    conn.execute(
                        "UPDATE memories SET last_position = %s "
                        "WHERE memory_id = %s AND last_position < %s",
                        (idx, memory_id, idx),
                    )
                return int(row[0])

        return self._run(op, retry=key is not None)

    def assign_position(self, memory_id: str, message_key: str, after: int = 0) -> int:
        """The position of the message ``message_key``: the same every time, assigned once.

        Under the memory's row lock (``SELECT ... FOR UPDATE``): a new key gets
        the next position past ``after``, every position assigned before and
        every ``msg_idx`` written; replicas asked at once give out distinct ones.
        """

        def op(conn: psycopg.Connection) -> int:
            with conn.transaction():
                last = conn.execute(
                    "SELECT last_position FROM memories WHERE memory_id = %s FOR UPDATE",
                    (memory_id,),
                ).fetchone()
                if last is None:
                    raise MemoryInputError(f"unknown memory {memory_id!r}")
                row = conn.execute(
                    "SELECT position FROM positions WHERE memory_id = %s AND message_key = %s",
                    (memory_id, message_key),
                ).fetchone()
                if row is not None:
                    position, new = int(row[0]), False
                else:
                    check_after(memory_id, after, int(last[0]))
                    position, new = max(int(last[0]), after) + 1, True
                    if position > MAX_POSITION:
                        raise MemoryInputError(f"memory {memory_id!r} has no position left")
                    conn.execute(
                        "INSERT INTO positions (memory_id, message_key, position) "
                        "VALUES (%s, %s, %s)",
                        (memory_id, message_key, position),
                    )
                    conn.execute(
                        "UPDATE memories SET last_position = %s WHERE memory_id = %s",
                        (position, memory_id),
                    )
                conn.execute(
                    "INSERT INTO ops (memory_id, tool, detail, at) VALUES (%s, %s, %s, %s)",
                    (
                        memory_id,
                        "assign_position",
                        json.dumps({"position": position, "new": new}, sort_keys=True),
                        now(),
                    ),
                )
                return position

        return self._run(op)

    def log_op(self, memory_id: str, tool: str, detail: dict[str, Any] | None = None) -> None:
        """Record a successful read in the call log (the auditor checks bootstraps with it)."""
        line = (memory_id, tool, json.dumps(detail or {}, sort_keys=True), now())
        self._run(
            lambda conn: conn.execute(
                "INSERT INTO ops (memory_id, tool, detail, at) VALUES (%s, %s, %s, %s)", line
            )
        )

    # --- the writer's side: claim whole memories, apply their queued writes -----------------

    def pending(self) -> list[dict[str, Any]]:
        """Queued writes not applied yet (every replica's), oldest first."""
        return self._rows("SELECT * FROM queue WHERE applied_at IS NULL ORDER BY seq")

    def pending_count(self, memory_id: str) -> int:
        """Queued writes of ``memory_id`` not applied yet, counted in the database."""
        return self._rows(
            "SELECT COUNT(*) AS n FROM queue WHERE memory_id = %s AND applied_at IS NULL",
            (memory_id,),
        )[0]["n"]

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

    def list_entries(
        self,
        memory_id: str,
        limit: int = 25,
        before: int | str | None = None,
        after: int | str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
        """One page of entries, oldest first, and the cursor of the next page (or None).

        As the SQLite store's ``list_entries``;
        ``seq`` counts this memory's entries (1, 2, ...) in the order they committed.
        """
        if isinstance(after, str):
            after = self._first_seq(memory_id, ">", after) - 1
        if isinstance(before, str):
            before = self._first_seq(memory_id, ">=", before)
        if after is not None:
            rows = self._rows(
                "SELECT * FROM entries WHERE memory_id = %s AND seq > %s ORDER BY seq ASC LIMIT %s",
                (memory_id, after, limit + 1),
            )
            page = [_entry(r) for r in rows[:limit]]
            return page, ({"after": page[-1]["seq"]} if len(rows) > limit else None)
        rows = self._rows(
            "SELECT * FROM entries WHERE memory_id = %s AND seq < %s ORDER BY seq DESC LIMIT %s",
            (memory_id, LAST_SEQ if before is None else before, limit + 1),
        )
        page = [_entry(r) for r in reversed(rows[:limit])]
        return page, ({"before": page[0]["seq"]} if len(rows) > limit else None)

    def _first_seq(self, memory_id: str, op: str, stamp: str) -> int:
        assert op in (">", ">=")  # never user text in the statement
        rows = self._rows(
            f"SELECT seq FROM entries WHERE memory_id = %s AND created_at {op} %s "
            "ORDER BY seq LIMIT 1",
            (memory_id, stamp),
        )
        return rows[0]["seq"] if rows else LAST_SEQ

    def get_entry(self, memory_id: str, entry_id: str) -> dict[str, Any]:
        """One entry of ``memory_id``; ``MemoryInputError`` if there is none."""
        rows = self._rows(
            "SELECT * FROM entries WHERE memory_id = %s AND entry_id = %s", (memory_id, entry_id)
        )
        if not rows:
            raise MemoryInputError(f"no entry {entry_id!r} in memory {memory_id!r}")
        return _entry(rows[0])

    def search(self, memory_id: str, query: str, top_ke: int) -> list[dict[str, Any]]:
        """Full-text search, each word of the query OR-ed, best ``ts_rank`` first."""
        terms = re.findall(r"\w+", query, flags=re.UNICODE)
        if not terms or top_ke == 0:
            return []
        match = " | ".join(f"'{t}'" for t in terms)  # \w+ holds no quote or operator
        rows = self._rows(
            "SELECT *, ts_rank(words, q) AS rank FROM entries, to_tsquery('simple', %s) q "
            "WHERE memory_id = %s AND words @@ q ORDER BY rank DESC, seq LIMIT %s",
            (match, memory_id, top_ke),
        )
        return [_entry(r) for r in rows]

    def contexts(self, memory_id: str, limit: int = 1) -> list[dict[str, Any]]:
        """Latest snapshots first."""
        return self._rows(
            "SELECT content, created_at FROM contexts WHERE memory_id = %s "
            "ORDER BY snapshot DESC LIMIT %s",
            (memory_id, limit),
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


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": row["seq"],
        "entry_id": row["entry_id"],
        "raw_entry": row["raw_entry"],
        "summary": row["summary"],
        "tags": json.loads(row["tags"]),
        "created_at": row["created_at"],
    }


def read_memory_rows(url: str, memory_id: str) -> dict[str, Any]:
    """Entries, call log, contexts and pending count of one memory, read from the database.

    For the auditor: a read-only transaction of its own, never a replica's memory.
    """
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SET TRANSACTION READ ONLY")
            entries = cur.execute(
                "SELECT seq, raw_entry, tags FROM entries WHERE memory_id = %s ORDER BY seq",
                (memory_id,),
            ).fetchall()
            ops = cur.execute(
                "SELECT tool, detail FROM ops WHERE memory_id = %s ORDER BY seq", (memory_id,)
            ).fetchall()
            pending = cur.execute(
                "SELECT COUNT(*) AS n FROM queue WHERE memory_id = %s AND applied_at IS NULL",
                (memory_id,),
            ).fetchone()
            contexts = cur.execute(
                "SELECT content FROM contexts WHERE memory_id = %s ORDER BY snapshot",
                (memory_id,),
            ).fetchall()
    return {
        "entries": entries,
        "ops": ops,
        "contexts": [r["content"] for r in contexts],
        "pending": pending["n"] if pending else 0,
    }

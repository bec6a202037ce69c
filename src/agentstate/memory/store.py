"""SQLite storage for the memory server: memories, a durable write queue, entries, contexts.

Why a table for the queue: ``add_entry`` and ``put_context`` answer "enqueued"
before the write is applied, so the queued write itself must survive a server
kill. Enqueueing is one transaction (the queued write plus its line in the
``ops`` call log); the writer applies it in another (the entry or context
snapshot plus marking it applied), so nothing is ever half-written. The
``ops`` log records every successful tool call on a memory, reads included,
which lets the auditor of notebook 06 check bootstraps and flushes from the
store alone. Entries are indexed with SQLite FTS5. Timestamps are RFC3339 UTC.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    memory_id TEXT PRIMARY KEY, vault_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL, kind TEXT NOT NULL,
    payload TEXT NOT NULL, enqueued_at TEXT NOT NULL, applied_at TEXT);
CREATE INDEX IF NOT EXISTS queue_pending ON queue (applied_at, seq);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, entry_id TEXT UNIQUE NOT NULL,
    vault_id TEXT NOT NULL, memory_id TEXT NOT NULL, raw_entry TEXT NOT NULL,
    summary TEXT NOT NULL, tags TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_by_memory ON entries (memory_id, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    raw_entry, summary, content='entries', content_rowid='seq');
CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts(rowid, raw_entry, summary) VALUES (new.seq, new.raw_entry, new.summary);
END;
CREATE TABLE IF NOT EXISTS contexts (
    snapshot INTEGER PRIMARY KEY AUTOINCREMENT, vault_id TEXT NOT NULL,
    memory_id TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL, tool TEXT NOT NULL,
    detail TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS ops_by_memory ON ops (memory_id, seq);
"""

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class MemoryError_(ValueError):
    """Bad input or an unknown memory: the message says which and why."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(value: Any, name: str) -> str:
    """Validate an RFC3339 cursor and return it normalised to UTC ``...Z``."""
    if not isinstance(value, str):
        raise MemoryError_(f"{name} must be an RFC3339 timestamp string")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MemoryError_(f"{name} must be an RFC3339 timestamp, got {value!r}") from None
    if moment.tzinfo is None:
        raise MemoryError_(f"{name} must include a timezone, e.g. 2026-01-01T00:00:00Z")
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def check_id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise MemoryError_(f"{name} is required")
    if not ID_PATTERN.match(value):
        raise MemoryError_(f"{name} {value!r} must be 1-128 letters, digits, '.', '_', ':' or '-'")
    return value


class MemoryStore:
    """Thread-safe access to one SQLite file (one connection, one lock, WAL)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _transaction(self, statements: list[tuple[str, tuple]]) -> list[int]:
        """Run statements in one IMMEDIATE transaction; return their lastrowids."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                rowids = [self._conn.execute(sql, params).lastrowid for sql, params in statements]
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return rowids

    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, params)]

    # memories -------------------------------------------------------------
    def create_memory(self, vault_id: Any, memory_id: Any, title: str = "") -> bool:
        """Create a memory; False if it already exists in this vault (idempotent)."""
        check_id(vault_id, "vault_id"), check_id(memory_id, "memory_id")
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = ?", (memory_id,))
        if rows:
            if rows[0]["vault_id"] != vault_id:
                raise MemoryError_(
                    f"memory id {memory_id!r} already belongs to vault {rows[0]['vault_id']!r}"
                )
            return False
        self._transaction(
            [
                (
                    "INSERT INTO memories (memory_id, vault_id, title, created_at)"
                    " VALUES (?, ?, ?, ?)",
                    (memory_id, vault_id, title, now()),
                )
            ]
        )
        return True

    def require_memory(self, vault_id: Any, memory_id: Any) -> None:
        check_id(vault_id, "vault_id"), check_id(memory_id, "memory_id")
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = ?", (memory_id,))
        if not rows or rows[0]["vault_id"] != vault_id:
            raise MemoryError_(
                f"unknown memory {memory_id!r} in vault {vault_id!r}; create it with create_memory"
            )

    def vault_of(self, memory_id: Any) -> str:
        check_id(memory_id, "memory_id")
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = ?", (memory_id,))
        if not rows:
            raise MemoryError_(f"unknown memory {memory_id!r}; create it with create_memory")
        return rows[0]["vault_id"]

    # queue and call log ---------------------------------------------------
    def enqueue(self, memory_id: str, kind: str, payload: dict[str, Any], detail: dict) -> int:
        """Queue a write and log the call in one transaction; return the queue position."""
        stamp = now()
        payload = {**payload, "enqueued_at": stamp}
        seq, _ = self._transaction(
            [
                (
                    "INSERT INTO queue (memory_id, kind, payload, enqueued_at) VALUES (?, ?, ?, ?)",
                    (memory_id, kind, json.dumps(payload, ensure_ascii=False), stamp),
                ),
                (
                    "INSERT INTO ops (memory_id, tool, detail, at) VALUES (?, ?, ?, ?)",
                    (
                        memory_id,
                        "add_entry" if kind == "entry" else "put_context",
                        json.dumps(detail, ensure_ascii=False, sort_keys=True),
                        stamp,
                    ),
                ),
            ]
        )
        return seq

    def log_op(self, memory_id: str, tool: str, detail: dict[str, Any] | None = None) -> None:
        self._transaction(
            [
                (
                    "INSERT INTO ops (memory_id, tool, detail, at) VALUES (?, ?, ?, ?)",
                    (memory_id, tool, json.dumps(detail or {}, sort_keys=True), now()),
                )
            ]
        )

    def pending(self) -> list[dict[str, Any]]:
        """Queued writes not applied yet, oldest first."""
        return self._rows("SELECT * FROM queue WHERE applied_at IS NULL ORDER BY seq")

    def apply(self, item: dict[str, Any]) -> None:
        """Apply one queued write and mark it applied, atomically (idempotent by seq)."""
        payload = json.loads(item["payload"])
        stamp = payload["enqueued_at"]
        mark = (
            "UPDATE queue SET applied_at = ? WHERE seq = ? AND applied_at IS NULL",
            (now(), item["seq"]),
        )
        if item["kind"] == "entry":
            write = (
                "INSERT INTO entries (entry_id, vault_id, memory_id, raw_entry, summary, tags, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    payload["entry_id"],
                    payload["vault_id"],
                    item["memory_id"],
                    payload["raw_entry"],
                    payload["summary"],
                    json.dumps(payload["tags"], ensure_ascii=False, sort_keys=True),
                    stamp,
                ),
            )
        else:
            write = (
                "INSERT INTO contexts (vault_id, memory_id, content, created_at) "
                "VALUES (?, ?, ?, ?)",
                (payload["vault_id"], item["memory_id"], payload["content"], stamp),
            )
        with self._lock:
            still = self._rows(
                "SELECT 1 FROM queue WHERE seq = ? AND applied_at IS NULL", (item["seq"],)
            )
            if still:
                self._transaction([write, mark])

    # reads ----------------------------------------------------------------
    def list_entries(
        self,
        memory_id: str,
        limit: int = 25,
        before: str | None = None,
        after: str | None = None,
    ) -> list[dict[str, Any]]:
        """Entries oldest first; ``before``/``after`` are exclusive RFC3339 cursors."""
        sql = "SELECT * FROM entries WHERE memory_id = ?"
        params: list[Any] = [memory_id]
        if after is not None:
            rows = self._rows(
                sql + " AND created_at > ? ORDER BY seq ASC LIMIT ?", (memory_id, after, limit)
            )
            return [self._entry(r) for r in rows]
        if before is not None:
            sql += " AND created_at < ?"
            params.append(before)
        rows = self._rows(sql + " ORDER BY seq DESC LIMIT ?", (*params, limit))
        return [self._entry(r) for r in reversed(rows)]

    def get_entry(self, memory_id: str, entry_id: str) -> dict[str, Any]:
        rows = self._rows(
            "SELECT * FROM entries WHERE memory_id = ? AND entry_id = ?", (memory_id, entry_id)
        )
        if not rows:
            raise MemoryError_(f"no entry {entry_id!r} in memory {memory_id!r}")
        return self._entry(rows[0])

    @staticmethod
    def _entry(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "entry_id": row["entry_id"],
            "raw_entry": row["raw_entry"],
            "summary": row["summary"],
            "tags": json.loads(row["tags"]),
            "created_at": row["created_at"],
        }

    def search(self, memory_id: str, query: str, top_ke: int) -> list[dict[str, Any]]:
        """FTS5 search in bm25 order; each word of the query is matched as a quoted term."""
        terms = re.findall(r"\w+", query, flags=re.UNICODE)
        if not terms or top_ke == 0:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self._rows(
            "SELECT e.* FROM entries_fts f JOIN entries e ON e.seq = f.rowid "
            "WHERE entries_fts MATCH ? AND e.memory_id = ? ORDER BY bm25(entries_fts) LIMIT ?",
            (match, memory_id, top_ke),
        )
        return [self._entry(r) for r in rows]

    def contexts(self, memory_id: str, limit: int = 1) -> list[dict[str, Any]]:
        """Latest snapshots first."""
        return self._rows(
            "SELECT content, created_at FROM contexts WHERE memory_id = ? "
            "ORDER BY snapshot DESC LIMIT ?",
            (memory_id, limit),
        )


def new_entry_id() -> str:
    return uuid.uuid4().hex

"""SQLite storage for the memory server: memories, entries, context snapshots.

Every write is one transaction (nothing half-written); entries are indexed
with SQLite FTS5 for ``search_memories``; every ``put_context`` is kept as a
snapshot and ``get_context`` returns the latest. Timestamps are RFC3339 UTC.
Taught in notebook 06.
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
    vault_id TEXT NOT NULL, memory_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL, PRIMARY KEY (vault_id, memory_id));
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, entry_id TEXT UNIQUE NOT NULL,
    vault_id TEXT NOT NULL, memory_id TEXT NOT NULL, raw_entry TEXT NOT NULL,
    summary TEXT NOT NULL, tags TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_by_memory ON entries (vault_id, memory_id, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    raw_entry, summary, content='entries', content_rowid='seq');
CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts(rowid, raw_entry, summary) VALUES (new.seq, new.raw_entry, new.summary);
END;
CREATE TABLE IF NOT EXISTS contexts (
    snapshot INTEGER PRIMARY KEY AUTOINCREMENT, vault_id TEXT NOT NULL,
    memory_id TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
"""

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class MemoryError_(ValueError):
    """Bad input or an unknown memory: the message says which and why."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(value: str, name: str) -> str:
    """Validate an RFC3339 cursor and return it normalised to UTC ``...Z``."""
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
    """Thread-safe access to one SQLite file (one connection, one lock)."""

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

    def _write(self, sql: str, params: tuple) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(sql, params)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _rows(self, sql: str, params: tuple) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, params)]

    # memories -------------------------------------------------------------
    def create_memory(self, vault_id: str, memory_id: str, title: str = "") -> bool:
        """Create a memory; False if it already existed (idempotent)."""
        check_id(vault_id, "vault_id"), check_id(memory_id, "memory_id")
        if self.has_memory(vault_id, memory_id):
            return False
        self._write(
            "INSERT INTO memories (vault_id, memory_id, title, created_at) VALUES (?, ?, ?, ?)",
            (vault_id, memory_id, title, now()),
        )
        return True

    def has_memory(self, vault_id: str, memory_id: str) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM memories WHERE vault_id = ? AND memory_id = ?", (vault_id, memory_id)
            )
        )

    def require_memory(self, vault_id: Any, memory_id: Any) -> None:
        check_id(vault_id, "vault_id"), check_id(memory_id, "memory_id")
        if not self.has_memory(vault_id, memory_id):
            raise MemoryError_(
                f"unknown memory {memory_id!r} in vault {vault_id!r}; create it with create_memory"
            )

    def vault_of(self, memory_id: str) -> str:
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = ?", (memory_id,))
        if not rows:
            raise MemoryError_(f"unknown memory {memory_id!r}; create it with create_memory")
        if len(rows) > 1:
            raise MemoryError_(f"memory id {memory_id!r} exists in several vaults")
        return rows[0]["vault_id"]

    # entries --------------------------------------------------------------
    def insert_entry(
        self, entry_id: str, vault_id: str, memory_id: str, raw: str, summary: str,
        tags: dict[str, Any],
    ) -> None:
        self._write(
            "INSERT INTO entries (entry_id, vault_id, memory_id, raw_entry, summary, tags, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (entry_id, vault_id, memory_id, raw, summary, json.dumps(tags, sort_keys=True), now()),
        )

    def list_entries(
        self, vault_id: str, memory_id: str, limit: int = 25,
        before: str | None = None, after: str | None = None,
    ) -> list[dict[str, Any]]:
        """Entries oldest first; ``before``/``after`` are exclusive RFC3339 cursors."""
        sql = "SELECT * FROM entries WHERE vault_id = ? AND memory_id = ?"
        params: list[Any] = [vault_id, memory_id]
        if before is not None:
            sql += " AND created_at < ? ORDER BY seq DESC LIMIT ?"
            params += [before, limit]
            return [self._entry(r) for r in reversed(self._rows(sql, tuple(params)))]
        if after is not None:
            sql += " AND created_at > ?"
            params.append(after)
            sql += " ORDER BY seq ASC LIMIT ?"
            params.append(limit)
            return [self._entry(r) for r in self._rows(sql, tuple(params))]
        sql += " ORDER BY seq DESC LIMIT ?"
        params.append(limit)
        return [self._entry(r) for r in reversed(self._rows(sql, tuple(params)))]

    def get_entry(self, vault_id: str, memory_id: str, entry_id: str) -> dict[str, Any]:
        rows = self._rows(
            "SELECT * FROM entries WHERE vault_id = ? AND memory_id = ? AND entry_id = ?",
            (vault_id, memory_id, entry_id),
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
        """Full-text search (FTS5, bm25 order); the query's words are matched as terms."""
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

    # contexts -------------------------------------------------------------
    def insert_context(self, vault_id: str, memory_id: str, content: str) -> None:
        self._write(
            "INSERT INTO contexts (vault_id, memory_id, content, created_at) VALUES (?, ?, ?, ?)",
            (vault_id, memory_id, content, now()),
        )

    def contexts(self, vault_id: str, memory_id: str, limit: int = 1) -> list[dict[str, Any]]:
        """Latest snapshots first."""
        return self._rows(
            "SELECT content, created_at FROM contexts WHERE vault_id = ? AND memory_id = ? "
            "ORDER BY snapshot DESC LIMIT ?",
            (vault_id, memory_id, limit),
        )

    def count(self, table: str, memory_id: str) -> int:
        if table not in {"entries", "contexts"}:
            raise ValueError(table)
        rows = self._rows(f"SELECT COUNT(*) AS n FROM {table} WHERE memory_id = ?", (memory_id,))
        return rows[0]["n"]


def new_entry_id() -> str:
    return uuid.uuid4().hex

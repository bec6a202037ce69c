"""SQLite storage for the memory server: memories, a durable write queue, entries, contexts.

Why a table for the queue: ``add_entry`` and ``put_context`` answer "enqueued"
before the write is applied, so the queued write itself must survive a server
kill. Enqueueing is one transaction (the queued write plus its line in the
``ops`` call log); the writer applies it in another (the entry or context
snapshot plus marking it applied), so nothing is ever half-written. The
``ops`` log records every successful tool call on a memory, reads included,
which lets the auditor of notebook 06 check bootstraps and flushes from the
store alone. Entries are indexed with SQLite FTS5. Timestamps are RFC3339 UTC;
the order of entries is their ``seq`` (the order they were stored in), and
``list_entries`` pages by it, cursors included, so a clock that steps back or
stamps several entries alike skips or repeats nothing. ``positions`` gives
each message a position once (``assign_position``), atomically, past every
``msg_idx`` the memory was written with: a count two writers read at once
would give two messages one position, and so one idempotency key. Those
rules, the pages and the checks are the same on Postgres and live once in
:mod:`.sql_store` and :mod:`.checks`; this module holds what is SQLite's: its
schema, the file's checks and lock, its transactions, its FTS5 search.

Durability: WAL with ``synchronous=NORMAL``. A transaction is in the WAL
file when COMMIT returns, so a killed server (even SIGKILL) loses nothing it
answered "enqueued" for: the operating system still writes the file out. What
NORMAL gives up is the fsync at each commit: after a power loss or an OS
crash the last transactions before it (up to the previous checkpoint of the
WAL) can be missing, though the file is never corrupted. ``synchronous=FULL``
(``MemoryStore(path, fsync=True)``) keeps those too, at one fsync per write.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

# The checks and limits live in .checks, shared by both stores; those that other modules
# (agentstate.lessons.served, the tests) import from here, where they were first, are re-exported.
from agentstate.memory.service.checks import MAX_MSG_IDX as MAX_MSG_IDX
from agentstate.memory.service.checks import MemoryInputError
from agentstate.memory.service.checks import check_id as check_id
from agentstate.memory.service.checks import check_key as check_key
from agentstate.memory.service.checks import check_text as check_text
from agentstate.memory.service.checks import parse_time as parse_time
from agentstate.memory.service.sql_store import (
    INSERT_OP,
    INSERT_QUEUED,
    Execute,
    QueuedWrite,
    Store,
    audit_rows,
    now,
)
from agentstate.private_files import check_own_file, own_file, read_head

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    memory_id TEXT PRIMARY KEY, vault_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL, last_position INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS positions (
    memory_id TEXT NOT NULL, message_key TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (memory_id, message_key));
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL, kind TEXT NOT NULL,
    payload TEXT NOT NULL, enqueued_at TEXT NOT NULL, applied_at TEXT, write_key TEXT);
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
# A write's key (``idempotency_key``) is unique per memory: a write sent again with its key
# (a retry, a resent message) is recognised and not stored twice. Created after the column is
# added to a store made before keys existed.
KEY_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS queue_by_key ON queue (memory_id, write_key) "
    "WHERE write_key IS NOT NULL"
)
# A store made before positions: the highest integer msg_idx each memory was written with.
LAST_POSITION_COLUMN = "ALTER TABLE memories ADD COLUMN last_position INTEGER NOT NULL DEFAULT 0"
BACKFILL_POSITIONS = """UPDATE memories SET last_position = COALESCE((
    SELECT MAX(json_extract(payload, '$.tags.msg_idx')) FROM queue
    WHERE queue.memory_id = memories.memory_id AND kind = 'entry'
    AND json_type(payload, '$.tags.msg_idx') = 'integer'), 0)"""


class StoreInUseError(RuntimeError):
    """Another process already serves this SQLite file (one writer per file)."""


SQLITE_HEADER = b"SQLite format 3\x00"
# SQLite opens these beside the store by name; each must be a regular file if it exists
SIDE_FILES = ("-wal", "-shm", "-journal", ".lock")


def check_store_path(path: str | Path) -> Path:
    """Refuse a path that cannot hold a store, creating, opening for write and locking nothing.

    A missing folder, or a path (or one of its side files ``-wal``, ``-shm``,
    ``-journal``, ``.lock``) that is a folder, a symlink, a FIFO, a device or
    anything but a regular file, or an existing non-empty file that is not
    SQLite, is a ``MemoryInputError``: ``lstat`` decides before anything is
    opened (see :mod:`agentstate.private_files`), so ``--db /dev/null`` or a FIFO is never
    opened or chmodded. ``MemoryStore`` checks this first, and the command line
    before it imports the MCP server, so a bad ``--db`` fails at once and
    changes nothing.
    """
    path = Path(path)
    try:
        if not path.parent.is_dir():
            raise FileNotFoundError(f"folder for the database does not exist: {path.parent}")
        seen = check_own_file(path, "the store")
        for side in SIDE_FILES:
            check_own_file(path.with_name(path.name + side), "the store's side file")
        if seen is not None and seen.st_size:
            if read_head(path, len(SQLITE_HEADER), "the store") != SQLITE_HEADER:
                raise MemoryInputError(f"{path} exists and is not an SQLite database")
    except OSError as exc:
        raise MemoryInputError(str(exc)) from None
    return path


def tighten_side_files(path: Path) -> None:
    """Tighten the store's existing ``-wal``, ``-shm`` and ``-journal`` files to 0600.

    SQLite creates them with the store's mode, but one left by a crash or copied
    in with the store keeps its own (0644, say) while conversations are appended
    to it. Each is checked like the store (:func:`agentstate.private_files.own_file`:
    a symlink or anything but a regular file is refused); a missing one is left
    for SQLite to create. Called with the writer's lock held, so no other server
    is using them.
    """
    for side in ("-wal", "-shm", "-journal"):
        side_path = path.with_name(path.name + side)
        if check_own_file(side_path, "the store's side file") is not None:
            own_file(side_path, "the store's side file")


def _lock_writer(path: Path) -> int:
    """Hold an exclusive lock on ``<db>.lock`` for this process's lifetime, or refuse.

    Two servers on one file would each keep their own count of queued writes
    (one answers "consistent" too early, the other waits for writes it never
    sees) and both would drain the queue. The kernel drops the lock when the
    process dies, even by SIGKILL, so a restart after a crash is never blocked.
    The lock file is created 0600 the way the store is (:func:`agentstate.private_files.own_file`).
    """
    lock_path = own_file(path.with_name(path.name + ".lock"), "the store's lock file")
    fd = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StoreInUseError(
            f"another memory server (pid {holder}) already serves {path}; "
            "point every client at that server, or give this one another --db"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class MemoryStore(Store):
    """Thread-safe access to one SQLite file (one connection, one lock, WAL).

    One process at a time may open a file as its store (``StoreInUseError``
    otherwise). The file and its lock file are created 0600: entries are
    conversations. Raises ``MemoryInputError`` if its folder is missing, if
    ``path`` (or a side file) is a folder, a symlink, a FIFO, a device or
    anything but a regular file (decided by ``lstat``, before any open or
    chmod: :mod:`agentstate.private_files`), or if the file is not an SQLite database.
    """

    blocking = False  # fast local calls: the server runs them on its event loop

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = Path(path)
        check_store_path(self.path)  # before anything touches it: bad input changes nothing
        try:
            own_file(self.path, "the store")  # 0600, refused if it is not a regular file
            self._lock_fd: int | None = _lock_writer(self.path)
            tighten_side_files(self.path)
        except OSError as exc:
            raise MemoryInputError(str(exc)) from None
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._vaults = {}  # memory_id -> vault_id; memories are never moved
        try:
            with self._lock:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
                self._conn.executescript(SCHEMA)
                columns = {r[1] for r in self._conn.execute("PRAGMA table_info(queue)")}
                if "write_key" not in columns:  # a store made before idempotency keys
                    self._conn.execute("ALTER TABLE queue ADD COLUMN write_key TEXT")
                self._conn.execute(KEY_INDEX)
                columns = {r[1] for r in self._conn.execute("PRAGMA table_info(memories)")}
                if "last_position" not in columns:  # a store made before positions
                    self._conn.execute(LAST_POSITION_COLUMN)
                    self._conn.execute(BACKFILL_POSITIONS)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise MemoryInputError(f"{self.path} is not a memory store: {exc}") from None

    def close(self) -> None:
        """Close the connection and release the file for another server."""
        with self._lock:
            self._conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _atomic(self, work: Callable[[Execute], T]) -> T:
        """``work`` in one IMMEDIATE transaction, under this process's lock."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(self._conn.execute)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

    def _transaction(self, statements: list[tuple[str, tuple]]) -> list[int | None]:
        """Run statements in one IMMEDIATE transaction; return their lastrowids."""
        return self._atomic(
            lambda execute: [execute(sql, params).lastrowid for sql, params in statements]
        )

    def _write(self, sql: str, params: tuple) -> None:
        self._transaction([(sql, params)])

    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, params)]

    # memories -------------------------------------------------------------
    def _create(self, vault_id: str, memory_id: str, title: str) -> str | None:
        rows = self._rows("SELECT vault_id FROM memories WHERE memory_id = ?", (memory_id,))
        if rows:
            return rows[0]["vault_id"]
        self._write(
            "INSERT INTO memories (memory_id, vault_id, title, created_at) VALUES (?, ?, ?, ?)",
            (memory_id, vault_id, title, now()),
        )
        return None

    # queue ----------------------------------------------------------------
    def _enqueue(self, write: QueuedWrite) -> int | None:
        """A key already used is found inside the lock, so two concurrent sends store once."""
        with self._lock:
            if write.key is not None and self._rows(
                "SELECT 1 FROM queue WHERE memory_id = ? AND write_key = ?",
                (write.memory_id, write.key),
            ):
                return None
            queued, logged = write.rows(now())
            statements: list[tuple[str, tuple]] = [(INSERT_QUEUED, queued), (INSERT_OP, logged)]
            idx = write.raises_last_position
            if idx is not None:
                statements.append(
                    (
                        "UPDATE memories SET last_position = MAX(last_position, ?) "
                        "WHERE memory_id = ?",
                        (idx, write.memory_id),
                    )
                )
            seq = self._transaction(statements)[0]
            assert seq is not None  # an INSERT always sets lastrowid
            return seq

    def apply(self, item: dict[str, Any]) -> None:
        """Apply one queued write and mark it applied, atomically (idempotent by seq)."""
        self.apply_many([item])

    def apply_many(self, items: list[dict[str, Any]]) -> None:
        """Apply queued writes in one transaction, each at most once (checked inside it)."""

        def apply(execute: Execute) -> None:
            for item in items:
                still = execute(
                    "SELECT 1 FROM queue WHERE seq = ? AND applied_at IS NULL", (item["seq"],)
                ).fetchone()
                if still:
                    for statement in self._apply_statements(item):
                        execute(*statement)

        self._atomic(apply)

    @staticmethod
    def _apply_statements(item: dict[str, Any]) -> list[tuple[str, tuple]]:
        payload = json.loads(item["payload"])
        stamp = payload["enqueued_at"]
        mark = (
            "UPDATE queue SET applied_at = ? WHERE seq = ? AND applied_at IS NULL",
            (now(), item["seq"]),
        )
        write: tuple[str, tuple[Any, ...]]
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
        return [write, mark]

    def drain(self) -> int:
        """Apply every queued write in one transaction; return how many there were."""
        queued = self.pending()
        if queued:
            self.apply_many(queued)
        return len(queued)

    # reads ----------------------------------------------------------------
    def _search(self, memory_id: str, terms: list[str], top_ke: int) -> list[dict[str, Any]]:
        """FTS5 in bm25 order; each term quoted (``\\w+`` holds no quote)."""
        return self._rows(
            "SELECT e.* FROM entries_fts f JOIN entries e ON e.seq = f.rowid "
            "WHERE entries_fts MATCH ? AND e.memory_id = ? ORDER BY bm25(entries_fts) LIMIT ?",
            (" OR ".join(f'"{t}"' for t in terms), memory_id, top_ke),
        )


def read_memory_rows(path: str | Path, memory_id: str) -> dict[str, Any]:
    """What the auditor reads of one memory (:func:`~.sql_store.audit_rows`), opened ``mode=ro``."""
    conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return audit_rows(
            lambda sql, params: [dict(r) for r in conn.execute(sql, params)], memory_id
        )
    finally:
        conn.close()


def new_entry_id() -> str:
    """A fresh entry id (32 hex digits)."""
    return uuid.uuid4().hex

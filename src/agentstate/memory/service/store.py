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
would give two messages one position, and so one idempotency key.

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
import re
import sqlite3
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentstate.private_files import check_own_file, own_file, read_head

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
MAX_KEY_CHARS = 200
# A store made before positions: the highest integer msg_idx each memory was written with.
LAST_POSITION_COLUMN = "ALTER TABLE memories ADD COLUMN last_position INTEGER NOT NULL DEFAULT 0"
BACKFILL_POSITIONS = """UPDATE memories SET last_position = COALESCE((
    SELECT MAX(json_extract(payload, '$.tags.msg_idx')) FROM queue
    WHERE queue.memory_id = memories.memory_id AND kind = 'entry'
    AND json_type(payload, '$.tags.msg_idx') = 'integer'), 0)"""
MAX_POSITION = 2**53 - 1  # the largest integer every JSON reader keeps exact
# The largest msg_idx a writer may choose itself. Positions (``assign_position``) go on past it
# to MAX_POSITION, so one huge msg_idx can never use up a memory's positions: a writer that
# numbers its own messages moves the next assigned position to at most MAX_MSG_IDX + 1.
MAX_MSG_IDX = 2**31 - 1
LAST_SEQ = 2**63 - 1  # past every seq SQLite assigns

# Whole-string patterns, used with ``fullmatch``: ``$`` alone would accept a trailing newline.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
# Longest text each field accepts (characters): a message, a summary line, a title, a query.
MAX_CHARS = {
    "raw_entry": 100_000,
    "content": 100_000,
    "summary": 1_000,
    "title": 200,
    "query": 1_000,
}
MAX_TAGS_CHARS = 4_000


class MemoryInputError(ValueError):
    """Bad input or an unknown memory: the message says which and why; nothing was written."""


def check_after(memory_id: str, after: int, last: int) -> None:
    """Refuse an ``assign_position`` ``after`` that would move the memory's positions too far."""
    if after > MAX_MSG_IDX and after > last:
        raise MemoryInputError(
            f"after {after} is past {MAX_MSG_IDX} and past the last position of memory "
            f"{memory_id!r} ({last}); nothing was assigned"
        )


class StoreInUseError(RuntimeError):
    """Another process already serves this SQLite file (one writer per file)."""


class StoreUnavailableError(RuntimeError):
    """The store's database cannot be reached (Postgres down or restarting), in one line.

    Nothing was acknowledged: a write that got this error is sent again with its
    key, and lands once.
    """


def now() -> str:
    """The current time as RFC3339 UTC with microseconds (``...Z``)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(value: Any, name: str) -> str:
    """Validate an RFC3339 cursor and return it normalised to UTC ``...Z``.

    Python's ``fromisoformat`` also takes dates, basic ISO forms and missing
    seconds; a cursor must be a full RFC3339 timestamp, so the shape is checked first.
    """
    if not isinstance(value, str):
        raise MemoryInputError(f"{name} must be an RFC3339 timestamp string, got {value!r}")
    if not RFC3339.fullmatch(value):
        raise MemoryInputError(
            f"{name} must be an RFC3339 timestamp such as 2026-01-01T00:00:00Z, got {value!r}"
        )
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MemoryInputError(f"{name} must be an RFC3339 timestamp, got {value!r}") from None
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def check_id(value: Any, name: str) -> str:
    """An id: 1-128 of letters, digits, ``.``, ``_``, ``:``, ``-``, starting alphanumeric."""
    if not isinstance(value, str) or not value:
        raise MemoryInputError(f"{name} is required")
    if not ID_PATTERN.fullmatch(value):
        raise MemoryInputError(
            f"{name} {value!r} must be 1-128 letters, digits, '.', '_', ':' or '-'"
        )
    return value


def check_text(value: Any, name: str, *, blank_ok: bool = False) -> str:
    """A text field: a string without NUL, within ``MAX_CHARS``, not blank unless allowed.

    ``raw_entry`` may be empty or only spaces (a message is stored verbatim,
    whatever it is); a summary, a context or a query that is only whitespace says nothing.
    """
    if not isinstance(value, str):
        raise MemoryInputError(f"{name} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise MemoryInputError(f"{name} must not contain a NUL character")
    if len(value) > MAX_CHARS[name]:
        raise MemoryInputError(f"{name} is {len(value)} characters; the limit is {MAX_CHARS[name]}")
    if not blank_ok and not value.strip():
        raise MemoryInputError(f"{name} must not be empty or only whitespace")
    return check_encodable(value, name)


def check_encodable(value: str, name: str) -> str:
    """Refuse a lone surrogate (such as ``"\\ud800"``): valid in a Python str, not in UTF-8.

    JSON can carry one (``"\\ud800"``), SQLite and every UTF-8 reader cannot; without
    this check the write fails deep in a codec with a message that names no field.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryInputError(
            f"{name} contains a lone surrogate {value[exc.start]!r} at character {exc.start}: "
            "not valid Unicode text (encode the text properly, or replace that character)"
        ) from None
    return value


def written_msg_idx(tags: dict[str, Any]) -> int | None:
    """The integer ``msg_idx`` of an entry's tags (None if it has none, or another type)."""
    idx = tags.get("msg_idx")
    return idx if isinstance(idx, int) and not isinstance(idx, bool) else None


def msg_idx_refusal(memory_id: str, idx: int) -> MemoryInputError:
    """The one-line refusal of a ``msg_idx`` past :data:`MAX_MSG_IDX` the memory never assigned."""
    return MemoryInputError(
        f"msg_idx {idx} is past {MAX_MSG_IDX}, the largest a writer may give, and is not a "
        f"position memory {memory_id!r} assigned (ask assign_position for one); nothing was stored"
    )


def check_key(value: Any, name: str = "idempotency_key") -> str | None:
    """A key (a write's, a message's): None, or 1-200 characters without control characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise MemoryInputError(f"{name} must be a non-empty string, got {value!r}")
    if len(value) > MAX_KEY_CHARS or any(ord(c) < 32 for c in value):
        raise MemoryInputError(
            f"{name} must be at most {MAX_KEY_CHARS} characters, without control characters"
        )
    return check_encodable(value, name)


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


class MemoryStore:
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
        self._vaults: dict[str, str] = {}  # memory_id -> vault_id; memories are never moved
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

    def _transaction(self, statements: list[tuple[str, tuple]]) -> list[int | None]:
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
                raise MemoryInputError(
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

    # queue and call log ---------------------------------------------------
    def enqueue(
        self,
        memory_id: str,
        kind: str,
        payload: dict[str, Any],
        detail: dict,
        key: str | None = None,
    ) -> int | None:
        """Queue a write and log the call in one transaction; return the queue position.

        With ``key``: None, and nothing written or logged, if this memory already
        has a write with that key (checked inside the transaction, so two
        concurrent sends of one write store it once). An entry's ``msg_idx`` past
        :data:`MAX_MSG_IDX` is refused unless this memory assigned that position.
        """
        idx = written_msg_idx(payload.get("tags", {})) if kind == "entry" else None
        with self._lock:
            if (
                idx is not None
                and idx > MAX_MSG_IDX
                and not self._rows(
                    "SELECT 1 FROM positions WHERE memory_id = ? AND position = ?", (memory_id, idx)
                )
            ):
                raise msg_idx_refusal(memory_id, idx)
            if key is not None and self._rows(
                "SELECT 1 FROM queue WHERE memory_id = ? AND write_key = ?", (memory_id, key)
            ):
                return None
            return self._enqueue(memory_id, kind, payload, detail, key)

    def _enqueue(
        self, memory_id: str, kind: str, payload: dict[str, Any], detail: dict, key: str | None
    ) -> int:
        stamp = now()
        payload = {**payload, "enqueued_at": stamp}
        statements: list[tuple[str, tuple]] = [
            (
                "INSERT INTO queue (memory_id, kind, payload, enqueued_at, write_key) "
                "VALUES (?, ?, ?, ?, ?)",
                (memory_id, kind, json.dumps(payload, ensure_ascii=False), stamp, key),
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
        idx = written_msg_idx(payload.get("tags", {})) if kind == "entry" else None
        if idx is not None and 0 <= idx <= MAX_MSG_IDX:
            # a message written with its own msg_idx: a position assigned later comes after it
            # (an assigned position past MAX_MSG_IDX is already the memory's last_position)
            statements.append(
                (
                    "UPDATE memories SET last_position = MAX(last_position, ?) WHERE memory_id = ?",
                    (idx, memory_id),
                )
            )
        seq = self._transaction(statements)[0]
        assert seq is not None  # an INSERT always sets lastrowid
        return seq

    def assign_position(self, memory_id: str, message_key: str, after: int = 0) -> int:
        """The position (``msg_idx``) of the message ``message_key`` in ``memory_id``.

        Assigned once, atomically (one IMMEDIATE transaction): the same key gets
        the same position every time, a new key the next free one, greater than
        ``after``, than every position assigned before and than every integer
        ``msg_idx`` this memory was written with. Two writers that read the same
        count at once therefore never give two messages one position. An ``after``
        past both :data:`MAX_MSG_IDX` and the memory's last position is refused:
        like a huge ``msg_idx``, it would use up the positions of the memory.
        """
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute(
                    "SELECT position FROM positions WHERE memory_id = ? AND message_key = ?",
                    (memory_id, message_key),
                ).fetchone()
                if row is not None:
                    position, new = int(row[0]), False
                else:
                    last = self._conn.execute(
                        "SELECT last_position FROM memories WHERE memory_id = ?", (memory_id,)
                    ).fetchone()[0]
                    check_after(memory_id, after, int(last))
                    position, new = max(int(last), after) + 1, True
                    if position > MAX_POSITION:
                        raise MemoryInputError(f"memory {memory_id!r} has no position left")
                    self._conn.execute(
                        "INSERT INTO positions (memory_id, message_key, position) VALUES (?, ?, ?)",
                        (memory_id, message_key, position),
                    )
                    self._conn.execute(
                        "UPDATE memories SET last_position = ? WHERE memory_id = ?",
                        (position, memory_id),
                    )
                self._conn.execute(
                    "INSERT INTO ops (memory_id, tool, detail, at) VALUES (?, ?, ?, ?)",
                    (
                        memory_id,
                        "assign_position",
                        json.dumps({"position": position, "new": new}, sort_keys=True),
                        now(),
                    ),
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return position

    def log_op(self, memory_id: str, tool: str, detail: dict[str, Any] | None = None) -> None:
        """Record a successful read in the call log (the auditor checks bootstraps with it)."""
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
        self.apply_many([item])

    def apply_many(self, items: list[dict[str, Any]]) -> None:
        """Apply queued writes in one transaction, each at most once (checked inside it)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for item in items:
                    still = self._conn.execute(
                        "SELECT 1 FROM queue WHERE seq = ? AND applied_at IS NULL", (item["seq"],)
                    ).fetchone()
                    if still:
                        for statement in self._apply_statements(item):
                            self._conn.execute(*statement)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

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

    def pending_count(self, memory_id: str) -> int:
        """Queued writes of ``memory_id`` not applied yet, counted in the database."""
        return self._rows(
            "SELECT COUNT(*) AS n FROM queue WHERE memory_id = ? AND applied_at IS NULL",
            (memory_id,),
        )[0]["n"]

    # reads ----------------------------------------------------------------
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
        timestamp (normalised by :func:`parse_time`) is a point in that order:
        ``after=T`` starts at the first entry stamped later than ``T``,
        ``before=T`` ends before the first entry stamped ``T`` or later.
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
            page = [self._entry(r) for r in rows[:limit]]
            more = {"after": page[-1]["seq"]} if len(rows) > limit else None
            return page, more
        rows = self._rows(
            "SELECT * FROM entries WHERE memory_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            (memory_id, LAST_SEQ if before is None else before, limit + 1),
        )
        page = [self._entry(r) for r in reversed(rows[:limit])]
        more = {"before": page[0]["seq"]} if len(rows) > limit else None
        return page, more

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
        return self._entry(rows[0])

    @staticmethod
    def _entry(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "seq": row["seq"],
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
    """A fresh entry id (32 hex digits)."""
    return uuid.uuid4().hex

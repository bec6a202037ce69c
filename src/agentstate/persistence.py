"""Checkpointers on real databases, with files only their owner can read.

A checkpoint holds whatever state held (tool arguments, user text), so the
SQLite files the package creates are made ``0600`` before SQLite opens them;
SQLite gives its ``-wal`` and ``-shm`` files the same mode. Every stage that
persists a thread uses these helpers: notebooks 02-06 and the CLIs.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

PRIVATE_MODE = 0o600


def private_db_file(path: str | Path) -> Path:
    """Create ``path`` with mode 0600 (or tighten an existing file) and return it.

    Raises ``FileNotFoundError`` naming the folder when it does not exist and
    ``IsADirectoryError`` when ``path`` is a folder, instead of SQLite's
    "unable to open database file".
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder for the database does not exist: {path.parent}")
    if path.is_dir():
        raise IsADirectoryError(f"expected a database file, got a folder: {path}")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, PRIVATE_MODE)
    os.close(fd)
    os.chmod(path, PRIVATE_MODE)
    return path


def memory_checkpointer() -> InMemorySaver:
    """An in-process checkpointer: threads last as long as the Python process."""
    return InMemorySaver()


@contextmanager
def sqlite_checkpointer(path: str | Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver on a private file at ``path`` (created if missing); closed on exit.

    ``check_same_thread=False`` because parallel tools and experts run in
    worker threads; SqliteSaver serialises access with its own lock.
    """
    conn = sqlite3.connect(str(private_db_file(path)), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def async_sqlite_checkpointer(path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """The async twin of :func:`sqlite_checkpointer` (for ``ainvoke`` / ``astream``)."""
    async with AsyncSqliteSaver.from_conn_string(str(private_db_file(path))) as saver:
        await saver.setup()
        yield saver


def file_contains(path: str | Path, needle: bytes) -> bool:
    """True if ``needle`` occurs in the database file or its WAL/journal, read as bytes."""
    path = Path(path)
    files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-journal"))]
    return any(f.exists() and needle in f.read_bytes() for f in files)

"""Checkpointers for experts threads: in memory, or a real SQLite file.

Threads grow across runs (and, with SQLite, across processes: the CLI's
``--checkpoint-db``). :func:`file_contains` reads the database files as raw
bytes, which is how a test proves the manual never reaches a checkpoint.
Taught in notebook 05.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver


def memory_checkpointer() -> InMemorySaver:
    return InMemorySaver()


@contextmanager
def sqlite_checkpointer(path: str | Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver on ``path`` (created if missing); closed on exit.

    ``check_same_thread=False`` because parallel experts run in worker threads;
    SqliteSaver serialises access with its own lock.
    """
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FileNotFoundError(f"folder for the checkpoint database does not exist: {path.parent}")
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


def file_contains(path: str | Path, needle: bytes) -> bool:
    """True if ``needle`` occurs in the database file or its WAL/journal, read as bytes."""
    path = Path(path)
    files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-journal"))]
    return any(f.exists() and needle in f.read_bytes() for f in files)

"""The capture graph's SQLite checkpointer: a private file, WAL, one fsync saved per step.

Exactly-once capture needs a checkpoint after every step (``durability=
"sync"``): ``resume`` must know whether the tool call of a killed turn was
already sent. Each step therefore commits; what makes that cheap is
``synchronous=NORMAL`` in WAL mode. A committed checkpoint is in the WAL file
when the commit returns, so it survives a kill of the capture process (even
SIGKILL); only a power loss or an OS crash can take the last commits before
the WAL's next checkpoint with it (never corrupting the file), and then a
resumed turn may send one write the store already has, which ``resume`` and
the client's check before a retry find and skip. Files are created 0600
(``agentstate.persistence.private_db_file``). Notebook 06 and the worker.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiosqlite
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentstate.persistence import private_db_file

PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")


@asynccontextmanager
async def async_capture_checkpointer(path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """An AsyncSqliteSaver on ``path`` (created 0600) in WAL with synchronous=NORMAL."""
    async with aiosqlite.connect(str(private_db_file(path))) as conn:
        for pragma in PRAGMAS:
            await conn.execute(pragma)
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        yield saver


@contextmanager
def capture_checkpointer(path: str | Path) -> Iterator[SqliteSaver]:
    """The sync twin of :func:`async_capture_checkpointer` (a SqliteSaver)."""
    conn = sqlite3.connect(str(private_db_file(path)), check_same_thread=False)
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()

"""The capture graph's SQLite checkpointer: a private file, WAL, no thread hop, no fsync per step.

Exactly-once capture needs a checkpoint after every step (``durability=
"sync"``): ``resume`` must know whether the tool call of a killed turn was
already sent. Each step therefore commits, and two things make that cheap:

- ``synchronous=NORMAL`` in WAL mode. A committed checkpoint is in the WAL
  file when the commit returns, so it survives a kill of the capture process
  (even SIGKILL). Only a power loss or an OS crash can take the last commits
  with it (never corrupting the file); a resumed turn may then send a write
  the store already has, which ``resume`` and the client's check before a
  retry find and skip.
- ``LoopSqliteSaver`` runs LangGraph's own ``SqliteSaver`` inside the event
  loop for ``ainvoke``/``astream``. A commit without fsync takes well under a
  millisecond; ``AsyncSqliteSaver`` hands each statement to a thread instead
  (aiosqlite), about 35 hand-offs per captured message, which on a busy
  2-core machine cost more than the writes (see ``scripts/bench_memory.py``).

Files are created 0600, and a path that is a symlink, a FIFO, a device or
anything but a regular file is refused before it is opened
(:func:`agentstate.private_files.own_file`).
Notebook 06 and the worker.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from agentstate.private_files import own_file

PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")


class LoopSqliteSaver(SqliteSaver):
    """``SqliteSaver`` whose async methods run the sync ones in place (sync and async graphs)."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple``, in the event loop."""
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list``, in the event loop."""
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put``, in the event loop."""
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes``, in the event loop."""
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread``, in the event loop."""
        self.delete_thread(thread_id)


def _connect(path: str | Path) -> sqlite3.Connection:
    if not Path(path).parent.is_dir():
        raise FileNotFoundError(f"folder for the database does not exist: {Path(path).parent}")
    conn = sqlite3.connect(str(own_file(path, "the checkpoint file")), check_same_thread=False)
    for pragma in PRAGMAS:
        conn.execute(pragma)
    return conn


@contextmanager
def capture_checkpointer(path: str | Path) -> Iterator[LoopSqliteSaver]:
    """A ``LoopSqliteSaver`` on ``path`` (created 0600), closed on exit; sync and async graphs."""
    conn = _connect(path)
    try:
        saver = LoopSqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def async_capture_checkpointer(path: str | Path) -> AsyncIterator[LoopSqliteSaver]:
    """:func:`capture_checkpointer` for ``async with``."""
    with capture_checkpointer(path) as saver:
        yield saver

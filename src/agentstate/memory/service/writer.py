"""The writer: one thread drains the durable write queue of the memory server.

``add_entry`` and ``put_context`` are asynchronous in Mycelian Memory, the
service whose tools the server reproduces: they answer "enqueued" and a
writer applies them later. A client that needs its
writes visible (and durable in their final tables) calls
``await_consistency``, which waits here until no write of that memory is
queued. The queue lives in SQLite (see ``store``), so writes queued before a
server kill are applied by the next server on the same file. The pending
counts are exact because one process at a time serves a file
(``store.StoreInUseError``). Notebook 06.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

from agentstate.memory.service.queue_writer import QueueWriter
from agentstate.memory.service.store import MemoryStore


class Writer(QueueWriter):
    """Applies queued writes in queue order; tracks how many are pending per memory.

    :meth:`close` applies what is queued first, then stops the thread.
    """

    def __init__(self, store: MemoryStore, delay: float = 0.0) -> None:
        self.store = store
        self.delay = delay  # seconds per write: lets tests and the notebook see "enqueued"
        self._pending: Counter[str] = Counter(row["memory_id"] for row in store.pending())
        super().__init__("memory-writer")

    @contextmanager
    def submitting(self, memory_id: str):
        """Count the write as pending before it is committed to the queue table."""
        with self._cond:
            self._pending[memory_id] += 1
        try:
            yield
        except BaseException:
            with self._cond:
                self._pending[memory_id] -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._cond.notify_all()

    def withdraw(self, memory_id: str) -> None:
        """A write counted by ``submitting`` was not queued after all (its key was already used)."""
        with self._cond:
            self._pending[memory_id] -= 1
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or +self._pending, timeout=0.5)
                if self._stopping and not +self._pending:
                    return
            queued = self.store.pending()
            # one transaction for what is queued now (one commit, not one per write);
            # with a delay (tests, the notebook's slow writer) one write at a time
            batches = [[item] for item in queued] if self.delay else [queued] if queued else []
            for batch in batches:
                if self.delay:
                    time.sleep(self.delay)
                try:
                    self.store.apply_many(batch)
                except Exception as exc:  # reported by await_consistency; retried
                    self._failed(exc)
                    break
                with self._cond:
                    self._error = None
                    for item in batch:
                        self._pending[item["memory_id"]] -= 1
                    self._cond.notify_all()

    def pending(self, memory_id: str) -> int:
        """Writes of ``memory_id`` queued and not applied yet."""
        with self._cond:
            return self._pending[memory_id]

    def wait(self, memory_id: str, timeout: float) -> None:
        """Block until ``memory_id`` has no queued writes; TimeoutError names the last failure."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._pending[memory_id] <= 0, timeout=timeout):
                raise self._still_queued(self._pending[memory_id], memory_id, timeout)

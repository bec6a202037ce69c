"""The writer of one replica in a fleet: drains the queue every replica shares (notebook 06).

With Postgres, several server processes write to one queue, so no process
can count what is pending from its own writes (the SQLite :class:`.Writer`
can: one process per file). This writer asks the database instead. Its thread
applies queued writes with
:meth:`~agentstate.memory.service.store_postgres.PostgresMemoryStore.drain`,
woken at once by a write of this replica and every ``poll`` seconds for the
others: a write queued by a replica that was killed before applying it is
applied by whichever replica looks next. ``wait`` (``await_consistency``)
polls the database's pending count, so a client that wrote through one
replica and awaits through another still waits for its writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from agentstate.memory.service.queue_writer import QueueWriter
from agentstate.memory.service.store_postgres import PostgresMemoryStore


class FleetWriter(QueueWriter):
    """Applies the shared queue's writes; pending counts come from the database.

    :meth:`close` stops the thread after its current transaction: what is still
    queued stays queued, for whichever replica looks next.
    """

    def __init__(self, store: PostgresMemoryStore, delay: float = 0.0, poll: float = 0.5) -> None:
        self.store = store
        self.delay = delay  # seconds each claimed write is held before it is applied (tests)
        self.poll = poll
        self._poked = True  # drain once at start: writes left by a replica that died
        super().__init__("memory-fleet-writer")

    @contextmanager
    def submitting(self, memory_id: str) -> Iterator[None]:
        """Wake the writer once the write is queued (nothing to count here)."""
        yield
        with self._cond:
            self._poked = True
            self._cond.notify_all()

    def withdraw(self, memory_id: str) -> None:
        """A write that was not queued (its key was already used): nothing to undo."""

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._poked, timeout=self.poll)
                if self._stopping:
                    return
                self._poked = False
            while not self._stopping:
                try:
                    applied = self.store.drain(delay=self.delay)
                except Exception as exc:  # reported by await_consistency; retried
                    self._failed(exc)
                    break
                with self._cond:
                    self._error = None
                    self._cond.notify_all()
                if not applied:
                    break

    def pending(self, memory_id: str) -> int:
        """Writes of ``memory_id`` queued by any replica and not applied yet."""
        return self.store.pending_count(memory_id)

    def wait(self, memory_id: str, timeout: float) -> None:
        """Block until the database holds no queued write of ``memory_id``.

        ``TimeoutError`` names how many are left and the writer's last failure.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = self.store.pending_count(memory_id)
            if left == 0:
                return
            if time.monotonic() >= deadline:
                raise self._still_queued(left, memory_id, timeout)
            with self._cond:
                self._poked = True  # another replica's writes: look now, not at the next poll
                self._cond.notify_all()
                self._cond.wait(timeout=0.02)

"""What both writers of the memory service do alike: one thread, one-line failures (notebook 06).

A writer applies queued writes on a thread of its own: the SQLite
:class:`~.writer.Writer` counts what is pending in its process, a fleet's
:class:`~.fleet_writer.FleetWriter` asks the database. Both keep the last
failure of an apply in one line for ``await_consistency``, pause and retry,
name what is still queued when a wait times out, and stop the same way.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import Any

from agentstate.memory.service.sql_store import StoreUnavailableError

RETRY_PAUSE = 0.2  # seconds between a failed apply and the next try


class QueueWriter(ABC):
    """What the server's tools call of a writer; a subclass supplies the thread's loop."""

    def __init__(self, name: str) -> None:
        """Start the thread ``name`` (a subclass sets up its own state before calling this)."""
        self._cond = threading.Condition()
        self._error: str | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @abstractmethod
    def _run(self) -> None:
        """Apply queued writes until :meth:`close`."""

    @abstractmethod
    def submitting(self, memory_id: str) -> Any:
        """A context manager around queueing one write."""

    @abstractmethod
    def withdraw(self, memory_id: str) -> None:
        """A write counted by ``submitting`` was not queued (its key was already used)."""

    @abstractmethod
    def wait(self, memory_id: str, timeout: float) -> None:
        """Block until no write of the memory is queued; ``TimeoutError`` otherwise."""

    def _failed(self, exc: Exception) -> None:
        """Keep the failure, in one line, for ``await_consistency``; pause before the retry."""
        with self._cond:
            self._error = (
                str(exc)  # already one line, naming the database
                if isinstance(exc, StoreUnavailableError)
                else f"{type(exc).__name__}: {exc}"
            )
        time.sleep(RETRY_PAUSE)

    def _still_queued(self, left: int, memory_id: str, timeout: float) -> TimeoutError:
        """The error of a wait that timed out: how many writes are left and the last failure."""
        why = f"; last write error: {self._error}" if self._error else ""
        return TimeoutError(
            f"{left} write(s) for {memory_id!r} still queued after {timeout:g}s{why}"
        )

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (what it does with writes still queued is the subclass's ``_run``)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)

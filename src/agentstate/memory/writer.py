"""One writer thread drains queued writes, so writes return "enqueued" at once.

``add_entry`` and ``put_context`` are asynchronous in the anchor service; a
client that needs to read its own writes calls ``await_consistency``, which
blocks until every write queued for that memory is committed (or reports the
first write that failed). Taught in notebook 06.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from collections.abc import Callable


class WriteQueue:
    """FIFO of write callables tagged with a memory id; one daemon thread runs them."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, Callable[[], None]] | None] = queue.Queue()
        self._pending: dict[str, int] = defaultdict(int)
        self._errors: dict[str, list[str]] = defaultdict(list)
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="memory-writer", daemon=True)
        self._thread.start()

    def submit(self, memory_id: str, write: Callable[[], None]) -> None:
        with self._cond:
            self._pending[memory_id] += 1
        self._queue.put((memory_id, write))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            memory_id, write = item
            try:
                write()
            except Exception as exc:  # reported to the next await_consistency
                with self._cond:
                    self._errors[memory_id].append(f"{type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._pending[memory_id] -= 1
                    self._cond.notify_all()

    def wait(self, memory_id: str, timeout: float) -> list[str]:
        """Block until ``memory_id`` has no queued writes; return (and clear) failed writes.

        Raises TimeoutError if writes are still queued after ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._pending[memory_id] == 0, timeout=timeout):
                raise TimeoutError(
                    f"{self._pending[memory_id]} write(s) for {memory_id!r} still queued "
                    f"after {timeout:g}s"
                )
            return self._errors.pop(memory_id, [])

    def close(self, timeout: float = 10.0) -> None:
        """Finish every queued write, then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout)

"""The bookkeeping of one batch for the turn cache (notebook 03).

A :class:`Batch` is the writer and reader calls of one AIMessage: what each
writer wrote, which calls have finished, which writers will not write in
this attempt (paused for a human, or failed with no retry coming), and the
readers waiting for them. :class:`agentstate.core.TurnCacheMiddleware`
creates one per AIMessage and drops it when every call has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolCall
from langgraph.types import Overwrite

from agentstate.core.turn_cache_calls import Alive

Reducer = Callable[[Any, Any], Any]
PAUSED = "is paused for a human decision"
_POLL = 0.02  # how often a reader re-checks a failed writer's call while a retry may come


@dataclass
class Batch:
    """The writer and reader calls of one AIMessage, and what the writers wrote."""

    writers: tuple[str, ...]
    """Writer call ids, in tool-call order."""
    participants: frozenset[str]
    """Every writer and reader call id: the batch is dropped when all have finished."""
    writes: dict[str, Any] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    created: float = field(default_factory=time.monotonic)
    cond: threading.Condition = field(default_factory=threading.Condition)
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list
    )
    calls: dict[str, ToolCall] = field(default_factory=dict)
    """Call id -> the tool call as the model made it (an edit may run another tool)."""
    lost: dict[str, str] = field(default_factory=dict)
    """Writer call id -> why it has not written: failed, or paused for a human."""
    watches: dict[str, Alive] = field(default_factory=dict)
    """Failed writer call id -> is its call still running (a retry may come)?"""
    arrived: set[str] = field(default_factory=set)
    slots: int | None = None
    """``max_concurrency`` of the run, when the caller set it."""
    waiting: int = 0
    stalled: bool = False
    restored: bool = False

    def tool_name(self, call_id: str, default: str) -> str:
        """The tool the model called as ``call_id`` (``default`` for a call not in the batch)."""
        call = self.calls.get(call_id)
        return call["name"] if call is not None else default

    def record(self, call_id: str, value: Any) -> None:
        """Keep what writer ``call_id`` wrote to the key."""
        with self.cond:
            self.writes[call_id] = value

    def start(self, call_id: str) -> None:
        """A call reached the cache (again, for a retried or resumed writer)."""
        with self.cond:
            self.arrived.add(call_id)
            self.lost.pop(call_id, None)
            self.watches.pop(call_id, None)

    def fail(self, call_id: str, reason: str, alive: Alive) -> None:
        """Writer ``call_id`` raised: lost unless its call is retried while ``alive()``."""
        with self.cond:
            self.lost[call_id] = reason
            self.watches[call_id] = alive
            self._wake()

    def pause(self, call_id: str, reason: str = PAUSED) -> None:
        """Writer ``call_id`` will not write before the run is resumed."""
        with self.cond:
            self.lost[call_id] = reason
            self.watches.pop(call_id, None)
            self._wake()

    def finish(self, call_id: str) -> bool:
        """Mark a call as finished and wake waiting readers; True when the batch is done."""
        with self.cond:
            if call_id not in self.lost:
                self.finished.add(call_id)
            self._wake()
            return self.ended()

    def _wake(self) -> None:
        # every waiter re-checks (and starts polling if a failed writer is watched)
        self.cond.notify_all()
        for loop, future in self.waiters:
            with contextlib.suppress(RuntimeError):  # a loop closed since it registered
                loop.call_soon_threadsafe(_resolve, future)
        self.waiters.clear()

    def _gone(self, call_id: str) -> bool:
        """Lost for good: paused, or failed and its call is over."""
        if call_id not in self.lost:
            return False
        alive = self.watches.get(call_id)
        return alive is None or not alive()

    def _settled(self, call_id: str) -> bool:
        """Finished, or lost for good: ``call_id`` will do nothing more in this attempt."""
        return call_id in self.finished or self._gone(call_id)

    def ended(self) -> bool:
        """True when no participant can still act in this attempt of the step."""
        with self.cond:
            return all(self._settled(c) for c in self.participants)

    def _writers_done(self) -> bool:
        return all(self._settled(c) for c in self.writers)

    def _stalled(self) -> bool:
        # every worker slot is held by a waiting reader: no writer can start
        self.stalled = self.slots is not None and self.waiting >= self.slots
        return self.stalled

    def _ready(self) -> bool:
        return self._writers_done() or self._stalled()

    def _missing(self) -> list[str]:
        return [c for c in self.writers if not self._settled(c)]

    def lost_writers(self) -> dict[str, str]:
        """Writer call id -> reason, for the writers whose write this batch will not have."""
        with self.cond:
            return {c: self.lost[c] for c in self.writers if self._gone(c)}

    def wait_for_writers(self, timeout: float) -> list[str]:
        """Block until every writer finished or is lost; return the ids still missing."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.waiting += 1
            self._wake()
            try:
                while not self._ready():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(min(left, _POLL) if self.watches else left)
                return self._missing()
            finally:
                self.waiting -= 1

    async def await_writers(self, timeout: float) -> list[str]:
        """The async twin of :meth:`wait_for_writers`: waits on the event loop, no thread."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        with self.cond:
            self.waiting += 1
            self._wake()
        try:
            while True:
                future = loop.create_future()
                with self.cond:
                    if self._ready():
                        return self._missing()
                    self.waiters.append((loop, future))
                    polling = bool(self.watches)
                try:
                    left = deadline - loop.time()
                    if left <= 0:
                        return self._missing()
                    await asyncio.wait([future], timeout=min(left, _POLL) if polling else left)
                finally:  # also when the run is cancelled: no waiter outlives its loop
                    with self.cond:
                        if (loop, future) in self.waiters:
                            self.waiters.remove((loop, future))
        finally:
            with self.cond:
                self.waiting -= 1

    def merged(self, current: Any, reducer: Reducer) -> Any:
        """``current`` with the recorded writes applied in tool-call order."""
        with self.cond:
            writes = [self.writes[c] for c in self.writers if c in self.writes]
        overwritten = False
        for value in writes:
            if isinstance(value, Overwrite):  # as LangGraph applies it: later writes are ignored
                current, overwritten = value.value, True
            elif not overwritten:
                current = reducer(current, value)
        return current

    def take_earlier(self, results: Mapping[str, tuple[bool, Any]]) -> None:
        """Calls that finished in an earlier attempt of this step (read from the checkpoint)."""
        with self.cond:
            for call_id, (wrote, value) in results.items():
                if call_id not in self.participants or call_id in self.arrived:
                    continue
                if wrote and call_id in self.writers:
                    self.writes[call_id] = value
                self.finished.add(call_id)
            self._wake()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

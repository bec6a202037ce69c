"""Same-turn visibility: readers see the writes of their own batch, and wait for them.

The tools of one AIMessage run as one super-step, in parallel threads, and
each reads the state from before the step: a reader next to the writers sees
none of their writes, whatever order they finish in. The next model step
already sees everything, so the gap is exactly one batch (notebook 03).

:class:`TurnCacheMiddleware` closes it without touching the tools:

1. **Record**: when a writer tool returns a ``Command`` that updates the
   state key, the value it wrote is kept for its batch.
2. **Wait**: a reader first waits until every writer call of its own
   AIMessage has finished (stored or rejected), with a timeout that returns a
   clear error to the model instead of hanging (``max_concurrency=1`` with the
   reader first can never be satisfied).
3. **Merge**: the reader then runs on a copy of the state whose key holds the
   state value with the batch's writes applied through the key's reducer, in
   tool-call order, which is the value LangGraph will store at the step's end.

A batch is identified by thread, graph namespace, AIMessage id and the ids of
its calls, so nothing is shared between invokes, threads or batches; the
middleware creates it on the first call and drops it when the batch's last
writer or reader finishes. It lives in the middleware, not in the caller's
config, so it works however the compiled graph runs: ``invoke``, ``ainvoke``,
``stream``, ``astream``, ``astream_events`` or a LangGraph server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from agentstate.core.reducers import merge_fields

Reducer = Callable[[Any, Any], Any]
BatchKey = tuple[Any, str, str, tuple[str, ...]]


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
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = field(default_factory=list)

    def record(self, call_id: str, value: Any) -> None:
        """Keep what writer ``call_id`` wrote to the key."""
        with self.cond:
            self.writes[call_id] = value

    def finish(self, call_id: str) -> bool:
        """Mark a call as finished and wake waiting readers; True when the batch is done."""
        with self.cond:
            self.finished.add(call_id)
            self.cond.notify_all()
            if self._writers_done():
                for loop, future in self.waiters:
                    loop.call_soon_threadsafe(_resolve, future)
                self.waiters.clear()
            return self.participants <= self.finished

    def _writers_done(self) -> bool:
        return set(self.writers) <= self.finished

    def _missing(self) -> list[str]:
        return [c for c in self.writers if c not in self.finished]

    def wait_for_writers(self, timeout: float) -> list[str]:
        """Block until every writer finished; return the ids still missing."""
        with self.cond:
            self.cond.wait_for(self._writers_done, timeout=timeout)
            return self._missing()

    async def await_writers(self, timeout: float) -> list[str]:
        """The async twin of :meth:`wait_for_writers`: waits on the event loop, no thread."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.cond:
            if self._writers_done():
                return []
            self.waiters.append((loop, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        with self.cond:
            if (loop, future) in self.waiters:
                self.waiters.remove((loop, future))
            return self._missing()

    def merged(self, current: Any, reducer: Reducer) -> Any:
        """``current`` with the recorded writes applied in tool-call order."""
        with self.cond:
            writes = [self.writes[c] for c in self.writers if c in self.writes]
        for value in writes:
            current = reducer(current, value)
        return current


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def _calls_of(state: Any, call_id: str) -> tuple[AIMessage | None, list[dict[str, Any]]]:
    messages = state.get("messages", []) if isinstance(state, Mapping) else []
    for message in reversed(messages):
        if not isinstance(message, AIMessage):
            continue
        if any(c.get("id") == call_id for c in message.tool_calls):
            return message, list(message.tool_calls)
    return None, []


def _graph_scope(config: Mapping[str, Any] | None) -> tuple[Any, str]:
    """(thread id, namespace of the graph running the tool): tools of one batch share it."""
    configurable = (config or {}).get("configurable") or {}
    namespace = str(configurable.get("checkpoint_ns") or "")
    return configurable.get("thread_id"), namespace.rpartition("|")[0]


def written_value(result: Any, key: str) -> tuple[bool, Any]:
    """What a tool result writes to ``key``: ``(True, value)`` for a Command updating it."""
    results = result if isinstance(result, list) else [result]
    for item in results:
        update = getattr(item, "update", None) if isinstance(item, Command) else None
        if isinstance(update, Mapping) and key in update:
            return True, update[key]
    return False, None


class TurnCacheMiddleware(AgentMiddleware):
    """Readers see, and wait for, the writes of their own batch to ``key``.

    ``writers`` are tools that update ``key`` by returning a ``Command``;
    ``readers`` are tools that read ``key`` from their runtime state (or an
    injected state). ``reducer`` must be the key's own reducer. Works in
    ``create_agent`` and ``create_deep_agent`` alike. Taught in notebook 03.

    Limit: under ``invoke``/``stream`` a waiting reader holds one of the
    step's worker threads (``max_concurrency``, or the thread pool's default,
    ``min(32, cores + 4)``). Readers placed *before* the writers in one reply
    can fill every slot, so the writers never start and the readers time out
    with the error below. Put readers after writers, or raise
    ``max_concurrency``; ``ainvoke``/``astream`` wait on the event loop and
    hold no thread.
    """

    def __init__(
        self,
        *,
        writers: Iterable[str],
        readers: Iterable[str],
        key: str,
        reducer: Reducer = merge_fields,
        timeout: float = 10.0,
        max_age: float = 600.0,
    ) -> None:
        super().__init__()
        self.writers = frozenset(writers)
        self.readers = frozenset(readers)
        if not self.writers or not self.readers:
            raise ValueError("TurnCacheMiddleware needs at least one writer and one reader tool")
        if both := sorted(self.writers & self.readers):
            raise ValueError(f"a tool cannot be both writer and reader: {', '.join(both)}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.key = key
        self.reducer = reducer
        self.timeout = timeout
        self.max_age = max_age
        self._batches: dict[BatchKey, Batch] = {}
        self._lock = threading.Lock()

    @property
    def open_batches(self) -> int:
        """How many batches are held in memory now (0 once every turn has ended)."""
        with self._lock:
            return len(self._batches)

    # --- bookkeeping shared by the sync and async hooks ---

    def _join(self, request: Any) -> tuple[BatchKey, Batch] | None:
        call_id = request.tool_call["id"]
        message, calls = _calls_of(request.state, call_id)
        if message is None:  # a tool run outside an agent loop: nothing to coordinate
            return None
        ours = [c for c in calls if c.get("name") in self.writers | self.readers]
        thread, namespace = _graph_scope(getattr(request.runtime, "config", None))
        key = (thread, namespace, str(message.id), tuple(c["id"] for c in calls))
        now = time.monotonic()
        with self._lock:
            for stale in [k for k, b in self._batches.items() if now - b.created > self.max_age]:
                del self._batches[stale]
            batch = self._batches.get(key)
            if batch is None:
                batch = Batch(
                    writers=tuple(c["id"] for c in ours if c["name"] in self.writers),
                    participants=frozenset(c["id"] for c in ours),
                )
                self._batches[key] = batch
        return key, batch

    def _leave(self, key: BatchKey, batch: Batch, call_id: str) -> None:
        if batch.finish(call_id):
            with self._lock:
                if self._batches.get(key) is batch:
                    del self._batches[key]

    def _timed_out(self, request: Any, missing: list[str]) -> ToolMessage:
        name = request.tool_call["name"]
        return ToolMessage(
            content=(
                f"Error: {name} timed out after {self.timeout:g}s waiting for {len(missing)} "
                f"writer call(s) of the same reply ({', '.join(sorted(self.writers))}); "
                "nothing was read. Call it again in your next reply, after the writers."
            ),
            tool_call_id=request.tool_call["id"],
            name=name,
            status="error",
        )

    def _reader_view(self, request: Any, batch: Batch) -> Any:
        state = request.state
        if not isinstance(state, Mapping):
            return request
        view = {**state, self.key: batch.merged(state.get(self.key), self.reducer)}
        runtime = request.runtime
        if dataclasses.is_dataclass(runtime):
            runtime = dataclasses.replace(runtime, state=view)
        return request.override(state=view, runtime=runtime)

    # --- the hooks ---

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        joined = self._join(request) if name in self.writers | self.readers else None
        if joined is None:
            return handler(request)
        key, batch = joined
        try:
            if name in self.writers:
                result = handler(request)
                wrote, value = written_value(result, self.key)
                if wrote:
                    batch.record(call_id, value)
                return result
            missing = batch.wait_for_writers(self.timeout)
            if missing:
                return self._timed_out(request, missing)
            return handler(self._reader_view(request, batch))
        finally:
            self._leave(key, batch, call_id)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        joined = self._join(request) if name in self.writers | self.readers else None
        if joined is None:
            return await handler(request)
        key, batch = joined
        try:
            if name in self.writers:
                result = await handler(request)
                wrote, value = written_value(result, self.key)
                if wrote:
                    batch.record(call_id, value)
                return result
            missing = await batch.await_writers(self.timeout)
            if missing:
                return self._timed_out(request, missing)
            return await handler(self._reader_view(request, batch))
        finally:
            self._leave(key, batch, call_id)

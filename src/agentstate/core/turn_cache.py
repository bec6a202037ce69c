"""Same-turn visibility: readers see the writes of their own batch, and wait for them.

The tools of one AIMessage run as one super-step, in parallel threads, and
each reads the state from before the step: a reader next to the writers sees
none of their writes, whatever order they finish in. The next model step
already sees everything, so the gap is exactly one batch (notebook 03).

:class:`TurnCacheMiddleware` closes it without touching the tools:

1. **Record**: when a writer tool returns a ``Command`` that updates the
   state key, the value it wrote is kept for its batch.
2. **Wait**: a reader first waits until every writer call of its own
   AIMessage has finished, with a timeout that returns a clear error to the
   model instead of hanging. A writer that will never write does not make it
   wait: one already answered by a ToolMessage in state (a human rejected or
   answered it, ``ToolCallLimitMiddleware`` blocked it), one a per-call
   review pauses, one that failed for good. If such a writer's write is
   missing, the reader returns an error naming it instead of a stale view.
3. **Merge**: the reader then runs on a copy of the state whose key holds the
   state value with the batch's writes applied through the key's reducer, in
   tool-call order, which is the value LangGraph will store at the step's end.

A batch is identified by thread, graph namespace, AIMessage id and the ids of
its calls, so nothing is shared between invokes, threads or batches; the
middleware creates it on the first call and drops it when the batch's last
writer or reader finishes. A batch resumed after an interrupt or a failure
takes the calls that finished before it from the checkpoint's pending writes,
so its readers see what was really written. It lives in the middleware, not in the caller's
config, so it works however the compiled graph runs: ``invoke``, ``ainvoke``,
``stream``, ``astream``, ``astream_events`` or a LangGraph server.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
from langchain_core.messages import ToolCall, ToolMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.types import Command, Overwrite

from agentstate.core.reducers import merge_fields
from agentstate.core.turn_cache_base import checked_settings
from agentstate.core.turn_cache_batch import Batch as Batch
from agentstate.core.turn_cache_batch import Reducer as Reducer
from agentstate.core.turn_cache_calls import (
    acall_watch,
    aearlier_results,
    call_watch,
    earlier_results,
    gated_upstream,
    graph_scope,
    outer_middleware,
    pending_calls,
)

BatchKey = tuple[Any, str, str, tuple[str, ...]]
ToolResult = ToolMessage | Command[Any]
"""What a tool call returns through the middleware chain (``AgentMiddleware.wrap_tool_call``)."""
GATED = "waits for a human decision (a per-call review listed before the turn cache)"


class Written(NamedTuple):
    """What a tool result writes to one state key (:func:`written_value`)."""

    wrote: bool
    """True when a ``Command`` in the result updates the key."""
    value: Any
    """The value it writes there (None when it writes nothing)."""


def written_value(result: object, key: str) -> Written:
    """What a tool result writes to ``key``: ``Written(True, value)`` for a Command updating it,
    ``Written(False, None)`` otherwise (notebook 03's teaching cache reads ``.value``)."""
    results = result if isinstance(result, list) else [result]
    for item in results:
        update = getattr(item, "update", None) if isinstance(item, Command) else None
        if isinstance(update, Mapping) and key in update:
            return Written(True, update[key])
    return Written(False, None)


def reader_view(request: ToolCallRequest, key: str, value: Any) -> ToolCallRequest:
    """``request`` with ``key`` set to ``value`` in its state and in its runtime's state.

    A tool reads ``runtime.state``, which is not the request's ``state``: a view
    set in one only leaves the tool blind, so both change. Used by
    :class:`TurnCacheMiddleware` and notebook 03's teaching turn cache.
    """
    state = request.state
    if not isinstance(state, Mapping):
        raise TypeError(f"reader_view: the request's state is not a mapping: {type(state)!r}")
    view = {**state, key: value}
    runtime = request.runtime
    if dataclasses.is_dataclass(runtime) and not isinstance(runtime, type):
        runtime = dataclasses.replace(runtime, state=view)
    # what ``request.override`` does; its typed overrides leave out ``runtime``
    return dataclasses.replace(request, state=view, runtime=runtime)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return (
        f"failed ({type(exc).__name__}: {text[:200]})" if text else f"failed ({type(exc).__name__})"
    )


class TurnCacheMiddleware(AgentMiddleware):
    """Readers see, and wait for, the writes of their own batch to ``key``.

    ``writers`` are tools that update ``key`` by returning a ``Command``;
    ``readers`` are tools that read ``key`` from their runtime state (or an
    injected state). ``reducer`` must be the key's own reducer. Works in
    ``create_agent`` and ``create_deep_agent`` alike, beside LangChain's
    ``HumanInTheLoopMiddleware`` (either order), ``ToolCallLimitMiddleware``
    and ``ToolRetryMiddleware``; one instance per key, several compose.
    Taught in notebook 03.

    Limit: a waiting reader holds one of the step's worker slots, under
    ``invoke`` and ``ainvoke`` alike when the config sets ``max_concurrency``
    (``invoke`` without it: the thread pool's default, ``min(32, cores + 4)``).
    Readers placed *before* the writers in one reply can fill every slot, so
    the writers never start. With ``max_concurrency`` set the readers see that
    at once and return an error; otherwise they wait ``timeout``. Put readers
    after writers, or raise ``max_concurrency``.

    A middleware listed *before* the cache that answers a writer without
    calling it (other than a per-call ``HumanInTheLoopMiddleware``, which the
    cache recognises) is invisible to it: list the cache first.
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
        self.writers, self.readers = checked_settings(
            "TurnCacheMiddleware", writers, readers, key, reducer, timeout
        )
        self.key = key
        self.reducer = reducer
        self.timeout = timeout
        self.max_age = max_age
        self._batches: dict[BatchKey, Batch] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """One name per key, so caches on several keys can sit in one agent."""
        return f"{type(self).__name__}[{self.key}]"

    @property
    def open_batches(self) -> int:
        """How many batches are held in memory now (0 once every turn has ended)."""
        with self._lock:
            return len(self._batches)

    # --- bookkeeping shared by the sync and async hooks ---

    def _join(self, request: ToolCallRequest) -> tuple[BatchKey, Batch] | None:
        call_id = request.tool_call["id"]
        if call_id is None:  # no chat model makes a call without an id: nothing to match
            return None
        message, calls = pending_calls(request.state, call_id)
        if message is None:  # a tool run outside an agent loop: nothing to coordinate
            return None
        ours: dict[str, ToolCall] = {}  # call id -> call, for our tools' calls in the reply
        for c in calls:
            if c["id"] is not None and c["name"] in self.writers | self.readers:
                ours[c["id"]] = c
        if call_id not in ours:
            return None
        config = getattr(request.runtime, "config", None)
        thread, namespace = graph_scope(config)
        key = (thread, namespace, str(message.id), tuple(str(c["id"]) for c in calls))
        slots = (config or {}).get("max_concurrency")
        now = time.monotonic()
        with self._lock:
            # too old, or ended by a writer whose failure was seen after the others left
            for old in [
                k
                for k, b in self._batches.items()
                if now - b.created > self.max_age or (b.lost and b.ended())
            ]:
                del self._batches[old]
            batch = self._batches.get(key)
            if batch is None:
                batch = Batch(
                    writers=tuple(i for i, c in ours.items() if c["name"] in self.writers),
                    participants=frozenset(ours),
                    calls=ours,
                    slots=slots if isinstance(slots, int) and slots > 0 else None,
                )
                self._batches[key] = batch
        return key, batch

    def _needs_restore(self, request: ToolCallRequest, batch: Batch) -> bool:
        with batch.cond:
            if batch.restored:
                return False
            batch.restored = True
        return getattr(request.runtime, "config", None) is not None

    def _leave(self, key: BatchKey, batch: Batch, call_id: str) -> None:
        if batch.finish(call_id):
            with self._lock:
                if self._batches.get(key) is batch:
                    del self._batches[key]

    def _timed_out(self, request: ToolCallRequest, missing: list[str]) -> ToolMessage:
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

    def _stalled(self, request: ToolCallRequest, batch: Batch, missing: list[str]) -> ToolMessage:
        name = request.tool_call["name"]
        return ToolMessage(
            content=(
                f"Error: {name} cannot wait for {len(missing)} writer call(s) of the same reply "
                f"({', '.join(sorted(self.writers))}): all {batch.slots} worker slot(s) "
                f"(max_concurrency={batch.slots}) are held by readers waiting for them, so "
                "they cannot start; nothing was read. Call it again in your next reply, "
                "after the writers."
            ),
            tool_call_id=request.tool_call["id"],
            name=name,
            status="error",
        )

    def _lost(self, request: ToolCallRequest, batch: Batch, lost: dict[str, str]) -> ToolMessage:
        name = request.tool_call["name"]
        which = "; ".join(f"{batch.tool_name(c, '?')} call {c} {why}" for c, why in lost.items())
        return ToolMessage(
            content=(
                f"Error: {name} did not read {self.key!r}: a writer of the same reply has not "
                f"written ({which}), so what it would read now may not be what the state will "
                f"hold. Nothing was read. Call {name} again in your next reply."
            ),
            tool_call_id=request.tool_call["id"],
            name=name,
            status="error",
        )

    def _refused(self, request: ToolCallRequest, value: Any, error: Exception) -> ToolMessage:
        name = request.tool_call["name"]
        return ToolMessage(
            content=(
                f"Error: {name} wrote a {type(value).__name__} to {self.key!r}, which its "
                f"reducer refuses ({error}); nothing was written."
            ),
            tool_call_id=request.tool_call["id"],
            name=name,
            status="error",
        )

    def _check_write(
        self, request: ToolCallRequest, result: ToolResult
    ) -> tuple[bool, Any, ToolMessage | None]:
        wrote, value = written_value(result, self.key)
        if not wrote:
            return False, None, None
        state = request.state if isinstance(request.state, Mapping) else {}
        try:
            if isinstance(value, Overwrite):  # bypasses the reducer, not the value's type
                self.reducer(None, value.value)
            else:
                self.reducer(state.get(self.key), value)
        except (TypeError, ValueError) as error:
            return False, None, self._refused(request, value, error)
        return True, value, None

    def _gate(self, request: ToolCallRequest, batch: Batch, frame: Any, *, is_async: bool) -> None:
        """Writers a per-call review listed before the cache will pause first: say so."""
        with batch.cond:
            absent = [
                c for c in batch.writers if c not in batch.arrived and c not in batch.finished
            ]
        if not absent:
            return
        outer = outer_middleware(frame, is_async=is_async)
        if not outer:
            return
        for call_id in absent:
            if gated_upstream(outer, request, batch.calls[call_id]):
                with batch.cond:
                    if call_id not in batch.arrived and call_id not in batch.finished:
                        batch.pause(call_id, GATED)

    def _reader_view(self, request: ToolCallRequest, batch: Batch) -> ToolCallRequest:
        state = request.state
        if not isinstance(state, Mapping):
            return request
        return reader_view(request, self.key, batch.merged(state.get(self.key), self.reducer))

    # --- the hooks ---

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        joined = self._join(request)
        if joined is None or call_id is None:  # _join has checked the id: this is for mypy
            return handler(request)
        key, batch = joined
        if self._needs_restore(request, batch):
            batch.take_earlier(earlier_results(request.runtime.config, self.key))
        name = batch.tool_name(call_id, name)  # the tool the model called
        batch.start(call_id)
        try:
            if name in self.writers:
                try:
                    result = handler(request)
                except GraphInterrupt:
                    batch.pause(call_id)
                    raise
                except GraphBubbleUp:
                    raise
                except Exception as exc:
                    batch.fail(call_id, _reason(exc), call_watch())
                    raise
                wrote, value, refused = self._check_write(request, result)
                if refused is not None:
                    return refused
                if wrote:
                    batch.record(call_id, value)
                return result
            self._gate(request, batch, sys._getframe(), is_async=False)
            missing = batch.wait_for_writers(self.timeout)
            if missing:
                if batch.stalled:
                    return self._stalled(request, batch, missing)
                return self._timed_out(request, missing)
            if lost := batch.lost_writers():
                return self._lost(request, batch, lost)
            return handler(self._reader_view(request, batch))
        finally:
            self._leave(key, batch, call_id)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        joined = self._join(request)
        if joined is None or call_id is None:
            return await handler(request)
        key, batch = joined
        if self._needs_restore(request, batch):
            batch.take_earlier(await aearlier_results(request.runtime.config, self.key))
        name = batch.tool_name(call_id, name)  # the tool the model called
        batch.start(call_id)
        try:
            if name in self.writers:
                try:
                    result = await handler(request)
                except GraphInterrupt:
                    batch.pause(call_id)
                    raise
                except GraphBubbleUp:
                    raise
                except Exception as exc:
                    batch.fail(call_id, _reason(exc), acall_watch())
                    raise
                wrote, value, refused = self._check_write(request, result)
                if refused is not None:
                    return refused
                if wrote:
                    batch.record(call_id, value)
                return result
            self._gate(request, batch, sys._getframe(), is_async=True)
            missing = await batch.await_writers(self.timeout)
            if missing:
                if batch.stalled:
                    return self._stalled(request, batch, missing)
                return self._timed_out(request, missing)
            if lost := batch.lost_writers():
                return self._lost(request, batch, lost)
            return await handler(self._reader_view(request, batch))
        finally:
            self._leave(key, batch, call_id)

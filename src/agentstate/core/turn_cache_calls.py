"""What the turn cache can know about the calls of a batch it does not run itself.

The turn cache (notebook 03) makes readers wait for the writers of their own
AIMessage. A writer that will never write must not make them wait, and a
write that was lost must not be reported as a fresh view. These helpers read
what LangGraph and LangChain leave behind:

- :func:`batch_of`: the AIMessage a call belongs to, its writer calls and its size
  (the bookkeeping notebook 03's teaching ``TurnCache`` takes from here);
- :func:`pending_calls`: calls already answered by a ToolMessage in state
  (``HumanInTheLoopMiddleware`` reject/respond in batched mode,
  ``ToolCallLimitMiddleware``) never reach the tools node;
- :func:`earlier_results`: calls that finished in an earlier attempt of the
  same step (before an interrupt or a failure) are in the checkpoint's
  pending writes and are not run again on resume;
- :func:`call_watch` / :func:`acall_watch`: is the tool call that just failed
  still running (so a retry middleware around the cache may call it again)?
- :func:`gated_upstream`: writers that a per-call review listed *before* the
  cache will pause before they reach it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, ToolCall, ToolMessage

Alive = Callable[[], bool]

_RUN_ONE = {"_run_one", "_arun_one"}
_WRAP = {"wrap_tool_call", "awrap_tool_call"}


def pending_calls(state: Any, call_id: str) -> tuple[AIMessage | None, list[ToolCall]]:
    """The AIMessage holding ``call_id`` and those of its calls with no ToolMessage in state yet."""
    messages = state.get("messages", []) if isinstance(state, Mapping) else []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage) and any(
            c.get("id") == call_id for c in message.tool_calls
        ):
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            return message, [c for c in message.tool_calls if c.get("id") not in answered]
    return None, []


class CallBatch(NamedTuple):
    """The batch a tool call belongs to: the calls of one AIMessage (:func:`batch_of`)."""

    reply: str
    """The AIMessage's id (its call ids joined, for a message without one)."""
    writer_ids: tuple[str, ...]
    """Its calls to a writer tool, in the model's call order."""
    size: int
    """How many tool calls it holds."""


def batch_of(request: Any, writers: Iterable[str]) -> CallBatch:
    """The batch of a tool call (a ``ToolCallRequest``): the AIMessage in its state holding
    the call, that message's calls to ``writers`` and how many calls it holds. Notebook 03's
    teaching turn cache keys what the calls of one reply wrote by it."""
    if isinstance(writers, str):
        raise TypeError(f"batch_of: writers must be tool names, not the string {writers!r}")
    call_id = request.tool_call.get("id")
    message, _ = pending_calls(request.state, call_id or "")
    if message is None:
        raise ValueError(f"batch_of: no AIMessage in the state holds tool call {call_id!r}")
    names = set(writers)
    ids = [str(c.get("id")) for c in message.tool_calls]
    writer_ids = tuple(
        i for i, c in zip(ids, message.tool_calls, strict=True) if c["name"] in names
    )
    return CallBatch(message.id or "|".join(ids), writer_ids, len(ids))


def graph_scope(config: Mapping[str, Any] | None) -> tuple[Any, str]:
    """(thread id, namespace of the graph running the tool): tools of one batch share it."""
    configurable = (config or {}).get("configurable") or {}
    namespace = str(configurable.get("checkpoint_ns") or "")
    return configurable.get("thread_id"), namespace.rpartition("|")[0]


def _checkpoint_query(config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]] | None:
    """(checkpointer, config of the checkpoint the running step started from), if any."""
    configurable = (config or {}).get("configurable") or {}
    saver = configurable.get("__pregel_checkpointer")
    if saver is None or not hasattr(saver, "get_tuple"):
        return None
    thread, namespace = graph_scope(config)
    checkpoint_id = (configurable.get("checkpoint_map") or {}).get(namespace)
    if checkpoint_id is None:
        return None
    query = {"thread_id": thread, "checkpoint_ns": namespace}
    return saver, {"configurable": {**query, "checkpoint_id": checkpoint_id}}


def _results(pending_writes: Any, key: str) -> dict[str, tuple[bool, Any]]:
    """call id -> (wrote key, value) for every task that answered a call in ``pending_writes``."""
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in pending_writes or ():
        by_task.setdefault(task_id, []).append((channel, value))
    out: dict[str, tuple[bool, Any]] = {}
    for writes in by_task.values():
        answered = [
            m.tool_call_id
            for channel, value in writes
            if channel == "messages"
            for m in (value if isinstance(value, list) else [value])
            if isinstance(m, ToolMessage)
        ]
        written = [value for channel, value in writes if channel == key]
        for call_id in answered:
            out[call_id] = (bool(written), written[-1] if written else None)
    return out


def earlier_results(config: Mapping[str, Any] | None, key: str) -> dict[str, tuple[bool, Any]]:
    """Calls of the running step that finished in an earlier attempt (sync checkpointers)."""
    found = _checkpoint_query(config)
    if found is None:
        return {}
    saver, query = found
    try:
        saved = saver.get_tuple(query)
    except Exception:  # an async-only saver, or one that cannot be read from here
        return {}
    return _results(saved.pending_writes, key) if saved else {}


async def aearlier_results(
    config: Mapping[str, Any] | None, key: str
) -> dict[str, tuple[bool, Any]]:
    """The async twin of :func:`earlier_results`."""
    found = _checkpoint_query(config)
    if found is None:
        return {}
    saver, query = found
    try:
        saved = await saver.aget_tuple(query)
    except Exception:  # a sync-only saver
        try:
            saved = saver.get_tuple(query)
        except Exception:
            return {}
    return _results(saved.pending_writes, key) if saved else {}


def _never() -> bool:
    return False


def _stack(frame: Any) -> Iterator[Any]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def call_watch() -> Alive:
    """Called by a failed attempt (sync): is its tool call still running?

    The call ends when the tools node's ``_run_one`` frame leaves the thread;
    until then a retry middleware listed before the cache may run it again.
    """
    import threading

    ident = threading.get_ident()
    run_one = next((f for f in _stack(sys._getframe(1)) if f.f_code.co_name in _RUN_ONE), None)
    if run_one is None:
        return _never

    def alive() -> bool:
        frame = sys._current_frames().get(ident)
        return any(f is run_one for f in _stack(frame))

    return alive


def _coroutine_frames(task: asyncio.Task[Any]) -> list[Any]:
    """The frames of the coroutines ``task`` is running, outermost first."""
    frames = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def _awaiting(task: asyncio.Task[Any]) -> asyncio.Task[Any] | None:
    """The task waiting for ``task`` (langsmith runs each middleware hook in its own task)."""
    for callback, *_ in getattr(task, "_callbacks", None) or ():
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, asyncio.Task):
            return owner
    return None


def _task_chain() -> list[tuple[asyncio.Task[Any], list[Any]]]:
    """(task, its frames) from the outermost awaiting task to the current one."""
    chain: list[tuple[asyncio.Task[Any], list[Any]]] = []
    task = asyncio.current_task()
    while task is not None and len(chain) < 64:
        chain.append((task, _coroutine_frames(task)))
        task = _awaiting(task)
    return chain[::-1]


def _async_chain(frame: Any) -> list[Any]:
    """The coroutine frames from the tool call's root to ``frame``, across tasks."""
    frames = [f for _, task_frames in _task_chain() for f in task_frames]
    return frames[: frames.index(frame) + 1] if frame in frames else [frame]


def acall_watch() -> Alive:
    """Called by a failed attempt (async): is its tool call still running?

    The call ends when the task running the tools node's ``_arun_one`` is done.
    """
    for task, frames in reversed(_task_chain()):
        if any(f.f_code.co_name in _RUN_ONE for f in frames):
            return lambda: not task.done()
    return _never


def outer_middleware(frame: Any, *, is_async: bool) -> list[Any]:
    """The middleware instances whose ``(a)wrap_tool_call`` encloses ``frame``, outermost first."""
    frames = _async_chain(frame) if is_async else list(reversed(list(_stack(frame))))
    # only this tool call's chain: a subagent's tools also run inside the parent's call
    starts = [i for i, f in enumerate(frames) if f.f_code.co_name in _RUN_ONE]
    frames = frames[starts[-1] :] if starts else frames
    found = []
    for f in frames[:-1]:
        owner = f.f_locals.get("self") if f.f_code.co_name in _WRAP else None
        if owner is not None and owner not in found:
            found.append(owner)
    return found


def gated_upstream(outer: list[Any], request: Any, call: ToolCall) -> bool:
    """True if a per-call ``HumanInTheLoopMiddleware`` in ``outer`` reviews ``call`` first."""
    for middleware in outer:
        if getattr(middleware, "interrupt_mode", None) != "per_call":
            continue
        config = getattr(middleware, "interrupt_on", {}).get(call.get("name"))
        if config is None:
            continue
        when = config.get("when")
        if when is None:
            return True
        try:
            return bool(when(request.override(tool_call=call)))
        except Exception:
            return True
    return False

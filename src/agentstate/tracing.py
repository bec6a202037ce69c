"""See inside a run: which tool call ran on which thread, when, in which super-step.

:class:`ToolTimeline` is a middleware that wraps every tool call and records
its super-step, position in its AIMessage, thread and start/finish times;
:func:`plot_timeline` draws it with matplotlib (locally, no remote service).
:func:`state_by_step` reads a checkpointer's history into one row per
super-step. Introduced in notebook 01, used by 02-04.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage


@dataclass(frozen=True)
class ToolEvent:
    """One tool call as it ran."""

    step: int
    position: int  # index of the call in its AIMessage (0-based)
    call_id: str
    name: str
    args: dict[str, Any]
    thread: str
    start: float
    end: float

    @property
    def label(self) -> str:
        field = self.args.get("field_name")
        return f"{self.name}({field})" if field else self.name


def tool_replies(state: Any, name: str | None = None) -> list[ToolMessage]:
    """The ToolMessages of a state (or a message list), oldest first; only ``name``'s if given."""
    messages = state.get("messages", []) if isinstance(state, dict) else state
    return [m for m in messages if isinstance(m, ToolMessage) and (name is None or m.name == name)]


def _position(state: Any, call_id: str) -> int:
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [c.get("id") for c in message.tool_calls]
            if call_id in ids:
                return ids.index(call_id)
    return -1


class ToolTimeline(AgentMiddleware):
    """Records a :class:`ToolEvent` per tool call; thread-safe, reusable with :meth:`clear`."""

    def __init__(self) -> None:
        super().__init__()
        self._events: list[ToolEvent] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def clear(self) -> None:
        """Forget recorded events and restart the clock (to reuse the middleware)."""
        with self._lock:
            self._events.clear()
            self._t0 = time.perf_counter()

    @property
    def events(self) -> list[ToolEvent]:
        """Events ordered by super-step, then by position in the AIMessage."""
        with self._lock:
            return sorted(self._events, key=lambda e: (e.step, e.position, e.start))

    def finish_order(self) -> list[ToolEvent]:
        """Events in the order the calls finished."""
        return sorted(self.events, key=lambda e: e.end)

    def thread_count(self, step: int | None = None) -> int:
        """How many threads ran tool calls (in one super-step if given)."""
        return len({e.thread for e in self.events if step is None or e.step == step})

    def _record(self, request: Any, start: float, end: float) -> None:
        call = request.tool_call
        metadata = (getattr(request.runtime, "config", None) or {}).get("metadata", {})
        event = ToolEvent(
            step=int(metadata.get("langgraph_step", -1)),
            position=_position(request.state, call["id"]),
            call_id=call["id"],
            name=call["name"],
            args=dict(call.get("args", {})),
            thread=threading.current_thread().name,
            start=start - self._t0,
            end=end - self._t0,
        )
        with self._lock:
            self._events.append(event)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        start = time.perf_counter()
        try:
            return handler(request)
        finally:
            self._record(request, start, time.perf_counter())

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        start = time.perf_counter()
        try:
            return await handler(request)
        finally:
            self._record(request, start, time.perf_counter())


class CommandRecorder(AgentMiddleware):
    """Records which state keys each call of the named tools tried to update.

    Shows what a ``task`` call really returns to the parent (notebook 04).
    """

    def __init__(self, tool_names: Iterable[str] = ("task",)) -> None:
        super().__init__()
        self.tool_names = frozenset(tool_names)
        self.updates: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _record(self, request: Any, result: Any) -> Any:
        if request.tool_call["name"] in self.tool_names:
            update = getattr(result, "update", None)
            keys = sorted(update) if isinstance(update, dict) else ["(no Command)"]
            with self._lock:
                self.updates.append({"tool": request.tool_call["name"], "update keys": keys})
        return result

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._record(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._record(request, await handler(request))


def plot_timeline(events: Iterable[ToolEvent], title: str = "tool calls", ax=None):
    """A Gantt chart of tool calls, one bar per call, coloured by thread."""
    import matplotlib.pyplot as plt

    events = list(events)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.45 * max(len(events), 2) + 1))
    threads = {t: i for i, t in enumerate(dict.fromkeys(e.thread for e in events))}
    cmap = plt.get_cmap("tab10")
    t0 = min((e.start for e in events), default=0.0)
    for row, e in enumerate(events):
        colour = cmap(threads[e.thread] % 10)
        ax.barh(row, (e.end - e.start) * 1000, left=(e.start - t0) * 1000, color=colour)
        ax.text((e.end - t0) * 1000, row, f" step {e.step}", va="center", fontsize=8)
    ax.set_yticks(range(len(events)), [e.label for e in events])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first call started (colour = thread)")
    ax.set_title(title)
    return ax


def _nodes(names: Iterable[str]) -> str:
    """``tools x5`` rather than five ``tools``: one task per tool call in a batch."""
    counts = Counter(names)
    return ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(counts.items())) or "(end)"


def state_by_step(
    graph: Any,
    config: dict[str, Any],
    summarise: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One row per checkpoint, oldest first: super-step, next nodes, changed keys, summary.

    ``changed`` lists the state keys whose values differ from the previous
    checkpoint (an empty value counts as absent), so a table shows which step
    wrote what; ``summarise(values)``
    adds lesson-specific columns (counts, field names).
    """
    snapshots = list(reversed(list(graph.get_state_history(config))))
    rows: list[dict[str, Any]] = []
    previous: dict[str, Any] = {}
    for snapshot in snapshots:
        values = snapshot.values
        keys = set(values) | set(previous)
        changed = sorted(k for k in keys if (values.get(k) or None) != (previous.get(k) or None))
        rows.append(
            {
                "step": snapshot.metadata.get("step"),
                "next": _nodes(snapshot.next),
                "changed": changed,
                **(summarise(values) if summarise else {}),
            }
        )
        previous = values
    return rows

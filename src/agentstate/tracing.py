"""See inside a run: which tool call ran on which thread, when, in which super-step.

:class:`ToolTimeline` is a middleware that records every model and tool call
of a run: its super-step, its position in its AIMessage, its thread, start
and finish times, and what a tool call wrote and replied. :func:`draw_run`
draws that record with matplotlib (locally, no remote service): super-steps,
the calls of one reply on their threads, which write survived and what each
reader saw; attach a ``ToolTimeline`` to your own agent to draw the same
picture of it. :func:`state_by_step` reads a checkpointer's history into one
row per super-step. Introduced in notebook 01, used by notebooks 02-04.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class ToolEvent:
    """One tool call as it ran, and what it wrote and replied."""

    step: int
    position: int  # index of the call in its AIMessage (0-based)
    call_id: str
    name: str
    args: dict[str, Any]
    thread: str
    start: float
    end: float
    update: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """The state keys its ``Command`` wrote and their values (``messages`` left out)."""
    reply: str = ""
    """The text of the ToolMessage it returned (or of the one inside its ``Command``)."""
    status: str = "success"

    @property
    def label(self) -> str:
        field_name = self.args.get("field_name")
        return f"{self.name}({field_name})" if field_name else self.name


@dataclass(frozen=True)
class ModelEvent:
    """One model call as it ran: its super-step, thread, start and finish times."""

    step: int
    thread: str
    start: float
    end: float


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


def _outcome(result: Any) -> tuple[dict[str, Any], str, str]:
    """What a tool call's result wrote (keys but ``messages``), its reply text and status."""
    update = getattr(result, "update", None)
    written = (
        {k: v for k, v in update.items() if k != "messages"} if isinstance(update, dict) else {}
    )
    messages = update.get("messages", []) if isinstance(update, dict) else [result]
    reply = next((m for m in reversed(messages) if isinstance(m, ToolMessage)), None)
    if reply is None:
        return written, "", "success"
    return written, reply.text, reply.status


def _step_now() -> int:
    """The super-step LangGraph is running (``-1`` outside a run)."""
    try:
        return int(get_config().get("metadata", {}).get("langgraph_step", -1))
    except RuntimeError:  # not inside a runnable context
        return -1


class ToolTimeline(AgentMiddleware):
    """Records a :class:`ToolEvent` per tool call and a :class:`ModelEvent` per model call.

    Thread-safe, sync and async; reusable with :meth:`clear`. Pass it in an
    agent's ``middleware=[...]``, run the agent, then :func:`draw_run` it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._events: list[ToolEvent] = []
        self._models: list[ModelEvent] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def clear(self) -> None:
        """Forget recorded calls and restart the clock (to reuse the middleware)."""
        with self._lock:
            self._events.clear()
            self._models.clear()
            self._t0 = time.perf_counter()

    @property
    def events(self) -> list[ToolEvent]:
        """Tool calls ordered by super-step, then by position in the AIMessage."""
        with self._lock:
            return sorted(self._events, key=lambda e: (e.step, e.position, e.start))

    @property
    def model_calls(self) -> list[ModelEvent]:
        """Model calls in the order they started."""
        with self._lock:
            return sorted(self._models, key=lambda e: e.start)

    def finish_order(self) -> list[ToolEvent]:
        """Tool calls in the order they finished."""
        return sorted(self.events, key=lambda e: e.end)

    def thread_count(self, step: int | None = None) -> int:
        """How many threads ran tool calls (in one super-step if given)."""
        return len({e.thread for e in self.events if step is None or e.step == step})

    def _record(self, request: Any, start: float, end: float, result: Any) -> None:
        call = request.tool_call
        metadata = (getattr(request.runtime, "config", None) or {}).get("metadata", {})
        update, reply, status = _outcome(result)
        event = ToolEvent(
            step=int(metadata.get("langgraph_step", -1)),
            position=_position(request.state, call["id"]),
            call_id=call["id"],
            name=call["name"],
            args=dict(call.get("args", {})),
            thread=threading.current_thread().name,
            start=start - self._t0,
            end=end - self._t0,
            update=update,
            reply=reply,
            status=status,
        )
        with self._lock:
            self._events.append(event)

    def _record_model(self, step: int, start: float, end: float) -> None:
        event = ModelEvent(step, threading.current_thread().name, start - self._t0, end - self._t0)
        with self._lock:
            self._models.append(event)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        start, result = time.perf_counter(), None
        try:
            result = handler(request)
            return result
        finally:
            self._record(request, start, time.perf_counter(), result)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        start, result = time.perf_counter(), None
        try:
            result = await handler(request)
            return result
        finally:
            self._record(request, start, time.perf_counter(), result)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        step, start = _step_now(), time.perf_counter()
        try:
            return handler(request)
        finally:
            self._record_model(step, start, time.perf_counter())

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        step, start = _step_now(), time.perf_counter()
        try:
            return await handler(request)
        finally:
            self._record_model(step, start, time.perf_counter())


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


# Colours of draw_run: a write the final state kept, one it lost, a reader's call, a model call.
KEPT, LOST, READ, MODEL = "#2a9d8f", "#e76f51", "#457b9d", "#6c757d"


def write_survived(event: ToolEvent, key: str, state: Mapping[str, Any]) -> bool | None:
    """Whether ``event``'s write to ``key`` is in ``state`` (``None`` if it wrote no ``key``).

    A dict write survived when every item it wrote is in the final dict (a
    field merge keeps them all; a whole-value replace keeps one writer's); a
    list write when each of its elements is in the final list (an appending
    reducer); any other write when it is the final value.
    """
    if key not in event.update:
        return None
    wrote, final = event.update[key], state.get(key)
    if isinstance(wrote, Mapping) and isinstance(final, Mapping):
        return all(k in final and final[k] == v for k, v in wrote.items())
    if isinstance(wrote, list) and isinstance(final, list):
        return all(item in final for item in wrote)
    return bool(final == wrote)


def _first_line(event: ToolEvent) -> str:
    text = (event.reply.splitlines() or [""])[0]
    return text if len(text) <= 40 else text[:39] + "…"


def draw_run(
    timeline: ToolTimeline,
    state: Mapping[str, Any] | None = None,
    *,
    key: str | None = None,
    saw: Callable[[ToolEvent], str] | None = None,
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw a run recorded by ``timeline``: super-steps, calls on their threads, writes kept.

    One row per tool call (``#k`` is its position in its AIMessage) and a
    ``model`` row; the x axis is milliseconds since the first call started
    (real timings, so they vary from run to run). Each super-step with tool
    calls is a shaded band: every call in it reads the state as it was when
    the band began, and LangGraph applies their writes when it ends. Threads
    are named ``thread 1..n`` in the order they first ran a call. Given the
    run's final ``state`` and a ``key``, a call that wrote ``key`` is green if
    its write survived and red if it was lost; every other call is a reader,
    labelled with what it saw: ``saw(event)``, by default the first line of its
    reply. Returns the figure (drawn into ``ax`` if given). Under ``ainvoke``
    the timeline runs on the event loop, so every call shows as ``thread 1``
    even where sync tools ran on worker threads.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    tools, models = timeline.events, timeline.model_calls
    if not tools and not models:
        raise ValueError(
            "the timeline recorded no call: put it in the agent's middleware and run it"
        )
    if key is not None and state is None:
        raise ValueError(f"key={key!r} needs the run's final state= to tell which writes survived")
    rows = 1 + len(tools)
    own = ax is None
    if ax is None:
        fig = plt.figure(figsize=(9, 0.4 * rows + 1.5), layout="constrained")
        ax = fig.add_subplot()
        plt.close(fig)  # shown once, as the returned value
    else:
        root = ax.get_figure(root=True)
        if root is None:
            raise ValueError("ax= must belong to a figure")
        fig = root
    spans = [(e.start, e.end) for e in tools] + [(m.start, m.end) for m in models]
    t0 = min(start for start, _ in spans)
    span = max(end for _, end in spans) - t0
    least = span * 0.006  # a call too short to see still gets a visible bar

    def bar(row: int, start: float, end: float, colour: str, note: str) -> None:
        left, width = (start - t0) * 1000, max(end - start, least) * 1000
        ax.barh(row, width, left=left, color=colour, height=0.6)
        ax.text(left + width, row, f" {note}", va="center", fontsize=8)

    for m in models:
        bar(0, m.start, m.end, MODEL, f"step {m.step}")
    by_start = sorted(tools, key=lambda e: e.start)
    threads = {
        t: f"thread {i + 1}" for i, t in enumerate(dict.fromkeys(e.thread for e in by_start))
    }
    shown = {MODEL} if models else set()
    for row, e in enumerate(tools, start=1):
        kept = None if key is None or state is None else write_survived(e, key, state)
        if kept is None:
            colour, note = READ, (saw or _first_line)(e) if (state is not None or saw) else ""
        else:
            colour, note = (KEPT, "kept") if kept else (LOST, "lost")
        shown.add(colour)
        bar(row, e.start, e.end, colour, threads[e.thread] + (f" · {note}" if note else ""))
    for i, step in enumerate(sorted({e.step for e in tools})):
        of_step = [e for e in tools if e.step == step]
        start = (min(e.start for e in of_step) - t0) * 1000
        end = (max(e.end for e in of_step) - t0) * 1000
        ax.axvspan(start, end, color=("#f1f3f5", "#e9ecef")[i % 2], zorder=0)
        ax.axvline(end, color=MODEL, linestyle="--", linewidth=1)
        calls = f"{len(of_step)} tool call" + ("s" if len(of_step) > 1 else "")
        ax.text(start, -0.75, f" super-step {step}: {calls}", fontsize=8)
    names = {
        KEPT: f"write to {key!r} kept",
        LOST: f"write to {key!r} lost",
        READ: "reader: what it saw" if state is not None or saw else "tool call",
        MODEL: "model call",
    }
    handles: list[Any] = [Patch(color=c, label=n) for c, n in names.items() if c in shown]
    if tools:
        handles.append(Line2D([], [], color=MODEL, linestyle="--", label="writes applied"))
    if own:  # below the axes, one line
        fig.legend(
            handles=handles,
            fontsize=8,
            frameon=False,
            ncol=len(handles),
            loc="outside lower center",
        )
    else:
        ax.legend(handles=handles, fontsize=8, frameon=False, loc="lower right")
    labels = ["model", *(f"#{e.position + 1} {e.label}" for e in tools)]
    ax.set_yticks(range(rows), labels, fontsize=8)
    ax.set_ylim(rows - 0.4, -1.1)
    ax.set_xlim(0, (span * 1.45 + least) * 1000)
    ax.set_xlabel("ms since the first call started (times vary from run to run)")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


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

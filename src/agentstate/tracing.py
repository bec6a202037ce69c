"""See inside a run: which tool call ran on which thread, when, in which super-step.

:class:`ToolTimeline` is a middleware that records every model and tool call
of a run: its super-step, its position in its AIMessage, its thread, start
and finish times, the state it was handed, and what a tool call wrote and
replied. Two pictures draw that record with matplotlib (locally, no remote
service). :func:`draw_superstep` draws the mechanism: one super-step as state
flow, left to right, the state before, what each call read and wrote, the
reducer, the state after (:func:`superstep` gives the same values as data).
:func:`draw_run` draws time: the calls of one reply on their threads, which
write survived and what each reader saw. Attach a ``ToolTimeline`` to your
own agent to draw the same pictures of it. :func:`state_by_step` reads a
checkpointer's history into one row per super-step; :func:`run_by_step` runs
a graph once and prints the nodes each super-step ran. Introduced in notebook
01, used by notebooks 02-04.
"""

from __future__ import annotations

import copy
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
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
    read: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """The state the call was handed (``messages`` left out): what its tool could read."""

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
    state: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """The state the model call was handed (``messages`` left out)."""


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


def _without_messages(state: Any) -> dict[str, Any]:
    """A copy of a state's keys but ``messages``, taken before anything can change them."""
    if not isinstance(state, Mapping):
        return {}
    kept = {k: v for k, v in state.items() if k != "messages"}
    try:
        return copy.deepcopy(kept)
    except Exception:  # a value that cannot be copied (a lock, a client): keep the reference
        return kept


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
        self._recorded = threading.Condition(self._lock)  # notified after each tool call
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

    def wait_for(self, done: Callable[[list[ToolEvent]], bool], timeout: float) -> bool:
        """Block until ``done(tool events recorded so far)`` holds; False after ``timeout`` s.

        A call recorded here has finished: its ``end`` is taken before it is
        recorded, so whatever runs after this returns ends later
        (:class:`agentstate.lessons.simulation.FinishOrder` relies on it).
        """
        with self._recorded:
            return self._recorded.wait_for(lambda: done(list(self._events)), timeout)

    def thread_count(self, step: int | None = None) -> int:
        """How many threads ran tool calls (in one super-step if given)."""
        return len({e.thread for e in self.events if step is None or e.step == step})

    def _record(
        self, request: Any, read: dict[str, Any], start: float, end: float, result: Any
    ) -> None:
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
            read=read,
        )
        with self._recorded:
            self._events.append(event)
            self._recorded.notify_all()

    def _record_model(self, request: Any, step: int, start: float, end: float) -> None:
        thread = threading.current_thread().name
        state = _without_messages(getattr(request, "state", None))
        event = ModelEvent(step, thread, start - self._t0, end - self._t0, state)
        with self._lock:
            self._models.append(event)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        read, start, result = _without_messages(request.state), time.perf_counter(), None
        try:
            result = handler(request)
            return result
        finally:
            self._record(request, read, start, time.perf_counter(), result)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        read, start, result = _without_messages(request.state), time.perf_counter(), None
        try:
            result = await handler(request)
            return result
        finally:
            self._record(request, read, start, time.perf_counter(), result)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        step, start = _step_now(), time.perf_counter()
        try:
            return handler(request)
        finally:
            self._record_model(request, step, start, time.perf_counter())

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        step, start = _step_now(), time.perf_counter()
        try:
            return await handler(request)
        finally:
            self._record_model(request, step, start, time.perf_counter())


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


class TaskInputs(BaseCallbackHandler):
    """Records the state each ``task`` call hands its subagent (a callback, not a middleware:
    the subagent's graph keeps only the keys it declares, this sees the dict before it does).

    Shows what goes down the ``task`` boundary (notebook 04):
    ``agent.invoke(..., config={"callbacks": [recorder]})``, then ``recorder.inputs``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[dict[str, Any]] = []
        self._task_runs: set[UUID] = set()
        self._lock = threading.Lock()

    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if (kwargs.get("name") or (serialized or {}).get("name")) == "task":
            with self._lock:
                self._task_runs.add(run_id)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            if kwargs.get("parent_run_id") in self._task_runs and isinstance(inputs, dict):
                self.inputs.append(dict(inputs))


# Colours of draw_run: a write the final state kept, one it lost, a reader's call, a model call.
KEPT, LOST, READ, MODEL = "#2a9d8f", "#e76f51", "#457b9d", "#6c757d"
# Type sizes in points. At the 100 dpi of a notebook figure 9 pt is 12.5 px, and the figures
# are drawn about 950 px wide, so JupyterLab shows them at 100% and the type reads as drawn
# (tests/test_figures.py checks every saved figure).
FONT_SIZE, TITLE_SIZE = 9, 10


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
        fig = plt.figure(figsize=(9.3, 0.42 * rows + 1.6), layout="constrained")
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
        ax.text(left + width, row, f" {note}", va="center", fontsize=FONT_SIZE)

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
        ax.text(start, -0.75, f" super-step {step}: {calls}", fontsize=FONT_SIZE)
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
            fontsize=FONT_SIZE,
            frameon=False,
            ncol=len(handles),
            loc="outside lower center",
        )
    else:
        ax.legend(handles=handles, fontsize=FONT_SIZE, frameon=False, loc="lower right")
    labels = ["model", *(f"#{e.position + 1} {e.label}" for e in tools)]
    ax.set_yticks(range(rows), labels, fontsize=FONT_SIZE)
    ax.set_ylim(rows - 0.4, -1.1)
    ax.set_xlim(0, (span * 1.45 + least) * 1000)
    ax.set_xlabel("ms since the first call started (times vary from run to run)")
    if title:
        ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


_MISSING = object()


@dataclass(frozen=True)
class StepCall:
    """One call of a super-step, as the state-flow picture shows it."""

    position: int  # index of the call in its AIMessage (0-based)
    label: str
    read: Any  # the value of the key the call was handed (``None`` if absent)
    wrote: Any  # what it wrote to the key; ``None`` for a reader
    writes: bool  # whether it wrote the key at all
    kept: bool | None  # its write is in the state after the step (``None``: a reader)
    reply: str  # the first line of the ToolMessage it returned


@dataclass(frozen=True)
class SuperStep:
    """One super-step's state flow, read from a :class:`ToolTimeline` of a real run.

    ``before`` is the key's value before the step (what the model call before
    it was handed), ``calls`` what each tool call of the step was handed and
    wrote, in call order, and ``after`` the value after the step (what the
    next model call was handed, or the run's final state).
    """

    key: str
    step: int
    before: Any
    calls: tuple[StepCall, ...]
    after: Any

    @property
    def writers(self) -> tuple[StepCall, ...]:
        return tuple(c for c in self.calls if c.writes)

    @property
    def readers(self) -> tuple[StepCall, ...]:
        return tuple(c for c in self.calls if not c.writes)


def superstep(
    timeline: ToolTimeline,
    key: str,
    *,
    step: int | None = None,
    state: Mapping[str, Any] | None = None,
) -> SuperStep:
    """The state flow of one super-step of the run ``timeline`` recorded, for state key ``key``.

    ``step`` defaults to the first super-step whose tool calls wrote ``key``
    (or the first with tool calls). The value after the step is what the next
    model call was handed; pass the run's final ``state`` when no model call
    follows the step.
    """
    events = timeline.events
    if not events:
        raise ValueError("the timeline recorded no tool call: put it in the agent's middleware")
    if step is None:
        writing = [e.step for e in events if key in e.update]
        step = writing[0] if writing else events[0].step
    calls_of_step = [e for e in events if e.step == step]
    if not calls_of_step:
        steps = sorted({e.step for e in events})
        raise ValueError(f"no tool call ran in super-step {step}; tool calls ran in {steps}")
    models = timeline.model_calls
    earlier = [m for m in models if m.step < step]
    later = [m for m in models if m.step > step]
    before = earlier[-1].state.get(key) if earlier else calls_of_step[0].read.get(key)
    if later:
        after = later[0].state.get(key)
    elif state is not None:
        after = state.get(key)
    else:
        raise ValueError(f"no model call after super-step {step}: pass the run's final state=")
    calls = tuple(
        StepCall(
            position=e.position,
            label=e.label,
            read=e.read.get(key),
            wrote=e.update.get(key),
            writes=key in e.update,
            kept=write_survived(e, key, {key: after}),
            reply=(e.reply.splitlines() or [""])[0],
        )
        for e in sorted(calls_of_step, key=lambda e: e.position)
    )
    return SuperStep(key=key, step=step, before=before, calls=calls, after=after)


def _short(value: Any, width: int = 34) -> str:
    """A value in one line of at most ``width`` characters (``{}`` for an empty or absent one)."""
    if value is None:
        return "{}"
    if isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k!r}: {v!r}" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    return _clip(text, width)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def draw_superstep(
    runs: ToolTimeline | SuperStep | Mapping[str, ToolTimeline | SuperStep],
    *,
    key: str | None = None,
    step: int | None = None,
    state: Mapping[str, Any] | None = None,
    show: Callable[[Any], str] | None = None,
    reducer: str
    | Callable[..., Any]
    | Mapping[str, str | Callable[..., Any]] = "the key's reducer",
    title: str | None = None,
) -> Figure:
    """Draw one super-step as state flow, left to right: before, each call, reducer, after.

    Each row is one tool call of the step, in call order (``#k``: its place in
    its AIMessage): what it was handed of ``key`` (``read``) and what it wrote
    (``wrote``), or, for a call that wrote nothing to ``key``, what it replied.
    An arrow carries each write into the reducer, which LangGraph calls in
    call order; it is green if the write is in the state after the step and
    red if it was lost. Every value comes from the run the
    :class:`ToolTimeline` recorded (see :func:`superstep`); ``show(value)``
    writes a value in one line (default: its items, cut at 34 characters).
    Give ``runs`` as ``{"title": timeline, ...}`` to stack several runs, say a
    broken and a fixed reducer, one above the other; ``reducer`` names the
    reducer in the picture (a function is named by its ``__name__``), or maps
    each title to its own. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import FancyBboxPatch, Patch

    panels = runs if isinstance(runs, Mapping) else {title or "": runs}
    steps: dict[str, SuperStep] = {}
    for name, run in panels.items():
        if isinstance(run, SuperStep):
            steps[name] = run
        elif key is None:
            raise ValueError("key= names the state key to follow, e.g. key='files'")
        else:
            steps[name] = superstep(run, key, step=step, state=state)
    render = show or _short

    def reducer_text(name: str) -> str:
        given = reducer.get(name, "the key's reducer") if isinstance(reducer, Mapping) else reducer
        label = given if isinstance(given, str) else getattr(given, "__name__", "reducer")
        return f"{label}\nfolds the writes\nin call order,\n#1 first"

    font = FontProperties(family="monospace", size=FONT_SIZE)
    measure = FigureCanvasAgg(plt.Figure(dpi=100)).get_renderer()
    line = FONT_SIZE * 1.25 / 72  # inches per line of text
    pad = 2 * 0.3 * FONT_SIZE / 72 + 0.02  # a box's padding, both sides

    def inches(text: str) -> float:
        lines = text.splitlines() or [""]
        widths = [measure.get_text_width_height_descent(s, font, ismath=False)[0] for s in lines]
        return max(widths) / 100 + pad

    def tall(text: str) -> float:
        return (text.count("\n") + 1) * line + pad

    def state_text(value: Any) -> str:  # one item a line when it does not fit on one
        if show is not None or not isinstance(value, Mapping):
            return textwrap.fill(render(value), 32, subsequent_indent="  ")  # on its spaces
        if len(_short(value, 200)) <= 30:
            return render(value)
        items = [_clip(f"  {k!r}: {_short(v, 200)}", 34) for k, v in list(value.items())[:8]]
        more = [f"  … {len(value) - 8} more"] if len(value) > 8 else []
        return "{\n" + "\n".join(items + more) + "\n}"

    def before_text(s: SuperStep) -> str:
        return f"state before\nstep {s.step}\n{s.key}:\n{state_text(s.before)}"

    def after_text(s: SuperStep) -> str:
        value = state_text(s.after)
        return f"state after\n{s.key}:" + ("\n" if "\n" in value else " ") + value

    def read_text(c: StepCall) -> str:  # the state before, which its own box shows whole
        return f"read {_clip(render(c.read), 14)}"

    def wrote_text(c: StepCall) -> str:
        reply = c.reply if len(c.reply) <= 30 else c.reply[:29] + "…"
        return f"wrote {_clip(render(c.wrote), 34)}" if c.writes else f"replied {reply}"

    all_steps = list(steps.values())
    all_calls = [c for s in all_steps for c in s.calls]
    # Three columns, about 950 px wide at 100 dpi with 12 px type (JupyterLab shows a wider
    # figure shrunk): the state before; each call on two lines (its name, then what it read
    # and wrote); the reducer, as tall as the calls, above the state after. Each write's arrow
    # runs level, in its own row, into the reducer: no arrow crosses a box or another arrow.
    w_before = max(inches(before_text(s)) for s in all_steps)
    w_right = max(
        max(inches(reducer_text(name)) for name in steps),
        max(inches(after_text(s)) for s in all_steps),
    )
    labels = max(inches(f"#{c.position + 1} {c.label}") for c in all_calls)
    side_by_side = max(inches(read_text(c)) + 0.08 + inches(wrote_text(c)) for c in all_calls)
    # read and wrote side by side when that fits in about 9.5 inches, else one under the other
    stacked = w_before + 0.85 + max(labels, side_by_side) + w_right > 9.5
    w_calls = (
        max(labels, max(max(inches(read_text(c)), inches(wrote_text(c))) for c in all_calls))
        if stacked
        else max(labels, side_by_side)
    )
    x_before, x_calls = 0.0, w_before + 0.4
    x_right = x_calls + w_calls + 0.45
    total_width = x_right + w_right
    box_row = line + pad + 0.04
    row = line + box_row * (2 if stacked else 1) + 0.06  # its name, then its read and wrote
    gap = 0.3  # between the reducer and the state after, room for the arrow down
    title_room = 2 * TITLE_SIZE * 1.3 / 72 + 0.1
    tops, contents = [], []
    for name, s in steps.items():
        block = max(len(s.calls) * row, tall(reducer_text(name)) + 0.1)
        tops.append((block - len(s.calls) * row) / 2)  # the calls centred beside the reducer
        contents.append(max(block + gap + tall(after_text(s)), tall(before_text(s))))
    heights = [c + title_room for c in contents]
    fig = plt.figure(figsize=(total_width, sum(heights) + 0.35), layout="constrained")
    plt.close(fig)  # shown once, as the returned value
    axes = fig.subplots(len(all_steps), 1, squeeze=False, height_ratios=heights)[:, 0]
    boxed = {"boxstyle": "round,pad=0.3", "linewidth": 0.8}
    for ax, (name, s), content, first in zip(axes, steps.items(), contents, tops, strict=True):
        ax.set_xlim(0, total_width)
        ax.set_ylim(content, 0)
        ax.axis("off")
        rows = [first + i * row for i in range(len(s.calls))]  # the top of each call
        block = 2 * first + len(s.calls) * row

        def put(text: str, x: float, y: float, colour: str, ax: Axes = ax) -> None:
            box = {**boxed, "facecolor": "white", "edgecolor": colour}
            ax.text(x, y, text, fontproperties=font, va="center", ha="left", bbox=box)

        def arrow(x0: float, y0: float, x1: float, y1: float, colour: str, ax: Axes = ax) -> None:
            style = {"arrowstyle": "->", "color": colour, "linewidth": 1, "shrinkA": 0}
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=style)

        put(before_text(s), x_before + pad / 2, block / 2, MODEL)
        # the reducer: a box the height of the calls, its name in the middle
        reducer_box = FancyBboxPatch(
            (x_right + 0.04, 0.05),
            inches(reducer_text(name)) - 0.08,
            block - 0.1,
            boxstyle="round,pad=0.04",
            linewidth=0.8,
            edgecolor=MODEL,
            facecolor="white",
        )
        ax.add_patch(reducer_box)
        ax.text(x_right + pad / 2, block / 2, reducer_text(name), fontproperties=font, va="center")
        put(after_text(s), x_right + pad / 2, block + gap + tall(after_text(s)) / 2, MODEL)
        arrow(x_right + 0.3, block + 0.01, x_right + 0.3, block + gap - 0.02, MODEL)
        for c, y in zip(s.calls, rows, strict=True):
            colour = READ if c.kept is None else KEPT if c.kept else LOST
            name_y, box_y = y + line / 2 + 0.02, y + line + pad / 2 + line / 2 + 0.04
            arrow(x_before + w_before - 0.02, block / 2, x_calls - 0.06, name_y, "#adb5bd")
            ax.text(
                x_calls, name_y, f"#{c.position + 1} {c.label}", fontproperties=font, va="center"
            )
            put(read_text(c), x_calls + pad / 2, box_y, "#adb5bd")
            x_wrote = x_calls if stacked else x_calls + inches(read_text(c)) + 0.08
            wrote_y = box_y + box_row if stacked else box_y
            if not c.writes:
                put(wrote_text(c), x_wrote + pad / 2, wrote_y, colour)
                continue
            # the box carries its arrow, which starts at the box's edge, level, in its own row
            ax.annotate(
                wrote_text(c),
                xy=(x_right, wrote_y),
                xytext=(x_wrote + pad / 2, wrote_y),
                fontproperties=font,
                va="center",
                ha="left",
                bbox={**boxed, "facecolor": "white", "edgecolor": colour},
                arrowprops={
                    "arrowstyle": "->",
                    "color": colour,
                    "linewidth": 1,
                    "relpos": (1, 0.5),
                },
            )
        kept = sum(bool(c.kept) for c in s.writers)
        caption = (
            f"super-step {s.step}: {len(s.calls)} call{'s' * (len(s.calls) > 1)}, each handed the "
            "state before the step\n"
            f"{kept} of {len(s.writers)} writes kept"
        )
        ax.set_title(f"{name}: {caption}" if name else caption, fontsize=TITLE_SIZE, loc="left")
    patches = {
        KEPT: "write kept in the state after",
        LOST: "write lost",
        READ: "wrote nothing to the key",
    }
    used = {READ if c.kept is None else KEPT if c.kept else LOST for c in all_calls}
    handles: list[Any] = [Patch(color=c, label=n) for c, n in patches.items() if c in used]
    # on top, where the reader starts: below two stacked runs it sat far from the first
    fig.legend(handles=handles, fontsize=FONT_SIZE, frameon=False, ncol=4, loc="outside upper left")
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


def _print_steps(tasks: list[tuple[int, str]], timeline: ToolTimeline | None) -> None:
    events = timeline.events if timeline is not None else []
    for step in sorted({s for s, _ in tasks}):
        calls = sorted((e for e in events if e.step == step), key=lambda e: e.position)
        threads = len({e.thread for e in calls})
        on = f", on {threads} thread{'s' if threads != 1 else ''}" if calls else ""
        print(f"super-step {step}: {_nodes(n for s, n in tasks if s == step)}{on}")
        for e in calls:
            print(f"  #{e.position + 1} {e.label} replied {e.reply!r}")


def _take(
    item: tuple[str, Any], tasks: list[tuple[int, str]], state: dict[str, Any]
) -> dict[str, Any]:
    """Add a ``debug`` task event's ``(super-step, node)`` to ``tasks`` (the input step left
    out); return the state, replaced by a ``values`` chunk."""
    mode, chunk = item
    if mode == "values":
        return dict(chunk)
    if chunk.get("type") == "task" and chunk["payload"]["name"] != "__start__":
        tasks.append((int(chunk["step"]), str(chunk["payload"]["name"])))
    return state


def run_by_step(
    graph: Any,
    inputs: Any,
    timeline: ToolTimeline | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``graph`` once and print the nodes each super-step ran; returns the final state.

    Under a step that ran tool calls, each call the ``timeline`` (in the
    graph's middleware) recorded: ``#k``, its place in the model's reply, as
    :func:`draw_superstep` numbers it, and what it replied. Notebook 01 shows
    with it why its tool calls run in super-step 3.
    """
    tasks: list[tuple[int, str]] = []
    state: dict[str, Any] = {}
    for item in graph.stream(inputs, config, stream_mode=["debug", "values"]):
        state = _take(item, tasks, state)
    _print_steps(tasks, timeline)
    return state


async def arun_by_step(
    graph: Any,
    inputs: Any,
    timeline: ToolTimeline | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The async twin of :func:`run_by_step` (the graph runs under ``astream``)."""
    tasks: list[tuple[int, str]] = []
    state: dict[str, Any] = {}
    async for item in graph.astream(inputs, config, stream_mode=["debug", "values"]):
        state = _take(item, tasks, state)
    _print_steps(tasks, timeline)
    return state

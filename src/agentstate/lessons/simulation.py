"""Simulated tool latency, so races show up the way they do with real tools.

Real tools spend milliseconds on I/O; scripted lessons do not. Adding the same
seeded random delay before every tool call lets a lesson compare a broken and
a fixed design under identical timing. Used by notebook 03.

:class:`FinishOrder` stands for the work a tool does between its read and
its write without a sleep: it holds one reply's parallel calls until all of
them are running, then lets them finish in a chosen order, so what a lesson
prints about threads and finishing order is the same under any load. Used by
notebook 01 and its going-further page. :func:`run_read_last` runs notebook 03's
late reader (:class:`ReadLast`) on as many threads as its held calls need.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware

if TYPE_CHECKING:
    from agentstate.tracing import ToolEvent, ToolTimeline


class ToolLatencyMiddleware(AgentMiddleware):
    """Sleep a random ``0..max_delay`` seconds before each tool call (seeded, thread-safe)."""

    def __init__(self, max_delay: float = 0.005, seed: int | None = None) -> None:
        super().__init__()
        self.max_delay = max_delay
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def _delay(self) -> float:
        with self._lock:
            return self._random.uniform(0, self.max_delay)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        time.sleep(self._delay())
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        await asyncio.sleep(self._delay())
        return await handler(request)


class SlowToolMiddleware(AgentMiddleware):
    """Make the named tools take ``seconds`` longer (to show a reader's timeout)."""

    def __init__(self, tool_name: str, seconds: float) -> None:
        super().__init__()
        self.tool_name = tool_name
        self.seconds = seconds

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] == self.tool_name:
            time.sleep(self.seconds)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] == self.tool_name:
            await asyncio.sleep(self.seconds)
        return await handler(request)


class FinishOrder(AgentMiddleware):
    """Parallel tool calls that run at the same time and finish in ``order``, by waiting
    on conditions, never on a sleep being long enough.

    Call it in a tool between its read and its write with the call's key (its
    ``field_name``), or list it in the agent's middleware after ``timeline``
    (a call's ``arg`` is its key; calls without one pass). Each call waits
    until every key of ``order`` has arrived (so all of them run at once,
    each on its own worker thread), then until ``timeline`` recorded the keys
    before its own in ``order`` as finished, so ``timeline.finish_order()``
    and anything the calls print after the wait follow ``order``. A key not
    in ``order`` passes at once. One run per object (and per timeline): the
    arrivals are not reset.
    """

    def __init__(
        self,
        timeline: ToolTimeline,
        order: Sequence[str],
        *,
        arg: str = "field_name",
        timeout: float = 60.0,
    ) -> None:
        if len(set(order)) != len(order):
            raise ValueError(f"FinishOrder: order names a key twice: {list(order)}")
        super().__init__()
        self.timeline = timeline
        self.order = list(order)
        self.arg = arg
        self.timeout = timeout
        self._arrived: set[str] = set()
        self._all_in = threading.Condition()

    def __call__(self, key: str | None) -> None:
        """Hold the call ``key`` until all calls run, then until its turn to finish."""
        if key not in self.order:
            return
        with self._all_in:
            self._arrived.add(key)
            self._all_in.notify_all()
            if not self._all_in.wait_for(
                lambda: len(self._arrived) == len(self.order), self.timeout
            ):
                raise TimeoutError(
                    f"FinishOrder: {len(self._arrived)} of {len(self.order)} calls ran at "
                    "once; run them with at least as many worker threads (max_concurrency)"
                )
        before = set(self.order[: self.order.index(key)])

        def finished(events: list[ToolEvent]) -> bool:
            return before <= {e.args.get(self.arg) for e in events}

        if not self.timeline.wait_for(finished, self.timeout):
            raise TimeoutError(f"FinishOrder: {sorted(before)} never finished before {key!r}")

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Hold the call for its turn, then run it."""
        self(request.tool_call.get("args", {}).get(self.arg))
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async twin: the wait runs in a worker thread, off the event loop."""
        await asyncio.to_thread(self, request.tool_call.get("args", {}).get(self.arg))
        return await handler(request)


class ReadLast(AgentMiddleware):
    """A reader that surely reads after every writer of its reply returned (lesson 03).

    List it before ``timeline`` in the middleware. The ``writers`` calls named
    ``writer`` wait until a ``reader`` call is waiting, then run; the reader
    waits until ``timeline`` recorded all of them as finished. So the reader
    starts after the last writer ended, and the writers ran on other threads
    than the reader's, under any load, where a sleep before the reader only
    bets that the writers are done by then.
    """

    def __init__(
        self,
        timeline: ToolTimeline,
        reader: str,
        writer: str,
        writers: int,
        *,
        timeout: float = 60.0,
    ) -> None:
        super().__init__()
        self.timeline, self.reader, self.writer = timeline, reader, writer
        self.writers, self.timeout = writers, timeout
        self._reader_waits = threading.Event()
        self._areader_waits: asyncio.Event | None = None  # the same, under ainvoke

    def _hold(self, name: str) -> None:
        if name == self.writer and not self._reader_waits.wait(self.timeout):
            raise TimeoutError(f"ReadLast: no {self.reader} call came to wait for the writers")
        if name == self.reader:
            self._reader_waits.set()

            def done(events: list[ToolEvent]) -> bool:
                return sum(e.name == self.writer for e in events) >= self.writers

            if not self.timeline.wait_for(done, self.timeout):
                raise TimeoutError(f"ReadLast: fewer than {self.writers} {self.writer} calls ended")

    def report(self) -> str:
        """What the held run showed, a fact a line (lesson 03 prints it): the reader started
        after every writer ended, the super-steps its calls ran in, their threads, and what
        the reader replied."""
        events = self.timeline.events
        readers = [e for e in events if e.name == self.reader]
        starts = [e.start for e in readers]
        ends = [e.end for e in events if e.name == self.writer]
        if not starts or not ends:
            raise ValueError(
                f"ReadLast.report: no {self.reader} or no {self.writer} call recorded: "
                "run the agent with this ReadLast and its timeline first"
            )
        return "\n".join(
            [
                f"{self.reader} started after every {self.writer} ended: {starts[0] > max(ends)}",
                f"super-steps of the {len(events)} calls: {sorted({e.step for e in events})}",
                f"they ran on more than one thread: {self.timeline.thread_count() > 1}",
                f"{self.reader} replied: {readers[0].reply}",
            ]
        )

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Hold a writer or the reader for its turn, then run it."""
        self._hold(request.tool_call["name"])
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async twin: writers wait on the loop (no thread each), the reader in a thread."""
        name = request.tool_call["name"]
        if self._areader_waits is None:
            self._areader_waits = asyncio.Event()
        if name == self.writer:
            try:
                await asyncio.wait_for(self._areader_waits.wait(), self.timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"ReadLast: no {self.reader} call came to wait for the writers"
                ) from None
        elif name == self.reader:
            self._areader_waits.set()
            await asyncio.to_thread(self._hold, name)
        return await handler(request)


def _held_read(
    build: Callable[..., Any], reader: str, writer: str, writers: int
) -> tuple[ReadLast, Any, dict[str, Any], str]:
    """The held run's parts: its ``ReadLast``, the agent, its config, the threads line."""
    from agentstate.tracing import ToolTimeline

    hold = ReadLast(ToolTimeline(), reader, writer, writers)
    calls = writers + 1  # the writers wait until the reader waits: all held at once
    why = (
        f"run with max_concurrency={calls}: {writers} {writer} calls wait until {reader} waits\n"
        "(on fewer threads they deadlock; Python's default pool has min(32, cpu_count+4))"
    )
    return hold, build(hold, hold.timeline), {"max_concurrency": calls}, why


def run_read_last(
    build: Callable[..., Any], turn: Any, reader: str, writer: str, writers: int
) -> str:
    """Lesson 03's late reader: ``build(ReadLast, its timeline)`` invoked on ``turn`` with a
    thread for each held call, and what it showed: why that many threads, then
    :meth:`ReadLast.report`."""
    hold, agent, config, why = _held_read(build, reader, writer, writers)
    agent.invoke(turn, config)
    return f"{why}\n{hold.report()}"


async def arun_read_last(
    build: Callable[..., Any], turn: Any, reader: str, writer: str, writers: int
) -> str:
    """The async twin of :func:`run_read_last` (``ainvoke``)."""
    hold, agent, config, why = _held_read(build, reader, writer, writers)
    await agent.ainvoke(turn, config)
    return f"{why}\n{hold.report()}"


class Together(AgentMiddleware):
    """Tool calls pass ``calls`` at a time: each waits until ``calls`` of them are waiting.

    ``tool`` names the calls it holds (all calls when None). List it after a
    ``ToolTimeline``: the recorded spans of the calls that pass together
    overlap, on as many threads, under any load, where a sleep in every call
    only bets that the pool starts the others before one ends (lesson 03,
    going further 03). The held calls of a step must come in multiples of
    ``calls``, with as many workers free; otherwise a call waits alone and
    times out with a message.
    """

    def __init__(self, calls: int, tool: str | None = None, *, timeout: float = 60.0) -> None:
        super().__init__()
        self.calls, self.tool, self.timeout = calls, tool, timeout
        self._group = threading.Barrier(calls)
        self._agroup: asyncio.Barrier | None = None  # the same, under ainvoke

    def _held(self, request: Any) -> bool:
        return self.tool is None or request.tool_call["name"] == self.tool

    def _alone(self) -> TimeoutError:
        what = f"{self.tool} call" if self.tool else "tool call"
        return TimeoutError(f"Together: a {what} found fewer than {self.calls - 1} to run beside")

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Wait for the others of its group, then run the call."""
        if self._held(request):
            try:
                self._group.wait(self.timeout)
            except threading.BrokenBarrierError:
                raise self._alone() from None
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async twin, on the event loop (an asyncio.Barrier)."""
        if self._held(request):
            if self._agroup is None:
                self._agroup = asyncio.Barrier(self.calls)
            try:
                await asyncio.wait_for(self._agroup.wait(), self.timeout)
            except TimeoutError:
                raise self._alone() from None
        return await handler(request)

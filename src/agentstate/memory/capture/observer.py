"""Replay a conversation into a capture agent, one message per invoke (notebook 06).

The observer sends each event of a conversation to the agent of its thread:
only the new message, with ``thread_id`` set, so the agent's state accrues in
its checkpointer. ``CaptureRun`` drives the tool-only graph, ``ReactRun`` the
prebuilt baseline; both create their memories first (``create_memory``) and
name them ``<run>.<thread>`` so several runs can share one server.
``CaptureRun.resume`` finishes a turn a killed process left half done: the
interrupted call is sent again, and a write the store already has (the same
``idempotency_key``) is answered "already enqueued" and not stored twice.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory.capture.baselines.react import build_react_agent
from agentstate.memory.capture.conversations import Conversation, Event
from agentstate.memory.capture.graph import build_capture_graph, check_turn
from agentstate.memory.client import DUPLICATE, WRITE_TOOLS, MemoryClient

VAULT = "agentstate"


class _Run:
    def __init__(self, client: MemoryClient, run: str, vault_id: str = VAULT) -> None:
        self.client, self.run, self.vault_id = client, run, vault_id
        self._created: set[str] = set()

    def memory_id(self, thread: str) -> str:
        """The memory of ``thread`` in this run: ``<run>.<thread>``."""
        return f"{self.run}.{thread}"

    def memories(self, conversation: Conversation) -> dict[str, str]:
        """thread -> memory id, for every thread of ``conversation`` (what the auditor takes)."""
        return {t: self.memory_id(t) for t in conversation.threads}

    async def ensure_memory(self, thread: str) -> str:
        """Create the thread's memory on the server once; return its id."""
        memory_id = self.memory_id(thread)
        if memory_id not in self._created:
            await self.client.call("create_memory", vault_id=self.vault_id, memory_id=memory_id)
            self._created.add(memory_id)
        return memory_id

    async def replay(self, conversation: Conversation, events: list[Event] | None = None) -> int:
        """Send every event (or the given ones) in order; return how many were sent."""
        sent = 0
        for event in events if events is not None else conversation.events:
            await self.send(event)
            sent += 1
        return sent

    async def send(self, event: Event) -> Any:  # pragma: no cover - abstract
        """Hand one event to the agent."""
        raise NotImplementedError


class CaptureRun(_Run):
    """The tool-only graph, one checkpointer thread per conversation thread."""

    def __init__(
        self,
        client: MemoryClient,
        model,
        tools: list,
        run: str = "capture",
        checkpointer=None,
        vault_id: str = VAULT,
    ) -> None:
        super().__init__(client, run, vault_id)
        # state must accrue per thread: without a checkpointer there is nothing to dedupe against
        self.graph = build_capture_graph(model, tools, checkpointer or InMemorySaver())

    def config(self, thread: str) -> dict[str, Any]:
        """The invoke config of ``thread``: its checkpointer thread and memory ids."""
        return {
            "configurable": {
                "thread_id": self.memory_id(thread),
                "vault_id": self.vault_id,
                "memory_id": self.memory_id(thread),
            }
        }

    async def send(self, event: Event) -> dict[str, Any]:
        """Capture one event: validated first, so a bad one changes nothing."""
        message = check_turn(event.to_message())
        await self.ensure_memory(event.thread)
        return await self.graph.ainvoke(
            {"messages": [message], "turn": message}, self.config(event.thread), durability="sync"
        )

    async def state(self, thread: str) -> dict[str, Any]:
        """The graph's checkpointed state of ``thread``."""
        return (await self.graph.aget_state(self.config(thread))).values

    async def resume(self, thread: str) -> str:
        """Finish an interrupted turn of ``thread``; say what was done."""
        config = self.config(thread)
        snapshot = await self.graph.aget_state(config)
        if not snapshot.next:
            return "nothing to resume"
        await self.ensure_memory(thread)
        note = f"resumed at {snapshot.next[0]}"
        pending = None
        if snapshot.next == ("tools",):
            last = snapshot.values["messages"][-1]
            assert isinstance(last, AIMessage) and last.tool_calls
            pending = last.tool_calls[0]
        # a write may have reached the server before the kill: sent again with its key,
        # the server stores it once (a read in flight is simply run again)
        result = await self.graph.ainvoke(None, config, durability="sync")
        if pending is not None and pending["name"] in WRITE_TOOLS:
            reply = next(
                (
                    m
                    for m in result.get("messages", [])
                    if isinstance(m, ToolMessage) and m.tool_call_id == pending["id"]
                ),
                None,
            )
            if reply is not None and reply.text == DUPLICATE:
                note += f": {pending['name']} was already in the store, not stored again"
        return note

    async def position(self, thread: str) -> int:
        """How many events of ``thread`` the checkpoint says are handled (after ``resume``)."""
        turn = (await self.state(thread)).get("turn")
        return 0 if turn is None else turn.additional_kwargs["position"] + 1


class ReactRun(_Run):
    """The prebuilt ReAct agent, one agent (prompt with its ids) per thread."""

    def __init__(
        self,
        client: MemoryClient,
        model,
        tools: list,
        run: str = "react",
        checkpointer=None,
        vault_id: str = VAULT,
    ) -> None:
        super().__init__(client, run, vault_id)
        self.model, self.tools = model, tools
        self.checkpointer = checkpointer or InMemorySaver()
        self.agents: dict[str, Any] = {}

    def config(self, thread: str) -> dict[str, Any]:
        """The invoke config of ``thread`` (its checkpointer thread)."""
        return {"configurable": {"thread_id": self.memory_id(thread)}}

    async def send(self, event: Event) -> dict[str, Any]:
        """Send one event to the thread's prebuilt agent (built on first use)."""
        memory_id = await self.ensure_memory(event.thread)
        if event.thread not in self.agents:
            self.agents[event.thread] = build_react_agent(
                self.model, self.tools, self.vault_id, memory_id, self.checkpointer
            )
        return await self.agents[event.thread].ainvoke(
            {"messages": [event.to_message()]}, self.config(event.thread)
        )

    async def state(self, thread: str) -> dict[str, Any]:
        """The prebuilt agent's checkpointed state of ``thread``."""
        return (await self.agents[thread].aget_state(self.config(thread))).values

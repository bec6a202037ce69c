"""Helpers that keep notebook 06's cells short: state tables, side-by-side runs, the knob,
a model that proposes nothing, and the guard removed for the proof that breaks it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory.auditor import Violation, audit, expected_flushes
from agentstate.memory.client import MemoryClient
from agentstate.memory.conversations import Conversation, load
from agentstate.memory.observer import CaptureRun, ReactRun
from agentstate.memory.policy import AS_REPORTED, CapturePolicy, Faults, policy_model
from agentstate.memory.process import ServerProcess

FAULTS = {
    "none": Faults(),
    "answers the user": Faults(answer_every=4),
    "writes twice": Faults(duplicate_every=5),
    "swaps roles": Faults(role_swap_every=4),
    "bootstraps twice": Faults(double_bootstrap=True),
    "skips the periodic flush": Faults(skip_periodic_flush=True),
    "reads control words in text": Faults(control_words_in_text=True),
    "all, as reported": AS_REPORTED,
}
_runs = itertools.count(1)


def message_rows(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """One row per state message: type, role/msg_idx, a short text, the tool calls."""
    rows = []
    for m in messages:
        row = {"type": type(m).__name__, "role": "", "msg_idx": "", "text": "", "calls": ""}
        if isinstance(m, ChatMessage):
            row.update(role=m.role, msg_idx=m.additional_kwargs.get("msg_idx"))
        if isinstance(m, ChatMessage | SystemMessage) or (isinstance(m, AIMessage) and m.content):
            row["text"] = str(m.content)[:32]
        if isinstance(m, AIMessage):
            row["calls"] = [_call(c) for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            row["calls"] = f"-> {m.name}"
        rows.append(row)
    return rows


def _call(call: dict[str, Any]) -> str:
    tags = call["args"].get("tags") if call["name"] == "add_entry" else None
    return f"add_entry({tags.get('role')} #{tags.get('msg_idx')})" if tags else call["name"]


async def compare(
    client: MemoryClient, db, conversation: Conversation, faults: Faults = AS_REPORTED
) -> dict[str, list[Violation]]:
    """Replay ``conversation`` through three agents; audit each store.

    ``react``: the prebuilt agent with the faulty model; ``capture``: the
    tool-only graph with the well-behaved policy; ``capture + faulty model``:
    the tool-only graph with the same faulty model as ``react``.
    """
    tools = await client.tools()
    n = next(_runs)
    runs = {
        "react": ReactRun(
            client,
            policy_model(CapturePolicy(faults, one_call_per_step=True), "faulty"),
            tools,
            run=f"react{n}",
            checkpointer=InMemorySaver(),
        ),
        "capture": CaptureRun(
            client,
            policy_model(CapturePolicy(), "policy"),
            tools,
            run=f"capture{n}",
            checkpointer=InMemorySaver(),
        ),
        "capture + faulty model": CaptureRun(
            client,
            policy_model(CapturePolicy(faults), "f"),
            tools,
            run=f"guarded{n}",
            checkpointer=InMemorySaver(),
        ),
    }
    for run in runs.values():
        await run.replay(conversation)
        for thread in conversation.threads:
            await client.call("await_consistency", memory_id=run.memory_id(thread))
    return {name: audit(db, conversation, run.memories(conversation)) for name, run in runs.items()}


def compare_sync(url: str, db, conversation: str, fault: str) -> dict[str, int]:
    """``compare`` from synchronous code (a widget callback): violations per agent."""

    async def go() -> dict[str, int]:
        async with MemoryClient(url) as client:
            found = await compare(client, db, load(conversation), FAULTS[fault])
        return {name: len(vs) for name, vs in found.items()}

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the kernel's loop is busy
        return pool.submit(asyncio.run, go()).result()


def proposes_nothing(messages: list[BaseMessage]) -> AIMessage:
    """A policy for a model that proposes no tool call at all: an empty reply, every turn.

    With it, every call the tool-only graph sends comes from the guard, so a
    clean store shows that correctness is the guard's, not the model's.
    """
    return AIMessage(content="")


@contextlib.contextmanager
def without_guard() -> Iterator[None]:
    """Inside the block, graphs built by ``build_capture_graph`` run the model's calls as proposed.

    The proof that breaks the guard: ``capture.guard`` is replaced by a pass-through
    (plan = the model's tool calls, no state update) and restored on exit. Only the
    guard is removed: the curated prompt, the ``ToolNode`` and the checkpointer stay.
    """
    from agentstate.memory import capture

    def pass_through(turn, proposed, state, vault_id, memory_id):
        return [dict(c) for c in proposed], {}

    original = capture.guard
    capture.guard = pass_through
    try:
        yield
    finally:
        capture.guard = original


knob_servers: list[ServerProcess] = []  # every server the knob started (all stopped on return)


def knob_counts(conversation: str, faults: list[str]) -> list[dict[str, Any]]:
    """Violations per agent for each fault, on a memory server started for this call only.

    The knob does not depend on the notebook's own server: it starts one on a
    fresh SQLite file, runs ``compare_sync`` once per fault and stops it before
    returning (``knob_servers`` keeps each one, so a cell can check they are stopped).
    """
    folder = Path(tempfile.mkdtemp(prefix="stage06-knob-"))
    server = ServerProcess(folder / "memory.sqlite")
    knob_servers.append(server)
    with server.start():
        return [
            {"fault": f, **compare_sync(server.url, server.db, conversation, f)} for f in faults
        ]


def rules_table(conversation: Conversation) -> list[dict[str, Any]]:
    """What the capture rules ask of ``conversation``, per thread, before any agent runs.

    Columns: the messages (one ``add_entry`` each), the SESSION_STARTs (one
    bootstrap each) and the msg_idx after which a flush is due (every 6th
    message, FLUSH_CONTEXT and SESSION_END), as the auditor expects them.
    """
    rows = []
    for thread in conversation.threads:
        events = conversation.thread_events(thread)
        rows.append(
            {
                "thread": thread,
                "messages (add_entry)": len(conversation.messages(thread)),
                "SESSION_START (bootstrap)": sum(e.content == "SESSION_START" for e in events),
                "flush after msg_idx": expected_flushes(conversation, thread),
            }
        )
    return rows

"""Helpers that keep notebook 06's cells short: state tables, side-by-side runs, the knob."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory.auditor import Violation, audit
from agentstate.memory.client import MemoryClient
from agentstate.memory.conversations import Conversation, load
from agentstate.memory.observer import CaptureRun, ReactRun
from agentstate.memory.policy import AS_REPORTED, CapturePolicy, Faults, policy_model

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

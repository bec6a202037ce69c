"""Stage 06 per-message costs (issue 12): what was removed stays removed, checked without timing.

The figures themselves come from ``scripts/bench_memory.py``; these tests pin
the mechanisms: no output schema on the one-word tools, one graph step fewer
per turn, a checkpointer that commits in the loop without fsync, batched
writer commits, concurrent calls over one kept session.
"""

import asyncio
import os
import sqlite3
import stat
import sys
from typing import TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from agentstate.memory.capture.checkpoints import (
    LoopSqliteSaver,
    async_capture_checkpointer,
    capture_checkpointer,
)
from agentstate.memory.capture.conversations import load
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import CapturePolicy, policy_model
from agentstate.memory.client import MemoryClient
from agentstate.memory.service.process import ServerProcess
from agentstate.memory.service.store import MemoryStore

pytestmark = pytest.mark.anyio
sys.modules.setdefault("rfc3987_syntax", None)


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_one_word_tools_have_no_output_schema_and_records_do(tmp_path):
    from agentstate.memory.service.server import build_server

    server = build_server(tmp_path / "m.sqlite")
    try:
        schemas = {t.name: t.outputSchema for t in await server.list_tools()}
    finally:
        server.agentstate_writer.close()
        server.agentstate_store.close()
    one_word = ("add_entry", "put_context", "await_consistency", "get_context", "create_memory")
    for name in (*one_word, "assign_position"):
        assert schemas[name] is None, name  # the client would validate each reply with jsonschema
    for name in ("list_entries", "get_entry", "search_memories"):
        assert schemas[name] is not None, name


async def test_a_plain_message_takes_two_node_steps(tmp_path):
    conversation = load("solo_travel")
    events = list(conversation.events)
    with ServerProcess(tmp_path / "memory.sqlite") as server:
        async with MemoryClient(server.url) as client:
            run = CaptureRun(
                client,
                policy_model(CapturePolicy(), "p"),
                await client.tools(),
                run="steps",
                checkpointer=InMemorySaver(),
            )
            await run.replay(conversation, events[:2])
            message = events[2].to_message()  # msg 2: one add_entry, no flush
            nodes = [
                node
                async for update in run.graph.astream(
                    {"messages": [message], "turn": message},
                    run.config("trip"),
                    stream_mode="updates",
                )
                for node in update
            ]
    assert nodes == ["llm_call", "tools"]  # the first call leaves llm_call, no dispatch step


class _Count(TypedDict, total=False):
    n: int


def _counter_graph(checkpointer):
    builder = StateGraph(_Count)
    builder.add_node("step", lambda s: {"n": s.get("n", 0) + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=checkpointer)


async def test_capture_checkpointer_is_private_wal_normal_and_works_sync_and_async(tmp_path):
    path = tmp_path / "ck.sqlite"
    config = {"configurable": {"thread_id": "t"}}
    async with async_capture_checkpointer(path) as saver:
        assert isinstance(saver, LoopSqliteSaver)
        graph = _counter_graph(saver)
        assert (await graph.ainvoke({"n": 0}, config, durability="sync"))["n"] == 1
        assert (await graph.ainvoke({"n": 5}, config, durability="sync"))["n"] == 6
        assert (await graph.aget_state(config)).values["n"] == 6
        assert len([c async for c in saver.alist(config)]) >= 4
        pragmas = (
            saver.conn.execute("PRAGMA journal_mode").fetchone()[0],
            saver.conn.execute("PRAGMA synchronous").fetchone()[0],
        )
    assert pragmas == ("wal", 1)  # 1 = NORMAL: no fsync per commit
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with capture_checkpointer(path) as saver:  # the same file, sync API, state kept
        graph = _counter_graph(saver)
        assert graph.get_state(config).values["n"] == 6
        assert graph.invoke({"n": 1}, config)["n"] == 2
        async_again = await graph.ainvoke({"n": 2}, config)
    assert async_again["n"] == 3
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] >= 8


def test_store_commits_without_fsync_and_applies_a_batch_once(tmp_path):
    store = MemoryStore(tmp_path / "m.sqlite")
    assert store._rows("PRAGMA synchronous")[0]["synchronous"] == 1  # NORMAL
    store.create_memory("v", "m")
    for i in range(3):
        payload = {"entry_id": f"e{i}", "vault_id": "v", "raw_entry": f"r{i}", "summary": "s"}
        store.enqueue("m", "entry", {**payload, "tags": {}}, {})
    batch = store.pending()
    store.apply_many(batch)
    store.apply_many(batch)  # a second pass over the same items changes nothing
    assert [e["raw_entry"] for e in store.list_entries("m")[0]] == ["r0", "r1", "r2"]
    assert store.pending() == [] and store.pending_count("m") == 0
    store.close()
    fsync = MemoryStore(tmp_path / "full.sqlite", fsync=True)
    assert fsync._rows("PRAGMA synchronous")[0]["synchronous"] == 2  # FULL, when asked
    fsync.close()


async def test_calls_of_different_memories_share_one_session_concurrently(tmp_path):
    """A slow await_consistency on one memory does not hold up a read of another."""
    with ServerProcess(tmp_path / "memory.sqlite", write_delay=2.0) as server:
        async with MemoryClient(server.url) as client:
            for memory_id in ("slow", "fast"):
                await client.call("create_memory", vault_id="v", memory_id=memory_id)
            for i in range(5):  # about 10 s of queued writes
                await client.call(
                    "add_entry", vault_id="v", memory_id="slow", raw_entry=f"r{i}", summary="s"
                )
            waiting = asyncio.create_task(client.call("await_consistency", memory_id="slow"))
            await asyncio.sleep(0)
            assert await client.call("get_context", vault_id="v", memory_id="fast") == (
                "context not found"
            )
            assert not waiting.done()  # the read came back while the wait was still open
            assert await waiting == "consistent"

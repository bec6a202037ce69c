"""Stage 06 reliability with real processes: capture killed, server killed, lost replies."""

import asyncio
import os
import stat
import subprocess
import sys
import time

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentstate.memory.capture.baselines.auditor import audit, read_memory
from agentstate.memory.capture.conversations import load
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import CapturePolicy, policy_model
from agentstate.memory.client import MemoryClient, MemoryServerUnavailable
from agentstate.memory.service.targets import is_postgres
from tests import memory_backends
from tests.memory_backends import memory_server

pytestmark = pytest.mark.anyio


postgres = memory_backends.postgres  # the server tests run on SQLite and on a real Postgres
memory_db = memory_backends.memory_db


@pytest.fixture
def anyio_backend():
    return "asyncio"


def worker(server, checkpoints, conversation, pace=0.0):
    return [
        sys.executable,
        "-m",
        "agentstate.memory.capture.worker",
        "--url",
        server.url,
        "--checkpoints",
        str(checkpoints),
        "--conversation",
        conversation,
        "--run",
        "crash",
        "--pace",
        str(pace),
    ]


async def settled_audit(server, conversation, memories):
    async with MemoryClient(server.url) as client:
        for memory_id in memories.values():
            await client.call("await_consistency", memory_id=memory_id)
    return audit(server.db, conversation, memories)


async def test_capture_process_killed_mid_conversation_then_resumed(memory_db, tmp_path):
    conversation = load("two_threads")
    memories = {t: f"crash.{t}" for t in conversation.threads}
    with memory_server(memory_db, tmp_path) as server:
        cmd = worker(server, tmp_path / "checkpoints.sqlite", "two_threads", pace=0.03)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            sent = [proc.stdout.readline() for _ in range(9)]
            time.sleep(0.01)
        finally:
            proc.kill()  # SIGKILL: no cleanup, maybe mid-turn
            proc.wait()
        assert sum(line.startswith("sent") for line in sent) == 7
        async with MemoryClient(server.url) as client:  # the writer applies what was sent
            await client.call("await_consistency", memory_id=memories["alice"])
        partial = read_memory(server.db, memories["alice"])["entries"]
        assert 0 < len(partial) < len(conversation.messages("alice"))
        done = subprocess.run(cmd[:-2], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().endswith("done")
        assert "events handled" in done.stdout
        assert await settled_audit(server, conversation, memories) == []
    for private in (tmp_path / "checkpoints.sqlite", memory_db):
        if is_postgres(private):
            continue
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o600, private


async def test_lost_reply_is_resent_and_stored_once(memory_db, tmp_path):
    """Deterministic version of the crash window: add_entry ran, its checkpoint did not.

    The resumed turn sends the write again with its idempotency key; the server has it.
    """
    conversation = load("solo_travel")
    events = list(conversation.events)
    with memory_server(memory_db, tmp_path) as server:
        async with (
            MemoryClient(server.url) as client,
            AsyncSqliteSaver.from_conn_string(str(tmp_path / "ck.sqlite")) as saver,
        ):
            tools = await client.tools()
            run = CaptureRun(
                client, policy_model(CapturePolicy(), "p"), tools, run="lost", checkpointer=saver
            )
            await run.replay(conversation, events[:3])
            # the next message: stop right before its tool runs, then run the tool ourselves
            message = events[3].to_message()
            await run.graph.ainvoke(
                {"messages": [message], "turn": message},
                run.config("trip"),
                interrupt_before=["tools"],
            )
            snapshot = await run.graph.aget_state(run.config("trip"))
            pending = snapshot.values["messages"][-1].tool_calls[0]
            assert snapshot.next == ("tools",) and pending["name"] == "add_entry"
            await client.call("add_entry", **pending["args"])  # it reached the server...
            note = await run.resume("trip")  # ...but the process died before the checkpoint
            assert note == "resumed at tools: add_entry was already in the store, not stored again"
            await client.call("await_consistency", memory_id=run.memory_id("trip"))  # queue applied
            stored = read_memory(server.db, run.memory_id("trip"))["entries"]
            assert [e["tags"]["msg_idx"] for e in stored] == [1, 2, 3]
            await run.replay(conversation, events[4:])
        assert await settled_audit(server, conversation, run.memories(conversation)) == []


async def test_server_killed_mid_run_queued_writes_land_and_retries_do_not_duplicate(
    memory_db, tmp_path
):
    conversation = load("solo_travel")
    events = list(conversation.events)
    server = memory_server(memory_db, tmp_path, write_delay=600).start()  # held till the kill
    try:
        async with MemoryClient(server.url, retry_for=30) as client:
            run = CaptureRun(
                client,
                policy_model(CapturePolicy(), "p"),
                await client.tools(),
                run="restart",
                checkpointer=InMemorySaver(),
            )
            await run.replay(conversation, events[:6])
            queued = run.memory_id("trip")
            server.kill()  # writes are still queued (slow writer): they must survive
            assert read_memory(server.db, queued)["pending"] > 0
            server.write_delay = 0.0

            async def restart_later():
                await asyncio.sleep(1.0)
                server.start()

            restarting = asyncio.create_task(restart_later())
            await run.replay(conversation, events[6:])  # the first call waits, then retries
            await restarting
            assert client.stats["retries"] >= 1
            assert await client.call("await_consistency", memory_id=queued) == "consistent"
        assert await settled_audit(server, conversation, run.memories(conversation)) == []
    finally:
        server.stop()


async def test_a_write_sent_again_with_its_key_is_stored_once(memory_db, tmp_path):
    """The server's own check: a key it already has is answered, not stored again."""
    with memory_server(memory_db, tmp_path) as server:
        async with MemoryClient(server.url) as client:
            await client.call("create_memory", vault_id="v", memory_id="m")
            args = {
                "vault_id": "v",
                "memory_id": "m",
                "raw_entry": "once",
                "summary": "s",
                "tags": {"role": "user", "msg_idx": 1},
                "idempotency_key": "t:msg:1",
            }
            assert await client.call("add_entry", **args) == "enqueued"
            assert await client.call("add_entry", **args) == "already enqueued"
            # the same key in another memory is another write
            await client.call("create_memory", vault_id="v", memory_id="m2")
            assert await client.call("add_entry", **{**args, "memory_id": "m2"}) == "enqueued"
            ctx = {"vault_id": "v", "memory_id": "m", "content": "ctx 1", "idempotency_key": "c1"}
            assert await client.call("put_context", **ctx) == "enqueued"
            assert await client.call("put_context", **ctx) == "already enqueued"
            # a duplicate is not a pending write: await_consistency does not wait for it
            assert await client.call("await_consistency", memory_id="m") == "consistent"
        memory = read_memory(server.db, "m")
        assert [e["raw_entry"] for e in memory["entries"]] == ["once"]
        assert memory["contexts"] == ["ctx 1"]
        assert [op["tool"] for op in memory["ops"]] == [
            "add_entry",
            "put_context",
            "await_consistency",
        ]  # a duplicate is not logged as a write either (the auditor counts writes)


async def test_missing_server_says_how_to_start_it(tmp_path):
    from agentstate.memory.service.process import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    async with MemoryClient(url, retry_for=0) as client:
        with pytest.raises(MemoryServerUnavailable, match="agentstate memory serve --db"):
            await client.tools()
        with pytest.raises(MemoryServerUnavailable, match="--transport http --port"):
            await client.call("get_context", vault_id="v", memory_id="m")

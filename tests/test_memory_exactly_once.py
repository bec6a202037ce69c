"""Stage 06's invariant after a failure (issue 16): exactly one entry per message, acknowledged.

Every test runs a REAL memory server process and stops, kills (SIGKILL) or
pauses (SIGSTOP) it: a message is marked stored only when the server
acknowledged its write, a write sent again carries its idempotency key (one
entry, never two, never none), an idle client survives a restart, a closed
transport is retried, and a refused write is reported as refused.
"""

import asyncio
import os
import signal
import time

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.served import MEMORY_URL_VAR, build_served_capture
from agentstate.memory.capture.baselines.auditor import audit, read_memory
from agentstate.memory.capture.conversations import load
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import CapturePolicy, policy_model
from agentstate.memory.client import MemoryClient, MemoryServerUnavailable
from tests import memory_backends
from tests.memory_backends import memory_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


postgres = memory_backends.postgres  # every test runs on SQLite and on a real Postgres
memory_db = memory_backends.memory_db


@pytest.fixture
def server(memory_db, tmp_path):
    proc = memory_server(memory_db, tmp_path).start()
    yield proc
    proc.stop()


async def settled_audit(server, conversation, memories):
    async with MemoryClient(server.url) as client:
        for memory_id in memories.values():
            await client.call("await_consistency", memory_id=memory_id)
    return audit(server.db, conversation, memories)


def unread_bytes(port: int) -> int:
    """Bytes the kernel holds for the server on ``port`` that it has not read (Linux's
    /proc/net/tcp rx_queue): a request sent to a paused (SIGSTOP) server shows here."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                local, state, queues = fields[1], fields[3], fields[4]
                if int(local.rsplit(":", 1)[1], 16) == port and state == "01":  # ESTABLISHED
                    total += int(queues.split(":")[1], 16)
    return total


def capture_run(client, tools, run="once"):
    model = policy_model(CapturePolicy(), "p")
    return CaptureRun(client, model, tools, run=run, checkpointer=InMemorySaver())


# --- a failed or cancelled run leaves the message to be sent again ----------------------


async def test_a_run_failed_with_the_server_down_stores_the_resent_message_once(server):
    conversation = load("solo_travel")
    events = list(conversation.events)
    async with MemoryClient(server.url, retry_for=0.5, timeout=10) as client:
        run = capture_run(client, await client.tools())
        await run.replay(conversation, events[:4])  # SESSION_START + messages 1..3
        failing = events[4]
        assert failing.kind == "message"
        server.stop()
        with pytest.raises(MemoryServerUnavailable):
            await run.send(failing)  # the run fails, as it should
        assert failing.msg_idx not in (await run.state("trip")).get("persisted", [])
        server.start()
        await run.send(failing)  # the same event again: planned and stored
        state = await run.state("trip")
        assert failing.msg_idx in state["persisted"]
        assert not any("already persisted" in c for c in state["corrections"])
        await run.replay(conversation, events[5:])
    assert await settled_audit(server, conversation, run.memories(conversation)) == []


async def test_a_run_cancelled_mid_call_stores_the_resent_message_once(server):
    """SIGSTOP holds the add_entry in flight; the run is cancelled; SIGKILL drops it."""
    conversation = load("solo_travel")
    events = list(conversation.events)
    async with MemoryClient(server.url, retry_for=20, timeout=10) as client:
        run = capture_run(client, await client.tools())
        await run.replay(conversation, events[:4])
        target = events[4]
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            sending = asyncio.create_task(run.send(target))
            for _ in range(1000):  # until the add_entry is checkpointed and being sent
                snapshot = await run.graph.aget_state(run.config("trip"))
                if snapshot.next == ("tools",):
                    break
                await asyncio.sleep(0.02)
            assert snapshot.next == ("tools",)
            deadline = time.monotonic() + 60
            while not unread_bytes(server.port):  # the add_entry sits in the paused server's socket
                assert time.monotonic() < deadline, "the add_entry never reached the server"
                await asyncio.sleep(0.02)
            sending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sending
        finally:
            server.kill()  # the paused server dies with the request unread
        server.start()
        await run.send(target)
        await run.replay(conversation, events[5:])
    assert await settled_audit(server, conversation, run.memories(conversation)) == []


async def test_a_write_that_reached_the_server_before_the_failure_is_not_doubled(server):
    """The other side of the window: the write landed, the run died before recording it."""
    conversation = load("solo_travel")
    events = list(conversation.events)
    async with MemoryClient(server.url) as client:
        run = capture_run(client, await client.tools())
        await run.replay(conversation, events[:4])
        message = events[4].to_message()
        config = run.config("trip")
        await run.graph.ainvoke({"messages": [message], "turn": message}, config,
                                interrupt_before=["tools"])  # fmt: skip
        pending = (await run.graph.aget_state(config)).values["messages"][-1].tool_calls[0]
        assert pending["args"]["idempotency_key"] == f"{run.memory_id('trip')}:msg:4"
        assert await client.call("add_entry", **pending["args"]) == "enqueued"  # it landed
        result = await run.send(events[4])  # a new run with the same event, not a resume
        assert result["messages"][-1].text == "already enqueued"
        assert 4 in result["persisted"]
        await run.replay(conversation, events[5:])
    assert await settled_audit(server, conversation, run.memories(conversation)) == []


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_served_graph_through_a_failed_run_and_a_restart(server, mode):
    """A failed run's message is stored when resent; the next run after a restart of an
    idle server returns (one event loop for every ainvoke, as in ``langgraph dev``)."""
    graph = build_served_capture(environ={MEMORY_URL_VAR: server.url}, checkpointer=InMemorySaver())
    thread = f"failed-{mode}"
    config = {"configurable": {"thread_id": thread}}
    chat = [
        {"role": "user", "content": "Book a table for two.", "msg_idx": 1},
        {"role": "assistant", "content": "Done.", "msg_idx": 2},
        {"role": "user", "content": "Thanks!", "msg_idx": 3},
    ]

    async def send(event):
        if mode == "invoke":
            return await asyncio.to_thread(graph.invoke, event, config)
        return await asyncio.wait_for(graph.ainvoke(event, config), timeout=30)

    async def scenario():
        assert (await send(chat[0]))["tool_calls"] == ["add_entry"]
        server.stop()
        with pytest.raises(MemoryServerUnavailable):
            await send(chat[1])
        server.start()
        again = await send(chat[1])
        assert again["tool_calls"] == ["add_entry"] and again["refused"] == []
        assert not any("already persisted" in c for c in again["corrections"])
        server.stop()  # an idle client across a restart: the next run returns
        server.start()
        started = time.monotonic()
        assert (await send(chat[2]))["tool_calls"] == ["add_entry"]
        assert time.monotonic() - started < 20
        assert (await send(chat[1]))["tool_calls"] == []  # acknowledged: a resend is skipped
        await _settle(server.url, thread)

    asyncio.run(scenario())
    stored = read_memory(server.db, thread)["entries"]
    assert [e["raw_entry"] for e in stored] == [m["content"] for m in chat]


async def _settle(url, memory_id):
    async with MemoryClient(url) as client:
        await client.call("await_consistency", memory_id=memory_id)


# --- a refused write is reported as refused ---------------------------------------------


async def test_a_write_the_server_refuses_is_reported_and_not_marked_stored(server):
    conversation = load("solo_travel")
    message = next(e for e in conversation.events if e.kind == "message")
    async with MemoryClient(server.url) as client:
        run = capture_run(client, await client.tools())
        config = run.config("trip")  # its memory is not created yet: the server refuses
        turn = message.to_message()
        result = await run.graph.ainvoke({"messages": [turn], "turn": turn}, config)
        assert result["refused"] == [
            "msg 1: add_entry refused by the server: Error executing tool add_entry: "
            f"unknown memory '{run.memory_id('trip')}'; create it with create_memory"
        ]
        assert result.get("persisted", []) == []
        await run.send(message)  # the memory is created first: now it is stored
        assert (await run.state("trip"))["persisted"] == [1]
        # add_entry queues the entry; it is in the table once the queue is applied
        await client.call("await_consistency", memory_id=run.memory_id("trip"))
    entries = read_memory(server.db, run.memory_id("trip"))["entries"]
    assert [e["raw_entry"] for e in entries] == [message.content]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize(
    ("case", "content", "error"),
    [
        ("nul", "a\x00b", "must not contain a NUL character"),
        ("long", "x" * 100_001, "raw_entry is 100001 characters; the limit is 100000"),
        ("surrogate", "a\ud800b", "lone surrogate '\\\\ud800' at character 1"),
    ],
)
def test_the_served_graph_refuses_text_the_server_cannot_store(server, mode, case, content, error):
    graph = build_served_capture(environ={MEMORY_URL_VAR: server.url}, checkpointer=InMemorySaver())
    thread = f"refused-{mode}-{case}"
    config = {"configurable": {"thread_id": thread}}
    event = {"role": "user", "content": content}
    with pytest.raises(ValueError, match=error):
        graph.invoke(event, config) if mode == "invoke" else asyncio.run(
            graph.ainvoke(event, config)
        )  # fmt: skip
    ok = {"role": "user", "content": "fine"}
    result = graph.invoke(ok, config) if mode == "invoke" else asyncio.run(
        graph.ainvoke(ok, config)
    )  # fmt: skip
    assert result["tool_calls"] == ["add_entry"] and result["event"] == "msg 1"
    asyncio.run(_settle(server.url, thread))
    assert [e["raw_entry"] for e in read_memory(server.db, thread)["entries"]] == ["fine"]


# --- the client: retries lose nothing and double nothing --------------------------------


async def test_a_repeated_message_written_while_the_server_restarts_is_not_lost(server):
    """A second "ok" retried after a restart is a new write, not the first one found again."""
    async with MemoryClient(server.url, retry_for=30) as client:
        await client.call("create_memory", vault_id="v", memory_id="m")
        args = {"vault_id": "v", "memory_id": "m", "raw_entry": "ok", "summary": "user: ok"}
        await client.call("add_entry", **args, tags={"role": "user"})
        server.kill()

        async def restart_later():
            await asyncio.sleep(1.0)
            server.start()

        restarting = asyncio.create_task(restart_later())
        assert await client.call("add_entry", **args, tags={"role": "user"}) == "enqueued"
        await restarting
        assert client.stats["retries"] >= 1
        await client.call("await_consistency", memory_id="m")
    assert [e["raw_entry"] for e in read_memory(server.db, "m")["entries"]] == ["ok", "ok"]


async def test_an_idle_client_survives_a_server_restart_within_its_timeout(server):
    async with MemoryClient(server.url, retry_for=10, timeout=5) as client:
        await client.call("create_memory", vault_id="v", memory_id="m")
        for restart in range(3):
            server.stop()
            server.start()
            started = time.monotonic()
            # the first calls after the restart: a read, then a write retried on a new session
            got = await asyncio.wait_for(client.call("get_context", vault_id="v", memory_id="m"),
                                         timeout=20)  # fmt: skip
            assert got == "context not found"
            text = f"after restart {restart}"
            written = await asyncio.wait_for(
                client.call("add_entry", vault_id="v", memory_id="m", raw_entry=text, summary="s"),
                timeout=20,
            )
            assert written == "enqueued"
            assert time.monotonic() - started < 15
        await client.call("await_consistency", memory_id="m")
    stored = [e["raw_entry"] for e in read_memory(server.db, "m")["entries"]]
    assert stored == [f"after restart {n}" for n in range(3)]


async def test_writes_in_flight_when_the_server_is_killed_are_retried_exactly_once(server):
    """SIGKILL under 100 concurrent writes (some repeated word for word): every call returns,
    nothing escapes as a bare transport error, every write is stored once.

    20 writes are answered first; then the server is paused (SIGSTOP) before the other
    80 start, so none of them can be answered before the kill: each is in flight or not
    yet sent when the server dies, whatever the load. (A watcher that killed the server
    once 20 writes had returned lost the race under load: all 100 had returned before
    it ran, nothing was retried, and ``retries >= 1`` failed.)
    """
    texts = [f"message {n}" if n % 3 else "ok" for n in range(100)]
    async with MemoryClient(server.url, retry_for=30, timeout=5) as client:
        await client.call("create_memory", vault_id="v", memory_id="m")

        async def write(text):
            return await client.call(
                "add_entry", vault_id="v", memory_id="m", raw_entry=text, summary="s",
                tags={"role": "user"},
            )  # fmt: skip

        answered = await asyncio.gather(*(write(t) for t in texts[:20]))
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            pending = [asyncio.create_task(write(t)) for t in texts[20:]]
            await asyncio.sleep(0)  # the 80 calls start: they write to a paused server
        finally:
            server.kill()  # the paused server dies with the requests unread
        server.start()
        results = [*answered, *await asyncio.gather(*pending, return_exceptions=True)]
        errors = [r for r in results if isinstance(r, BaseException)]
        assert errors == []
        assert set(results) <= {"enqueued", "already enqueued"}
        assert client.stats["retries"] >= 1  # no call of the 80 was answered before the kill
        await client.call("await_consistency", memory_id="m")
    stored = sorted(e["raw_entry"] for e in read_memory(server.db, "m")["entries"])
    assert stored == sorted(texts)


def test_a_sync_invoke_of_the_served_graph_closes_its_memory_client(server, monkeypatch):
    """Each sync ``invoke`` runs on its own event loop: the client it opened is closed with it."""
    closed = []
    close = MemoryClient.close

    async def counting_close(self):
        closed.append(self)
        await close(self)

    monkeypatch.setattr(MemoryClient, "close", counting_close)
    graph = build_served_capture(environ={MEMORY_URL_VAR: server.url}, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "sync-close"}}
    graph.invoke({"role": "user", "content": "Hello.", "msg_idx": 1}, config)
    graph.invoke({"role": "assistant", "content": "Hi.", "msg_idx": 2}, config)
    assert len(closed) == 2 and closed[0] is not closed[1]

"""Issue 25: one entry per message when capture runs overlap on one thread.

The served ``memory_capture`` graph numbers a message without ``msg_idx``.
A count read from the thread's state (``last_msg_idx + 1``) is read by two
runs at once: both became message 1 with one idempotency key, the second
write was dropped as a duplicate and both runs said ``add_entry``. Now the
memory server assigns the position (``assign_position``, once per message,
atomically). Every test here runs a REAL memory server process; the runs
overlap for real (two ``ainvoke`` on one loop, two ``invoke`` in two threads,
two worker processes with their own checkpointers).
"""

import asyncio
import json
import subprocess
import sys
import threading

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.served import MEMORY_URL_VAR, build_served_capture
from agentstate.memory.capture.baselines.auditor import read_memory
from agentstate.memory.client import MemoryClient
from tests import memory_backends
from tests.memory_backends import memory_server

ALREADY = "add_entry: the server already had this write (same key), nothing stored again"


postgres = memory_backends.postgres  # every test runs on SQLite and on a real Postgres
memory_db = memory_backends.memory_db


@pytest.fixture
def server(memory_db, tmp_path):
    proc = memory_server(memory_db, tmp_path).start()
    yield proc
    proc.stop()


def settle(url: str, memory_id: str) -> None:
    async def consistent():
        async with MemoryClient(url) as client:
            return await client.call("await_consistency", memory_id=memory_id)

    assert asyncio.run(consistent()) == "consistent"


def stored(server, memory_id: str) -> list[tuple[int, str]]:
    """(msg_idx, text) of every entry of ``memory_id``, in stored order."""
    settle(server.url, memory_id)
    return [
        (e["tags"]["msg_idx"], e["raw_entry"]) for e in read_memory(server.db, memory_id)["entries"]
    ]


def served(server, checkpointer=None):
    return build_served_capture(
        environ={MEMORY_URL_VAR: server.url}, checkpointer=checkpointer or InMemorySaver()
    )


# --- two runs at once in one process ------------------------------------------------------


def test_two_ainvokes_at_once_on_one_thread_store_both_messages(server):
    graph = served(server)
    config = {"configurable": {"thread_id": "both-async"}}
    texts = ["I land at 9.", "Book the airport taxi."]

    async def both():
        return await asyncio.gather(
            *(graph.ainvoke({"role": "user", "content": t}, config) for t in texts)
        )

    results = asyncio.run(both())
    entries = stored(server, "both-async")  # the invariant first: both messages, once each
    assert sorted(t for _, t in entries) == sorted(texts)
    assert sorted(i for i, _ in entries) == [1, 2]
    by_text = {t: i for i, t in entries}
    assert {r["event"] for r in results} == {f"msg {by_text[t]}" for t in texts}
    for result in results:
        assert result["tool_calls"] == ["add_entry"] and result["refused"] == []
        assert result["already_stored"] == []
    # the next message, sent alone, comes after both
    after = asyncio.run(graph.ainvoke({"role": "assistant", "content": "Done."}, config))
    assert after["event"] == "msg 3" and after["tool_calls"] == ["add_entry"]
    assert stored(server, "both-async")[-1] == (3, "Done.")


def test_two_invokes_at_once_in_two_threads_on_one_thread_store_both_messages(server):
    graph = served(server)
    config = {"configurable": {"thread_id": "both-sync"}}
    texts = ["Window seat, please.", "And a vegetarian meal."]
    start = threading.Barrier(2)
    results: dict[str, dict] = {}

    def send(text):
        start.wait()
        results[text] = graph.invoke({"role": "user", "content": text}, config)

    threads = [threading.Thread(target=send, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r["tool_calls"] == ["add_entry"] for r in results.values()), results
    assert sorted(r["event"] for r in results.values()) == ["msg 1", "msg 2"]
    entries = stored(server, "both-sync")
    assert sorted(t for _, t in entries) == sorted(texts)
    assert sorted(i for i, _ in entries) == [1, 2]
    by_text = {t: i for i, t in entries}
    assert {results[t]["event"] for t in texts} == {f"msg {by_text[t]}" for t in texts}


def test_a_message_resent_with_its_id_keeps_its_position_and_is_stored_once(server):
    graph = served(server)
    config = {"configurable": {"thread_id": "resent"}}
    first = {"role": "user", "content": "ok", "id": "chat-msg-17"}

    async def scenario():
        one, two = await asyncio.gather(
            graph.ainvoke(first, config),
            graph.ainvoke({"role": "user", "content": "ok", "id": "chat-msg-18"}, config),
        )
        again = await graph.ainvoke(first, config)  # the observer sends msg 17 again
        return one, two, again

    one, two, again = asyncio.run(scenario())
    assert again["event"] == one["event"] != two["event"]  # the same position as the first time
    assert again["tool_calls"] == [] and again["refused"] == []
    # two runs at once fork the thread's checkpoint (the last to finish wins): the state may
    # not list the message, then the server knows its key; either way the report says so
    skipped = f"{one['event']}: already persisted, add_entry skipped"
    assert skipped in again["corrections"] or again["already_stored"] == [ALREADY], again
    # a repeated text without an id is a new message: "ok" twice is two entries
    assert [t for _, t in stored(server, "resent")] == ["ok", "ok"]


def test_every_message_of_many_runs_at_once_is_stored_once_with_its_own_position(server):
    graph = served(server)
    config = {"configurable": {"thread_id": "many"}}
    texts = [f"message {n}" for n in range(12)]

    async def all_at_once():
        return await asyncio.gather(
            *(graph.ainvoke({"role": "user", "content": t, "id": f"id-{t}"}, config) for t in texts)
        )

    results = asyncio.run(all_at_once())
    entries = stored(server, "many")
    assert sorted(t for _, t in entries) == sorted(texts)
    assert sorted(i for i, _ in entries) == list(range(1, 13))
    assert all(r["tool_calls"][0] == "add_entry" and r["already_stored"] == [] for r in results)


# --- two worker processes, each with its own checkpointer --------------------------------

WORKER = """
import asyncio, json, sys, time
from pathlib import Path
from agentstate.memory.capture.checkpoints import async_capture_checkpointer
from agentstate.lessons.served import MEMORY_URL_VAR, build_served_capture
from tests import memory_backends
from tests.memory_backends import memory_server

url, checkpoints, thread, go, events = sys.argv[1:6]

async def main():
    async with async_capture_checkpointer(checkpoints) as saver:
        graph = build_served_capture(environ={MEMORY_URL_VAR: url}, checkpointer=saver)
        print("ready", flush=True)
        while not Path(go).exists():
            await asyncio.sleep(0.002)
        config = {"configurable": {"thread_id": thread}}
        out = [await graph.ainvoke(e, config) for e in json.loads(events)]
    print(json.dumps(out), flush=True)

asyncio.run(main())
"""


def run_workers(server, tmp_path, thread: str, batches: list[list[dict]]) -> list[list[dict]]:
    """One process per batch, each with its own SQLite checkpointer, all released at once."""
    go = tmp_path / f"go-{thread}"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                server.url,
                str(tmp_path / f"ck-{thread}-{n}.sqlite"),
                thread,
                str(go),
                json.dumps(batch),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n, batch in enumerate(batches)
    ]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        go.touch()
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert all(proc.returncode == 0 for proc in procs), outputs
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


# two worker processes each (a LangGraph import apiece: the slowest tests here); on Postgres the
# same store semantics are covered by tests/test_memory_fleet.py's 3 replicas and 6 writers
@pytest.mark.parametrize("memory_db", ["sqlite"], indirect=True)
def test_two_worker_processes_with_their_own_checkpointers_store_both_messages(server, tmp_path):
    first = {"role": "user", "content": "Find me a hotel in Porto.", "id": "p-1"}
    second = {"role": "assistant", "content": "Three options near the river.", "id": "p-2"}
    (one,), (two,) = run_workers(server, tmp_path, "two-workers", [[first], [second]])
    entries = stored(server, "two-workers")  # the invariant first: both messages, once each
    assert sorted(t for _, t in entries) == sorted([first["content"], second["content"]])
    assert sorted(i for i, _ in entries) == [1, 2]
    assert {one["event"], two["event"]} == {"msg 1", "msg 2"}
    assert one["tool_calls"] == ["add_entry"] == two["tool_calls"], (one, two)
    assert one["already_stored"] == [] == two["already_stored"]


@pytest.mark.parametrize("memory_db", ["sqlite"], indirect=True)  # as above
def test_a_message_two_workers_both_send_is_stored_once_and_the_second_says_so(server, tmp_path):
    """The same message (its id) reaches two workers: one entry; the run that stored nothing
    reports it in ``already_stored``, not in ``tool_calls``."""
    event = {"role": "user", "content": "Cancel my 3 pm meeting.", "id": "slack-1712"}
    (one,), (two,) = run_workers(server, tmp_path, "same-message", [[event], [event]])
    assert one["event"] == two["event"] == "msg 1"
    reports = sorted([one, two], key=lambda r: r["tool_calls"])
    assert reports[0]["tool_calls"] == [] and reports[0]["already_stored"] == [ALREADY]
    assert reports[1]["tool_calls"] == ["add_entry"] and reports[1]["already_stored"] == []
    assert stored(server, "same-message") == [(1, event["content"])]


def test_a_control_event_resent_with_its_id_is_handled_once(server):
    """With its ``id`` a control is known again: one bootstrap, one flush, and the resent
    flush's write is reported as already stored."""
    graph = served(server)
    config = {"configurable": {"thread_id": "controls"}}

    async def scenario():
        start = {"control": "SESSION_START", "id": "s-1"}
        flush = {"control": "FLUSH_CONTEXT", "id": "f-1"}
        return [
            await graph.ainvoke(event, config)
            for event in (start, {"role": "user", "content": "Hi."}, flush, start, flush)
        ]

    boot, message, flush, boot_again, flush_again = asyncio.run(scenario())
    assert boot["tool_calls"] == ["get_context", "list_entries"]
    assert boot_again["tool_calls"] == [] and boot_again["already_stored"] == []
    assert (
        "SESSION_START: this session is already bootstrapped, skipped"
        in (boot_again["corrections"])
    )
    assert flush["tool_calls"] == ["await_consistency", "put_context"]
    assert flush_again["tool_calls"] == ["await_consistency"]
    assert flush_again["already_stored"] == [
        "put_context: the server already had this write (same key), nothing stored again"
    ]
    settle(server.url, "controls")
    memory = read_memory(server.db, "controls")
    assert len(memory["contexts"]) == 1 and [t for _, t in stored(server, "controls")] == ["Hi."]
    assert [op["tool"] for op in memory["ops"]].count("get_context") == 1

"""Issue 35: the memory service as a fleet, several replicas over one real Postgres database.

Every test runs real server processes (``agentstate.memory.service.server`` with
``--db postgresql://...``) over a throwaway Postgres (Debian's ``postgres``,
started by :mod:`agentstate.servers.postgres`), and reads what was stored from
the database itself (the auditor's :func:`read_memory`), never from a replica.
What is checked: each message stored exactly once whichever replica took it,
a resend to another replica answered "already enqueued", a reader paging
throughout that never misses an entry (also when seq 11 tries to commit before
seq 10), a replica killed with ``kill -9`` mid-write, and Postgres restarted
under load (one-line errors or retries, never a false acknowledgement).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory.capture.baselines.auditor import audit, read_memory
from agentstate.memory.capture.conversations import load
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import CapturePolicy, policy_model
from agentstate.memory.client import MemoryClient, MemoryToolError
from agentstate.memory.fleet import Fleet, write_in_flight
from agentstate.memory.service.process import free_port
from agentstate.memory.service.store_postgres import PostgresMemoryStore
from agentstate.memory.service.stores import read_memory_rows
from agentstate.memory.service.targets import split_password
from tests import memory_backends

pytestmark = [pytest.mark.anyio, pytest.mark.extras("memory", "persistence")]
postgres = memory_backends.postgres
V = "fleet"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def url(postgres):
    return memory_backends.fresh_database(postgres)


def entry_args(memory_id, position, text):
    return {
        "vault_id": V,
        "memory_id": memory_id,
        "raw_entry": text,
        "summary": "s",
        "tags": {"role": "user", "msg_idx": position},
        "idempotency_key": f"{memory_id}:msg:{position}",
    }


# --- several replicas, one truth; paging that never skips -------------------------------


async def test_three_replicas_six_workers_600_messages_each_stored_once_paged_in_order(
    url, tmp_path
):
    """6 workers write 600 messages to 2 memories through 3 replicas; each memory is written
    through all 3 at once. Every 10th message is resent through another replica. A reader
    pages both memories by ``after=seq`` the whole time: it must see every entry once, in
    order, with no gap (a memory's seqs are 1, 2, 3, ...: a gap would be a skipped entry)."""
    memories = ["conv-a", "conv-b"]
    per_worker = 100
    with Fleet(url, tmp_path, 3) as fleet:
        async with MemoryClient(fleet.urls[0]) as setup:
            for memory_id in memories:
                await setup.call("create_memory", vault_id=V, memory_id=memory_id)
        writing = True
        answers: list[str] = []
        read: dict[str, list[dict]] = {m: [] for m in memories}
        gaps: list[str] = []

        async def worker(n):
            memory_id = memories[n % 2]
            async with (
                MemoryClient(fleet.urls[n % 3]) as client,
                MemoryClient(fleet.urls[(n + 1) % 3]) as other,
            ):
                for k in range(per_worker):
                    key = f"w{n}-{k}"
                    position = int(
                        await client.call(
                            "assign_position", vault_id=V, memory_id=memory_id, message_key=key
                        )
                    )
                    args = entry_args(memory_id, position, f"{key} says hello")
                    answers.append(await client.call("add_entry", **args))
                    if k % 10 == 0:  # the same write through another replica: stored once
                        answers.append(await other.call("add_entry", **args))

        async def reader():
            cursors = dict.fromkeys(memories, 0)
            async with MemoryClient(fleet.urls[2]) as client:
                while True:
                    last_round = not writing
                    for memory_id in memories:
                        while True:
                            page = await client.call(
                                "list_entries", vault_id=V, memory_id=memory_id, limit=50,
                                after=cursors[memory_id],
                            )  # fmt: skip
                            seqs = [e["seq"] for e in page["entries"]]
                            start = cursors[memory_id] + 1
                            if seqs != list(range(start, start + len(seqs))):
                                gaps.append(f"{memory_id}: after {start - 1} got {seqs[:5]}")
                            read[memory_id] += page["entries"]
                            if seqs:
                                cursors[memory_id] = seqs[-1]
                            if page["next"] is None:
                                break
                    if last_round:
                        return
                    await asyncio.sleep(0.05)

        paging = asyncio.create_task(reader())
        started = time.monotonic()
        await asyncio.gather(*(worker(n) for n in range(6)))
        async with MemoryClient(fleet.urls[1]) as client:  # consistent through another replica
            for memory_id in memories:
                assert await client.call("await_consistency", memory_id=memory_id) == "consistent"
        writing = False
        await paging
        took = time.monotonic() - started
    assert gaps == []
    assert answers.count("enqueued") == 600 and answers.count("already enqueued") == 60, took
    for memory_id in memories:
        stored = read_memory_rows(url, memory_id)
        assert stored["pending"] == 0
        entries = stored["entries"]
        assert [e["seq"] for e in entries] == list(range(1, 301))
        positions = sorted(json.loads(e["tags"])["msg_idx"] for e in entries)
        assert positions == list(range(1, 301))  # every position once: none shared, none lost
        assert [e["seq"] for e in read[memory_id]] == list(range(1, 301))  # paged completely
        assert [e["raw_entry"] for e in read[memory_id]] == [e["raw_entry"] for e in entries]
    texts = sorted(e["raw_entry"] for m in memories for e in read_memory_rows(url, m)["entries"])
    assert texts == sorted(f"w{n}-{k} says hello" for n in range(6) for k in range(per_worker))


def test_seq_11_cannot_commit_before_seq_10_so_a_reader_never_skips(url):
    """Deliberately interleaved commits. First the hazard, on this database: the queue's
    BIGSERIAL numbers 10 and 11 in one order and commits them in the other, and a reader
    that pages by it after seeing 11 never sees 10. Then the entries: the writer holding
    seq 10 uncommitted, a second writer cannot apply 11 (it skips the claimed memory, or
    waits on its row lock), so the reader, paging throughout, gets 10 then 11."""
    store = PostgresMemoryStore(url)
    try:
        store.create_memory(V, "m")
        for n in range(1, 10):
            store.enqueue("m", "entry", _payload(n), {}, key=f"k{n}")
        store.drain()
        assert [e["seq"] for e in store.list_entries("m", 50, after=0)[0]] == list(range(1, 10))

        # the hazard: a sequence number is taken at INSERT, visible at COMMIT
        with psycopg.connect(url) as first, psycopg.connect(url) as second:
            ten = first.execute(
                "INSERT INTO ops (memory_id, tool, detail, at) VALUES ('h', 't', '{}', 'x') "
                "RETURNING seq"
            ).fetchone()[0]
            eleven = second.execute(
                "INSERT INTO ops (memory_id, tool, detail, at) VALUES ('h', 't', '{}', 'x') "
                "RETURNING seq"
            ).fetchone()[0]
            second.commit()  # 11 visible first
            seen = _seqs_after(url, 0)
            first.commit()
            after_cursor = _seqs_after(url, max(seen))  # the reader goes on from 11
        assert eleven == ten + 1 and seen == [eleven] and after_cursor == []  # 10 was skipped

        # the entries: seq 10 is applied and held uncommitted by one writer
        store.enqueue("m", "entry", _payload(10), {}, key="k10")
        store.enqueue("m", "entry", _payload(11), {}, key="k11")
        reader: list[int] = []

        def page() -> None:
            cursor = reader[-1] if reader else 9
            reader.extend(e["seq"] for e in store.list_entries("m", 50, after=cursor)[0])

        with psycopg.connect(url, autocommit=True) as holder:
            with holder.transaction():
                assert PostgresMemoryStore.drain_on(holder, delay=0.001) == 1  # seq 10, open
                assert store.drain() == 0  # another writer skips the claimed memory
                waiting = threading.Thread(target=_apply_waiting, args=(url,))
                waiting.start()  # a writer that waits for the row lock instead
                waiting.join(1.0)
                assert waiting.is_alive()  # it cannot number, let alone commit, seq 11
                page()
                assert reader == []  # nothing visible yet, and the cursor stays at 9
            page()  # seq 10 committed
            waiting.join(30)
        page()
        assert reader == [10, 11]
        assert store.drain() == 0  # 11 was applied by the waiting writer, once
        assert [e["raw_entry"] for e in store.list_entries("m", 50, after=9)[0]] == [
            "message 10",
            "message 11",
        ]
    finally:
        store.close()


def _seqs_after(url: str, cursor: int) -> list[int]:
    """A reader paging the ops log by its BIGSERIAL seq (what the entries must not do)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT seq FROM ops WHERE memory_id = 'h' AND seq > %s ORDER BY seq", (cursor,)
        )
        return [r[0] for r in rows]


def _payload(n: int) -> dict:
    return {"entry_id": f"e{n}", "vault_id": V, "raw_entry": f"message {n}", "summary": "s",
            "tags": {"role": "user", "msg_idx": n}}  # fmt: skip


def _apply_waiting(url: str) -> None:
    """A writer that claims ``m`` without SKIP LOCKED: it waits for the row lock, then applies."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT 1 FROM heads WHERE memory_id = 'm' FOR UPDATE")
        PostgresMemoryStore.drain_on(conn)


# --- faults: a replica killed mid-write, Postgres restarted under load --------------------


async def test_a_replica_killed_mid_write_loses_and_doubles_nothing(url, tmp_path):
    """The capture graph writes a conversation through a client that knows two replicas.
    Replica A is SIGKILLed while it holds a claimed write uncommitted (seen in
    pg_stat_activity); the client sends its calls again, with the same keys, to replica B;
    B applies what A had queued. The auditor, reading the database, finds nothing wrong."""
    conversation = load("solo_travel")
    events = list(conversation.events)
    with Fleet(url, tmp_path, 2, write_delay=0.3) as fleet:
        a, b = fleet.replicas
        async with MemoryClient(fleet.urls, retry_for=30, timeout=10) as client:
            run = CaptureRun(
                client, policy_model(CapturePolicy(), "p"), await client.tools(), run="kill",
                checkpointer=InMemorySaver(),
            )  # fmt: skip
            await run.replay(conversation, events[:5])
            assert client.url == a.url
            killed = asyncio.get_running_loop().create_future()

            async def kill_mid_write():
                deadline = time.monotonic() + 60
                while not await asyncio.to_thread(write_in_flight, url, a.pid):
                    assert time.monotonic() < deadline, "replica A never held a write"
                    await asyncio.sleep(0.01)
                a.kill()  # SIGKILL: its open transaction dies with its connection
                killed.set_result(read_memory(url, run.memory_id("trip"))["pending"])

            killer = asyncio.create_task(kill_mid_write())
            await run.replay(conversation, events[5:])
            await killer
            assert killed.result() > 0  # writes were queued, one of them mid-apply, at the kill
            assert client.stats["failovers"] >= 1 and client.url == b.url
            memories = run.memories(conversation)
            for memory_id in memories.values():
                assert await client.call("await_consistency", memory_id=memory_id) == "consistent"
        assert audit(url, conversation, memories) == []
        assert "Traceback" not in b.log_path.read_text()


def test_a_capture_worker_given_two_replicas_finishes_after_one_is_killed(url, tmp_path):
    """The capture worker process, as a machine of the fleet runs it (``--url`` twice): replica A
    is SIGKILLed while it holds a write; the worker goes on through B and prints done; the
    auditor finds every message of both threads once."""
    conversation = load("two_threads")
    with Fleet(url, tmp_path, 2, write_delay=0.2) as fleet, open(tmp_path / "err", "w") as errors:
        a = fleet.replicas[0]
        worker = subprocess.Popen(
            [sys.executable, "-m", "agentstate.memory.capture.worker", "--url", fleet.urls[0],
             "--url", fleet.urls[1], "--checkpoints", str(tmp_path / "ck.sqlite"),
             "--conversation", "two_threads", "--run", "fleet", "--pace", "0.02"],
            stdout=subprocess.PIPE, stderr=errors, text=True,
        )  # fmt: skip
        try:
            first_lines = [worker.stdout.readline() for _ in range(4)]  # two threads, two sent
            assert sum(line.startswith("sent") for line in first_lines) == 2, first_lines
            deadline = time.monotonic() + 120
            while not write_in_flight(url, a.pid):  # early in the run: calls follow the kill
                assert worker.poll() is None and time.monotonic() < deadline, "A never wrote"
                time.sleep(0.01)
            a.kill()
            out = "".join(first_lines) + worker.communicate(timeout=180)[0]
        finally:
            worker.kill()
        errors.flush()
        why = out[-1500:] + (tmp_path / "err").read_text()[-1500:]
        assert worker.returncode == 0 and out.strip().endswith("done"), why
        assert "replicas: failed over 1 time(s)" in out  # it wrote through A, then through B
        memories = {t: f"fleet.{t}" for t in conversation.threads}
        asyncio.run(_settle(fleet.urls[1], memories.values()))
    assert audit(url, conversation, memories) == []


async def _settle(url, memory_ids):
    async with MemoryClient(url) as client:
        for memory_id in memory_ids:
            assert await client.call("await_consistency", memory_id=memory_id) == "consistent"


async def test_postgres_restarted_under_load_errors_in_one_line_or_retries_never_a_false_ack(
    url, tmp_path, postgres
):
    """Four writers through two replicas while Postgres restarts. Replica 1 waits up to 10 s
    for the database (its calls just take longer); replica 2 only 0.3 s (its calls fail).
    Every call ends acknowledged or with a one-line error; every acknowledged write is in
    the database once; the refused ones, sent again with their keys, land once."""
    with Fleet(url, tmp_path, 1) as patient, Fleet(url, tmp_path, 1, db_retry_for=0.3) as brief:
        urls = [patient.urls[0], brief.urls[0]]
        async with MemoryClient(urls[0]) as setup:
            await setup.call("create_memory", vault_id=V, memory_id="m")
        acked: list[str] = []
        refused: dict[str, str] = {}
        # Postgres goes down while every writer has calls to make, and comes back only
        # once the brief replica refused a call and the patient one logged its wait: no
        # bet that 30 calls' worth of time outlasts a restart (a sleep-paced version could
        # see every call answered before Postgres stopped, under load).
        at_gate, down, refused_one = [], asyncio.Event(), asyncio.Event()
        all_at_gate = asyncio.Event()

        async def writer(n):
            async with MemoryClient(urls[n % 2], retry_for=30, timeout=30) as client:
                for k in range(40):
                    if k == 10:  # 40 writes answered before the restart
                        at_gate.append(n)
                        if len(at_gate) == 4:
                            all_at_gate.set()
                        await down.wait()
                    args = entry_args("m", n * 1000 + k, f"w{n}-{k}")
                    try:
                        answer = await client.call("add_entry", **args)
                    except MemoryToolError as exc:
                        refused[args["idempotency_key"]] = str(exc)
                        if n % 2:  # through the brief replica
                            refused_one.set()
                        continue
                    assert answer == "enqueued", answer
                    acked.append(args["idempotency_key"])

        def patient_waited() -> bool:
            return "memory database unavailable, retrying" in patient_log_text()

        def patient_log_text() -> str:
            return patient.replicas[0].log_path.read_text()

        async def restart_under_load():
            await all_at_gate.wait()
            await asyncio.to_thread(postgres.stop)
            down.set()
            try:  # a guard against a hang, not a pace: the refusal comes in 0.3 s
                await asyncio.wait_for(refused_one.wait(), 60)
            except TimeoutError:
                raise AssertionError("the brief replica never refused a call") from None
            deadline = time.monotonic() + 60
            while not patient_waited():  # the log is a file: read it until the line is there
                assert time.monotonic() < deadline, "the patient replica never waited"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(postgres.start)

        await asyncio.gather(restart_under_load(), *(writer(n) for n in range(4)))
        assert len(acked) + len(refused) == 160
        assert refused, "the brief replica should have refused calls while Postgres was down"
        assert patient_waited()  # it waited, then went on
        for message in refused.values():
            assert "\n" not in message and "memory database" in message, message
            assert postgres.password not in message
        keys_stored = _stored_keys(url)
        assert set(acked) <= set(keys_stored)  # no false acknowledgement
        async with MemoryClient(urls) as client:  # the refused writes, sent again with their keys
            for key in refused:
                n, k = divmod(int(key.rsplit(":", 1)[1]), 1000)
                await client.call("add_entry", **entry_args("m", n * 1000 + k, f"w{n}-{k}"))
            assert await client.call("await_consistency", memory_id="m") == "consistent"
    stored = read_memory(url, "m")["entries"]
    texts = sorted(e["raw_entry"] for e in stored)
    assert texts == sorted(f"w{n}-{k}" for n in range(4) for k in range(40))  # each exactly once


def _stored_keys(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT write_key FROM queue WHERE memory_id = 'm'")]


# --- the command line: one line for every way --db can be wrong ---------------------------


def serve(db, env):
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", "--db", db,
         "--transport", "http", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip


def test_a_bad_postgres_db_is_refused_in_one_line_and_no_password_is_shown(postgres):
    env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"}
    shown, password = split_password(postgres.url)
    nobody_home = f"postgresql://agentstate@127.0.0.1:{free_port()}/memory"
    cases = [
        (postgres.url, env, "a password in --db is readable by every local user"),
        (f"postgresql://agentstate@127.0.0.1:{postgres.port}", env, "name the database"),
        (nobody_home, env, "cannot reach the memory database"),
        (shown, {**env, "PGPASSWORD": "wrong-" + password}, "password authentication failed"),
    ]
    for db, environment, message in cases:
        done = serve(db, environment)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-1500:]
        assert lines[0].startswith("agentstate memory serve: error: --db") and message in lines[0]
        assert password not in done.stderr and "Traceback" not in done.stderr

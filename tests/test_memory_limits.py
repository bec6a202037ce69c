"""Issue 33 items 6, 8 and 15: the memory service's limits hold on hostile input.

Item 6: side files (``-wal``, ``-shm``) of an existing store, left 0644 by a crash
or a copy, are tightened to 0600 with the store. Item 8: ``msg_idx`` is bounded,
so one event with a huge ``msg_idx`` can no longer use up every position of its
memory. Item 15: a bearer token must be what an HTTP header carries (visible
ASCII), refused at server start in one line and by the client before it sends.
"""

import os
import sqlite3
import stat
import subprocess
import sys

import pytest
from langchain_core.messages import ChatMessage

from agentstate.lessons.served import event_message
from agentstate.memory.capture.graph import InvalidTurn, check_turn
from agentstate.memory.client import MemoryAccessDenied, MemoryClient, MemoryToolError
from agentstate.memory.service.process import ServerProcess, free_port
from agentstate.memory.service.store import MemoryInputError, MemoryStore
from agentstate.memory.service.stores import open_store
from tests import memory_backends

pytestmark = pytest.mark.anyio

V, M = "v", "m"
postgres = memory_backends.postgres
memory_db = memory_backends.memory_db


@pytest.fixture
def anyio_backend():
    return "asyncio"


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --- item 6: existing side files are tightened with the store -----------------------------


def test_existing_0644_wal_and_shm_are_tightened_to_0600_when_the_store_opens(tmp_path):
    db = tmp_path / "m.sqlite"
    store = MemoryStore(db)
    store.create_memory(V, M)
    store.close()
    # a crash (or a copy) leaves the store's side files behind with a reader-friendly mode
    crashed = sqlite3.connect(db)
    crashed.execute("PRAGMA journal_mode=WAL")
    crashed.execute("INSERT INTO ops (memory_id, tool, detail, at) VALUES ('m', 't', '{}', 'x')")
    crashed.commit()  # still open: its -wal and -shm stay on disk, as after a crash
    for side in ("-wal", "-shm"):
        os.chmod(f"{db}{side}", 0o644)
    store = MemoryStore(db)  # opened while the other connection still holds the WAL
    try:
        for side in ("-wal", "-shm"):
            assert mode(f"{db}{side}") == 0o600, side
        store.create_memory(V, "m2")
        assert mode(f"{db}-wal") == 0o600
    finally:
        store.close()
        crashed.close()


# --- item 8: msg_idx bounded; positions never used up by one huge msg_idx ----------------


def entry(idx) -> dict:
    return {"entry_id": f"e{idx}", "vault_id": V, "raw_entry": "hi", "summary": "s",
            "tags": {"role": "user", "msg_idx": idx}}  # fmt: skip


def test_a_huge_msg_idx_is_refused_and_positions_go_on(memory_db):
    store = open_store(memory_db)  # SQLite, then Postgres (issue 35): the same limits
    store.create_memory(V, M)
    try:
        with pytest.raises(MemoryInputError, match=r"msg_idx 9007199254740991 is past 2147483647"):
            store.enqueue(M, "entry", entry(2**53 - 1), {})
        assert store.pending_count(M) == 0  # nothing was queued
        assert store.assign_position(M, "next") == 1
        # the largest msg_idx a writer may give still leaves positions for every later message
        store.enqueue(M, "entry", entry(2**31 - 1), {})
        assert store.assign_position(M, "after-the-largest") == 2**31
        # a position the memory assigned is a msg_idx it takes, past the bound or not
        assert store.enqueue(M, "entry", entry(2**31), {}, key="k") is not None
        with pytest.raises(MemoryInputError, match="past 2147483647 and past the last position"):
            store.assign_position(M, "huge-after", after=2**53 - 2)
        assert store.assign_position(M, "later") == 2**31 + 1
    finally:
        store.close()


async def test_the_server_refuses_a_huge_msg_idx_in_one_line_and_assigns_positions_after(tmp_path):
    with ServerProcess(tmp_path / "memory.sqlite") as proc:
        async with MemoryClient(proc.url, retry_for=5) as client:
            await client.call("create_memory", vault_id=V, memory_id=M)
            args = {"vault_id": V, "memory_id": M, "raw_entry": "x", "summary": "s"}
            with pytest.raises(MemoryToolError) as refused:
                await client.call("add_entry", tags={"msg_idx": 2**53 - 1}, **args)
            message = str(refused.value)
            assert "\n" not in message and "past 2147483647" in message, message
            for n in (1, 2):
                position = await client.call(
                    "assign_position", vault_id=V, memory_id=M, message_key=f"k{n}"
                )
                assert position == str(n)


def test_the_served_graph_refuses_a_huge_msg_idx_in_one_line():
    huge = r"^msg_idx must be at most 2147483647, got 9007199254740991$"
    with pytest.raises(ValueError, match=huge):
        event_message({"role": "user", "content": "hi", "msg_idx": 2**53 - 1}, 0)
    with pytest.raises(InvalidTurn, match="past 9007199254740991"):
        check_turn(ChatMessage(role="user", content="hi", additional_kwargs={"msg_idx": 2**64}))


# --- item 15: a token must be what an HTTP header carries --------------------------------


def serve(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("token", ["tökén-secret", "\u0441ecret-cyrillic"])
def test_a_token_an_http_header_cannot_carry_is_refused_at_start_in_one_line(tmp_path, token):
    db = tmp_path / "m.sqlite"
    clean = {k: v for k, v in os.environ.items() if k != "AGENTSTATE_MEMORY_TOKEN"}
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n", encoding="utf-8")
    http = ["--db", str(db), "--transport", "http", "--port", str(free_port())]
    for args, env in (
        (http, {**clean, "AGENTSTATE_MEMORY_TOKEN": token}),
        ([*http, "--token-file", str(token_file)], clean),
    ):
        done = serve(*args, env=env)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-800:]
        assert "visible ASCII" in lines[0] and token not in done.stderr, lines[0]
    assert not db.exists()  # nothing was started or created


async def test_the_client_refuses_such_a_token_by_name_not_as_a_missing_server(tmp_path):
    with ServerProcess(tmp_path / "memory.sqlite") as proc:
        with pytest.raises(MemoryAccessDenied, match="AGENTSTATE_MEMORY_TOKEN .*visible ASCII"):
            MemoryClient(proc.url, token="tökén", retry_for=0)

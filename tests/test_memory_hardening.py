"""Stage 06 hardening (issue 11): bad input fails at the boundary and changes nothing,
one server per store file, a bearer token over HTTP, private files, one-line CLI errors."""

import os
import socket
import stat
import subprocess
import sys
from types import SimpleNamespace

import httpx
import pytest
from langchain_core.messages import ChatMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory.capture.baselines.auditor import audit, read_memory
from agentstate.memory.capture.conversations import Event, parse
from agentstate.memory.capture.graph import InvalidTurn, check_turn, guard
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import CapturePolicy, policy_model
from agentstate.memory.client import MemoryAccessDenied, MemoryClient, MemoryToolError
from agentstate.memory.service.process import ServerProcess, free_port
from agentstate.memory.service.store import (
    MemoryInputError,
    MemoryStore,
    StoreInUseError,
    check_id,
    check_text,
    parse_time,
)

pytestmark = pytest.mark.anyio
V, M = "vault-1", "chat-1"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("hardening") / "memory.sqlite") as proc:
        yield proc


def chat(role, idx, text="hi"):
    return ChatMessage(role=role, content=text, additional_kwargs={"msg_idx": idx})


# --- capture input: validated at the observer boundary -------------------------------


@pytest.mark.parametrize("idx", ["3", True, -1, 2.0, None])
def test_msg_idx_must_be_a_non_negative_int(idx):
    with pytest.raises(ValueError, match="msg_idx must be a non-negative int"):
        Event("t", 1, "message", "hello", "user", idx)
    with pytest.raises(InvalidTurn, match="msg_idx must be a non-negative int"):
        check_turn(chat("user", idx))


@pytest.mark.parametrize("role", ["tool", "", "System", "user\n"])
def test_tool_and_empty_roles_are_rejected(role):
    with pytest.raises(ValueError, match="role must be one of"):
        Event("t", 1, "message", "hello", role, 1)
    with pytest.raises(InvalidTurn, match="role must be one of"):
        check_turn(chat(role, 1))


def test_other_turn_types_are_rejected_and_system_chat_is_never_stored():
    with pytest.raises(InvalidTurn, match="got HumanMessage"):
        check_turn(HumanMessage("hi"))
    with pytest.raises(InvalidTurn, match="control message must be one of"):
        check_turn(SystemMessage("be nice"))
    plan, update = guard(chat("system", 2, "You are..."), [], {}, V, M)
    assert plan == [] and "persisted" not in update
    assert update["corrections"] == ["msg 2: system message, not persisted"]


async def test_a_bad_turn_changes_nothing_and_the_thread_goes_on(server):
    conversation = parse(
        {
            "events": [
                {"thread": "t", "system": "SESSION_START"},
                {"thread": "t", "role": "user", "content": "first"},
                {"thread": "t", "role": "assistant", "content": "second"},
                {"thread": "t", "system": "SESSION_END"},
            ]
        },
        "bad_turn",
    )
    events = list(conversation.events)
    async with MemoryClient(server.url) as client:
        run = CaptureRun(
            client,
            policy_model(CapturePolicy(), "p"),
            await client.tools(),
            run="badturn",
            checkpointer=InMemorySaver(),
        )
        await run.replay(conversation, events[:2])
        before = await run.graph.aget_state(run.config("t"))
        for bad in (chat("user", "3"), chat("tool", 3), chat("", 3)):
            with pytest.raises(InvalidTurn):
                await run.send(SimpleNamespace(thread="t", to_message=lambda m=bad: m))
        after = await run.graph.aget_state(run.config("t"))
        assert after.values == before.values and after.next == ()
        await run.replay(conversation, events[2:])
        assert await run.resume("t") == "nothing to resume"
        await client.call("await_consistency", memory_id=run.memory_id("t"))
    assert audit(server.db, conversation, run.memories(conversation)) == []


async def test_two_sessions_in_a_thread_pass_the_auditor(server):
    """Guard and auditor share one rule: one bootstrap per SESSION_START message."""
    raw = [
        {"thread": "t", "system": "SESSION_START"},
        {"thread": "t", "role": "user", "content": "plan a trip"},
        {"thread": "t", "role": "assistant", "content": "where to?"},
        {"thread": "t", "system": "SESSION_END"},
        {"thread": "t", "system": "SESSION_START"},
        {"thread": "t", "role": "user", "content": "back again"},
        {"thread": "t", "system": "SESSION_END"},
    ]
    conversation = parse({"events": raw}, "two_sessions")
    async with MemoryClient(server.url) as client:
        run = CaptureRun(
            client,
            policy_model(CapturePolicy(), "p"),
            await client.tools(),
            run="sessions",
            checkpointer=InMemorySaver(),
        )
        await run.replay(conversation)
        await run.send(conversation.events[4])  # the second SESSION_START, resent: skipped
        await client.call("await_consistency", memory_id=run.memory_id("t"))
        state = await run.state("t")
    ops = [op["tool"] for op in read_memory(server.db, run.memory_id("t"))["ops"]]
    assert ops.count("get_context") == 2
    assert "SESSION_START: this session is already bootstrapped, skipped" in state["corrections"]
    assert audit(server.db, conversation, run.memories(conversation)) == []


# --- validation: whole-string patterns, text limits, strict cursors -------------------


@pytest.mark.parametrize("bad", ["m3\n", "m3\r\n", " m3", "m 3", "", "x" * 129, "m\x003"])
def test_ids_are_matched_whole(bad):
    with pytest.raises(MemoryInputError):
        check_id(bad, "memory_id")
    assert check_id("m3", "memory_id") == "m3"


def test_text_fields_reject_blank_nul_and_unbounded_values():
    for bad, why in (("   ", "empty or only whitespace"), ("a\x00b", "NUL"), ("x" * 1001, "limit")):
        with pytest.raises(MemoryInputError, match=why):
            check_text(bad, "summary")
    assert check_text("  ", "raw_entry", blank_ok=True) == "  "  # a message is kept verbatim
    with pytest.raises(MemoryInputError, match="limit is 100000"):
        check_text("x" * 100_001, "raw_entry", blank_ok=True)


@pytest.mark.parametrize(
    "bad",
    [
        "2026-01-01",
        "20260101T000000Z",
        "2026-01-01T00:00Z",
        "2026-01-01T00:00:00",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00:00Z\n",
        "2026-13-01T00:00:00Z",
    ],
)
def test_cursors_must_be_rfc3339(bad):
    with pytest.raises(MemoryInputError, match="RFC3339"):
        parse_time(bad, "before")


def test_rfc3339_cursors_are_normalised_to_utc():
    assert parse_time("2026-01-01T02:00:00+02:00", "after") == "2026-01-01T00:00:00.000000Z"
    assert parse_time("2026-01-01T00:00:00.5Z", "after") == "2026-01-01T00:00:00.500000Z"


SERVER_BAD_INPUT = [
    ("list_entries", {"vault_id": V, "memory_id": M, "limit": True}, "limit must be an integer"),
    ("list_entries", {"vault_id": V, "memory_id": M, "limit": "10"}, "limit must be an integer"),
    ("list_entries", {"vault_id": V, "memory_id": M, "after": "2026-01-01"}, "RFC3339"),
    ("list_entries", {"vault_id": V, "memory_id": M, "before": "20260101T000000Z"}, "RFC3339"),
    ("search_memories", {"memory_id": M, "query": "x", "top_ke": "3"}, "top_ke must be"),
    ("list_entries", {"vault_id": V, "memory_id": f"{M}\n"}, "must be 1-128"),
    (
        "add_entry",
        {"vault_id": V, "memory_id": M, "raw_entry": "x", "summary": " \t"},
        "summary must not be empty",
    ),
    (
        "add_entry",
        {"vault_id": V, "memory_id": M, "raw_entry": "a\x00b", "summary": "s"},
        "NUL",
    ),
    (
        "add_entry",
        {"vault_id": V, "memory_id": M, "raw_entry": "x" * 100_001, "summary": "s"},
        "limit is 100000",
    ),
    ("put_context", {"vault_id": V, "memory_id": M, "content": "   "}, "content must not be"),
    ("create_memory", {"vault_id": V, "memory_id": "other", "title": "  "}, "title must not"),
]


async def test_server_rejects_lax_types_and_bad_text_and_writes_nothing(server):
    async with MemoryClient(server.url) as client:
        await client.call("create_memory", vault_id=V, memory_id=M)
        for tool, args, message in SERVER_BAD_INPUT:
            with pytest.raises(MemoryToolError, match=message):
                await client.call(tool, **args)
        await client.call("await_consistency", memory_id=M)
        assert (await client.call("list_entries", vault_id=V, memory_id=M))["entries"] == []
        assert await client.call("get_context", vault_id=V, memory_id=M) == "context not found"
        with pytest.raises(MemoryToolError, match="unknown memory 'other'"):
            await client.call("get_context", vault_id=V, memory_id="other")


async def test_list_entries_is_structured_with_a_cursor_for_the_next_page(server):
    async with MemoryClient(server.url) as client:
        await client.call("create_memory", vault_id=V, memory_id="paged")
        for i in range(7):
            await client.call(
                "add_entry", vault_id=V, memory_id="paged", raw_entry=f"e{i}", summary="s"
            )
        await client.call("await_consistency", memory_id="paged")
        result = await client.call_result(
            "list_entries", {"vault_id": V, "memory_id": "paged", "limit": 3}
        )
        page = result.structuredContent
        assert [e["raw_entry"] for e in page["entries"]] == ["e4", "e5", "e6"]
        seen, cursor = [page["entries"]], page["next"]
        while cursor:  # backwards: newest page first
            page = await client.call(
                "list_entries", vault_id=V, memory_id="paged", limit=3, **cursor
            )
            seen.insert(0, page["entries"])
            cursor = page["next"]
        assert [e["raw_entry"] for p in seen for e in p] == [f"e{i}" for i in range(7)]
        forward = await client.call(
            "list_entries", vault_id=V, memory_id="paged", limit=4, after=seen[0][0]["created_at"]
        )
        assert [e["raw_entry"] for e in forward["entries"]] == ["e1", "e2", "e3", "e4"]
        assert forward["next"] == {"after": forward["entries"][-1]["seq"]}  # cursors are seqs
        rest = await client.call("list_entries", vault_id=V, memory_id="paged", **forward["next"])
        assert [e["raw_entry"] for e in rest["entries"]] == ["e5", "e6"] and rest["next"] is None


# --- one server per file; private files ------------------------------------------------


async def test_a_second_server_process_on_one_file_is_refused(tmp_path):
    db = tmp_path / "shared.sqlite"
    with ServerProcess(db) as first:
        second = ServerProcess(db)
        with pytest.raises(RuntimeError, match="another memory server .* already serves"):
            second.start()
        assert not second.running and first.running
        async with MemoryClient(first.url) as client:  # the first one still serves
            assert await client.call("create_memory", vault_id=V, memory_id=M) == "created"
    with ServerProcess(db):  # the lock went with the first process
        pass


def test_a_second_store_in_one_process_is_refused_until_the_first_closes(tmp_path):
    first = MemoryStore(tmp_path / "m.sqlite")
    with pytest.raises(StoreInUseError, match="already serves"):
        MemoryStore(tmp_path / "m.sqlite")
    first.close()
    MemoryStore(tmp_path / "m.sqlite").close()


def test_store_and_lock_files_are_created_0600(tmp_path):
    db = tmp_path / "m.sqlite"
    store = MemoryStore(db)
    store.create_memory(V, M)
    for path in (db, tmp_path / "m.sqlite.lock", tmp_path / "m.sqlite-wal"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    store.close()


# --- HTTP: bearer token, the URL printed at startup ------------------------------------


async def test_bearer_token_is_required_when_set(tmp_path, monkeypatch):
    token = "t0ken-for-this-test"
    monkeypatch.setenv("AGENTSTATE_MEMORY_TOKEN", token)
    with ServerProcess(tmp_path / "memory.sqlite") as proc:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"accept": "application/json, text/event-stream"}
        for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": token}):
            reply = httpx.post(proc.url, json=body, headers={**headers, **auth}, timeout=10)
            assert reply.status_code == 401, auth
        async with MemoryClient(proc.url, token="wrong", retry_for=0) as client:
            with pytest.raises(MemoryAccessDenied, match="AGENTSTATE_MEMORY_TOKEN"):
                await client.call("create_memory", vault_id=V, memory_id=M)
        async with MemoryClient(proc.url) as client:  # the token from the environment
            assert await client.call("create_memory", vault_id=V, memory_id=M) == "created"
        log = (tmp_path / "memory.sqlite.log").read_text()
    assert f"memory server on {proc.url} (bearer token required)" in log
    assert token not in log


def test_without_a_token_the_startup_line_says_anyone_local_can_use_it(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    with ServerProcess(tmp_path / "memory.sqlite") as proc:
        reply = httpx.post(
            proc.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
            timeout=10,
        )
        assert reply.status_code != 401
    log = (tmp_path / "memory.sqlite.log").read_text()
    assert f"memory server on {proc.url} (no token: any local process can use it)" in log


# --- the CLI fails in one line -----------------------------------------------------------


def serve(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_serve_with_bad_db_or_port_fails_in_one_line(tmp_path):
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("these are my notes, not a database\n" * 20)
    mode = stat.S_IMODE(os.stat(not_sqlite).st_mode)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    port = str(free_port())
    cases = [
        (["--db", str(tmp_path), "--transport", "http", "--port", port], "folder"),
        (["--db", str(not_sqlite), "--transport", "http", "--port", port], "not an SQLite"),
        (["--db", str(tmp_path / "no" / "m.sqlite")], "does not exist"),
        (["--db", str(tmp_path / "m.sqlite"), "--transport", "http", "--port", "99999"], "99999"),
        (["--db", str(tmp_path / "m.sqlite"), "--port", "eighty"], "not a port number"),
        (
            ["--db", str(tmp_path / "m.sqlite"), "--transport", "http", "--port", str(taken)],
            "already in use",
        ),
    ]
    try:
        for args, message in cases:
            done = serve(*args)
            assert done.returncode == 2, (args, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and message in lines[0], (args, done.stderr)
            assert lines[0].startswith("agentstate memory serve: error:")
    finally:
        busy.close()
    assert not_sqlite.read_text().startswith("these are my notes")  # untouched
    assert stat.S_IMODE(os.stat(not_sqlite).st_mode) == mode
    assert not (tmp_path / "notes.txt.lock").exists()
    assert not (tmp_path / "m.sqlite").exists()


def worker_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "agentstate.memory.capture.worker", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_worker_fails_in_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    ck = str(tmp_path / "ck.sqlite")
    cases = [
        (["--url", url, "--checkpoints", ck, "--retry-for", "0"], "agentstate memory serve"),
        (["--url", url, "--checkpoints", ck, "--conversation", "nope"], "no conversation 'nope'"),
        (["--url", url, "--checkpoints", str(tmp_path / "no" / "ck.sqlite")], "does not exist"),
    ]
    for args, message in cases:
        done = worker_cli(*args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.stderr[-600:])
        assert message in lines[0] and "Traceback" not in done.stderr

"""Stage 06 pieces without a server: conversations, policy, guard, store, auditor, CLI."""

import json

import pytest
from langchain_core.messages import AIMessage, ChatMessage, SystemMessage

from agentstate.memory.capture import calls
from agentstate.memory.capture.baselines.auditor import (
    KINDS,
    audit,
    counts,
    expected_flushes,
    side_by_side,
)
from agentstate.memory.capture.conversations import load, parse, synthetic
from agentstate.memory.capture.graph import curated, guard
from agentstate.memory.capture.policy import AGENT_ANSWER, AS_REPORTED, CapturePolicy
from agentstate.memory.capture.prompt import ids_from, system_prompt
from agentstate.memory.service.store import MemoryInputError
from agentstate.memory.service.stores import open_service, open_store, read_memory_rows
from tests import memory_backends

V, M = "vault", "mem"
postgres = memory_backends.postgres  # SQLite and a real Postgres: every store test runs on both
memory_db = memory_backends.memory_db


def test_conversations_number_messages_per_thread_and_type_controls():
    conv = load("two_threads")
    assert conv.threads == ["alice", "bob"]
    assert [e.msg_idx for e in conv.messages("bob")] == list(range(1, 8))
    hard = load("hard_cases")
    as_text = [e for e in hard.events if e.content == "SESSION_END"]
    assert [e.kind for e in as_text] == ["message", "control"]  # typed, not guessed
    message = hard.messages("edge")[0].to_message()
    assert isinstance(message, ChatMessage) and message.additional_kwargs["msg_idx"] == 1
    with pytest.raises(ValueError, match="event 1 .*role"):
        parse({"events": [{"system": "SESSION_START"}, {"role": "bot", "content": "x"}]})
    with pytest.raises(ValueError, match="system must be one of"):
        parse({"events": [{"system": "RESTART"}]})
    with pytest.raises(FileNotFoundError, match="available: hard_cases"):
        load("nope")
    assert len(synthetic(10).messages("bench")) == 10


def test_prompt_carries_the_ids_the_policy_reads():
    assert ids_from([SystemMessage(system_prompt(V, M))]) == (V, M)
    with pytest.raises(ValueError, match="no capture prompt"):
        ids_from([SystemMessage("hello")])


def _turn(conv, n):
    return [SystemMessage(system_prompt(V, M))] + [e.to_message() for e in conv.events[:n]]


def test_well_behaved_policy_emits_the_turns_calls():
    conv = load("solo_travel")
    policy = CapturePolicy()
    start = policy(_turn(conv, 1))
    assert [c["name"] for c in start.tool_calls] == ["get_context", "list_entries"]
    sixth = policy(_turn(conv, 7))  # events: START + 6 messages
    assert [c["name"] for c in sixth.tool_calls] == [
        "add_entry",
        "await_consistency",
        "put_context",
    ]
    assert sixth.tool_calls[0]["args"]["tags"] == {"role": "assistant", "msg_idx": 6}


def test_reported_policy_misbehaves_where_configured():
    conv = load("solo_travel")
    react = CapturePolicy(AS_REPORTED, one_call_per_step=True)
    names = []
    history = _turn(conv, 1)
    for _ in range(5):
        reply = react(history)
        names += [c["name"] for c in reply.tool_calls]
        history = history + [reply]
    assert names == ["get_context", "list_entries"] * 2
    assert reply.tool_calls == [] and reply.content == ""
    first_user = _turn(conv, 2) + [
        AIMessage("", tool_calls=[calls.add_entry(V, M, "user", 1, "x") | {"id": "1"}])
    ]
    assert react(first_user).content == AGENT_ANSWER
    fourth = CapturePolicy(AS_REPORTED).plan(_turn(conv, 5)[-1], [], V, M)
    assert fourth[0]["args"]["tags"] == {"role": "user", "msg_idx": 4}  # an assistant turn


def test_guard_builds_the_plan_from_the_rules():
    conv = load("solo_travel")
    msg6 = conv.messages("trip")[5].to_message()
    wrong = [
        calls.add_entry(V, M, "user", 6, "paraphrase", "my summary"),
        calls.add_entry(V, M, "assistant", 6, "again"),
        calls.call("get_context", vault_id=V, memory_id=M),
    ]
    plan, update = guard(msg6, wrong, {"messages": [msg6]}, V, M)
    assert [c["name"] for c in plan] == ["add_entry", "await_consistency", "put_context"]
    assert plan[0]["args"]["raw_entry"] == msg6.content
    assert plan[0]["args"]["tags"] == {"role": "assistant", "msg_idx": 6}
    assert plan[0]["args"]["summary"] == "my summary"  # the model's part is kept
    # the write's key is thread + msg_idx; nothing is marked persisted until the server says so
    assert plan[0]["args"]["idempotency_key"] == f"{M}:msg:6"
    assert "persisted" not in update
    assert "msg 6: corrected add_entry.raw_entry" in update["corrections"]
    assert "msg 6: dropped get_context" in update["corrections"]
    again, update = guard(msg6, [], {"messages": [], "persisted": [6]}, V, M)
    assert [c["name"] for c in again] == ["await_consistency", "put_context"]
    start = SystemMessage("SESSION_START", id="t-e0")
    assert guard(start, [], {"bootstrapped": ["t-e0"]}, V, M)[0] == []  # the same one, resent
    plan, update = guard(start, [], {"bootstrapped": ["t-e9"]}, V, M)  # a new session
    assert [c["name"] for c in plan] == ["get_context", "list_entries"]
    assert "bootstrapped" not in update  # marked when list_entries is acknowledged


def test_curated_input_keeps_controls_and_conversation_only():
    kept = curated(
        [
            SystemMessage("SESSION_START"),
            SystemMessage("other"),
            AIMessage("hi"),
            ChatMessage(role="user", content="q"),
        ]
    )
    assert [m.content for m in kept] == ["SESSION_START", "q"]


def _store_with(db, entries, ops_extra=()):
    store, writer = open_service(db)
    store.create_memory(V, M)
    for n, (role, idx, text) in enumerate(entries):
        tags = {"role": role, "msg_idx": idx} if idx is not None else {"role": role}
        with writer.submitting(M):
            store.enqueue(
                M,
                "entry",
                {
                    "entry_id": f"e{n}",
                    "vault_id": V,
                    "raw_entry": text,
                    "summary": "s",
                    "tags": tags,
                },
                {"tags": tags},
            )
    for tool in ops_extra:
        store.log_op(M, tool, {"limit": 10} if tool == "list_entries" else {})
    writer.wait(M, 10)
    writer.close()
    store.close()
    return db


def test_auditor_names_each_violation(memory_db):
    conv = parse(
        {
            "events": [
                {"system": "SESSION_START"},
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
                {"role": "assistant", "content": "d"},
            ]
        }
    )
    db = _store_with(
        memory_db,
        [
            ("system", None, "SESSION_START"),  # system persisted
            ("user", 1, "a"),
            ("user", 1, "a"),  # duplicated
            ("assistant", 4, "d"),  # before 3: reordered later
            ("user", 3, "c!"),  # content mismatch
            ("assistant", 9, "hello"),  # extra
        ],
        ops_extra=["get_context", "list_entries", "get_context"],
    )
    found = counts(audit(db, conv, {"main": M}))
    assert found == {
        "missing": 1,
        "duplicated": 1,
        "reordered": 1,
        "content_mismatch": 1,
        "system_persisted": 1,
        "extra_entry": 1,
        "repeated_bootstrap": 1,
        "bootstrap_incomplete": 1,
    }
    assert set(found) <= set(KINDS)


def test_auditor_checks_roles_flushes_and_awaits(memory_db):
    conv = parse(
        {
            "events": [
                {"role": "user", "content": "a"},
                {"system": "FLUSH_CONTEXT"},
                {"role": "assistant", "content": "b"},
            ]
        }
    )
    assert expected_flushes(conv, "main") == [1]
    db = _store_with(
        memory_db,
        [("user", 1, "a"), ("user", 2, "b")],
        ops_extra=["put_context", "await_consistency", "put_context"],
    )
    found = audit(db, conv, {"main": M})
    # both put_context calls come after message 2 (the log is in call order); the first is
    # not awaited, and no flush happened after message 1, where FLUSH_CONTEXT asked for one
    assert [(v.kind, v.msg_idx) for v in found] == [
        ("wrong_role", 2),
        ("missing_flush", 1),
        ("extra_flush", 2),
        ("extra_flush", 2),
        ("flush_not_awaited", 2),
    ]


def test_side_by_side_table_has_a_total_row(memory_db):
    conv = parse({"events": [{"role": "user", "content": "a"}]})
    db = _store_with(memory_db, [])
    rows = side_by_side({"react": audit(db, conv, {"main": M}), "capture": []})
    assert rows == [
        {"violation": "missing", "react": 1, "capture": 0},
        {"violation": "total", "react": 1, "capture": 0},
    ]


def test_store_rejects_bad_ids_and_unknown_memories(memory_db):
    store = open_store(memory_db)
    with pytest.raises(MemoryInputError, match="vault_id is required"):
        store.create_memory("", M)
    with pytest.raises(MemoryInputError, match="must be 1-128 letters"):
        store.create_memory(V, "has space")
    store.create_memory(V, M)
    with pytest.raises(MemoryInputError, match="already belongs to vault"):
        store.create_memory("other", M)
    with pytest.raises(MemoryInputError, match="unknown memory 'x'"):
        store.require_memory(V, "x")
    store.close()


def test_assign_position_refuses_an_unknown_memory_in_one_line_and_writes_nothing(memory_db):
    # one position rule for both stores (sql_store.Store); SQLite's raised a TypeError here
    store = open_store(memory_db)
    try:
        with pytest.raises(MemoryInputError, match="^unknown memory 'x'$"):
            store.assign_position("x", "a message")
        assert read_memory_rows(memory_db, "x")["ops"] == []  # nothing logged
        store.create_memory(V, "x")
        assert store.assign_position("x", "a message") == 1  # nothing was assigned before
    finally:
        store.close()


def test_queued_writes_wait_for_the_writer_and_survive_a_new_store(memory_db):
    store = open_store(memory_db)
    store.create_memory(V, M)
    for i in range(3):
        store.enqueue(
            M,
            "entry",
            {"entry_id": f"e{i}", "vault_id": V, "raw_entry": f"r{i}", "summary": "s", "tags": {}},
            {},
        )
    store.enqueue(M, "context", {"vault_id": V, "content": "ctx"}, {})
    assert store.list_entries(M) == ([], None) and len(store.pending()) == 4  # queued, not applied
    store.close()
    again = open_store(memory_db)
    assert len(again.pending()) == 4  # the queue survived the close
    again.close()
    reopened, writer = open_service(memory_db)  # as a restarted server would
    # The new writer counts the queue when it starts and drains it (without that count it
    # would wait for a write that never comes, and the entries below would be missing). Its
    # thread may drain the queue at once, so the count is not read here: that raced.
    writer.wait(M, 10)
    assert writer.pending(M) == 0 and reopened.pending() == []
    assert [e["raw_entry"] for e in reopened.list_entries(M)[0]] == ["r0", "r1", "r2"]
    assert [c["content"] for c in reopened.contexts(M, 5)] == ["ctx"]
    assert [e["raw_entry"] for e in reopened.search(M, "r1", 5)] == ["r1"]
    writer.close()
    reopened.close()


def test_cli_registers_memory_serve():
    from agentstate.cli import build_parser

    args = build_parser().parse_args(
        ["memory", "serve", "--db", "x.sqlite", "--transport", "http", "--port", "9001"]
    )
    assert (args.db, args.transport, args.port) == ("x.sqlite", "http", 9001)
    assert callable(args.func)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["memory", "serve"])  # --db is required


def test_ops_detail_is_json(memory_db):
    store = open_store(memory_db)
    store.create_memory(V, M)
    store.log_op(M, "list_entries", {"limit": 10})
    rows = store._rows("SELECT detail FROM ops")
    assert json.loads(rows[0]["detail"]) == {"limit": 10}
    store.close()

"""Both capture agents against a real memory server process (stage 06).

The prebuilt ReAct agent with the reported model must still show each symptom
in its state and in the store; the tool-only graph must leave a store the
auditor finds clean, with the well-behaved policy and with the faulty one.
"""

import pytest
from langchain_core.messages import AIMessage, ChatMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory.capture.baselines.auditor import audit, counts, read_memory
from agentstate.memory.capture.conversations import load
from agentstate.memory.capture.observer import CaptureRun, ReactRun
from agentstate.memory.capture.policy import AGENT_ANSWER, AS_REPORTED, CapturePolicy, policy_model
from agentstate.memory.client import MemoryClient
from tests import memory_backends
from tests.memory_backends import memory_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


postgres = memory_backends.postgres


@pytest.fixture(scope="module", params=memory_backends.BACKENDS)
def server(request, tmp_path_factory):
    """One server for the module, over SQLite, then over a real Postgres (issue 35)."""
    folder = tmp_path_factory.mktemp("memory")
    db = folder / "memory.sqlite"
    if request.param == "postgres":
        db = memory_backends.fresh_database(request.getfixturevalue("postgres"))
    with memory_server(db, folder) as proc:
        yield proc
    assert proc.proc is None  # stopped, nothing left behind


async def settle(client, run, conversation):
    for thread in conversation.threads:
        assert await client.call("await_consistency", memory_id=run.memory_id(thread)) == (
            "consistent"
        )


def reported_react(client, tools, run):
    model = policy_model(CapturePolicy(AS_REPORTED, one_call_per_step=True), "reported")
    return ReactRun(client, model, tools, run=run, checkpointer=InMemorySaver())


def capture(client, tools, run, faults=None):
    policy = CapturePolicy(faults) if faults else CapturePolicy()
    return CaptureRun(
        client, policy_model(policy, run), tools, run=run, checkpointer=InMemorySaver()
    )


async def test_react_baseline_shows_every_reported_symptom(server):
    conversation = load("solo_travel")
    async with MemoryClient(server.url) as client:
        react = reported_react(client, await client.tools(), "t-react")
        await react.replay(conversation)
        await settle(client, react, conversation)
        messages = (await react.state("trip"))["messages"]
    # in state: agent-authored text, a second add_entry for msg 3, two bootstraps
    assert [m.content for m in messages if isinstance(m, AIMessage) and m.content] == [
        AGENT_ANSWER
    ] * 4
    adds = [
        c["args"]
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["name"] == "add_entry"
    ]
    assert sum(a["tags"]["msg_idx"] == 3 for a in adds) == 2
    assert [a["tags"]["role"] for a in adds if a["tags"]["msg_idx"] == 4] == ["user"]
    boots = [c["name"] for m in messages[:10] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert boots == ["get_context", "list_entries"] * 2
    # in the store: the auditor sees the same things without looking at state
    found = counts(audit(server.db, conversation, react.memories(conversation)))
    assert found == {
        "duplicated": 3,
        "wrong_role": 3,
        "extra_entry": 4,
        "missing_flush": 2,
        "repeated_bootstrap": 1,
    }
    stored = read_memory(server.db, react.memory_id("trip"))["entries"]
    assert any(e["raw_entry"] == AGENT_ANSWER for e in stored)


@pytest.mark.parametrize("name", ["solo_travel", "hard_cases", "two_threads"])
async def test_tool_only_graph_leaves_a_clean_store(server, name):
    conversation = load(name)
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        good = capture(client, tools, f"t-good-{name}")
        guarded = capture(client, tools, f"t-guarded-{name}", AS_REPORTED)
        react = reported_react(client, tools, f"t-react-{name}")
        for run in (good, guarded, react):
            await run.replay(conversation)
            await settle(client, run, conversation)
        thread = conversation.threads[0]
        state = await guarded.state(thread)
    assert audit(server.db, conversation, good.memories(conversation)) == []
    assert audit(server.db, conversation, guarded.memories(conversation)) == []
    assert audit(server.db, conversation, react.memories(conversation))  # the baseline fails
    # state: every AI message is a tool call without text; the guard says what it changed
    assert all(
        not m.content and len(m.tool_calls) == 1
        for m in state["messages"]
        if isinstance(m, AIMessage)
    )
    assert any("dropped" in c for c in state["corrections"])
    # byte-identical content, exact tags, in order
    for t in conversation.threads:
        stored = read_memory(server.db, good.memory_id(t))["entries"]
        expected = conversation.messages(t)
        assert [e["raw_entry"] for e in stored] == [m.content for m in expected]
        assert [e["tags"] for e in stored] == [
            {"role": m.role, "msg_idx": m.msg_idx} for m in expected
        ]


async def test_hard_cases_round_trip_byte_for_byte(server):
    conversation = load("hard_cases")
    contents = [m.content for m in conversation.messages("edge")]
    assert "" in contents and "SESSION_END" in contents and max(map(len, contents)) > 20_000
    async with MemoryClient(server.url) as client:
        run = capture(client, await client.tools(), "t-bytes")
        await run.replay(conversation)
        await settle(client, run, conversation)
        listed = await client.call(
            "list_entries", vault_id=run.vault_id, memory_id=run.memory_id("edge"), limit=50
        )
    assert [e["raw_entry"].encode() for e in listed["entries"]] == [c.encode() for c in contents]


async def test_dedupe_guard_skips_a_resent_message(server):
    conversation = load("solo_travel")
    events = list(conversation.events)
    async with MemoryClient(server.url) as client:
        run = capture(client, await client.tools(), "t-resend")
        await run.replay(conversation, events[:4])
        await run.replay(conversation, [events[2], events[3]])  # the observer sends twice
        await run.replay(conversation, events[4:])
        await settle(client, run, conversation)
        state = await run.state("trip")
    assert audit(server.db, conversation, run.memories(conversation)) == []
    assert "msg 2: already persisted, add_entry skipped" in state["corrections"]
    chat = [m for m in state["messages"] if isinstance(m, ChatMessage)]
    assert len(chat) == len(conversation.messages("trip"))  # same id: replaced, not appended


async def test_curated_model_input_has_no_ai_or_tool_messages(server):
    conversation = load("solo_travel")
    model = policy_model(CapturePolicy(), "seen")
    async with MemoryClient(server.url) as client:
        run = CaptureRun(
            client, model, await client.tools(), run="t-curated", checkpointer=InMemorySaver()
        )
        await run.replay(conversation)
    for seen in model.seen:
        assert not any(isinstance(m, AIMessage | ToolMessage) for m in seen)
        assert "memory_id: t-curated.trip" in seen[0].content
    assert len(model.seen) == len(conversation.events)  # one model call per message


def test_a_real_endpoint_runs_the_same_graph(monkeypatch):
    from agentstate.memory.capture.graph import build_capture_graph

    monkeypatch.setenv("AGENTSTATE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    model = policy_model(CapturePolicy(), "x")
    assert type(model).__name__ == "ChatOpenAI"  # the env opts in: no scripted policy
    graph = build_capture_graph(model, [])
    assert {"llm_call", "dispatch", "tools"} <= set(graph.get_graph().nodes)


async def test_state_stays_bounded_on_a_long_thread(server):
    from agentstate.memory.capture.conversations import synthetic
    from agentstate.memory.capture.graph import MODEL_WINDOW

    conversation = synthetic(60)
    async with MemoryClient(server.url) as client:
        run = capture(client, await client.tools(), "t-long")
        await run.replay(conversation)
        await settle(client, run, conversation)
        state = await run.state("bench")
    assert audit(server.db, conversation, run.memories(conversation)) == []
    assert len(state["messages"]) <= MODEL_WINDOW + 4  # window + a flush: 2 calls, 2 results
    assert state["persisted"] == list(range(1, 61))

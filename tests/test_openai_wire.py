"""Issue 8 item 5: every stage's agent, unchanged, on ``ChatOpenAI`` over real loopback HTTP.

:class:`ReplayServer` answers ``/v1/chat/completions`` with the lesson's
scripted replies in the OpenAI wire format. Each stage runs twice, once on the
scripted model itself and once on ``ChatOpenAI`` pointed at the replay server,
sync and async (and streamed), and must give the same result; the recorded
request bodies show what the client sent back.
"""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.experts.graph import ExpertsConfig, build_experts_graph, user_turn
from agentstate.experts.llm import chat_model
from agentstate.experts.manual import load_manual
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    collector_model,
    file_fields,
    one_batch_model,
    parent_model,
    reader_batch_model,
    store_calls,
)
from agentstate.lessons.fixtures import user_turn as rds_turn
from agentstate.lessons.served import (
    MEMORY_URL_VAR,
    build_served_capture,
    build_served_turn_cache,
    rds_policy,
)
from agentstate.memory.capture.baselines.auditor import audit, read_memory
from agentstate.memory.capture.conversations import load
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import CapturePolicy
from agentstate.memory.client import MemoryClient
from agentstate.memory.service.process import ServerProcess, port_open
from agentstate.models import ModelSettings, ScriptedChatModel, reply, tool_call
from agentstate.models.openai_replay import ReplayServer
from agentstate.models.policy import PolicyChatModel
from agentstate.rds import (
    build_file_storage_agent,
    build_reducer_agent,
    build_shared_schema_agent,
    build_turn_cache_agent,
)
from tests.secret_refs import RDS_PASSWORD

PASSWORD = "hunter2-plain"
SECRET_REF = RDS_PASSWORD  # equals any reference labelled rds-master-password
MODES = ["invoke", "ainvoke", "stream", "astream"]


def openai_model(server: ReplayServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key="not-needed", model="replay", max_retries=0)


def call(agent, payload, mode: str, config=None):
    """Run ``agent`` one way; return the final state."""
    if mode == "invoke":
        return agent.invoke(payload, config)
    if mode == "ainvoke":
        return asyncio.run(agent.ainvoke(payload, config))
    if mode == "stream":  # "messages" makes ChatOpenAI stream its reply (SSE on the wire)
        chunks = list(agent.stream(payload, config, stream_mode=["messages", "values"]))
        return [data for kind, data in chunks if kind == "values"][-1]

    async def collect():
        return [c async for c in agent.astream(payload, config, stream_mode=["messages", "values"])]

    return [data for kind, data in asyncio.run(collect()) if kind == "values"][-1]


def outcome(state: dict) -> dict:
    """What a lesson checks: requirements, files, every tool reply, the final text."""
    messages = state["messages"]
    seen = {
        "requirements": state.get("requirements"),
        "files": {path: data["content"] for path, data in (state.get("files") or {}).items()},
        "tools": [(m.name, m.content, m.status) for m in messages if isinstance(m, ToolMessage)],
        "final": messages[-1].content,
    }
    # each run's secret reference has its own random id: compare the labels
    return json.loads(re.sub(r"(\$secret:[\w./-]+?)-[0-9a-f]{24}", r"\1", json.dumps(seen)))


def on_both(build, script, payload, mode):
    """The same agent on the scripted model and on ChatOpenAI over the replay server."""
    scripted = call(build(script()), payload, mode)
    with ReplayServer(script()) as server:
        wired = call(build(openai_model(server)), payload, mode)
    return scripted, wired, server


@pytest.mark.parametrize("mode", MODES)
def test_stage01_file_storage_loses_the_same_fields_over_the_wire(mode):
    scripted, wired, server = on_both(
        build_file_storage_agent, lambda: one_batch_model(POSTGRES_FIELDS), rds_turn(), mode
    )
    assert file_fields(wired) == file_fields(scripted) == {"username": "dbadmin"}
    assert outcome(wired) == outcome(scripted)
    assert len(server.requests) == 2
    assert all(body.get("stream", False) == mode.endswith("stream") for body in server.requests)


def password_script() -> ScriptedChatModel:
    calls = store_calls({**POSTGRES_FIELDS, "password": PASSWORD})
    return ScriptedChatModel(
        script=[reply(*calls), reply(tool_call("get_collected_requirements")), reply(text="Done.")]
    )


@pytest.mark.parametrize("mode", MODES)
def test_stage02_reducer_over_the_wire_and_the_client_sends_back_only_the_reference(mode):
    scripted, wired, server = on_both(build_reducer_agent, password_script, rds_turn(), mode)
    assert wired["requirements"] == {**POSTGRES_FIELDS, "password": SECRET_REF}
    assert outcome(wired) == outcome(scripted)
    # the server's first reply carried the plain password; the client's next request holds the
    # assistant message as state stored it: the reference, never the plain value
    assert len(server.requests) == 3
    echoed = server.requests[1]["messages"]
    (assistant,) = [m for m in echoed if m["role"] == "assistant"]
    arguments = [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]]
    assert {"field_name": "password", "value": SECRET_REF} in arguments
    assert len(arguments) == 6
    assert [m["tool_call_id"] for m in echoed if m["role"] == "tool"] == [
        c["id"] for c in assistant["tool_calls"]
    ]
    assert PASSWORD not in json.dumps(server.requests)


@pytest.mark.parametrize("agent_builder", [build_reducer_agent, build_turn_cache_agent])
def test_the_messages_stream_of_a_real_client_never_carries_the_plain_password(agent_builder):
    """The server streams the plain password (SSE); what the agent streams on is redacted."""
    with ReplayServer(password_script()) as server:
        agent = agent_builder(openai_model(server))
        chunks = list(agent.stream(rds_turn(), stream_mode="messages"))
    assert server.requests[0]["stream"] is True  # the wire itself was streamed
    assert chunks and PASSWORD not in repr(chunks)
    assert SECRET_REF in repr(chunks)  # the redacted reply is still streamed, whole


@pytest.mark.parametrize("mode", MODES)
def test_stage03_turn_cache_reader_sees_the_whole_batch_over_the_wire(mode):
    scripted, wired, _ = on_both(
        build_turn_cache_agent, lambda: reader_batch_model(POSTGRES_FIELDS, 1), rds_turn(), mode
    )
    reads = [content for name, content, _ in outcome(wired)["tools"] if name != "store_requirement"]
    assert [json.loads(r) for r in reads] == [POSTGRES_FIELDS]
    assert outcome(wired) == outcome(scripted)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_stage04_collector_and_parent_both_over_the_wire(mode):
    payload = rds_turn()
    scripted = call(
        build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model()), payload, mode
    )
    with (
        ReplayServer(parent_model(POSTGRES_FIELDS)) as parent,
        ReplayServer(collector_model()) as collector,
    ):
        agent = build_shared_schema_agent(openai_model(parent), openai_model(collector))
        wired = call(agent, payload, mode)
    assert wired["requirements"] == POSTGRES_FIELDS
    assert outcome(wired) == outcome(scripted)
    # the collector got the task description as its user message, and its results came back
    first = collector.requests[0]["messages"]
    assert json.loads(first[-1]["content"]) == POSTGRES_FIELDS
    assert [m["role"] for m in collector.requests[1]["messages"]].count("tool") == 5


def expert_reply(messages: list[BaseMessage]) -> AIMessage:
    """A deterministic expert: names its persona (system message 2) and the question."""
    persona = messages[1].content.splitlines()[0][:60]
    return AIMessage(content=f"{persona} | {messages[-1].content.splitlines()[0][:60]}")


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_experts_in_llm_mode_stream_over_the_wire(mode):
    query = "Last night's batch outage sent a SEPA file twice: what do we report?"
    manual = load_manual(sections=1)

    def graph(model):
        return build_experts_graph(ExpertsConfig(manual=manual, mode="llm", expert_model=model))

    scripted = call(graph(PolicyChatModel(policy=expert_reply)), user_turn(query), mode)
    with ReplayServer(PolicyChatModel(policy=expert_reply)) as server:
        settings = ModelSettings(base_url=server.base_url, model="replay")
        wired = call(graph(chat_model(settings)), user_turn(query), mode)
    assert wired["route"] == scripted["route"] and len(wired["route"]["experts"]) >= 2
    assert wired["expert_outputs"] == scripted["expert_outputs"]
    assert wired["response"] == scripted["response"] and wired["response"]
    assert set(wired["ttft_ms"]) == {*wired["route"]["experts"], "synthesis"}
    # every call streamed, and system message 1 (the manual prefix) was byte-identical
    assert len(server.requests) == len(wired["route"]["experts"]) + 1
    assert all(body["stream"] is True for body in server.requests)
    assert len({body["messages"][0]["content"] for body in server.requests}) == 1


def from_wire(policy):
    """The capture policy as a real model sees it: chat messages come back as user/assistant.

    The wire drops ``ChatMessage`` and its ``msg_idx``; this puts them back
    the way the prompt numbers them, so the policy decides as it does offline.
    """

    def retyped(messages: list[BaseMessage]) -> AIMessage:
        out, idx = [], 0
        for m in messages:
            if isinstance(m, HumanMessage) or (isinstance(m, AIMessage) and not m.tool_calls):
                idx += 1
                role = "user" if isinstance(m, HumanMessage) else "assistant"
                m = ChatMessage(role=role, content=m.content, additional_kwargs={"msg_idx": idx})
            out.append(m)
        return policy(out)

    return retyped


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("memory") / "memory.sqlite") as server:
        yield server


def test_capture_graph_over_the_wire_stores_what_it_stores_offline(memory):
    conversation = load("solo_travel")

    async def capture(model, run: str) -> CaptureRun:
        async with MemoryClient(memory.url) as client:
            tools = await client.tools()
            runner = CaptureRun(client, model, tools, run=run, checkpointer=InMemorySaver())
            await runner.replay(conversation)
            for thread in conversation.threads:
                await client.call("await_consistency", memory_id=runner.memory_id(thread))
        return runner

    offline = asyncio.run(capture(PolicyChatModel(policy=CapturePolicy()), "offline"))
    with ReplayServer(PolicyChatModel(policy=from_wire(CapturePolicy()))) as server:
        wired = asyncio.run(capture(openai_model(server), "wired"))
    assert len(server.requests) == len(conversation.events)
    for run in (offline, wired):
        assert audit(memory.db, conversation, run.memories(conversation)) == []
    for thread in conversation.threads:
        a = read_memory(memory.db, offline.memory_id(thread))
        b = read_memory(memory.db, wired.memory_id(thread))
        assert a["entries"] == b["entries"] and len(b["entries"]) == len(
            conversation.messages(thread)
        )
        assert [c.replace("wired.", "offline.") for c in b["contexts"]] == a["contexts"]
    # the capture model was offered the memory tools, by name, in every request
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"add_entry", "put_context", "get_context", "list_entries"} <= offered


# --- the served graphs opt in to an endpoint through AGENTSTATE_LLM_BASE_URL ---


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_served_turn_cache_graph_on_an_endpoint_named_by_the_environment(mode):
    payload = {"messages": [{"role": "user", "content": json.dumps(POSTGRES_FIELDS)}]}
    offline = call(build_served_turn_cache(environ={}), payload, mode)
    with ReplayServer(PolicyChatModel(policy=rds_policy)) as server:
        env = {"AGENTSTATE_LLM_BASE_URL": server.base_url, "AGENTSTATE_LLM_MODEL": "replay"}
        wired = call(build_served_turn_cache(environ=env), payload, mode)
    assert outcome(wired) == outcome(offline)
    assert wired["messages"][-1].content == "Stored 5 field(s); the reader in the same batch saw 5."
    assert [body["model"] for body in server.requests] == ["replay", "replay"]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_served_capture_graph_on_an_endpoint_named_by_the_environment(memory, mode):
    events = [
        {"control": "SESSION_START"},
        *(
            {"role": r, "content": f"message {i} ✓"}
            for i, r in enumerate(["user", "assistant"] * 3)
        ),
        {"control": "SESSION_END"},
    ]

    def replay(graph, thread: str) -> list[dict]:
        config = {"configurable": {"thread_id": thread}}
        return [call_plain(graph, e, config, mode) for e in events]

    def build(env):
        return build_served_capture(environ=env, checkpointer=InMemorySaver())

    offline = replay(build({MEMORY_URL_VAR: memory.url}), f"off-{mode}")
    with ReplayServer(PolicyChatModel(policy=from_wire(CapturePolicy()))) as server:
        env = {MEMORY_URL_VAR: memory.url, "AGENTSTATE_LLM_BASE_URL": server.base_url}
        wired = replay(build(env), f"wire-{mode}")
    strip = [{k: v for k, v in r.items() if k != "memory_id"} for r in offline]
    assert [{k: v for k, v in r.items() if k != "memory_id"} for r in wired] == strip
    assert wired[6]["tool_calls"] == ["add_entry", "await_consistency", "put_context"]
    assert len(server.requests) == len(events)


def call_plain(graph, payload, config, mode: str):
    if mode == "invoke":
        return graph.invoke(payload, config)
    return asyncio.run(graph.ainvoke(payload, config))


# --- the replay server itself: a real HTTP endpoint with clear errors ---


def test_streamed_reply_is_split_into_chunks_the_client_reassembles():
    model = ScriptedChatModel(script=[reply(*store_calls(POSTGRES_FIELDS), text="Storing five.")])
    with ReplayServer(model) as server:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        response = httpx.post(f"{server.base_url}/chat/completions", json=body)
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert response.headers["content-type"] == "text/event-stream" and events[-1] == "[DONE]"
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]]
    assert sum("content" in d and d["content"] != "" for d in deltas) > 1
    assert "".join(d.get("content") or "" for d in deltas) == "Storing five."
    pieces: dict[int, str] = {}
    for d in deltas:
        for c in d.get("tool_calls", []):
            pieces[c["index"]] = pieces.get(c["index"], "") + c["function"]["arguments"]
    assert [json.loads(p) for p in pieces.values()] == [
        {"field_name": k, "value": v} for k, v in POSTGRES_FIELDS.items()
    ]
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "tool_calls"


def test_bad_requests_get_a_clear_400_and_reach_no_model():
    model = ScriptedChatModel(script=[reply(text="never played")])
    with ReplayServer(model) as server:
        url = f"{server.base_url}/chat/completions"
        not_json = httpx.post(url, content=b"{nope", headers={"Content-Type": "application/json"})
        orphan = httpx.post(
            url, json={"messages": [{"role": "tool", "tool_call_id": "x", "content": "?"}]}
        )
        wrong = httpx.post(f"{server.base_url}/completions", json={})
    assert not_json.status_code == 400 and "invalid chat completion request" in not_json.text
    assert orphan.status_code == 400
    assert "tool result for unknown call 'x'" in orphan.json()["error"]["message"]
    assert wrong.status_code == 404
    assert model.position == 0


def test_a_script_that_runs_out_is_a_500_naming_it_and_the_port_is_freed():
    with ReplayServer(ScriptedChatModel(script=[], model_name="empty")) as server:
        port = server.port
        with pytest.raises(openai.InternalServerError, match="ScriptExhaustedError"):
            openai_model(server).invoke("hello")
    assert not port_open(port)

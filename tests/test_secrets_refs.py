"""Issue 16, secrets: one reference per secret value, never shared by calls, threads or users.

Before the fix every value of a field shared one reference
(``$secret:password``), so the last value stored won: two parallel
``connect`` calls, the threads "alice" and "bob" of one agent, and every
user of a served graph (built once at import) all resolved to the last
password. And a secret-looking field name longer than about 117 characters
ended the run with ``ValueError: invalid secret name``.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.lessons import served
from agentstate.lessons.fixtures import POSTGRES_FIELDS, one_reply_model, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.models.policy import PolicyChatModel
from agentstate.rds import build_reducer_agent
from agentstate.tracing import tool_replies
from tests.secret_refs import RDS_PASSWORD, AnyRef

APIS = ["invoke", "ainvoke"]


def run(agent, payload, api, config=None):
    if api == "invoke":
        return agent.invoke(payload, config)
    return asyncio.run(agent.ainvoke(payload, config))


@tool
def connect(host: str, password: str) -> str:
    """Connect to a database."""
    return f"connected to {host}"


def connect_agent(store: SecretStore, *calls: dict):
    model = ScriptedChatModel(script=[reply(*calls), reply(text="ok")])
    redaction = SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})
    return create_agent(model, tools=[connect], middleware=[redaction])


def call_args(state, name: str) -> list[dict]:
    return [
        c["args"]
        for m in state["messages"]
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["name"] == name
    ]


def test_every_put_makes_a_new_reference_that_only_its_store_resolves():
    store, other = SecretStore(), SecretStore()
    first, second = store.put("password", "one"), store.put("password", "two")
    assert first != second and first == AnyRef("password") and second == AnyRef("password")
    assert (store.resolve(first), store.resolve(second)) == ("one", "two")
    assert other.put("password", "one") != first
    with pytest.raises(KeyError, match="no secret stored"):
        other.resolve(first)
    assert "one" not in repr(store) and "two" not in repr(store)


@pytest.mark.parametrize("api", APIS)
def test_two_parallel_connect_calls_resolve_to_their_own_passwords(api):
    store = SecretStore()
    agent = connect_agent(
        store,
        tool_call("connect", host="a", password="pw-for-a"),
        tool_call("connect", host="b", password="pw-for-b"),
    )
    state = run(agent, {"messages": [("user", "connect both")]}, api)
    refs = {args["host"]: args["password"] for args in call_args(state, "connect")}
    assert refs["a"] != refs["b"]
    assert {host: store.resolve(ref) for host, ref in refs.items()} == {
        "a": "pw-for-a",
        "b": "pw-for-b",
    }
    assert "pw-for" not in repr(state["messages"])


def test_two_connect_runs_at_once_on_one_store_keep_their_own_passwords():
    store = SecretStore()

    def one(i: int) -> str:
        agent = connect_agent(store, tool_call("connect", host=f"h{i}", password=f"pw-{i}"))
        (args,) = call_args(agent.invoke({"messages": [("user", "go")]}), "connect")
        return args["password"]

    with ThreadPoolExecutor(8) as pool:
        refs = list(pool.map(one, range(8)))
    assert len(set(refs)) == 8
    assert [store.resolve(ref) for ref in refs] == [f"pw-{i}" for i in range(8)]


def json_turn(fields: dict) -> dict:
    return user_turn(json.dumps(fields))


def agent_side(state: dict) -> str:
    """Everything the agent kept, without the user's own message (which holds what they typed)."""
    kept = {k: v for k, v in state.items() if k != "messages"}
    return repr(kept) + repr([m for m in state["messages"] if not isinstance(m, HumanMessage)])


@pytest.mark.parametrize("api", APIS)
def test_threads_alice_and_bob_of_one_reducer_agent_keep_their_own_password(api):
    store = SecretStore()
    agent = build_reducer_agent(
        PolicyChatModel(policy=served.rds_policy, model_name="reducer"),
        secrets=store,
        checkpointer=InMemorySaver(),
    )
    refs = {}
    for user in ("alice", "bob"):
        config = {"configurable": {"thread_id": user}}
        state = run(agent, json_turn({"engine": "postgres", "password": f"{user}-pw"}), api, config)
        refs[user] = state["requirements"]["password"]
    assert {user: store.resolve(ref) for user, ref in refs.items()} == {
        "alice": "alice-pw",
        "bob": "bob-pw",
    }
    assert refs["alice"] != refs["bob"]
    assert refs["alice"] == RDS_PASSWORD and refs["bob"] == RDS_PASSWORD
    alice = agent.get_state({"configurable": {"thread_id": "alice"}}).values
    assert "bob" not in repr(alice["requirements"]) and refs["bob"] not in repr(alice)


SERVED = ["reducer", "turn_cache", "subagents"]


@pytest.mark.parametrize("graph", SERVED)
def test_the_served_graphs_built_once_keep_each_users_password_apart(graph):
    """In process, on the very graph objects ``langgraph dev`` imports, two users at once."""
    agent = getattr(served, graph)

    def one(user: str) -> str:
        config = {"configurable": {"thread_id": f"{graph}-{user}"}}
        state = agent.invoke(json_turn({"engine": "postgres", "password": f"{user}-pw"}), config)
        assert f"{user}-pw" not in agent_side(state)
        return state["requirements"]["password"]

    with ThreadPoolExecutor(2) as pool:
        refs = dict(zip(("alice", "bob"), pool.map(one, ("alice", "bob")), strict=True))
    assert refs["alice"] != refs["bob"]
    assert all(ref == RDS_PASSWORD for ref in refs.values())
    assert {u: served.SECRETS.resolve(r) for u, r in refs.items()} == {
        "alice": "alice-pw",
        "bob": "bob-pw",
    }


LONG = "x" * 190 + "_password"  # secret-looking, and far too long to name a secret


@pytest.mark.parametrize("graph", SERVED)
@pytest.mark.parametrize("api", APIS)
def test_a_200_character_secret_looking_field_is_a_tool_error_not_a_dead_run(graph, api):
    agent = getattr(served, graph)
    payload = json_turn({LONG: "long-field-pw", "engine": "postgres"})
    state = run(agent, payload, api, {"configurable": {"thread_id": f"long-{graph}-{api}"}})
    assert "long-field-pw" not in agent_side(state)
    assert state["requirements"] == {"engine": "postgres"}  # the bad field changed nothing
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls  # the run ended normally


@pytest.mark.parametrize("api", APIS)
def test_the_long_field_comes_back_to_the_model_as_an_error_it_can_correct(api):
    agent = build_reducer_agent(
        one_reply_model(*store_calls({LONG: "long-field-pw", **POSTGRES_FIELDS}))
    )
    state = run(agent, user_turn(), api)
    errors = [m for m in tool_replies(state, "store_requirement") if m.status == "error"]
    assert len(errors) == 1 and "unknown field" in errors[0].content
    assert isinstance(errors[0], ToolMessage) and "long-field-pw" not in errors[0].content
    assert state["requirements"] == POSTGRES_FIELDS

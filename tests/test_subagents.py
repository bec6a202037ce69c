"""Stage 04: what crosses the task boundary, the schema fix, parallel subagents, list hazard."""

import json

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import InvalidUpdateError

from agentstate.core import append_unique, undeclared_keys
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    AddNotesState,
    UniqueNotesState,
    build_notes_agent,
    collector_model,
    file_fields,
    parent_model,
    user_turn,
    who_sees_what,
)
from agentstate.rds import (
    PlainRequirementsState,
    build_cache_fix_agent,
    build_shared_schema_agent,
    build_split_schema_agent,
)
from agentstate.tracing import CommandRecorder

# One field per task: inside each collector one write per step, so the only
# parallel writes are the two task results in the parent.
NETWORK = {"engine": "postgres"}
SIZING = {"instance_class": "db.t3.micro"}


def verdict(state):
    return [
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "validate_manifest"
    ][-1].content


def test_split_schema_drops_the_subagents_writes_silently():
    recorder = CommandRecorder()
    agent = build_split_schema_agent(
        parent_model(POSTGRES_FIELDS), collector_model(), middleware=[recorder]
    )
    state = agent.invoke(user_turn())
    assert state.get("requirements", {}) == {}
    for field in POSTGRES_FIELDS:
        assert f"{field}: missing required field" in verdict(state)
    assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]


def test_shared_schema_carries_requirements_across_the_task_boundary():
    recorder = CommandRecorder()
    agent = build_shared_schema_agent(
        parent_model(POSTGRES_FIELDS),
        collector_model(),
        middleware=[recorder],
        checkpointer=InMemorySaver(),
    )
    state = agent.invoke(user_turn(), {"configurable": {"thread_id": "t"}})
    assert state["requirements"] == POSTGRES_FIELDS
    assert file_fields(state) == POSTGRES_FIELDS
    assert not any(f"{f}: missing" in verdict(state) for f in POSTGRES_FIELDS)
    assert recorder.updates == [{"tool": "task", "update keys": ["messages", "requirements"]}]


def test_who_sees_what_schema_fix_versus_cache_fix(tmp_path):
    schema = who_sees_what(build_shared_schema_agent, POSTGRES_FIELDS, str(tmp_path / "a.db"))
    cache = who_sees_what(build_cache_fix_agent, POSTGRES_FIELDS, str(tmp_path / "b.db"))
    split = who_sees_what(build_split_schema_agent, POSTGRES_FIELDS, str(tmp_path / "c.db"))
    assert schema == {"same turn": 5, "next turn": 5, "after restart": 5, "file after restart": 5}
    # the cache fix: the file keeps what the agent itself can no longer read
    assert cache == {"same turn": 5, "next turn": 0, "after restart": 0, "file after restart": 5}
    assert split == {"same turn": 0, "next turn": 0, "after restart": 0, "file after restart": 0}


def test_the_cache_fix_shows_the_subagents_fields_in_the_same_turn_only():
    agent = build_cache_fix_agent(
        parent_model(POSTGRES_FIELDS), collector_model(), checkpointer=InMemorySaver()
    )
    state = agent.invoke(user_turn(), {"configurable": {"thread_id": "t"}})
    assert not any(f"{f}: missing" in verdict(state) for f in POSTGRES_FIELDS)
    assert state.get("requirements", {}) == {}  # visible through the cache only, not in state


def test_the_cache_fix_needs_a_thread_and_says_so():
    agent = build_cache_fix_agent(parent_model(POSTGRES_FIELDS), collector_model())
    with pytest.raises(ValueError, match="keys its turn cache by thread"):
        agent.invoke(user_turn())


def test_undeclared_keys_finds_the_key_the_split_schema_collector_lacks():
    from deepagents import create_deep_agent

    from agentstate.rds import RdsAgentState

    plain = create_deep_agent(collector_model())
    shared = create_deep_agent(collector_model(), state_schema=RdsAgentState)
    assert undeclared_keys(plain, ["requirements"]) == ["requirements"]
    assert undeclared_keys(shared, ["requirements"]) == []


def test_a_subgraph_stream_shows_the_task_description_as_a_second_human_message():
    agent = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
    humans = {}
    for namespace, values in agent.stream(
        user_turn("Postgres please"), stream_mode="values", subgraphs=True
    ):
        for m in values.get("messages", []):
            if isinstance(m, HumanMessage):
                humans[m.id] = (bool(namespace), m.content)
    assert sorted(humans.values()) == [
        (False, "Postgres please"),
        (True, json.dumps(POSTGRES_FIELDS)),
    ]


def test_parallel_subagents_merge_with_the_reducer():
    agent = build_shared_schema_agent(parent_model(NETWORK, SIZING), collector_model(2))
    assert agent.invoke(user_turn())["requirements"] == {**NETWORK, **SIZING}


def test_parallel_subagents_without_a_reducer_raise_invalid_update_error():
    agent = build_shared_schema_agent(
        parent_model(NETWORK, SIZING), collector_model(2), state_schema=PlainRequirementsState
    )
    with pytest.raises(InvalidUpdateError, match="Can receive only one value per step"):
        agent.invoke(user_turn())
    single = build_shared_schema_agent(
        parent_model(NETWORK), collector_model(), state_schema=PlainRequirementsState
    )
    assert single.invoke(user_turn())["requirements"] == NETWORK


def test_operator_add_list_duplicates_the_parents_items_and_append_unique_does_not():
    start = {"messages": [("user", "note it")], "notes": ["pre"]}
    assert build_notes_agent(AddNotesState).invoke(start)["notes"] == ["pre", "pre", "new"]
    assert build_notes_agent(UniqueNotesState).invoke(start)["notes"] == ["pre", "new"]
    assert append_unique(["a"], ["a", "b"]) == ["a", "b"]


def test_the_user_message_is_stored_once_and_the_subagent_sees_only_the_task():
    collector = collector_model()
    agent = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector)
    state = agent.invoke(user_turn("Give me a Postgres 15.5 manifest"))
    humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
    assert [m.content for m in humans] == ["Give me a Postgres 15.5 manifest"]
    first_input = collector.seen[0]
    sub_humans = [m.content for m in first_input if isinstance(m, HumanMessage)]
    assert len(sub_humans) == 1 and "Postgres 15.5 manifest" not in sub_humans[0]


def test_share_state_refuses_a_compiled_subagent_it_cannot_change():
    """A middleware added to a compiled subagent's spec is ignored by deepagents: its
    writes to the shared key would be dropped silently, so share_state must refuse."""
    from langchain.agents import create_agent

    from agentstate.core import SharedStateMiddleware, share_state
    from agentstate.rds import RdsAgentState

    plain = create_agent(collector_model(), tools=[])
    spec = {"name": "collector", "description": "collects", "runnable": plain}
    with pytest.raises(ValueError, match=r"compiled subagent 'collector'.*requirements"):
        share_state([spec], RdsAgentState)
    declared = create_agent(
        collector_model(), tools=[], middleware=[SharedStateMiddleware(RdsAgentState)]
    )
    (kept,) = share_state([{**spec, "runnable": declared}], RdsAgentState)
    assert kept["runnable"] is declared and "middleware" not in kept
    remote = {"name": "far", "description": "remote", "graph_id": "g", "url": "http://127.0.0.1:9"}
    with pytest.raises(ValueError, match="async subagent 'far'"):
        share_state([remote], RdsAgentState)
    (declarative,) = share_state([{"name": "d", "description": "d", "system_prompt": "p"}], dict)
    assert isinstance(declarative["middleware"][0], SharedStateMiddleware)

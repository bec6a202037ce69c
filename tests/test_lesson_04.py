"""Notebook 04 (the subagent boundary): the deepagents / LangChain behaviour the lesson relies
on, pinned here so an upgrade that changes it turns CI red, and the lesson's plain
``create_deep_agent`` fix, executed from the notebook's own source, against the package's
``build_shared_schema_agent``."""

import json
from pathlib import Path

import jupytext
import pytest
from deepagents.middleware.subagents import create_sub_agent
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph import StateGraph

from agentstate.core import SharedStateMiddleware, share_state, undeclared_keys
from agentstate.doctor import diagnose
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    collector_model,
    fields_seen_by_reader,
    parent_model,
    user_turn,
)
from agentstate.models import ScriptedChatModel, reply
from agentstate.rds import (
    RdsAgentState,
    RequirementsSyncMiddleware,
    StateStorage,
    assemble_rds_agent,
    build_shared_schema_agent,
    build_split_schema_agent,
    collector_spec,
)
from agentstate.tracing import CommandRecorder

LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "_src" / "04_subagents.py"
GOING_FURTHER = LESSON.parent / "going_further" / "04_lists_and_fork_mode.py"
TEACHING = ("class RequirementsState", "def store_requirement", "def my_agent")


@pytest.fixture(scope="module")
def lesson() -> dict:
    """The cells of notebook 04 that write the plain agent, executed as the reader runs them."""
    cells = [c.source for c in jupytext.read(LESSON).cells if c.cell_type == "code"]
    chosen = [s for s in cells if any(marker in s for marker in TEACHING)]
    assert len(chosen) == len(TEACHING), "a teaching cell of notebook 04 was renamed or merged"
    namespace = {"POSTGRES_FIELDS": POSTGRES_FIELDS, "collector_model": collector_model}
    text = LESSON.read_text()
    for source in chosen:
        # Padded to the cell's line in the file, so inspect.getsource (the doctor) finds it.
        padded = "\n" * text[: text.index(source)].count("\n") + source
        exec(compile(padded, str(LESSON), "exec", dont_inherit=True), namespace)
    return namespace


@pytest.fixture(scope="module")
def humans_received():
    """``humans_received(mode)`` from going-further notebook 04, executed from its source: the
    human messages a collector that only answers received, in subagent ``mode``."""
    cells = [c.source for c in jupytext.read(GOING_FURTHER).cells if c.cell_type == "code"]
    (source,) = [s for s in cells if "def humans_received" in s]
    namespace: dict = {"POSTGRES_FIELDS": POSTGRES_FIELDS}
    exec(compile(source, str(GOING_FURTHER), "exec", dont_inherit=True), namespace)
    return namespace["humans_received"]


# --- what crosses the boundary, pinned ---


@pytest.mark.parametrize("mode", [None, "isolated"])
def test_the_default_mode_hands_the_subagent_only_the_task_description(humans_received, mode):
    humans = humans_received(mode)
    assert len(humans) == 1 and json.loads(humans[0]) == POSTGRES_FIELDS


def test_fork_mode_hands_the_subagent_the_parents_conversation(humans_received):
    humans = humans_received("fork")
    assert humans[0] == "Give me a Postgres 15.5 manifest"
    assert len(humans) == 2 and '"engine": "postgres"' in humans[1]  # the task, wrapped


def test_create_agent_not_langgraph_merges_a_middlewares_state_schema():
    class Declares(AgentMiddleware):
        state_schema = RdsAgentState

    model = ScriptedChatModel(script=[reply(text="ok")])
    merged = create_agent(model, middleware=[Declares()])
    assert "requirements" in merged.channels
    plain = StateGraph(AgentState)
    plain.add_node("noop", lambda state: {})
    plain.set_entry_point("noop")
    assert "requirements" not in plain.compile().channels


def test_create_deep_agent_forwards_its_schema_to_declarative_subagents():
    spec = collector_spec(collector_model(), StateStorage())
    assert undeclared_keys(create_sub_agent(spec), ["requirements"]) == ["requirements"]
    forwarded = create_sub_agent(spec, state_schema=RdsAgentState)
    assert undeclared_keys(forwarded, ["requirements"]) == []


def test_split_schema_task_returns_only_messages():
    recorder = CommandRecorder(["task"])
    state = build_split_schema_agent(
        parent_model(POSTGRES_FIELDS), collector_model(), middleware=[recorder]
    ).invoke(user_turn())
    assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]
    assert state.get("requirements", {}) == {}


def test_share_state_declares_the_key_on_a_spec_without_the_parents_schema():
    specs = share_state([collector_spec(collector_model(), StateStorage())], RdsAgentState)
    assert undeclared_keys(create_sub_agent(specs[0]), ["requirements"]) == []
    state = assemble_rds_agent(
        parent_model(POSTGRES_FIELDS),
        StateStorage(),
        middleware=[SharedStateMiddleware(RdsAgentState), RequirementsSyncMiddleware()],
        subagents=specs,
    ).invoke(user_turn())
    assert state["requirements"] == POSTGRES_FIELDS


# --- the lesson's plain agent against the package ---


def test_the_lessons_broken_agent_drops_the_key_like_the_split_schema_build(lesson):
    recorder = CommandRecorder(["task"])
    state = lesson["my_agent"](
        collector_model(), recorder, middleware=[lesson["DeclareOnParent"]()]
    ).invoke(user_turn())
    assert fields_seen_by_reader(state) == 0 and state.get("requirements", {}) == {}
    assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]


def test_the_lessons_fix_and_the_package_give_the_parent_the_same_fields(lesson):
    plain = lesson["my_agent"](state_schema=lesson["RequirementsState"]).invoke(user_turn())
    package = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model()).invoke(
        user_turn()
    )
    assert plain["requirements"] == package["requirements"] == POSTGRES_FIELDS
    assert fields_seen_by_reader(plain) == 5


def test_the_doctor_names_the_lessons_broken_agent_and_passes_the_fixed_one(lesson):
    broken = lesson["my_agent"](middleware=[lesson["DeclareOnParent"]()])
    fixed = lesson["my_agent"](state_schema=lesson["RequirementsState"])
    assert diagnose(broken).codes() == ["subagent-drops-key"]
    assert diagnose(fixed).errors == []


def test_the_lessons_fix_holds_under_ainvoke_like_the_package(lesson):
    import asyncio

    async def both():
        plain = lesson["my_agent"](state_schema=lesson["RequirementsState"])
        package = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
        return await plain.ainvoke(user_turn()), await package.ainvoke(user_turn())

    plain, package = asyncio.run(both())
    assert plain["requirements"] == package["requirements"] == POSTGRES_FIELDS

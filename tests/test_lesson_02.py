"""Notebook 02's library claims, pinned, and its teaching reducer agrees with the package's.

The lesson shows a few of these in cells; the exhaustive checks (channel
types, where and how often LangGraph calls a reducer, the step a write lands
in) live here so a LangGraph or LangChain upgrade that changes them turns CI
red, and so do the knob's fixed settings and the graph the lesson draws. The
teaching tool, schemas, reducer and knob are executed from the lesson's own
source (``notebooks/_src/02_state_reducer.py``), not copied.
"""

import asyncio
import copy
import re
import traceback
from typing import Annotated, Any, NotRequired

import pytest
from deepagents import DeepAgentState
from langchain.agents import AgentState, create_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import InvalidUpdateError

from agentstate.core import merge_fields as package_merge_fields
from agentstate.hazards import hazard
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    HoldReaderMiddleware,
    ReducerProbe,
    fields_seen_by_reader,
    file_fields,
    graph_steps,
    label_fields,
    merge_in_place,
    one_batch_model,
    one_call_per_step_model,
    reader_batch_model,
    user_turn,
)
from agentstate.lessons.purity import areader_saw, areducer_calls, reader_saw, reducer_calls
from agentstate.lessons.reducer_knob import arequirements_kept, requirements_kept
from agentstate.rds import (
    StateStorage,
    assemble_rds_agent,
    build_plain_dict_agent,
    build_reducer_agent,
)
from agentstate.tracing import ToolTimeline, state_by_step, tool_replies
from tests.lesson_source import LESSONS, definitions

LESSON = LESSONS / "02_state_reducer.py"
TEACHING = {
    "store_requirement",
    "PlainState",
    "replace_whole",
    "ReplaceState",
    "merge_fields",
    "RequirementsState",
    "TURN",
    "agent_with",
    "SCHEMAS",
    "merge_in_place",
}


def teaching() -> dict:
    """The lesson's imports and the definitions named in TEACHING, executed from its source."""
    return definitions("02", TEACHING)


@pytest.fixture(scope="module")
def lesson() -> dict:
    return teaching()


def agent_with(lesson: dict, schema: str, model, **kwargs):
    return create_agent(
        model, tools=[lesson["store_requirement"]], state_schema=lesson[schema], **kwargs
    )


def run(agent, inp, mode: str, config=None):
    if mode == "sync":
        return agent.invoke(inp, config)
    return asyncio.run(agent.ainvoke(inp, config))


# --- the failure ---


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plain_key_raises_after_every_tool_ran_in_apply_writes(lesson, mode):
    timeline = ToolTimeline()
    agent = agent_with(
        lesson, "PlainState", one_batch_model(POSTGRES_FIELDS), middleware=[timeline]
    )
    with pytest.raises(InvalidUpdateError) as caught:
        run(agent, user_turn(), mode)
    assert str(caught.value).splitlines()[0] == (
        "At key 'requirements': Can receive only one value per step. "
        "Use an Annotated key to handle multiple values."
    )
    assert "apply_writes" in {f.name for f in traceback.extract_tb(caught.value.__traceback__)}
    assert len(timeline.events) == 5


def test_a_plain_key_across_steps_keeps_only_the_last_write(lesson):
    model = one_call_per_step_model({"engine": "postgres", "username": "dbadmin"})
    state = agent_with(lesson, "PlainState", model).invoke(user_turn())
    assert state["requirements"] == {"username": "dbadmin"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_to_a_key_the_schema_does_not_declare_is_dropped_silently(lesson, mode):
    agent = create_agent(one_batch_model(POSTGRES_FIELDS), tools=[lesson["store_requirement"]])
    state = run(agent, user_turn(), mode)
    assert "requirements" not in state
    assert {m.status for m in tool_replies(state)} == {"success"}


def test_the_package_plain_agent_fails_the_same_way():
    with pytest.raises(InvalidUpdateError, match="Can receive only one value per step"):
        build_plain_dict_agent(one_batch_model(POSTGRES_FIELDS)).invoke(user_turn())


# --- the channels LangGraph builds ---


def test_a_plain_key_is_a_last_value_channel_and_an_annotated_one_folds_through_its_reducer(
    lesson,
):
    kinds = {
        schema: type(agent_with(lesson, schema, one_batch_model({})).channels["requirements"])
        for schema in ("PlainState", "ReplaceState", "RequirementsState")
    }
    assert {k: v.__name__ for k, v in kinds.items()} == {
        "PlainState": "LastValue",
        "ReplaceState": "BinaryOperatorAggregate",
        "RequirementsState": "BinaryOperatorAggregate",
    }
    package = build_reducer_agent(one_batch_model({}))
    assert type(package.channels["requirements"]).__name__ == "BinaryOperatorAggregate"


def test_a_reducer_that_replaces_keeps_the_last_call_of_the_reply(lesson):
    state = agent_with(lesson, "ReplaceState", one_batch_model(POSTGRES_FIELDS)).invoke(user_turn())
    assert state["requirements"] == {"username": "dbadmin"}


# --- the fix, and the package's version of it ---


def test_the_teaching_reducer_is_pure_and_equals_the_package_one(lesson):
    cases = [(None, None), ({"a": 1}, None), (None, {"b": 2}), ({"a": 1, "b": 1}, {"b": 2})]
    for left, right in cases:
        before = copy.deepcopy((left, right))
        result = lesson["merge_fields"](left, right)
        assert result == package_merge_fields(left, right)
        assert (left, right) == before and result is not left


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fields", [POSTGRES_FIELDS, label_fields(50)], ids=["five", "fifty"])
def test_the_teaching_agent_and_build_reducer_agent_keep_the_same_requirements(
    lesson, mode, fields
):
    teaching_state = run(
        agent_with(lesson, "RequirementsState", one_batch_model(fields)), user_turn(), mode
    )
    package_state = run(build_reducer_agent(one_batch_model(fields)), user_turn(), mode)
    assert teaching_state["requirements"] == package_state["requirements"] == fields
    assert file_fields(package_state) == fields  # what the package adds: the synced file


def test_five_hundred_parallel_calls_keep_five_hundred_fields(lesson):
    state = agent_with(lesson, "RequirementsState", one_batch_model(label_fields(500))).invoke(
        user_turn()
    )
    assert state["requirements"] == label_fields(500)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_second_turn_on_the_thread_adds_to_the_first(lesson, mode):
    from agentstate.lessons.fixtures import store_calls
    from agentstate.models import ScriptedChatModel, reply

    model = ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres"})),
            reply(text="ok"),
            reply(*store_calls({"username": "dbadmin"})),
            reply(text="ok"),
        ]
    )
    agent = agent_with(lesson, "RequirementsState", model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    run(agent, user_turn("one"), mode, config)
    state = run(agent, user_turn("two"), mode, config)
    assert state["requirements"] == {"engine": "postgres", "username": "dbadmin"}


# --- where the writes land, and how often LangGraph calls the reducer ---


def test_create_agent_applies_the_five_writes_at_step_two(lesson):
    agent = agent_with(
        lesson, "RequirementsState", one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "s"}}
    agent.invoke(user_turn(), config)
    steps = graph_steps(
        state_by_step(agent, config, lambda v: {"n": len(v.get("requirements", {}))})
    )
    assert [steps[s]["next"] for s in (-1, 0, 1, 2, 3)] == [
        "__start__",
        "model",
        "tools x5",
        "model",
        "(end)",
    ]
    assert [steps[s]["n"] for s in (1, 2)] == [0, 5]


def test_the_package_agent_merges_at_step_three_and_syncs_the_file_in_after_agent():
    agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "p"}}
    agent.invoke(user_turn(), config)
    rows = state_by_step(
        agent,
        config,
        lambda v: {"n": len(v.get("requirements", {})), "file": len(file_fields(v))},
    )
    steps = graph_steps(rows)
    assert steps[2]["next"] == "tools x5" and steps[3]["n"] == 5 and steps[3]["file"] == 0
    synced = next(r for r in rows if r["file"] == 5)
    assert steps[synced["step"] - 1]["next"] == "RequirementsSyncMiddleware.after_agent"


def _probed_schema(probe: ReducerProbe, base: type) -> type:
    class Probed(base):
        requirements: Annotated[NotRequired[dict[str, Any]], probe]

    return Probed


@pytest.mark.parametrize("base", [AgentState, DeepAgentState], ids=["create_agent", "deep"])
def test_langgraph_calls_the_reducer_twice_per_write_half_on_throwaway_copies(lesson, base):
    probe = ReducerProbe(package_merge_fields)
    schema = _probed_schema(probe, base)
    if base is AgentState:
        agent = create_agent(
            one_batch_model(POSTGRES_FIELDS),
            tools=[lesson["store_requirement"]],
            state_schema=schema,
        )
    else:
        agent = assemble_rds_agent(
            one_batch_model(POSTGRES_FIELDS), StateStorage(), state_schema=schema
        )
    assert agent.invoke(user_turn())["requirements"] == POSTGRES_FIELDS
    assert probe.sites() == {ReducerProbe.THROWAWAY: 5, ReducerProbe.APPLY: 5}
    applied = [c for c in probe.calls if c["site"] == ReducerProbe.APPLY]
    throwaway = [c for c in probe.calls if c["site"] == ReducerProbe.THROWAWAY]
    assert [list(c["write"]) for c in applied] == [[f] for f in POSTGRES_FIELDS]  # call order
    assert {c["thread"] for c in applied} == {"MainThread"}
    assert "MainThread" not in {c["thread"] for c in throwaway}  # on the tools' threads


@pytest.mark.parametrize(
    ("reducer", "seen"), [(package_merge_fields, 0), (merge_in_place, 5)], ids=["pure", "impure"]
)
def test_an_impure_reducer_leaks_the_batch_into_a_same_batch_reader(reducer, seen):
    probe = ReducerProbe(reducer)
    schema = _probed_schema(probe, DeepAgentState)
    hold = HoldReaderMiddleware(probe, throwaway_calls=len(POSTGRES_FIELDS))
    agent = assemble_rds_agent(
        reader_batch_model(POSTGRES_FIELDS, trials=1),
        StateStorage(),
        state_schema=schema,
        middleware=[hold],
    )
    assert fields_seen_by_reader(agent.invoke(user_turn())) == seen


# --- the knob at fixed settings, and the graph the lesson draws ---


def test_the_knob_over_its_range_plain_raises_from_two_replace_keeps_one_merge_keeps_all(
    lesson,
):
    """The table the knob's cell prints, and the knob's start (the first state class, 5 calls)."""
    kept = {
        name: {n: requirements_kept(schema, n) for n in (1, 2, 50)}
        for name, schema in lesson["SCHEMAS"].items()
    }
    assert list(lesson["SCHEMAS"]) == ["plain", "replace_whole", "merge_fields"]
    assert requirements_kept(lesson["PlainState"]) == "InvalidUpdateError"
    assert kept == {
        "plain": {1: 1, 2: "InvalidUpdateError", 50: "InvalidUpdateError"},
        "replace_whole": {1: 1, 2: 1, 50: 1},
        "merge_fields": {1: 1, 2: 2, 50: 50},
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("calls", [1, 3, 7])
def test_the_knobs_requirements_kept_keeps_what_the_pages_own_agent_keeps(lesson, mode, calls):
    """requirements_kept runs the package's copy of store_requirement: the page's agent_with,
    on the same state class and calls, keeps as many fields (or raises the same error)."""
    for schema in lesson["SCHEMAS"].values():
        try:
            state = run(lesson["agent_with"](schema, label_fields(calls)), user_turn(), mode)
            page: int | str = len(state["requirements"])
        except InvalidUpdateError:
            page = "InvalidUpdateError"
        if mode == "sync":
            assert requirements_kept(schema, calls) == page
        else:
            assert asyncio.run(arequirements_kept(schema, calls)) == page


def test_the_lessons_mermaid_diagram_has_the_edges_of_the_agents_graph(lesson):
    block = LESSON.read_text().split("# ```mermaid\n", 1)[1].split("# ```", 1)[0]
    drawn = set(re.findall(r"^#\s+(\w+)\b.*-->\s*(\w+)", block, re.M))
    names = {"__start__": "start", "__end__": "done"}
    graph = lesson["agent_with"](lesson["RequirementsState"]).get_graph()
    real = {(names.get(e.source, e.source), names.get(e.target, e.target)) for e in graph.edges}
    assert (
        drawn
        == real
        == {("start", "model"), ("model", "tools"), ("tools", "model"), ("model", "done")}
    )


# --- what the lesson now prints instead of asserting ---


def test_the_doctor_names_the_plain_key_and_passes_the_merging_reducer(lesson):
    from agentstate.doctor import diagnose

    assert diagnose(lesson["agent_with"](lesson["PlainState"])).codes() == [
        "unreduced-parallel-write"
    ]
    assert diagnose(lesson["agent_with"](lesson["RequirementsState"])).codes() == []


def test_the_side_by_side_picture_keeps_one_write_replacing_and_five_merging(lesson):
    from agentstate.tracing import ToolTimeline, superstep

    kept = {}
    for schema in ("ReplaceState", "RequirementsState"):
        timeline = ToolTimeline()
        lesson["agent_with"](lesson[schema], middleware=[timeline]).invoke(lesson["TURN"])
        flow = superstep(timeline, "requirements")
        assert [c.read for c in flow.calls] == [{}] * 5
        kept[schema] = [c.kept for c in flow.calls]
    assert kept == {"ReplaceState": [False] * 4 + [True], "RequirementsState": [True] * 5}


def test_the_hazard_rows_the_lesson_links_agree_with_what_it_shows(lesson):
    """agentstate.hazards' reproductions of lesson 02 (the rows its opening links to)."""
    results = {
        name: hazard(name).run()
        for name in ("plain-key-parallel-write", "replace-reducer", "undeclared-key")
    }
    assert {n: r.outcome for n, r in results.items()} == dict.fromkeys(results, "reproduced")
    assert results["plain-key-parallel-write"].evidence.startswith("InvalidUpdateError")
    assert results["replace-reducer"].evidence.startswith("kept 1 of 5")
    undeclared = lesson["agent_with"](lesson["AgentState"]).invoke(lesson["TURN"])
    assert "requirements" not in undeclared and "no error" in results["undeclared-key"].evidence


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_impure_reducer_leaks_the_five_writes_to_a_same_step_reader_and_the_pure_one_none(
    lesson, mode
):
    """The lesson's purity cell: its own reducers through the package's reader_saw (and
    areader_saw), three times: 0 and 5 fields every time."""
    for _ in range(3):
        saw = {
            r: reader_saw(lesson[r]) if mode == "sync" else asyncio.run(areader_saw(lesson[r]))
            for r in ("merge_fields", "merge_in_place")
        }
        assert saw == {"merge_fields": 0, "merge_in_place": 5}


def test_the_tools_of_create_agent_run_in_super_step_2(lesson):
    timeline = ToolTimeline()
    agent = agent_with(
        lesson, "RequirementsState", one_batch_model(POSTGRES_FIELDS), middleware=[timeline]
    )
    agent.invoke(user_turn())
    assert {e.step for e in timeline.events} == {2}
    assert [m.step for m in timeline.model_calls] == [1, 3]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_purity_cells_reducer_calls_one_per_write_while_the_step_runs_and_one_when_it_ends(
    lesson, mode
):
    """What the lesson prints before reader_saw: LangGraph's calls to its merge_fields."""
    calls = (
        reducer_calls(lesson["merge_fields"])
        if mode == "sync"
        else asyncio.run(areducer_calls(lesson["merge_fields"]))
    )
    assert calls == {
        "while the step runs (on a copy)": 5,
        "when the step ends (the real state)": 5,
    }

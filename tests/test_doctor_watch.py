"""``Watch``: evidence from a run of an unchanged graph, per code, sync and async."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langgraph.errors import InvalidUpdateError
from langgraph.graph import START, StateGraph

from agentstate import rds
from agentstate.core import TurnCacheMiddleware
from agentstate.doctor import Report, Watch, diagnose
from agentstate.doctor.facts.prefix import divergence
from agentstate.experts import ExpertsConfig, build_experts_graph, user_turn
from agentstate.lessons.fixtures import POSTGRES_FIELDS, collector_model, parent_model
from agentstate.models import ScriptedChatModel, reply, tool_call
from tests.test_doctor_diagnose import (
    MergedTags,
    PlainTags,
    TodoState,
    list_tags,
    read_todos,
    save_tag,
    write_todos,
)

MODES = ["invoke", "ainvoke", "stream", "astream"]
QUESTION = "How do I report a lost card, and which fees and compliance rules apply?"


def run(graph: Any, inputs: Any, mode: str, watch: Watch) -> None:
    """One run in ``mode`` with the watch as its only callback; errors are the caller's."""
    config: Any = {"callbacks": [watch]}
    if mode == "invoke":
        graph.invoke(inputs, config)
    elif mode == "stream":
        for _ in graph.stream(inputs, config):
            pass
    else:

        async def go() -> None:
            if mode == "ainvoke":
                await graph.ainvoke(inputs, config)
            else:
                async for _ in graph.astream(inputs, config):
                    pass

        asyncio.run(go())


def watched(graph: Any, inputs: Any, mode: str) -> Report:
    """The report of a fresh watch on one run of ``graph`` in ``mode``."""
    watch = Watch(graph)
    run(graph, inputs, mode, watch)
    return watch.report()


def batch_model(*names: str) -> ScriptedChatModel:
    calls = [tool_call("save_tag", name=n) for n in names]
    return ScriptedChatModel(script=[reply(*calls, tool_call("list_tags")), reply(text="done")])


def tags_agent(schema: type | None, *, cache: bool = False) -> Any:
    middleware = (
        [TurnCacheMiddleware(writers=["save_tag"], readers=["list_tags"], key="tags")]
        if cache
        else []
    )
    extra = {"state_schema": schema} if schema is not None else {}
    return create_agent(
        batch_model("a", "b"), tools=[save_tag, list_tags], middleware=middleware, **extra
    )


USER = {"messages": [{"role": "user", "content": "tag a and b"}]}


@pytest.mark.parametrize("mode", MODES)
def test_parallel_writers_of_a_plain_key_are_named_even_when_the_run_fails(mode):
    agent = tags_agent(PlainTags)
    watch = Watch(agent)
    with pytest.raises(InvalidUpdateError):
        run(agent, USER, mode, watch)
    (found,) = watch.report().of("unreduced-parallel-write")
    assert (found.severity, found.subject) == ("error", "tags")
    step, ended = found.evidence
    assert step.startswith("step 2: `save_tag` (call ") and step.count("`save_tag`") == 2
    assert ended.startswith("the run ended with InvalidUpdateError: At key 'tags'")


@pytest.mark.parametrize("mode", MODES)
def test_a_reduced_key_gives_no_parallel_write_evidence(mode):
    assert watched(tags_agent(MergedTags), USER, mode).of("unreduced-parallel-write") == []


@pytest.mark.parametrize("mode", MODES)
def test_a_dropped_write_to_an_undeclared_key_is_shown(mode):
    (found,) = watched(tags_agent(None), USER, mode).of("undeclared-key")
    assert found.subject == "tags" and len(found.evidence) == 2
    assert all("`save_tag` (call " in e and e.endswith("wrote `tags`") for e in found.evidence)
    assert watched(tags_agent(MergedTags), USER, mode).of("undeclared-key") == []


@pytest.mark.parametrize("mode", MODES)
def test_a_reader_in_its_writers_batch_is_shown_and_the_turn_cache_silences_it(mode):
    report = watched(tags_agent(MergedTags), USER, mode)
    assert report.codes() == ["same-batch-read"]
    (evidence,) = report.of("same-batch-read")[0].evidence
    assert evidence.startswith("step 2: `list_tags` (call ") and "which wrote `tags`" in evidence
    assert watched(tags_agent(MergedTags, cache=True), USER, mode).findings == []


STAMP = "2026-01-01T00:00:0"


def experts(policy: str) -> Any:
    model = ScriptedChatModel(script=[reply(text=f"note {i}") for i in range(8)])
    ticks = itertools.count(1)
    config = ExpertsConfig(
        mode="llm", expert_model=model, prefix_policy=policy, clock=lambda: f"{STAMP}{next(ticks)}"
    )
    return build_experts_graph(config)


@pytest.mark.parametrize("mode", MODES)
def test_a_timestamp_before_the_manual_is_shown_with_offset_and_text(mode):
    report = watched(experts("timestamp_first"), user_turn(QUESTION), mode)
    assert report.codes() == ["prefix-not-invariant"]
    first = report.findings[0].evidence[0]
    offset = len(f"system: Current time: {STAMP}")
    assert f"calls 1 and 2 diverge at offset {offset} (message 1 (system), character" in first
    assert f"'system: Current time: {STAMP}1' vs 'system: Current time: {STAMP}2'" in first
    assert first.endswith("characters are the same in both")


@pytest.mark.parametrize("mode", MODES)
def test_the_invariant_manual_prefix_is_clean(mode):
    graph = experts("invariant")
    watch = Watch(graph)
    run(graph, user_turn(QUESTION), mode, watch)
    assert len(watch._prompts) >= 2  # the calls were seen, and they agree up to the persona
    assert watch.report().findings == []


def test_divergence_needs_a_large_shared_part_after_it():
    manual = " ".join(f"rule {i}" for i in range(1000))
    stamped = divergence("t=1\n" + manual + "q1", "t=2\n" + manual + "q2")
    assert stamped is not None and stamped.prefix == 2 and stamped.shared >= len(manual)
    tail_only = divergence(manual + "persona A, question", manual + "persona B, question")
    assert tail_only is None or tail_only.shared < 20
    assert divergence("same", "same") is None


def test_reset_forgets_the_runs():
    agent = tags_agent(MergedTags)
    watch = Watch(agent)
    run(agent, USER, "invoke", watch)
    assert watch.report().codes() == ["same-batch-read"]
    watch.reset()
    assert watch.report().findings == []


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_subagents_dropped_write_is_shown_and_one_schema_is_clean(mode):
    turn = {"messages": [{"role": "user", "content": "collect"}]}
    broken = rds.build_split_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
    (found,) = watched(broken, turn, mode).of("subagent-drops-key")
    assert found.subject == "requirements-collector:requirements"
    assert len(found.evidence) == len(POSTGRES_FIELDS)  # one dropped write per stored field
    fixed = rds.build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
    assert watched(fixed, turn, mode).findings == []


# --- issue 22: one watch over many runs, subgraphs, a user's own todo tools ---


class AnswerState(TypedDict, total=False):
    question: str
    answer: str


def one_node_graph() -> Any:
    graph = StateGraph(AnswerState)
    graph.add_node("answer", lambda s: {"answer": s["question"].upper()})
    graph.add_edge(START, "answer")
    return graph.compile()


@pytest.mark.parametrize("mode", MODES)
def test_one_watch_over_two_runs_keeps_each_runs_tasks_apart(mode):
    graph = one_node_graph()
    watch = Watch(graph)
    run(graph, {"question": "a"}, mode, watch)
    run(graph, {"question": "b"}, mode, watch)
    assert watch.report().findings == []


def test_each_run_is_reported_with_its_own_evidence():
    agent = tags_agent(PlainTags)
    watch = Watch(agent)
    for _ in range(2):
        with pytest.raises(InvalidUpdateError):
            run(agent, USER, "invoke", watch)
        agent = tags_agent(PlainTags)  # a fresh script, the same graph shape
    (found,) = watch.report().of("unreduced-parallel-write")
    steps = [e for e in found.evidence if ", step " in e]
    assert [e.split(":")[0] for e in steps] == ["run 1, step 2", "run 2, step 2"]
    assert all(e.count("`save_tag`") == 2 for e in steps)  # two calls per run, not four
    ended = [e for e in found.evidence if " ended with InvalidUpdateError" in e]
    assert [e.split(" ended")[0] for e in ended] == ["run 1", "run 2"]


class InnerState(TypedDict, total=False):
    x: str
    scratch: str


class OuterState(TypedDict, total=False):
    x: str


def subgraph_with_private_key() -> Any:
    inner = StateGraph(InnerState)
    inner.add_node("work", lambda s: {"scratch": "draft", "x": s["x"] + "!"})
    inner.add_edge(START, "work")
    outer = StateGraph(OuterState)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    return outer.compile()


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_subgraphs_private_keys_are_not_dropped_writes(mode):
    graph = subgraph_with_private_key()
    assert watched(graph, {"x": "a"}, mode).findings == []
    assert diagnose(graph).findings == []


def test_a_users_own_todo_reader_in_its_writers_batch_is_shown():
    script = ScriptedChatModel(
        script=[
            reply(tool_call("write_todos", todos=["plan"]), tool_call("read_todos")),
            reply(text="done"),
        ]
    )
    agent = create_agent(script, [write_todos, read_todos], state_schema=TodoState)
    watch = Watch(agent)
    result = agent.invoke(USER, {"callbacks": [watch]})
    seen = [m.content for m in result["messages"] if getattr(m, "name", "") == "read_todos"]
    assert seen == ["No todos currently in the list."]  # what the run shows
    (found,) = watch.report().of("same-batch-read")
    assert found.subject == "todos" and "`read_todos`" in found.evidence[0]
    # the finding lands on the reader's own `def` line, below its `@tool` decorator
    assert (found.file, found.line) == (
        read_todos.func.__code__.co_filename,
        read_todos.func.__code__.co_firstlineno + 1,
    )

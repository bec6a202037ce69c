"""Notebook 03 (same-turn visibility): the library behaviour the lesson relies on, pinned here
so a LangGraph / LangChain / deepagents upgrade that changes it turns CI red, and the lesson's
teaching turn cache, executed from the notebook's own source, against the package's
``TurnCacheMiddleware``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import jupytext
import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.core import TurnCacheMiddleware
from agentstate.doctor import diagnose
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    VALID_REQUIREMENTS,
    ConfigCacheStorage,
    all_in_one_reply_model,
    build_get_config_cache_agent,
    fields_seen_by_reader,
    overlapping_calls,
    reader_batch_model,
    reader_summary,
    same_batch_reader_trials,
    user_turn,
)
from agentstate.rds import READER_TOOLS, WRITER_TOOLS, build_reducer_agent
from agentstate.simulation import SlowToolMiddleware, ToolLatencyMiddleware
from agentstate.tracing import ToolTimeline, state_by_step

LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "_src" / "03_same_turn_visibility.py"
# The cells that write the teaching turn cache and the plain agent (by what they define).
TEACHING = (
    "class Batch",
    "class TeachingTurnCache",
    "class RequirementsState",
    "def store_requirement",
    "def my_agent",
)


@pytest.fixture(scope="module")
def lesson() -> dict:
    """The teaching cells of notebook 03, executed as the reader runs them."""
    cells = [c.source for c in jupytext.read(LESSON).cells if c.cell_type == "code"]
    chosen = [s for s in cells if any(marker in s for marker in TEACHING)]
    assert len(chosen) == len(TEACHING), "a teaching cell of notebook 03 was renamed or merged"
    namespace = {
        "TRIALS": 200,
        "POSTGRES_FIELDS": POSTGRES_FIELDS,
        "reader_batch_model": reader_batch_model,
        "ToolLatencyMiddleware": ToolLatencyMiddleware,
    }
    text = LESSON.read_text()
    for source in chosen:
        # Padded to the cell's line in the file, so inspect.getsource (the doctor) finds it.
        padded = "\n" * text[: text.index(source)].count("\n") + source
        exec(compile(padded, str(LESSON), "exec", dont_inherit=True), namespace)
    return namespace


# --- the library behaviour the lesson shows ---


def test_the_readers_run_in_the_tools_step_before_any_write_lands():
    agent = build_reducer_agent(all_in_one_reply_model(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "lesson-03"}}
    agent.invoke(user_turn(), config)
    rows = state_by_step(agent, config, lambda v: {"n": len(v.get("requirements", {}))})
    after = {rows[i - 1]["next"]: rows[i] for i in range(1, len(rows))}
    tools = next(i for i, r in enumerate(rows) if r["next"] == "tools x11")
    assert rows[tools]["n"] == 0 and rows[tools + 1]["n"] == 8
    assert "requirements" in rows[tools + 1]["changed"]
    assert after["PatchToolCallsMiddleware.before_agent"]["changed"] == []
    assert after["RequirementsSyncMiddleware.after_agent"]["changed"] == ["files"]


def test_a_reader_that_sleeps_past_every_store_still_sees_nothing():
    late = ToolTimeline()
    state = build_reducer_agent(
        all_in_one_reply_model(),
        middleware=[late, SlowToolMiddleware("get_collected_requirements", 0.2)],
    ).invoke(user_turn())
    reader = next(e for e in late.events if e.name == "get_collected_requirements")
    assert reader.start + 0.2 > max(e.end for e in late.events if e.name == "store_requirement")
    assert fields_seen_by_reader(state) == 0 and state["requirements"] == VALID_REQUIREMENTS


def test_the_calls_of_one_reply_overlap_on_several_threads():
    timeline = ToolTimeline()
    build_reducer_agent(
        all_in_one_reply_model(),
        middleware=[timeline, SlowToolMiddleware("store_requirement", 0.1)],
    ).invoke(user_turn())
    assert overlapping_calls(timeline.events, "store_requirement") == 8
    assert timeline.thread_count() > 1


def test_the_get_config_repair_never_reaches_a_tool():
    storage = ConfigCacheStorage()
    agent = build_get_config_cache_agent(reader_batch_model(POSTGRES_FIELDS, 1), storage)
    state = agent.invoke(user_turn())
    assert storage.found == [False] * 6 and fields_seen_by_reader(state) == 0


# --- the teaching turn cache of the notebook against the package's ---


def test_the_plain_agent_of_the_lesson_reads_nothing_without_a_cache(lesson):
    assert same_batch_reader_trials(lesson["my_agent"](turns=20), 20) == [0] * 20


def test_teaching_and_package_turn_caches_agree_under_latency(lesson):
    teaching = lesson["my_cache"]()
    package = lesson["my_cache"](TurnCacheMiddleware)
    seen_teaching = same_batch_reader_trials(lesson["my_agent"](teaching, turns=100), 100)
    seen_package = same_batch_reader_trials(lesson["my_agent"](package, turns=100), 100)
    assert seen_teaching == seen_package == [5] * 100
    assert teaching.batches == {} and package.open_batches == 0


def test_teaching_and_package_turn_caches_agree_on_the_rds_reply(lesson):
    def summary(kind):
        cache = kind(
            writers=WRITER_TOOLS,
            readers=READER_TOOLS,
            key="requirements",
            reducer=lesson["merge_fields"],
        )
        state = build_reducer_agent(all_in_one_reply_model(), middleware=[cache]).invoke(
            user_turn()
        )
        return reader_summary(state), state["requirements"]

    teaching, package = summary(lesson["TeachingTurnCache"]), summary(TurnCacheMiddleware)
    assert teaching == package
    assert teaching[0]["validate_manifest"] == "valid: all rules pass"


def test_the_package_gives_the_teaching_result_under_ainvoke_too(lesson):
    """Async is what the package adds: the same turn through ``ainvoke``."""
    agent = lesson["my_agent"](lesson["my_cache"](TurnCacheMiddleware), turns=1)
    state = asyncio.run(agent.ainvoke(user_turn()))
    assert fields_seen_by_reader(state) == 5


def test_the_teaching_reader_times_out_instead_of_hanging(lesson):
    slow = create_agent(
        reader_batch_model(POSTGRES_FIELDS, 1),
        tools=[lesson["store_requirement"], lesson["get_collected_requirements"]],
        state_schema=lesson["RequirementsState"],
        middleware=[lesson["my_cache"](timeout=0.1), SlowToolMiddleware("store_requirement", 0.5)],
    ).invoke(user_turn())
    assert fields_seen_by_reader(slow) == -1 and slow["requirements"] == POSTGRES_FIELDS


def test_the_doctor_names_the_plain_agent_and_passes_it_with_the_package_cache(lesson):
    broken = diagnose(lesson["my_agent"](turns=1))
    fixed = diagnose(lesson["my_agent"](lesson["my_cache"](TurnCacheMiddleware), turns=1))
    assert broken.codes() == ["same-batch-read"] and fixed.codes() == []

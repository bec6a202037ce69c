"""agentstate.lessons.purity: what a reader in the writers' super-step sees (notebook 02).

The lesson prints ``reader_saw`` for its pure and its in-place reducer, and
``reducer_calls`` for its pure one; here both entry points (``invoke`` and
``ainvoke``) are pinned on other field counts, a reducer that replaces, and a
value that is not a reducer.
"""

import asyncio

import pytest

from agentstate.core import merge_fields
from agentstate.lessons.fixtures import POSTGRES_FIELDS, label_fields, merge_in_place, user_turn
from agentstate.lessons.purity import (
    READER,
    WHEN_THE_STEP_ENDS,
    WHILE_THE_STEP_RUNS,
    areader_saw,
    areducer_calls,
    reader_agent,
    reader_saw,
    reducer_calls,
)
from agentstate.tracing import tool_replies


def saw(reducer, mode: str, fields=POSTGRES_FIELDS) -> int:
    if mode == "sync":
        return reader_saw(reducer, fields)
    return asyncio.run(areader_saw(reducer, fields))


def replace_whole(current, write):
    return write


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fields", [POSTGRES_FIELDS, label_fields(12)], ids=["five", "twelve"])
def test_a_pure_reducer_shows_the_reader_nothing_and_an_in_place_one_every_write(mode, fields):
    assert saw(merge_fields, mode, fields) == 0
    assert saw(replace_whole, mode, fields) == 0
    assert saw(merge_in_place, mode, fields) == len(fields)  # held until every early call


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_stores_and_the_reader_are_one_reply_and_the_writes_still_land(mode):
    agent = reader_agent(merge_fields)
    turn = {**user_turn(), "requirements": {}}
    state = agent.invoke(turn) if mode == "sync" else asyncio.run(agent.ainvoke(turn))
    (batch,) = [m for m in state["messages"] if getattr(m, "tool_calls", None)]
    assert [c["name"] for c in batch.tool_calls] == ["store_requirement"] * 5 + [READER]
    assert state["requirements"] == POSTGRES_FIELDS
    assert [m.text for m in tool_replies(state, READER)] == ["0 fields"]


def test_a_value_that_is_not_a_reducer_is_refused_before_anything_runs():
    with pytest.raises(TypeError, match=r"^reducer must be a function of \(current, write\)"):
        reader_saw({"engine": "postgres"})


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fields", [POSTGRES_FIELDS, label_fields(12)], ids=["five", "twelve"])
@pytest.mark.parametrize("reducer", [merge_fields, replace_whole], ids=["merge", "replace"])
def test_reducer_calls_counts_one_early_call_per_write_and_one_when_the_step_ends(
    mode, fields, reducer
):
    calls = (
        reducer_calls(reducer, fields)
        if mode == "sync"
        else asyncio.run(areducer_calls(reducer, fields))
    )
    assert calls == {WHILE_THE_STEP_RUNS: len(fields), WHEN_THE_STEP_ENDS: len(fields)}


def test_reducer_calls_refuses_a_value_that_is_not_a_reducer():
    with pytest.raises(TypeError, match=r"^reducer must be a function of \(current, write\)"):
        reducer_calls("merge_fields")

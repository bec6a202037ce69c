"""The state-flow picture of one super-step draws what the run did, read from a real run.

``superstep`` reads a :class:`ToolTimeline` into the state before a step,
what each call was handed and wrote, and the state after; ``draw_superstep``
draws it (notebooks 01-03). Each test runs a real agent and checks the
picture's values against the run: the reads, the writes and the kept result.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, NotRequired

import pytest
from deepagents import create_deep_agent
from deepagents.backends.utils import create_file_data, file_data_to_string
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.lessons.fixtures import POSTGRES_FIELDS, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import ToolTimeline, draw_superstep, superstep

PATH = "/requirements.json"
ORDER = list(POSTGRES_FIELDS)


@tool
def store_in_file(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Read /requirements.json, add one field, write the whole file back."""
    files = runtime.state.get("files") or {}
    current = json.loads(file_data_to_string(files[PATH])) if PATH in files else {}
    current[field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps(current))
    return Command(update={"files": {PATH: data}, "messages": [done]})


def merge(current: dict | None, write: dict | None) -> dict:
    return {**(current or {}), **(write or {})}


class MergedState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge]


@tool
def store(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one field in the requirements key."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool
def count_fields(runtime: ToolRuntime) -> str:
    """How many fields the requirements key holds."""
    return f"{len(runtime.state.get('requirements', {}))} fields"


def stores(fields: dict, name: str = "store") -> list[dict]:
    return [tool_call(name, field_name=f, value=v) for f, v in fields.items()]


def in_file(files: Any) -> dict:
    return json.loads(file_data_to_string(files[PATH])) if files and PATH in files else {}


def texts(fig) -> str:
    """Every string drawn in the figure: boxes, labels, titles and the legend."""
    found = [t.get_text() for ax in fig.axes for t in ax.texts]
    found += [ax.get_title(loc="left") for ax in fig.axes]
    found += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return "\n".join(found)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_file_loss_is_drawn_as_the_run_did_it(mode):
    timeline = ToolTimeline()
    model = ScriptedChatModel(script=[reply(*stores(POSTGRES_FIELDS, "store_in_file")), reply()])
    agent = create_deep_agent(model, tools=[store_in_file], middleware=[timeline])
    turn = user_turn()
    state = agent.invoke(turn) if mode == "sync" else asyncio.run(agent.ainvoke(turn))
    flow = superstep(timeline, "files")
    assert in_file(flow.before) == {} and [in_file(c.read) for c in flow.calls] == [{}] * 5
    assert [in_file(c.wrote) for c in flow.calls] == [{f: v} for f, v in POSTGRES_FIELDS.items()]
    assert [c.kept for c in flow.calls] == [False] * 4 + [True]
    assert in_file(flow.after) == in_file(state["files"]) == {ORDER[-1]: POSTGRES_FIELDS[ORDER[-1]]}
    drawn = texts(draw_superstep(timeline, key="files", show=lambda f: str(in_file(f))))
    assert drawn.count("read {}") == 5
    for field, value in POSTGRES_FIELDS.items():
        assert f"wrote {{{field!r}: {value!r}}}" in drawn
    assert f"files: {{{ORDER[-1]!r}: {POSTGRES_FIELDS[ORDER[-1]]!r}}}" in drawn  # the after box
    assert "1 of 5 writes kept" in drawn


def test_a_merging_reducer_is_drawn_keeping_every_write_and_a_reader_seeing_the_old_state():
    timeline = ToolTimeline()
    calls = [*stores(POSTGRES_FIELDS), tool_call("count_fields")]
    model = ScriptedChatModel(script=[reply(*calls), reply()])
    agent = create_agent(
        model, tools=[store, count_fields], state_schema=MergedState, middleware=[timeline]
    )
    agent.invoke(user_turn())
    flow = superstep(timeline, "requirements")
    assert [c.kept for c in flow.writers] == [True] * 5 and flow.after == POSTGRES_FIELDS
    (reader,) = flow.readers
    assert not reader.read and (reader.reply, reader.kept, reader.position) == ("0 fields", None, 5)
    drawn = texts(draw_superstep(flow, reducer=merge))
    assert "replied 0 fields" in drawn and "merge\nfolds the writes" in drawn
    assert "5 of 5 writes kept" in drawn and "write lost" not in drawn


def test_the_state_after_is_the_one_after_that_step_not_the_end_of_the_run():
    timeline = ToolTimeline()
    first, second = {"engine": "postgres"}, {"username": "dbadmin"}
    model = ScriptedChatModel(script=[reply(*stores(first)), reply(*stores(second)), reply()])
    agent = create_agent(model, tools=[store], state_schema=MergedState, middleware=[timeline])
    final = agent.invoke(user_turn())
    early = superstep(timeline, "requirements")
    late = superstep(timeline, "requirements", step=max(e.step for e in timeline.events))
    assert not early.before and early.after == first
    assert late.before == late.calls[0].read == first
    assert late.after == final["requirements"] == {**first, **second}


def test_two_runs_stack_one_above_the_other_with_their_own_titles():
    runs = {}
    for name, schema in (("merge", MergedState), ("plain", None)):
        timeline = ToolTimeline()
        model = ScriptedChatModel(script=[reply(*stores({"engine": "postgres"})), reply()])
        options = {"state_schema": schema} if schema else {}
        create_agent(model, tools=[store], middleware=[timeline], **options).invoke(user_turn())
        runs[name] = timeline
    fig = draw_superstep(runs, key="requirements")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert len(fig.axes) == 2 and titles[0].startswith("merge: ") and titles[1].startswith("plain")
    assert "1 of 1 writes kept" in titles[0] and "0 of 1 writes kept" in titles[1]


def test_a_timeline_that_saw_nothing_or_a_step_without_calls_is_a_clear_error():
    with pytest.raises(ValueError, match="recorded no tool call"):
        superstep(ToolTimeline(), "files")
    timeline = ToolTimeline()
    model = ScriptedChatModel(script=[reply(*stores({"engine": "postgres"})), reply()])
    agent = create_agent(model, tools=[store], state_schema=MergedState, middleware=[timeline])
    agent.invoke(user_turn())
    with pytest.raises(ValueError, match="no tool call ran in super-step 99"):
        superstep(timeline, "requirements", step=99)
    with pytest.raises(ValueError, match="key="):
        draw_superstep(timeline)

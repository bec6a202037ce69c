"""The failures of stages 01-02 still reproduce with the pinned libraries, and the fix holds.

If an upgrade of deepagents or langgraph changes any of this, these tests
(and notebooks 01-02) turn red instead of the lessons rotting quietly.
"""

import random

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import InvalidUpdateError

from agentstate.core import merge_fields
from agentstate.lessons.fixtures import POSTGRES_FIELDS as FIVE
from agentstate.lessons.fixtures import one_reply_model as one_batch_model
from agentstate.lessons.fixtures import store_calls
from agentstate.lessons.fixtures import user_turn as user
from agentstate.lessons.simulation import FinishOrder
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import (
    REQUIREMENTS_PATH,
    build_file_storage_agent,
    build_plain_dict_agent,
    build_reducer_agent,
    read_json_file,
)
from agentstate.tracing import ToolTimeline


def test_file_storage_keeps_only_the_last_call_of_the_message():
    order = list(FIVE)
    timeline = ToolTimeline()
    agent = build_file_storage_agent(
        one_batch_model(*store_calls(FIVE)),
        between=FinishOrder(timeline, order[::-1]),  # all run at once, the last ends first
        middleware=[timeline],
    )
    state = agent.invoke(user())
    survivors = read_json_file(state["files"], REQUIREMENTS_PATH)
    assert survivors == {order[-1]: FIVE[order[-1]]}
    finished = [e.args["field_name"] for e in timeline.finish_order()]
    assert finished == order[::-1], "the survivor is the last call of the message, not to finish"
    assert timeline.thread_count() == 5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffling_the_call_order_changes_the_survivor(seed):
    order = list(FIVE)
    random.Random(seed).shuffle(order)
    agent = build_file_storage_agent(one_batch_model(*store_calls({k: FIVE[k] for k in order})))
    state = agent.invoke(user())
    assert list(read_json_file(state["files"], REQUIREMENTS_PATH)) == [order[-1]]


def test_one_call_per_step_loses_nothing():
    script = [reply(c) for c in store_calls(FIVE)] + [reply(text="done")]
    agent = build_file_storage_agent(ScriptedChatModel(script=script))
    state = agent.invoke(user())
    assert read_json_file(state["files"], REQUIREMENTS_PATH) == FIVE


def test_plain_dict_key_raises_invalid_update_error_after_the_tools_ran():
    timeline = ToolTimeline()
    agent = build_plain_dict_agent(one_batch_model(*store_calls(FIVE)), middleware=[timeline])
    with pytest.raises(InvalidUpdateError, match="Can receive only one value per step"):
        agent.invoke(user())
    assert len(timeline.events) == 5


def test_plain_dict_key_across_steps_last_write_replaces_the_dict():
    script = [reply(c) for c in store_calls({"engine": "postgres", "username": "dbadmin"})]
    agent = build_plain_dict_agent(ScriptedChatModel(script=[*script, reply(text="done")]))
    assert agent.invoke(user())["requirements"] == {"username": "dbadmin"}


def test_reducer_keeps_all_fields_and_syncs_the_file_after_the_turn():
    state = build_reducer_agent(one_batch_model(*store_calls(FIVE))).invoke(user())
    assert state["requirements"] == FIVE
    assert read_json_file(state["files"], REQUIREMENTS_PATH) == FIVE


def test_five_hundred_parallel_stores_keep_five_hundred_fields():
    calls = [
        tool_call("store_requirement", field_name=f"labels.k{i:03d}", value=str(i))
        for i in range(500)
    ]
    state = build_reducer_agent(one_batch_model(*calls)).invoke(user())
    assert len(state["requirements"]) == 500
    assert len(read_json_file(state["files"], REQUIREMENTS_PATH)) == 500


def test_requirements_persist_across_turns_on_one_thread():
    model = ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres"})),
            reply(text="ok"),
            reply(*store_calls({"username": "dbadmin"})),
            reply(text="ok"),
        ]
    )
    agent = build_reducer_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "a"}}
    agent.invoke(user("engine postgres"), config)
    state = agent.invoke(user("user dbadmin"), config)
    assert state["requirements"] == {"engine": "postgres", "username": "dbadmin"}


def test_merge_fields_is_pure():
    left, right = {"a": 1}, {"b": 2}
    assert merge_fields(left, right) == {"a": 1, "b": 2}
    assert left == {"a": 1} and right == {"b": 2}
    assert merge_fields(None, None) == {}
    assert merge_fields({"a": 1}, {"a": 2}) == {"a": 2}

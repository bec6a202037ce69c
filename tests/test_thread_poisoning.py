"""Whatever the model writes to /requirements.json, later turns still work (the file is output)."""

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.fixtures import file_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import REQUIREMENTS_PATH, build_file_storage_agent, build_reducer_agent
from agentstate.tracing import tool_replies

GARBAGE = ["not json at all", '["a", "list"]', "{broken", ""]


@pytest.mark.parametrize("content", GARBAGE, ids=["text", "list", "broken", "empty"])
def test_a_garbage_requirements_file_does_not_poison_the_thread(content):
    model = ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres"})),
            reply(tool_call("write_file", file_path=REQUIREMENTS_PATH, content=content)),
            reply(text="turn 1 done"),
            reply(*store_calls({"username": "dbadmin"})),
            reply(text="turn 2 done"),
        ]
    )
    agent = build_reducer_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "poisoned"}}
    agent.invoke(user_turn(), config)
    state = agent.invoke(user_turn("and the user"), config)
    assert state["requirements"] == {"engine": "postgres", "username": "dbadmin"}
    assert file_fields(state) == state["requirements"]  # re-rendered from state


@pytest.mark.parametrize("content", GARBAGE[:2], ids=["text", "list"])
def test_stage01_storage_survives_a_file_that_is_not_an_object(content):
    model = ScriptedChatModel(
        script=[
            reply(tool_call("write_file", file_path=REQUIREMENTS_PATH, content=content)),
            reply(*store_calls({"engine": "postgres"})),
            reply(text="done"),
        ]
    )
    state = build_file_storage_agent(model).invoke(user_turn())
    assert [m.status for m in tool_replies(state, "store_requirement")] == ["success"]
    assert file_fields(state) == {"engine": "postgres"}

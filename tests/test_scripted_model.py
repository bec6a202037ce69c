"""The scripted model and the model factory (shared by every notebook)."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agentstate.models import (
    ScriptedChatModel,
    ScriptExhaustedError,
    get_chat_model,
    model_settings,
    reply,
    tool_call,
)


def test_replays_script_with_unique_ids():
    model = ScriptedChatModel(
        script=[reply(tool_call("a", x=1), tool_call("b", y=2)), reply(tool_call("a", x=3))],
        model_name="m",
    )
    first = model.invoke("hi")
    second = model.invoke("again")
    ids = [c["id"] for c in first.tool_calls + second.tool_calls]
    token = ids[0].split("-")[1]
    assert ids == [f"m-{token}-1-1", f"m-{token}-1-2", f"m-{token}-2-1"]
    assert [first.id, second.id] == [f"m-{token}-1-reply", f"m-{token}-2-reply"]
    assert first.tool_calls[1]["args"] == {"y": 2}
    assert model.remaining == 0


def test_running_out_raises_an_error_naming_the_model():
    model = ScriptedChatModel(script=[reply(text="only")], model_name="collector")
    model.invoke("one")
    with pytest.raises(ScriptExhaustedError, match="'collector' ran out of script"):
        model.invoke("two")


def test_bind_tools_returns_the_model_itself():
    model = ScriptedChatModel(script=[])
    assert model.bind_tools([]) is model


def test_callable_steps_see_the_incoming_messages():
    def echo(messages):
        return AIMessage(content=f"saw {len(messages)}: {messages[-1].content}")

    model = ScriptedChatModel(script=[echo])
    out = model.invoke([HumanMessage("a"), HumanMessage("b")])
    assert out.content == "saw 2: b"
    assert model.seen[0][-1].content == "b"


def test_a_step_that_returns_something_else_is_a_type_error():
    model = ScriptedChatModel(script=[lambda messages: "not a message"], model_name="bad")
    with pytest.raises(TypeError, match="'bad': script step 1 produced str"):
        model.invoke("x")


def test_factory_is_scripted_unless_the_environment_opts_in():
    settings = model_settings({})
    assert not settings.is_real
    model = get_chat_model([reply(text="hi")], settings=settings)
    assert isinstance(model, ScriptedChatModel)
    with pytest.raises(ValueError, match="AGENTSTATE_LLM_BASE_URL"):
        get_chat_model(None, settings=settings)


@pytest.mark.extras("openai")
def test_factory_builds_an_openai_compatible_model_without_showing_the_key():
    env = {
        "AGENTSTATE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "AGENTSTATE_LLM_MODEL": "tiny",
        "AGENTSTATE_LLM_API_KEY": "sk-test-not-a-real-key-000000000",
    }
    settings = model_settings(env)
    assert settings.is_real and settings.model == "tiny"
    assert "sk-test" not in repr(settings) and "sk-test" not in settings.describe()
    model = get_chat_model(settings=settings)
    assert type(model).__name__ == "ChatOpenAI"
    assert model.model_name == "tiny"


def test_two_models_never_share_reply_or_call_ids():
    def play():
        return ScriptedChatModel(script=[reply(tool_call("a"))]).invoke("hi")

    one, two = play(), play()
    assert one.id != two.id
    assert one.tool_calls[0]["id"] != two.tool_calls[0]["id"]


@pytest.mark.extras("persistence")
def test_a_new_scripted_model_on_a_reused_thread_appends_its_reply(tmp_path):
    """Turn 2 played by a fresh model must not overwrite turn 1's AIMessage (same id)."""
    from langchain.agents import create_agent

    from agentstate.persistence import sqlite_checkpointer

    config = {"configurable": {"thread_id": "reused"}}
    with sqlite_checkpointer(tmp_path / "t.sqlite") as saver:
        for text in ("first answer", "second answer"):
            agent = create_agent(ScriptedChatModel(script=[reply(text=text)]), checkpointer=saver)
            state = agent.invoke({"messages": [("user", "hello")]}, config)
    answers = [m.content for m in state["messages"] if isinstance(m, AIMessage)]
    assert answers == ["first answer", "second answer"]

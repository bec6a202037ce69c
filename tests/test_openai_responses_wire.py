"""The loopback OpenAI server's Responses API (``POST /v1/responses``) with the real client.

``ChatOpenAI(use_responses_api=True)`` must run unchanged against it, plain
and streamed, through a whole tool loop (the second request carries the
first reply's ``function_call`` and the tool's ``function_call_output``);
bad bodies get a one-line 400, and a reply cut off by the token limit ends
``incomplete``, as a real server's does.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.models.openai_replay import ReplayServer
from tests.secret_providers import RawReplies


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def client(server: ReplayServer) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.base_url,
        api_key="not-needed",
        model="replay",
        max_retries=0,
        use_responses_api=True,
    )


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_a_tool_loop_runs_over_the_responses_api(mode):
    script = ScriptedChatModel(
        script=[reply(tool_call("add", a=2, b=3), text="Adding."), reply(text="It is 5.")]
    )
    with ReplayServer(script) as server:
        agent = create_agent(client(server), tools=[add])
        payload = {"messages": [("user", "2+3?")]}
        if mode == "invoke":
            state = agent.invoke(payload)
        elif mode == "ainvoke":
            state = asyncio.run(agent.ainvoke(payload))
        elif mode == "stream":
            state = list(agent.stream(payload, stream_mode=["messages", "values"]))[-1][1]
        else:

            async def collect():
                stream = agent.astream(payload, stream_mode=["messages", "values"])
                return [c async for c in stream][-1][1]

            state = asyncio.run(collect())
    assert [r.get("stream", False) for r in server.requests] == [mode.endswith("stream")] * 2
    first = state["messages"][1]
    assert isinstance(first, AIMessage) and first.tool_calls[0]["args"] == {"a": 2, "b": 3}
    (block,) = [b for b in first.content if b["type"] == "function_call"]
    assert block["call_id"] == first.tool_calls[0]["id"] and block["id"].startswith("fc_")
    assert [b["text"] for b in first.content if b["type"] == "text"] == ["Adding."]
    assert isinstance(state["messages"][2], ToolMessage) and state["messages"][2].content == "5"
    assert state["messages"][-1].text == "It is 5."
    items = server.requests[1]["input"]  # what the client sent back: the call and its output
    kinds = [i.get("type", "message") for i in items]
    assert "function_call" in kinds and "function_call_output" in kinds
    (output,) = [i for i in items if i.get("type") == "function_call_output"]
    assert output["call_id"] == block["call_id"] and output["output"] == "5"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "replay"}, "'input' must be a string or a non-empty list"),
        (
            {"input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]},
            "output for unknown call 'c9'",
        ),
        (
            {"input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{"}]},
            "arguments that are not JSON",
        ),
        ({"input": [{"type": "image_thing"}]}, "unknown item type 'image_thing'"),
    ],
)
def test_a_bad_body_gets_a_one_line_400(body, says):
    with ReplayServer(ScriptedChatModel(script=[])) as server:
        answer = httpx.post(f"{server.base_url}/responses", json=body)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert says in message and "\n" not in message


def test_a_cut_off_reply_ends_incomplete_with_its_raw_arguments():
    cut = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "add", "args": '{"a": 2, "b', "id": "call_cut", "error": None}
        ],
        response_metadata={"finish_reason": "length"},
    )
    with ReplayServer(RawReplies(script=[cut])) as server:
        answer = httpx.post(f"{server.base_url}/responses", json={"input": "add"}).json()
    assert answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}
    (item,) = answer["output"]
    assert item["arguments"] == '{"a": 2, "b' and item["call_id"] == "call_cut"


def test_the_chat_completions_route_still_answers_beside_it():
    with ReplayServer(ScriptedChatModel(script=[reply(text="hi")])) as server:
        chat = ChatOpenAI(base_url=server.base_url, api_key="x", model="replay", max_retries=0)
        assert chat.invoke("hello").content == "hi"
        missing = httpx.post(f"{server.base_url}/nowhere", json={})
    assert missing.status_code == 404
    assert "/v1/chat/completions or /v1/responses" in json.dumps(missing.json())

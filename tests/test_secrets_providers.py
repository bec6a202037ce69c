"""Issue 16, secrets: redaction with the real provider clients, over loopback HTTP.

``ChatAnthropic`` (deepagents' default provider) against
:class:`AnthropicReplayServer` and ``ChatOpenAI`` against :class:`ReplayServer`,
sync, async and streamed (SSE on the wire), each with a real SQLite
checkpointer whose file is searched byte by byte. Before the fix the
Anthropic ``tool_use`` block in ``AIMessage.content`` kept the plain value
(state, checkpoint, what the client sent back), and a call whose JSON did not
parse kept it in ``invalid_tool_calls`` (and LangChain's ``error`` text, which
quotes the raw arguments).
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI

from agentstate.core import SecretStore
from agentstate.lessons.fixtures import POSTGRES_FIELDS, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.models.anthropic_replay import AnthropicReplayServer
from agentstate.models.openai_replay import ReplayServer
from agentstate.persistence import async_sqlite_checkpointer, file_contains, sqlite_checkpointer
from agentstate.rds import build_reducer_agent
from tests.secret_refs import RDS_PASSWORD

PLAIN = "Wire-Pa55word-never-kept"
MODES = ["invoke", "ainvoke", "stream", "astream"]
STREAM_MODES = ["messages", "values", "updates", "debug", "tasks", "checkpoints"]
CONFIG = {"configurable": {"thread_id": "wire"}}


def anthropic(server: AnthropicReplayServer) -> ChatAnthropic:
    return ChatAnthropic(
        model="replay", base_url=server.base_url, api_key="not-needed", max_retries=0
    )


def openai(server: ReplayServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key="not-needed", model="replay", max_retries=0)


def run(build, mode: str, db) -> tuple[dict, list]:
    """Run the agent ``build(checkpointer)`` one way; the final state and every streamed chunk."""
    if mode in ("invoke", "stream"):
        with sqlite_checkpointer(db) as saver:
            agent = build(saver)
            if mode == "invoke":
                return agent.invoke(user_turn(), CONFIG), []
            chunks = list(agent.stream(user_turn(), CONFIG, stream_mode=STREAM_MODES))
            return agent.get_state(CONFIG).values, chunks

    async def arun():
        async with async_sqlite_checkpointer(db) as saver:
            agent = build(saver)
            if mode == "ainvoke":
                return await agent.ainvoke(user_turn(), CONFIG), []
            stream = agent.astream(user_turn(), CONFIG, stream_mode=STREAM_MODES)
            chunks = [c async for c in stream]
            return (await agent.aget_state(CONFIG)).values, chunks

    return asyncio.run(arun())


def password_script() -> ScriptedChatModel:
    calls = store_calls({**POSTGRES_FIELDS, "password": PLAIN})
    return ScriptedChatModel(script=[reply(*calls), reply(text="Done.")])


@pytest.mark.parametrize("mode", MODES)
def test_chatanthropic_tool_use_blocks_carry_the_reference_everywhere(mode, tmp_path):
    store, db = SecretStore(), tmp_path / "anthropic.sqlite"
    with AnthropicReplayServer(password_script()) as server:
        state, chunks = run(
            lambda saver: build_reducer_agent(anthropic(server), secrets=store, checkpointer=saver),
            mode,
            db,
        )
    assert server.requests[0].get("stream", False) == mode.endswith("stream")
    (ai,) = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    ref = state["requirements"]["password"]
    blocks = {b["id"]: b for b in ai.content if b["type"] == "tool_use"}
    for call in ai.tool_calls:  # every tool_use block says what its tool call says
        block = blocks[call["id"]]
        assert (block["input"] or json.loads(block["partial_json"])) == call["args"]
    assert {"field_name": "password", "value": ref} in [c["args"] for c in ai.tool_calls]
    assert PLAIN not in repr(state["messages"]) and PLAIN not in repr(chunks)
    assert not file_contains(db, PLAIN.encode()) and file_contains(db, ref.encode())
    # what the client sent back on its next request: the reference, never the plain value
    assert PLAIN not in json.dumps(server.requests[1:]) and ref in json.dumps(server.requests[1])
    assert ref == RDS_PASSWORD and store.resolve(ref) == PLAIN


BROKEN = f'{{"field_name": "password", "value": "{PLAIN}",}}'  # a trailing comma: not JSON


def refs_in(text: str) -> list[str]:
    return re.findall(r"\$secret:[\w./-]+", text)


def broken_call_model(call_id: str) -> GenericFakeChatModel:
    """A server-side model whose reply holds one tool call with unparsable arguments."""
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "store_requirement", "args": BROKEN, "id": call_id, "error": None}
        ],
    )
    return GenericFakeChatModel(messages=iter([broken, AIMessage(content="Done.")]))


def run_broken(server_type, client, call_id: str, mode: str, db):
    """The RDS agent over ``client`` against a server replying with one unparsable call.

    Returns (store, the AI message holding the invalid call, final state, streamed chunks).
    """
    store = SecretStore()
    with server_type(broken_call_model(call_id)) as server:
        state, chunks = run(
            lambda saver: build_reducer_agent(client(server), secrets=store, checkpointer=saver),
            mode,
            db,
        )
    (ai,) = [m for m in state["messages"] if isinstance(m, AIMessage) and m.invalid_tool_calls]
    return store, ai, state, chunks


@pytest.mark.parametrize("mode", MODES)
def test_chatopenai_unparsed_arguments_and_their_error_text_are_redacted(mode, tmp_path):
    db = tmp_path / "openai.sqlite"
    store, ai, state, chunks = run_broken(ReplayServer, openai, "call_broken", mode, db)
    (invalid,) = ai.invalid_tool_calls
    assert invalid["id"] == "call_broken"
    (ref,) = refs_in(invalid["args"])
    assert ref == RDS_PASSWORD and store.resolve(ref) == PLAIN
    if invalid["error"]:  # ChatOpenAI's non-streamed parse quotes the raw arguments here
        assert ref in invalid["error"]
    assert PLAIN not in repr(state["messages"]) and PLAIN not in repr(chunks)
    assert not file_contains(db, PLAIN.encode())


def test_chatopenai_error_text_quotes_the_arguments_so_it_needed_redacting(tmp_path):
    """The premise of the test above: LangChain's error text really does quote the raw value."""
    with ReplayServer(broken_call_model("call_raw")) as server:
        raw = openai(server).invoke("store the password")
    (invalid,) = raw.invalid_tool_calls
    assert PLAIN in invalid["error"] and PLAIN in invalid["args"]


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_chatanthropic_streamed_unparsable_input_is_redacted(mode, tmp_path):
    db = tmp_path / "anthropic-broken.sqlite"
    store, ai, state, chunks = run_broken(
        AnthropicReplayServer, anthropic, "toolu_broken", mode, db
    )
    assert PLAIN not in repr(state["messages"]) and PLAIN not in repr(chunks)
    assert not file_contains(db, PLAIN.encode())
    (ref,) = refs_in(ai.invalid_tool_calls[0]["args"])
    assert ref == RDS_PASSWORD and store.resolve(ref) == PLAIN


def test_a_secret_argument_of_any_tool_over_chatanthropic_sync_and_async(tmp_path):
    """The generic middleware (not the RDS one) on a plain ``create_agent``, both APIs."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from agentstate.core import SecretRedactionMiddleware

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return f"connected to {host}"

    for api in ("invoke", "ainvoke"):
        store = SecretStore()
        script = ScriptedChatModel(
            script=[reply(tool_call("connect", host="db", password=PLAIN)), reply(text="ok")]
        )
        with AnthropicReplayServer(script) as server:
            redaction = SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})
            agent = create_agent(anthropic(server), tools=[connect], middleware=[redaction])
            payload = {"messages": [("user", "connect")]}
            if api == "invoke":
                state = agent.invoke(payload)
            else:
                state = asyncio.run(agent.ainvoke(payload))
        (ai,) = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
        ref = ai.tool_calls[0]["args"]["password"]
        assert ai.content[0]["input"]["password"] == ref and store.resolve(ref) == PLAIN, api
        assert PLAIN not in repr(state["messages"]) and PLAIN not in json.dumps(server.requests[1])


def openai_responses(server: ReplayServer) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.base_url,
        api_key="not-needed",
        model="replay",
        max_retries=0,
        use_responses_api=True,
    )


@pytest.mark.parametrize("mode", MODES)
def test_chatopenai_responses_api_function_call_blocks_carry_the_reference(mode, tmp_path):
    """Issue 25 (High): the Responses API kept the password in ``function_call`` blocks.

    ``ChatOpenAI(use_responses_api=True)`` keeps each call as a content block
    whose ``id`` (``fc_...``) is not the call's (``call_id``); the middleware
    matched blocks by ``id`` and read only ``input``/``args``/``partial_json``,
    so the plain value stayed in state, in the checkpoint and in the next request.
    """
    store, db = SecretStore(), tmp_path / "responses.sqlite"
    with ReplayServer(password_script()) as server:
        state, chunks = run(
            lambda saver: build_reducer_agent(
                openai_responses(server), secrets=store, checkpointer=saver
            ),
            mode,
            db,
        )
    assert all(r.get("input") for r in server.requests)  # the Responses API, not chat completions
    assert server.requests[0].get("stream", False) == mode.endswith("stream")
    (ai,) = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    ref = state["requirements"]["password"]
    blocks = {b["call_id"]: b for b in ai.content if b["type"] == "function_call"}
    assert blocks.keys() == {c["id"] for c in ai.tool_calls}
    for call in ai.tool_calls:  # every function_call block says what its tool call says
        assert blocks[call["id"]]["id"].startswith("fc_")
        assert json.loads(blocks[call["id"]]["arguments"]) == call["args"]
    assert {"field_name": "password", "value": ref} in [c["args"] for c in ai.tool_calls]
    assert PLAIN not in repr(state["messages"]) and PLAIN not in repr(chunks)
    assert not file_contains(db, PLAIN.encode()) and file_contains(db, ref.encode())
    assert PLAIN not in json.dumps(server.requests[1:]) and ref in json.dumps(server.requests[1])
    assert ref == RDS_PASSWORD and store.resolve(ref) == PLAIN

"""Issue 25, secrets: the value pass, one pass over every string of a reply.

After the key rules, every value the store holds for the thread is replaced
wherever the reply repeats it: in a content block of any type,
``additional_kwargs``, ``response_metadata``, an unwatched tool's arguments,
an invalid call's error, a structured response, written plain or encoded.
Before the fix only the text of the same reply was searched, and only for
that reply's values; a secret equal to ``password`` was replaced inside its
own reference and in the call's keys (``{"$secret:password-...":
"$secret:$secret:password-...-..."}``); and a value holding ``"`` that the
reply repeated JSON-escaped was not found.
"""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import quote, quote_plus

import pytest
from langchain.agents.middleware.types import ModelResponse
from langchain_core.messages import AIMessage
from pydantic import BaseModel

from agentstate.core import SecretStore
from agentstate.models import reply, tool_call
from agentstate.persistence import file_contains
from agentstate.rds import build_reducer_agent
from tests.secret_providers import agent_side, build, provider, redaction, run

VALUE = 'Vex-"5512"/Hollow'  # a quote and a slash: its encoded forms differ from it


def refs_in(text: str) -> list[str]:
    return re.findall(r"\$secret:[\w./-]+-[0-9a-f]{24}", text)


def known(store: SecretStore, thread: str | None = "t") -> str:
    """Make ``VALUE`` known for ``thread`` the way a run does: a watched call offers it."""
    first = redaction(store).rewrite(
        reply(tool_call("connect", host="db1", password=VALUE)), thread=thread
    )
    return first.tool_calls[0]["args"]["password"]


ENCODED = {
    "plain": VALUE,
    "JSON-escaped": json.dumps(VALUE)[1:-1],
    "JSON-escaped twice": json.dumps(json.dumps(VALUE)[1:-1])[1:-1],
    "URL-encoded": quote(VALUE, safe=""),
    "URL-encoded, form": quote_plus(VALUE),
    "HTML-escaped": html.escape(VALUE),
    "base64": base64.b64encode(VALUE.encode()).decode(),
}


@pytest.mark.parametrize("form", list(ENCODED.values()), ids=list(ENCODED))
def test_a_known_value_is_replaced_in_the_reply_text_however_it_is_encoded(form):
    store = SecretStore()
    ref = known(store)
    text = f"Sent: {form} (cut"
    clean = redaction(store).rewrite(AIMessage(content=text), thread="t")
    assert clean.content == f"Sent: {ref} (cut"


def test_a_known_value_is_replaced_in_every_field_and_block_type_of_a_reply():
    store = SecretStore()
    ref = known(store)
    message = AIMessage(
        content=[
            {"type": "text", "text": f"Using {VALUE}.", "id": "msg_1"},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary", "text": VALUE}]},
            {"type": "server_tool_use", "id": "srv_1", "name": "web", "input": {"q": VALUE}},
            {"type": "made_up_block", "payload": {"deep": [f"x{VALUE}x"]}},
        ],
        additional_kwargs={"refusal": VALUE, "parsed": {"pin": VALUE}},
        response_metadata={"model_name": "replay", "note": f"echo {VALUE}"},
        tool_calls=[{"name": "lookup", "args": {"query": VALUE}, "id": "call_1"}],
        invalid_tool_calls=[
            {
                "name": "lookup",
                "args": f'{{"query": "{VALUE}',
                "id": "call_2",
                "error": f"bad JSON: {VALUE}",
                "type": "invalid_tool_call",
            }
        ],
    )
    clean = redaction(store).rewrite(message, thread="t")
    dumped = clean.model_dump_json()
    assert not [f for f in ENCODED.values() if f in dumped]
    assert clean.content[1]["summary"][0]["text"] == ref
    assert clean.content[2]["input"] == {"q": ref} and clean.content[3]["payload"]["deep"] == [
        f"x{ref}x"
    ]
    assert clean.additional_kwargs == {"refusal": ref, "parsed": {"pin": ref}}
    assert clean.tool_calls[0]["args"] == {"query": ref}  # an unwatched tool: the value pass
    assert clean.response_metadata["model_name"] == "replay"
    # structure is never rewritten: ids, block types, names
    assert [b.get("id") for b in clean.content] == ["msg_1", "rs_1", "srv_1", None]
    assert [b["type"] for b in clean.content] == [b["type"] for b in message.content]


def test_a_value_of_another_thread_is_never_matched():
    """The served graphs share one store: thread b's text must not be searched for a's values."""
    store = SecretStore()
    known(store, thread="a")
    text = f"the user typed {VALUE}"
    clean = redaction(store).rewrite(AIMessage(content=text), thread="b")
    assert clean.content == text and refs_in(clean.content) == []


def test_a_value_shorter_than_four_characters_is_not_searched_for():
    """docs/secrets.md: the value pass leaves values of 1-3 characters (the key rules do not)."""
    store = SecretStore()
    offered = reply(tool_call("connect", host="a", password="x9z"))
    first = redaction(store).rewrite(offered, thread="t")
    ref = first.tool_calls[0]["args"]["password"]
    assert store.resolve(ref) == "x9z"
    assert redaction(store).rewrite(AIMessage(content="x9z"), thread="t").content == "x9z"


def test_a_structured_response_holds_no_known_value():
    class Report(BaseModel):
        summary: str

    store = SecretStore()
    ref = known(store)
    response = ModelResponse(
        result=[AIMessage(content="ok")], structured_response=Report(summary=f"pw {VALUE}")
    )
    clean = redaction(store).rewrite_response(response, thread="t")
    assert clean.structured_response == Report(summary=f"pw {ref}")


def test_a_short_provider_strategy_pin_is_hidden_by_the_schema_not_by_the_value_pass():
    """``secret_args`` by schema name: a 3-character pin is hidden in the response and its text."""
    from tests.secret_providers import Creds

    store = SecretStore()
    text = json.dumps({"user": "admin", "pin": "482"})
    response = ModelResponse(
        result=[AIMessage(content=[{"type": "text", "text": text}])],
        structured_response=Creds(user="admin", pin="482"),
    )
    clean = redaction(store).rewrite_response(response, thread="t", schemas=["Creds"])
    pin = clean.structured_response.pin
    assert store.resolve(pin) == "482"
    assert json.loads(clean.result[0].content[0]["text"]) == {"user": "admin", "pin": pin}


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_a_secret_equal_to_password_keeps_references_keys_and_the_field_name(mode, tmp_path):
    """Issue 25 (Low): the value ``password`` no longer rewrites inside references or keys."""
    from langchain_anthropic import ChatAnthropic

    from agentstate.models.anthropic_replay import AnthropicReplayServer
    from agentstate.persistence import sqlite_checkpointer
    from tests.secret_providers import RawReplies

    store, db = SecretStore(), tmp_path / "word.sqlite"
    script = RawReplies(
        script=[
            reply(
                tool_call("store_requirement", field_name="password", value="password"),
                text="I will store the password.",
            ),
            reply(text="Done."),
        ]
    )
    config = {"configurable": {"thread_id": "word"}}
    with AnthropicReplayServer(script) as server, sqlite_checkpointer(db) as saver:
        model = ChatAnthropic(
            model="replay", base_url=server.base_url, api_key="not-needed", max_retries=0
        )
        agent = build_reducer_agent(model, secrets=store, checkpointer=saver)
        payload = {"messages": [("user", "the password is password")]}
        if mode == "invoke":
            state = agent.invoke(payload, config)
        else:
            list(agent.stream(payload, config, stream_mode=["messages", "values"]))
            state = agent.get_state(config).values
    ref = state["requirements"]["password"]
    assert store.resolve(ref) == "password"
    (ai,) = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert ai.tool_calls[0]["args"] == {"field_name": "password", "value": ref}
    (block,) = [b for b in ai.content if b["type"] == "tool_use"]
    assert (block["input"] or json.loads(block["partial_json"])) == ai.tool_calls[0]["args"]
    kept = agent_side(state)
    assert "$secret:$secret" not in kept and "$secret:rds-master-$secret" not in kept
    assert all(store.resolve(r) == "password" for r in refs_in(kept))
    assert file_contains(db, ref.encode())
    assert "$secret:$secret" not in json.dumps(server.requests)


def test_two_threads_of_one_agent_replace_only_their_own_values(tmp_path):
    """A value offered in thread a is replaced in a's later replies and never in b's."""
    store, db = SecretStore(), tmp_path / "threads.sqlite"
    replies = [
        reply(tool_call("connect", host="db1", password="Alpha-Secret-11")),
        reply(text="Connected."),
        reply(text="b's user wrote Alpha-Secret-11 too"),
        reply(text="a again: Alpha-Secret-11"),
    ]
    with provider("scripted", replies) as (model, _):
        make = lambda saver: build(model, store, saver)  # noqa: E731
        a, _ = run(make, "invoke", db, ["connect"], thread="a")
        b, _ = run(make, "invoke", db, ["hello"], thread="b")
        a, _ = run(make, "invoke", db, ["again"], thread="a")
    assert "Alpha-Secret-11" in b["messages"][-1].content  # another thread's value: not matched
    (ref,) = refs_in(a["messages"][-1].content)
    assert store.resolve(ref) == "Alpha-Secret-11" and "Alpha-Secret-11" not in agent_side(a)


def test_the_replys_prose_is_searched_for_known_values_only():
    """docs/secrets.md, "not redacted": the key rules read tool arguments, not the prose."""
    store = SecretStore()
    text = "Noted. my password: Fresh-Value-1"
    assert redaction(store).rewrite(AIMessage(content=text), thread="t").content == text
    assert len(store) == 0

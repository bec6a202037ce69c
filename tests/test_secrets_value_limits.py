"""Issue 33 items 9-12: a value pass with bounded cost, that runs without a thread cannot share.

Before: runs without a ``thread_id`` shared one bucket, so Bob's "Our codename
is Amber-Lantern-42." was rewritten because Alice's password had that value;
600 values that are prefixes of one another raised ``RecursionError`` on every
later reply of the thread; a known number echoed as a JSON number, a value in
JSON text with a key twice, and a value inside a reference-shaped string were
left plain; nothing bounded the values of a thread, and each new value rebuilt
the pattern of all of them (costs: ``scripts/bench_redaction.py``).
"""

from __future__ import annotations

import asyncio
import json
import secrets

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import ScriptedChatModel, reply, tool_call

PASSWORD = "Amber-Lantern-42"


@tool
def connect(host: str, password: str) -> str:
    """Connect to a database."""
    return f"connected to {host}"


@tool
def lookup(query: str) -> str:
    """Search the inventory (a tool the redaction does not watch)."""
    return "nothing found"


def stateless_agent(store: SecretStore, replies: list[AIMessage]):
    """A stateless agent (no checkpointer, so no thread), one store and middleware for all."""
    middleware = SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})
    return create_agent(
        ScriptedChatModel(script=replies), tools=[connect, lookup], middleware=[middleware]
    )


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
def test_runs_without_a_thread_do_not_share_their_values(api):
    store = SecretStore()
    alice = stateless_agent(
        store,
        [reply(tool_call("connect", host="db1", password=PASSWORD)), reply(text="Connected.")],
    )
    bob = stateless_agent(store, [reply(text=f"Our codename is {PASSWORD}.")])

    def run(agent, text):
        payload = {"messages": [HumanMessage(text)]}
        if api == "invoke":
            return agent.invoke(payload)
        return asyncio.run(agent.ainvoke(payload))

    alice_state = run(alice, "connect me")
    assert PASSWORD not in repr(alice_state["messages"][1:])  # Alice's run hid it
    bob_state = run(bob, "what is our codename?")
    assert bob_state["messages"][-1].content == f"Our codename is {PASSWORD}."


def test_one_run_without_a_thread_still_finds_its_own_values_in_later_calls():
    store = SecretStore()
    agent = stateless_agent(
        store,
        [
            reply(tool_call("connect", host="db1", password=PASSWORD)),
            reply(tool_call("lookup", query=f"logins by {PASSWORD}")),
            reply(text=f"You used {PASSWORD}."),
        ],
    )
    state = agent.invoke({"messages": [HumanMessage("connect me")]})
    assert PASSWORD not in repr(state["messages"][1:])
    assert state["messages"][-1].content.startswith("You used $secret:password-")


def test_600_values_that_are_prefixes_of_one_another_raise_no_recursion_error():
    store = SecretStore()
    base = "Q" + secrets.token_hex(400)
    nested = [base[:n] for n in range(5, 605)]
    for value in nested:
        store.put("token", value, thread="t")
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    message = AIMessage(content=f"one: {nested[-1]} two: {nested[0]}!")
    for _ in range(3):  # every later reply of the thread
        out = middleware.rewrite(message, thread="t")
    known = store.known("t")
    assert out.content == f"one: {known[nested[-1]]} two: {known[nested[0]]}!"


def test_a_known_number_is_replaced_as_a_json_number_and_as_an_int_argument():
    store = SecretStore()
    ref = store.put("pin", "12345678", thread="t")
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    message = AIMessage(
        content='{"pin": 12345678}',
        tool_calls=[tool_call("lookup", pin=12345678, limit=20)],
    )
    out = middleware.rewrite(message, thread="t")
    assert json.loads(out.content) == {"pin": ref}
    assert out.tool_calls[0]["args"] == {"pin": ref, "limit": 20}


def test_a_known_value_in_json_text_with_a_duplicated_key_is_replaced():
    store = SecretStore()
    ref = store.put("note", "Vex-5512-Hollow", thread="t")
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    out = middleware.rewrite(
        AIMessage(content='{"note":"Vex-5512-Hollow","note":"ok"}'), thread="t"
    )
    assert "Vex-5512-Hollow" not in out.content and ref in out.content


def test_a_value_wrapped_in_a_reference_shaped_string_is_replaced_a_real_one_kept():
    store = SecretStore()
    ref = store.put("note", "Vex-5512-Hollow", thread="t")
    fake = f"$secret:Vex-5512-Hollow-{'ab' * 12}"
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    out = middleware.rewrite(AIMessage(content=f"see {fake} and {ref}"), thread="t")
    assert "Vex-5512-Hollow" not in out.content
    assert out.content == f"see $secret:{ref}-{'ab' * 12} and {ref}"


def test_a_thread_holds_at_most_max_values_and_says_so_in_one_line(monkeypatch):
    from agentstate.core import redaction_index

    monkeypatch.setattr(redaction_index, "MAX_VALUES", 5)
    store = SecretStore()
    for i in range(5):
        store.put("password", f"Value-{i}-kept", thread="t")
    with pytest.raises(redaction_index.SecretLimitError, match="holds 5 secret values") as error:
        store.put("password", "Value-6-refused", thread="t")
    assert "\n" not in str(error.value) and "Value-6" not in str(error.value)
    assert len(store) == 5 and "Value-6-refused" not in store.known("t")
    store.put("password", "Value-0-kept", thread="t")  # a value it holds: a new reference
    store.put("password", "other-thread", thread="u")  # another thread has its own room


def test_a_new_value_builds_only_small_blocks_not_every_value(monkeypatch):
    """With 4,096 values known, the next 64 values rebuild few words, not all 4,096 each time."""
    from agentstate.core import redaction_matcher

    built: list[int] = []
    block = redaction_matcher._Block

    class Counted(block):  # type: ignore[misc, valid-type]
        def __init__(self, words: list[str]) -> None:
            built.append(len(words))
            super().__init__(words)

    monkeypatch.setattr(redaction_matcher, "_Block", Counted)
    store = SecretStore()
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    message = AIMessage(content="nothing to see")
    for i in range(4096):
        store.put("password", f"Known-{i:05d}-x", thread="t")
    middleware.rewrite(message, thread="t")
    built.clear()
    for i in range(64):  # one new value per reply, as a conversation adds them
        store.put("password", f"Fresh-{i:05d}-y", thread="t")
        middleware.rewrite(message, thread="t")
    words_per_value = len(store.index("t").matcher) / len(store.known("t"))
    assert sum(built) <= 64 * 8 * words_per_value, built  # O(log n) rebuilds per new word
    assert len(store.index("t").matcher._blocks) <= 14  # log2(4160) + 1

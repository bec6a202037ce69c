"""Issue 33 items 4 and 5: argument text that cannot steer the key rules or slow them down.

Before, langchain-core's ``parse_partial_json`` read any text that *started*
with JSON as that JSON: ``"[1] Create the db, password: x"`` became ``[1]``
and the free-text rules never saw ``password: x``. It also retried
``json.loads`` once per character dropped from the end, so a 40 KB
description starting with ``[`` took 12-15 s per rewrite, and broken 40 KB
arguments of a watched tool 44 s. ``core.redaction_json`` reads only JSON or
JSON cut off at its end, in one pass. The timing bound here is generous (one
second, for a noisy shared machine); ``scripts/bench_redaction.py`` prints
the figure.
"""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import AIMessage

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import tool_call

PLAIN = "Vex-5512-Hollow"


def middleware(store: SecretStore) -> SecretRedactionMiddleware:
    """``M(s)`` of the issue."""
    return SecretRedactionMiddleware(
        store,
        tool_name="store_requirement",
        secret_args={"connect": ["password"]},
        text_args={"task": ["description"]},
    )


def described(description: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call("task", description=description)])


@pytest.mark.parametrize(
    "description",
    [
        f"[1] Create the db, password: {PLAIN}",
        f'{{"db":"orders"}} then connect with password: {PLAIN}',
        f"[x] done\n[ ] rotate: the password is {PLAIN}",
        f'{{"db": "orders"}}\n\n**Password**: {PLAIN}',
    ],
)
def test_free_text_that_starts_with_json_is_read_whole_by_the_free_text_rules(description):
    store = SecretStore()
    out = middleware(store).rewrite(described(description), thread="t")
    kept = out.tool_calls[0]["args"]["description"]
    assert PLAIN not in kept, kept
    assert description.split(PLAIN)[0] in kept  # the rest of the text is as written
    assert PLAIN in store.known("t")


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('{"host": "db1", "password": "Vex-5512-Hol', {"host": "db1", "password": "Vex-5512-Hol"}),
        ('{"host": "db1", "pass', {"host": "db1"}),
        ('{"port": 54', {"port": 54}),
        ('{"a": [1, {"b": "c\\', {"a": [1, {"b": "c"}]}),
        ('{"a": "x\\u00', {"a": "x"}),
        ('{"a": 1,', {"a": 1}),
        ("[1] Create the db", None),
        ('{"db":"orders"} ... password: x', None),
        ('{"a" 1}', None),
        ("[,1]", None),
    ],
)
def test_only_json_or_json_cut_off_at_its_end_is_read_as_json(text, read):
    from agentstate.core.redaction_json import read_partial  # new in issue 33

    assert read_partial(text) == read


BIG = 40_000


def timed(make) -> float:
    start = time.perf_counter()
    make()
    return time.perf_counter() - start


def test_a_40_kb_description_starting_with_a_bracket_is_rewritten_in_under_a_second():
    description = "[" + ("Create the orders db, then the users db. " * 1000)[: BIG - 40]
    description += f" password: {PLAIN}"
    store = SecretStore()
    took = timed(lambda: middleware(store).rewrite(described(description), thread="t"))
    assert took < 1.0, f"{took:.2f} s"
    assert PLAIN in store.known("t")  # and the free-text rules read the end of it


def test_broken_40_kb_arguments_of_a_watched_tool_are_read_in_under_a_second():
    # a comma missing near the start: every character is a retry for parse_partial_json
    arguments = '{"host": "db1" "note": "' + "x" * BIG + '", "password": "' + PLAIN + '"}'
    message = AIMessage(
        content="",
        invalid_tool_calls=[
            {"type": "invalid_tool_call", "name": "connect", "args": arguments, "id": "c1"}
        ],
    )
    store = SecretStore()
    took = timed(lambda: middleware(store).rewrite(message, thread="t"))
    assert took < 1.0, f"{took:.2f} s"
    assert PLAIN not in repr(middleware(store).rewrite(message, thread="t").invalid_tool_calls)

"""Stage 05: the prefix is byte-identical across experts and turns; variable parts come after it."""

import itertools

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agentstate.experts import EXPERTS, build_messages, common_prefix_length, load_manual
from agentstate.experts.prompts import GLOBAL_INSTRUCTIONS, system_prefix

MANUAL = load_manual()
HISTORIES = [
    [],
    [HumanMessage("Who owns chapter 4?"), AIMessage("The Head of Payments Operations.")],
]


def test_system_one_is_byte_identical_for_every_expert_and_turn():
    prefix = system_prefix(MANUAL)
    sent = [
        build_messages(prefix, expert, query, history)[0].content.encode("utf-8")
        for expert, history, query in itertools.product(
            EXPERTS, HISTORIES, ["What is the SEPA cut-off?", "How fast do we answer a complaint?"]
        )
    ]
    assert len(sent) == 12 and len(set(sent)) == 1
    assert sent[0] == prefix.text.encode("utf-8")
    assert system_prefix(load_manual()).sha256 == prefix.sha256  # a fresh load, same hash


def test_fixed_order_manual_first_then_persona_history_query():
    prefix = system_prefix(MANUAL)
    messages = build_messages(
        prefix, "compliance_auditor", "Which lists do we screen?", HISTORIES[1]
    )
    assert [m.type for m in messages] == ["system", "system", "human", "ai", "human"]
    first = messages[0].content
    assert first.startswith(GLOBAL_INSTRUCTIONS) and MANUAL.text in first
    assert first.index(MANUAL.text) == len(GLOBAL_INSTRUCTIONS)  # nothing between them
    assert EXPERTS["compliance_auditor"].title not in first.split("\n", 1)[0]
    assert messages[1].content == EXPERTS["compliance_auditor"].system_text()
    assert messages[-1].content == "Which lists do we screen?"


def test_a_timestamp_first_makes_every_prefix_different():
    ticks = iter(["2025-01-01T10:00:00.000001", "2025-01-01T10:00:00.000002"])
    first, second = (system_prefix(MANUAL, "timestamp_first", lambda: next(ticks)) for _ in "ab")
    assert first.sha256 != second.sha256
    shared = common_prefix_length(first.text, second.text)
    assert shared < 40 < len(MANUAL.data)  # the divergence is before the manual starts


def test_no_manual_floor_keeps_the_instructions_but_not_the_manual():
    floor = system_prefix(MANUAL, "no_manual")
    assert floor.text.startswith(GLOBAL_INSTRUCTIONS)
    assert MANUAL.text[:200] not in floor.text and floor.size < 1000


def test_bad_inputs_are_named():
    prefix = system_prefix(MANUAL)
    with pytest.raises(ValueError, match="unknown expert 'lawyer'"):
        build_messages(prefix, "lawyer", "hi")
    with pytest.raises(ValueError, match="query is empty"):
        build_messages(prefix, "support_concierge", "   ")
    with pytest.raises(ValueError, match="unknown prefix policy"):
        system_prefix(MANUAL, "sometimes")

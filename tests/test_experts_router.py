"""Stage 05: deterministic rules, and an LLM router whose bad replies fall back to the rules."""

import pytest
from langchain_core.messages import AIMessage

from agentstate.experts import parse_router_reply, route_by_llm, route_by_rules
from agentstate.experts.router import RouterReplyError, router_messages
from agentstate.models import ScriptedChatModel

ALL3 = "The batch outage debited a customer twice: what must we report to the regulator?"


@pytest.mark.parametrize(
    ("query", "experts"),
    [
        ("The overnight batch job failed twice", ["technical_specialist"]),
        ("Which sanctions lists do we screen against?", ["compliance_auditor"]),
        ("How do I explain the fee refund to the customer?", ["support_concierge"]),
        (ALL3, ["technical_specialist", "compliance_auditor", "support_concierge"]),
    ],
)
def test_rules_pick_experts_by_keywords(query, experts):
    route = route_by_rules(query)
    assert sorted(route["experts"]) == sorted(experts) and route["reason"] is None


def test_rules_rank_by_hits_cap_at_three_and_default():
    route = route_by_rules("customer complaint about a card fee refund after a batch error")
    assert route["experts"][0] == "support_concierge" and len(route["experts"]) <= 3
    default = route_by_rules("Good morning!")
    assert default["experts"] == ["support_concierge"] and "no keyword" in default["reason"]


@pytest.mark.parametrize(
    ("reply", "experts"),
    [
        ('{"experts": ["compliance_auditor"]}', ["compliance_auditor"]),
        ('Sure!\n```json\n{"experts": ["Technical Specialist", "support"]}\n```',
         ["technical_specialist", "support_concierge"]),
        ('["compliance-auditor", "compliance_auditor"]', ["compliance_auditor"]),
        ('{"experts": "support_concierge"} and some chatter', ["support_concierge"]),
    ],
)  # fmt: skip
def test_parser_accepts_fences_lists_aliases_and_duplicates(reply, experts):
    assert parse_router_reply(reply) == experts


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I think the compliance team.", "no JSON"),
        ('{"team": ["compliance_auditor"]}', "without an 'experts' key"),
        ('{"experts": ["lawyer"]}', "unknown expert 'lawyer'"),
        ('{"experts": []}', "names no expert"),
        ('{"experts": 3}', "must be a list"),
        ('{"experts": ["technical", "compliance", "support", "tech", "x"]}', "unknown expert"),
    ],
)
def test_parser_rejects_what_it_cannot_use(reply, reason):
    with pytest.raises(RouterReplyError, match=reason):
        parse_router_reply(reply)


def test_llm_router_uses_a_valid_reply_and_never_sends_the_manual():
    model = ScriptedChatModel(
        script=[AIMessage('```json\n{"experts": ["compliance_auditor"]}\n```')]
    )
    route = route_by_llm(ALL3, model)
    assert route == {"mode": "llm", "experts": ["compliance_auditor"], "reason": None,
                     "raw": route["raw"]}  # fmt: skip
    sent = "".join(m.content for m in model.seen[0])
    assert "OPERATIONS MANUAL" not in sent and len(sent) < 2000
    assert [m.type for m in router_messages("q")] == ["system", "human"]


def test_llm_router_falls_back_to_rules_with_the_reason():
    garbage = route_by_llm(ALL3, ScriptedChatModel(script=[AIMessage("compliance, probably")]))
    assert (
        garbage["mode"] == "llm->rules"
        and garbage["reason"] == "no JSON object or list in the reply"
    )
    assert garbage["experts"] == route_by_rules(ALL3)["experts"]
    failed = route_by_llm(ALL3, ScriptedChatModel(script=[]))
    assert failed["mode"] == "llm->rules" and "router call failed" in failed["reason"]

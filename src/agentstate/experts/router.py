"""Pick 1-3 experts for a query: deterministic keyword rules, or a short LLM call.

The LLM router never sees the manual (routing must not cost a 25k-token
prefill), and its reply is parsed defensively: JSON in code fences, a bare
list, names with spaces or hyphens, short aliases. Anything invalid (no JSON,
an unknown expert, more than three, an empty list, a failed call) falls back
to the rules, and the reason is recorded in the route. Taught in notebook 05.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from agentstate.experts.personas import DEFAULT_EXPERT, EXPERT_ORDER, EXPERTS, MAX_EXPERTS

KEYWORDS: dict[str, tuple[str, ...]] = {
    "technical_specialist": (
        "outage", "batch", "job", "system", "server", "restart", "error", "incident", "file",
        "clearing", "reconciliation", "deploy", "change", "rollback", "database", "ledger",
        "failover", "latency", "api", "certificate", "sepa", "wire", "technical",
    ),
    "compliance_auditor": (
        "kyc", "aml", "sanction", "sanctions", "laundering", "suspicious", "regulator",
        "regulatory", "supervisor", "compliance", "audit", "gdpr", "breach", "retention",
        "report", "reporting", "notify", "notification", "deadline", "pep", "due diligence",
        "legal", "law", "policy",
    ),
    "support_concierge": (
        "customer", "customers", "complaint", "complains", "refund", "redress", "card", "tell",
        "explain", "letter", "call", "branch", "vulnerable", "fee", "fees", "compensation",
        "apologise", "message", "support",
    ),
}  # fmt: skip
ALIASES = {
    "technical": "technical_specialist", "specialist": "technical_specialist",
    "tech": "technical_specialist", "compliance": "compliance_auditor",
    "auditor": "compliance_auditor", "support": "support_concierge",
    "concierge": "support_concierge",
}  # fmt: skip


class RouterReplyError(ValueError):
    """The router model's reply is not a usable list of experts."""


def route_by_rules(query: str) -> dict[str, Any]:
    """Experts whose keywords occur in the query (most hits first), at most 3, else the default."""
    words = query.lower()
    hits = {
        name: [k for k in KEYWORDS[name] if re.search(rf"\b{re.escape(k)}\b", words)]
        for name in EXPERT_ORDER
    }
    ranked = sorted((n for n in EXPERT_ORDER if hits[n]), key=lambda n: -len(hits[n]))
    experts = ranked[:MAX_EXPERTS] or [DEFAULT_EXPERT]
    reason = None if ranked else f"no keyword matched; default {DEFAULT_EXPERT}"
    return {"mode": "rules", "experts": experts, "reason": reason,
            "matched": {n: hits[n] for n in experts if hits[n]}}  # fmt: skip


ROUTER_PROMPT = (
    "Route the question to the bank's experts. Experts: "
    + "; ".join(f"{p.name} ({p.focus})" for p in EXPERTS.values())
    + '. Reply with JSON only, for example {"experts": ["compliance_auditor"]}, naming 1 to 3 '
    "experts."
)


def router_messages(query: str) -> list:
    """The short routing call: no manual, no history."""
    return [SystemMessage(ROUTER_PROMPT), HumanMessage(query)]


def _json_candidates(text: str) -> list[Any]:
    fenced = re.findall(r"```(?:json|JSON)?\s*(.*?)```", text, flags=re.DOTALL)
    found: list[Any] = []
    decoder = json.JSONDecoder()
    for chunk in [*fenced, text]:
        for i, char in enumerate(chunk):
            if char in "[{":
                try:
                    value, _ = decoder.raw_decode(chunk, i)
                except ValueError:
                    continue
                found.append(value)
                break
    return found


def _normalise(name: Any) -> str:
    if not isinstance(name, str):
        raise RouterReplyError(f"expert names must be strings, got {name!r}")
    key = re.sub(r"[\s\-]+", "_", name.strip().lower())
    key = ALIASES.get(key, key)
    if key not in EXPERTS:
        raise RouterReplyError(f"unknown expert {name!r}")
    return key


def parse_router_reply(text: str) -> list[str]:
    """The experts named in a router reply, or :class:`RouterReplyError` saying why not."""
    candidates = _json_candidates(text or "")
    if not candidates:
        raise RouterReplyError("no JSON object or list in the reply")
    value = candidates[0]
    if isinstance(value, dict):
        if "experts" not in value:
            raise RouterReplyError("JSON object without an 'experts' key")
        value = value["experts"]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise RouterReplyError(f"'experts' must be a list, got {type(value).__name__}")
    experts = list(dict.fromkeys(_normalise(v) for v in value))
    if not experts:
        raise RouterReplyError("the reply names no expert")
    if len(experts) > MAX_EXPERTS:
        raise RouterReplyError(f"the reply names {len(experts)} experts; at most {MAX_EXPERTS}")
    return experts


def route_by_llm(query: str, model: BaseChatModel) -> dict[str, Any]:
    """Ask ``model``; on any failure use the rules and record why."""
    try:
        reply = model.invoke(router_messages(query), extra_body={"max_tokens": 48})
        raw = str(reply.text)
    except Exception as err:  # a router must never take the turn down
        return {**route_by_rules(query), "mode": "llm->rules",
                "reason": f"router call failed: {type(err).__name__}: {err}"[:300]}  # fmt: skip
    try:
        experts = parse_router_reply(raw)
    except RouterReplyError as err:
        return {**route_by_rules(query), "mode": "llm->rules", "reason": str(err),
                "raw": raw[:200]}  # fmt: skip
    return {"mode": "llm", "experts": experts, "reason": None, "raw": raw[:200]}

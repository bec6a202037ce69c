"""Prompt construction in a fixed order, so the manual is a token-identical prefix.

1. system message 1: global instructions + the manual, verbatim (invariant);
2. system message 2: the expert's persona and rules;
3. the thread's history, then the query.

Nothing variable (time, ids, persona, history) ever comes before the manual.
:func:`system_prefix` returns the prefix text and its sha256; the two broken
variants kept beside it are the lesson's baselines: ``timestamp_first`` (a
clock line before the manual: every call has a new prefix, every call is
cold) and ``no_manual`` (the benchmark's floor: the same calls without the
manual). Taught in notebook 05.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, get_args

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agentstate.experts.manual import Manual
from agentstate.experts.personas import EXPERTS

PrefixPolicy = Literal["invariant", "timestamp_first", "no_manual"]
POLICIES: tuple[str, ...] = get_args(PrefixPolicy)

GLOBAL_INSTRUCTIONS = (
    "You work on the internal operations desk of Harbourline Bank. Answer only from the "
    "operations and compliance manual below, which is the bank's single reference. Be "
    "precise and brief, and never invent rules, deadlines or amounts.\n\n"
    "=== OPERATIONS MANUAL (verbatim) ===\n"
)
MANUAL_END = "\n=== END OF MANUAL ===\n"
NO_MANUAL = "(The manual is not included in this call.)\n"


def utc_clock() -> str:
    """Wall-clock time with microseconds: what a careless prompt puts first."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Prefix:
    """System message 1 as sent, and the sha256 of its UTF-8 bytes."""

    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))


def system_prefix(
    manual: Manual,
    policy: PrefixPolicy = "invariant",
    clock: Callable[[], str] = utc_clock,
) -> Prefix:
    """System message 1 under ``policy``; only ``invariant`` is the fix."""
    if policy == "invariant":
        return Prefix(GLOBAL_INSTRUCTIONS + manual.text + MANUAL_END)
    if policy == "timestamp_first":
        return Prefix(f"Current time: {clock()}\n" + GLOBAL_INSTRUCTIONS + manual.text + MANUAL_END)
    if policy == "no_manual":
        return Prefix(GLOBAL_INSTRUCTIONS + NO_MANUAL + MANUAL_END)
    raise ValueError(f"unknown prefix policy {policy!r}; choose one of {', '.join(POLICIES)}")


def build_messages(
    prefix: Prefix, expert: str, query: str, history: Sequence[BaseMessage] = ()
) -> list[BaseMessage]:
    """[system 1 = prefix, system 2 = persona, *history, the query] for one expert call."""
    if expert not in EXPERTS:
        raise ValueError(f"unknown expert {expert!r}; choose from {', '.join(EXPERTS)}")
    if not query.strip():
        raise ValueError("the query is empty")
    return [
        SystemMessage(prefix.text),
        SystemMessage(EXPERTS[expert].system_text()),
        *history,
        HumanMessage(query),
    ]


def prime_messages(prefix: Prefix) -> list[BaseMessage]:
    """The 1-token warm-up call of the ``primed`` execution: the prefix and nothing personal."""
    return [SystemMessage(prefix.text), HumanMessage("Reply with OK.")]


SYNTHESIS_RULES = (
    "You are the desk lead. Combine the experts' notes below into one answer for the "
    "colleague who asked: keep every rule number they cite, remove repetition, and keep "
    "it under six sentences."
)


def synthesis_messages(prefix: Prefix, query: str, notes: dict[str, str]) -> list[BaseMessage]:
    """The synthesis call reuses the manual prefix, so it stays warm for the next turn."""
    body = "\n".join(f"- {EXPERTS[name].title}: {text}" for name, text in notes.items())
    return [
        SystemMessage(prefix.text),
        SystemMessage(SYNTHESIS_RULES),
        HumanMessage(f"Question: {query}\n\nExpert notes:\n{body}"),
    ]


def common_prefix_length(a: str | bytes, b: str | bytes) -> int:
    """How many leading bytes two prompts share (what a prefix cache can reuse)."""
    x = a.encode("utf-8") if isinstance(a, str) else a
    y = b.encode("utf-8") if isinstance(b, str) else b
    n = 0
    for left, right in zip(x, y, strict=False):
        if left != right:
            break
        n += 1
    return n

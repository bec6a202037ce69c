"""The prefix hazard (notebook 05): a line that changes per call, placed before the manual.

An engine reuses the cached prefix two prompts share. A clock line before a
large manual makes every call's prompt part from the last one before the
manual starts, so no call reuses the manual; the manual first keeps it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import dynamic_prompt
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool

from agentstate.hazards.registry import Result, reproduced_unless
from agentstate.hazards.writes import USER
from agentstate.models.scripted import ScriptedChatModel, reply, tool_call

MANUAL = "Operations manual.\n" + "".join(f"Rule {i}: check the ledger twice.\n" for i in range(40))


def ticking_clock() -> Callable[[], str]:
    """A clock that moves one second per reading (deterministic, unlike ``datetime.now``)."""
    seconds = itertools.count()
    return lambda: f"Now: 2026-11-26T09:00:{next(seconds):02d}Z"


@tool
def look_up(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: see chapter 2"


def system_prompts(layout: Callable[[str], str]) -> list[str]:
    """The system prompt of each model call of one two-call run, laid out by ``layout``."""

    @dynamic_prompt
    def prompt(request: Any) -> str:
        return layout(MANUAL)

    model = ScriptedChatModel(script=[reply(tool_call("look_up", topic="fees")), reply(text="ok")])
    create_agent(model, [look_up], middleware=[prompt]).invoke(USER)
    return [str(m.content) for call in model.seen for m in call if isinstance(m, SystemMessage)]


def shared_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share (what a prefix cache could reuse)."""
    return len(os.path.commonprefix([a, b]))


def clock_before_the_manual() -> Result:
    """Two calls of one run, the clock line first: how much of the manual do they share?"""
    clock = ticking_clock()
    first, second = system_prompts(lambda manual: f"{clock()}\n{manual}")
    start = first.index(MANUAL)
    shared = max(0, shared_prefix(first, second) - start)
    outcome = reproduced_unless(shared >= len(MANUAL))
    return Result(
        "prefix-not-invariant",
        outcome,
        f"the two calls' prompts part at character {shared_prefix(first, second)}; "
        f"shared manual {shared} of {len(MANUAL)} characters",
    )

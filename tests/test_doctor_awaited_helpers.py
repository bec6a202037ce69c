"""A node whose update is built by an awaited helper is read like one that calls it (issue 41
item 5): ``return await self.helper(state)``, ``await helper(state)`` and ``asyncio.gather`` of
helpers, sync and async. Each graph is run first: the key the helper writes is dropped
(undeclared), and the doctor must say so.
"""

from __future__ import annotations

import asyncio
from asyncio import gather
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from agentstate.doctor import diagnose


class Research(TypedDict, total=False):
    topic: str
    findings: str


class Analyst:
    """A node's work split into helpers, as research agents split it."""

    async def summarize(self, state: Research) -> dict[str, Any]:
        return {"findings": f"on {state['topic']}", "confidence": 0.9}

    async def cite(self, state: Research) -> dict[str, Any]:
        return {"citations": [state["topic"]]}

    def summarize_now(self, state: Research) -> dict[str, Any]:
        return {"findings": f"on {state['topic']}", "confidence": 0.9}

    async def analyze(self, state: Research) -> dict[str, Any]:
        return await self.summarize(state)

    async def analyze_named(self, state: Research) -> dict[str, Any]:
        update = await self.summarize(state)
        return update

    async def analyze_both(self, state: Research) -> dict[str, Any]:
        summary, sources = await asyncio.gather(self.summarize(state), self.cite(state))
        return {**summary, **sources}

    async def analyze_all(self, state: Research) -> dict[str, Any]:
        parts = await gather(*[self.summarize(part) for part in [state]])
        return {**parts[0]}

    def analyze_sync(self, state: Research) -> dict[str, Any]:
        return self.summarize_now(state)


async def summarize(state: Research) -> dict[str, Any]:
    return {"findings": f"on {state['topic']}", "confidence": 0.9}


async def analyze_function(state: Research) -> dict[str, Any]:
    return {**await summarize(state)}


def graph(node: Any) -> Any:
    builder = StateGraph(Research)
    builder.add_node("analyze", node)
    builder.add_edge(START, "analyze")
    builder.add_edge("analyze", END)
    return builder.compile()


ANALYST = Analyst()
CASES = {
    "return await self.helper(state)": (ANALYST.analyze, {"confidence"}),
    "name = await self.helper(state)": (ANALYST.analyze_named, {"confidence"}),
    "asyncio.gather of two helpers": (ANALYST.analyze_both, {"confidence", "citations"}),
    "gather(*[...]) of helpers": (ANALYST.analyze_all, {"confidence"}),
    "{**await helper(state)}": (analyze_function, {"confidence"}),
    "return self.helper(state) (sync)": (ANALYST.analyze_sync, {"confidence"}),
}


def run(node: Any) -> dict[str, Any]:
    compiled = graph(node)
    if asyncio.iscoroutinefunction(node):
        out: dict[str, Any] = asyncio.run(compiled.ainvoke({"topic": "tides"}))
    else:
        out = compiled.invoke({"topic": "tides"})
    return out


@pytest.mark.parametrize("shape", list(CASES))
def test_a_key_an_awaited_helper_writes_is_followed(shape: str):
    node, dropped = CASES[shape]
    out = run(node)
    assert out["findings"] == "on tides"  # the helper ran and its declared key landed
    assert not dropped & set(out)  # the undeclared ones were dropped silently
    found = {f.subject for f in diagnose(graph(node)).of("undeclared-key") if f.severity == "error"}
    assert dropped <= found, shape
    assert "findings" not in found

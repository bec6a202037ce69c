"""gpt-researcher's multi-agent report team: a writer that awaits its helper, and a workflow
given a second entry (issue 41 items 5 and 6).

Written for this corpus after the public shapes named per graph (no code copied).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, StateGraph
from typing_extensions import TypedDict

from tests.doctor_corpus._kit import Proof, case

# --- the writer: its node awaits a helper that builds the report's layout --------------------
# Follows assafelovic/gpt-researcher multi_agents/agents/writer.py (WriterAgent.run awaits
# self.write_sections(research_state), which awaits call_model for a JSON layout, then returns
# {**layout, "headers": headers}; revise_headers is awaited when the task follows guidelines)
# and multi_agents/memory/research.py (ResearchState declares every layout key). The model
# call is scripted: call_model returns the JSON the prompt asks for.


class ResearchState(TypedDict, total=False):
    task: dict
    title: str
    research_data: list[dict]
    headers: dict
    table_of_contents: str
    introduction: str
    conclusion: str
    sources: list[str]
    report: str


async def call_model(prompt: list[dict[str, str]], model: str | None) -> dict[str, Any]:
    """Stands for gpt-researcher's call_model with response_format="json"."""
    topic = prompt[-1]["content"]
    return json.loads(
        json.dumps(
            {
                "table_of_contents": f"- {topic}",
                "introduction": f"On {topic}.",
                "conclusion": "Done.",
                "sources": ["https://example.org"],
            }
        )
    )


class WriterAgent:
    def get_headers(self, research_state: dict[str, Any]) -> dict[str, str]:
        return {"title": research_state.get("title", ""), "introduction": "Introduction"}

    async def write_sections(self, research_state: dict[str, Any]) -> dict[str, Any]:
        task = research_state.get("task", {})
        prompt = [{"role": "user", "content": str(research_state.get("title"))}]
        response = await call_model(prompt, task.get("model"))
        return response

    async def revise_headers(self, task: dict[str, Any], headers: dict[str, str]) -> dict:
        return {"headers": {k: v.upper() for k, v in headers.items()}}

    async def run(self, research_state: dict[str, Any]) -> dict[str, Any]:
        research_layout_content = await self.write_sections(research_state)
        headers = self.get_headers(research_state)
        if research_state.get("task", {}).get("follow_guidelines"):
            headers = await self.revise_headers(task=research_state.get("task"), headers=headers)
            headers = headers.get("headers")
        return {**research_layout_content, "headers": headers}


class PublisherAgent:
    async def run(self, research_state: dict[str, Any]) -> dict[str, Any]:
        parts = [research_state.get("introduction"), research_state.get("conclusion")]
        return {"report": " ".join(p for p in parts if p)}


def writer_team() -> Any:
    writer, publisher = WriterAgent(), PublisherAgent()
    workflow = StateGraph(ResearchState)
    workflow.add_node("writer", writer.run)
    workflow.add_node("publisher", publisher.run)
    workflow.add_edge("writer", "publisher")
    workflow.set_entry_point("writer")
    workflow.add_edge("publisher", END)
    return workflow.compile()


def prove_writer() -> Proof:
    task = {"task": {"follow_guidelines": True}, "title": "tides"}
    out = asyncio.run(writer_team().ainvoke(task))
    kept = out["introduction"] == "On tides." and out["headers"]["title"] == "TIDES"
    return Proof(
        frozenset() if kept and out["report"] == "On tides. Done." else frozenset({"?"}),
        "the awaited helpers' layout and revised headers all landed; the report published",
    )


# --- the chief editor's workflow given a second entry ---------------------------------------
# Follows assafelovic/gpt-researcher multi_agents/agents/orchestrator.py (browser -> planner ->
# human -> researcher -> writer -> publisher, set_entry_point("browser"), nodes bound methods
# of the agents) and researcher.py (run_initial_research returns the task and the initial
# research). Here a conditional entry is added for tasks that carry saved research (a node
# loads it into `initial_research`) while set_entry_point("browser") stays: both entries start,
# and both write `initial_research` in the run's first step.


class EditorState(TypedDict, total=False):
    task: dict
    initial_research: str
    sections: list[str]
    report: str


class ResearchAgent:
    async def run_initial_research(self, research_state: dict[str, Any]) -> dict[str, Any]:
        task = research_state.get("task", {})
        return {"task": task, "initial_research": f"browsed {task.get('query')}"}

    async def load_saved_research(self, research_state: dict[str, Any]) -> dict[str, Any]:
        return {"initial_research": research_state.get("task", {}).get("saved", "")}


class EditorAgent:
    async def plan_research(self, research_state: dict[str, Any]) -> dict[str, Any]:
        return {"sections": [research_state.get("initial_research", "")[:10]]}


class Publisher:
    async def run(self, research_state: dict[str, Any]) -> dict[str, Any]:
        return {"report": ", ".join(research_state.get("sections", []))}


def route_start(research_state: dict[str, Any]) -> str:
    return "saved" if research_state.get("task", {}).get("saved") else "fresh"


def two_entries() -> Any:
    research, editor, publisher = ResearchAgent(), EditorAgent(), Publisher()
    workflow = StateGraph(EditorState)
    workflow.add_node("browser", research.run_initial_research)
    workflow.add_node("saved_research", research.load_saved_research)
    workflow.add_node("planner", editor.plan_research)
    workflow.add_node("publisher", publisher.run)
    workflow.set_conditional_entry_point(
        route_start, {"saved": "saved_research", "fresh": "planner"}
    )
    workflow.set_entry_point("browser")
    workflow.add_edge("browser", "planner")
    workflow.add_edge("saved_research", "planner")
    workflow.add_edge("planner", "publisher")
    workflow.add_edge("publisher", END)
    return workflow.compile()


def prove_two_entries() -> Proof:
    ran: list[set[str]] = []

    async def run() -> None:
        task = {"task": {"query": "tides", "saved": "notes on tides"}}
        async for step in two_entries().astream(task, stream_mode="updates"):
            ran.append(set(step))

    try:
        asyncio.run(run())
        raised = False
    except InvalidUpdateError as err:
        raised = "initial_research" in str(err)
    first = set().union(*ran)
    return Proof(
        frozenset({"unreduced-parallel-write"}) if raised else frozenset(),
        f"a task with saved research: {sorted(first)} ran in the first step, then "
        f"{'InvalidUpdateError at initial_research' if raised else 'no error'}",
    )


CASES = [
    case(
        "report writer: the node awaits its helper for the layout",
        "assafelovic/gpt-researcher multi_agents/agents/writer.py",
        set(),
        writer_team,
        prove_writer,
    ),
    case(
        "chief editor: a conditional entry beside set_entry_point",
        "assafelovic/gpt-researcher multi_agents/agents/orchestrator.py (a second entry)",
        {"unreduced-parallel-write"},
        two_entries,
        prove_two_entries,
    ),
]

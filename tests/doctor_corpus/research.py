"""Research agents from third-party frameworks and langchain-ai's deep researcher.

A Send fan-out whose workers hand their item back, a router typed narrower than
the state, a router reading a key nothing writes, and a tool loop whose helper
caches a token in the store. Written for this corpus after the public shapes
named per graph (no code copied).
"""

from __future__ import annotations

import asyncio
import operator
from dataclasses import dataclass, fields
from typing import Annotated, Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore
from langgraph.types import Send
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentstate.models import ScriptedChatModel, reply, tool_call
from tests.doctor_corpus._kit import USER, Proof, case, scripted

# --- the Gemini full-stack quickstart: generate queries, Send web research, reflect -----------
# Follows google-gemini/gemini-fullstack-langgraph-quickstart backend/src/agent/graph.py and
# state.py: OverallState concatenates `search_query`; continue_to_web_research Sends one
# web_research per query with the query under the same key; web_research returns
# `{"search_query": [state["search_query"]]}` into that list; reflection's router
# evaluate_research is typed with ReflectionState, which lacks `max_research_loops`, and
# falls back to the configuration. Models are built inside the nodes from the configured
# name (scripted here), search goes through a module-level client, as the original's genai
# client does.


class OverallState(TypedDict):
    messages: Annotated[list, add_messages]
    search_query: Annotated[list, operator.add]
    web_research_result: Annotated[list, operator.add]
    initial_search_query_count: int
    max_research_loops: int
    research_loop_count: int


class ReflectionState(TypedDict):
    is_sufficient: bool
    follow_up_queries: Annotated[list, operator.add]
    research_loop_count: int
    number_of_ran_queries: int


class QueryGenerationState(TypedDict):
    search_query: list[str]


class WebSearchState(TypedDict):
    search_query: str
    id: str


class SearchQueryList(BaseModel):
    query: list[str]


class Reflection(BaseModel):
    is_sufficient: bool
    follow_up_queries: list[str]


@dataclass
class Configuration:
    query_generator_model: str = "gemini-flash"
    reflection_model: str = "gemini-pro"
    number_of_initial_queries: int = 2
    max_research_loops: int = 3

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None = None) -> Configuration:
        given = (config or {}).get("configurable", {})
        return cls(**{f.name: given[f.name] for f in fields(cls) if f.name in given})


MODELS: dict[str, Any] = {}
"""The scripted models by configured name (the original builds ChatGoogleGenerativeAI)."""


def chat_model(name: str) -> Any:
    return MODELS.get(name) or scripted(reply(text="ok"))


class SearchClient:
    """Stands for the genai client: one grounded search per call."""

    def generate_content(self, query: str) -> str:
        return f"result for {query}"


search_client = SearchClient()


def generate_query(state: OverallState, config: RunnableConfig) -> QueryGenerationState:
    configurable = Configuration.from_runnable_config(config)
    if state.get("initial_search_query_count") is None:
        state["initial_search_query_count"] = configurable.number_of_initial_queries
    llm = chat_model(configurable.query_generator_model)
    result = llm.with_structured_output(SearchQueryList).invoke(str(state["messages"][-1]))
    return {"search_query": result.query[: state["initial_search_query_count"]]}


def continue_to_web_research(state: QueryGenerationState) -> list[Send]:
    return [
        Send("web_research", {"search_query": query, "id": str(idx)})
        for idx, query in enumerate(state["search_query"])
    ]


def web_research(state: WebSearchState, config: RunnableConfig) -> OverallState:
    text = search_client.generate_content(state["search_query"])
    return {"search_query": [state["search_query"]], "web_research_result": [text]}


def reflection(state: OverallState, config: RunnableConfig) -> ReflectionState:
    configurable = Configuration.from_runnable_config(config)
    state["research_loop_count"] = state.get("research_loop_count", 0) + 1
    llm = chat_model(configurable.reflection_model)
    result = llm.with_structured_output(Reflection).invoke("\n".join(state["web_research_result"]))
    return {
        "is_sufficient": result.is_sufficient,
        "follow_up_queries": result.follow_up_queries,
        "research_loop_count": state["research_loop_count"],
        "number_of_ran_queries": len(state["search_query"]),
    }


def evaluate_research(state: ReflectionState, config: RunnableConfig) -> Any:
    configurable = Configuration.from_runnable_config(config)
    max_research_loops = (
        state.get("max_research_loops")
        if state.get("max_research_loops") is not None
        else configurable.max_research_loops
    )
    if state["is_sufficient"] or state["research_loop_count"] >= max_research_loops:
        return "finalize_answer"
    return [
        Send("web_research", {"search_query": query, "id": str(state["number_of_ran_queries"] + i)})
        for i, query in enumerate(state["follow_up_queries"])
    ]


def finalize_answer(state: OverallState, config: RunnableConfig) -> dict[str, Any]:
    return {"messages": [AIMessage(content=" / ".join(state["web_research_result"]))]}


def gemini_quickstart() -> Any:
    builder = StateGraph(OverallState)  # its config_schema= is deprecated since LangGraph 1.0
    builder.add_node("generate_query", generate_query)
    builder.add_node("web_research", web_research)
    builder.add_node("reflection", reflection)
    builder.add_node("finalize_answer", finalize_answer)
    builder.add_edge(START, "generate_query")
    builder.add_conditional_edges("generate_query", continue_to_web_research, ["web_research"])
    builder.add_edge("web_research", "reflection")
    builder.add_conditional_edges(
        "reflection", evaluate_research, ["web_research", "finalize_answer"]
    )
    builder.add_edge("finalize_answer", END)
    return builder.compile(name="pro-search-agent")


def _structured(name: str, **args: Any) -> AIMessage:
    return reply(tool_call(name, **args))


def prove_gemini() -> Proof:
    global MODELS
    held = MODELS
    MODELS = {
        "gemini-flash": scripted(_structured("SearchQueryList", query=["q1", "q2"])),
        "gemini-pro": scripted(
            *[
                _structured("Reflection", is_sufficient=False, follow_up_queries=[f"f{i}"])
                for i in range(5)
            ]
        ),
    }
    try:
        out = gemini_quickstart().invoke({**USER, "max_research_loops": 1})
    finally:
        MODELS = held
    doubled = out["search_query"][:4] == ["q1", "q2", "q1", "q2"]
    ignored = out["research_loop_count"] == Configuration.max_research_loops  # not the input's 1
    hazards = {"list-doubled-by-subagent"} if doubled else set()
    hazards |= {"unseen-key-read"} if ignored else set()
    return Proof(
        frozenset(hazards),
        f"search_query began {out['search_query'][:4]}; with max_research_loops=1 given, "
        f"{out['research_loop_count']} loops ran (the configured default)",
    )


# --- gpt-researcher's multi-agent editor: plan, human review, parallel research ---------------
# Follows assafelovic/gpt-researcher multi_agents/agents/orchestrator.py (ChiefEditorAgent's
# workflow: browser -> planner -> human -> researcher -> writer -> publisher, nodes bound
# methods of agent objects; the router after `human` is a lambda that force-accepts once
# state.get('revisions_count', 0) reaches MAX_REVISIONS), human.py (review_plan writes
# `plan_revision_count`), memory/research.py (ResearchState, no `revisions_count`) and
# editor.py (run_parallel_research compiles a draft workflow inside the node and gathers one
# ainvoke per section).


class ResearchState(TypedDict):
    task: dict
    initial_research: str
    sections: list[str]
    research_data: list[dict]
    human_feedback: str | None
    plan_revision_count: int
    title: str
    report: str


class DraftState(TypedDict):
    task: dict
    topic: str
    draft: dict


class ResearchAgent:
    async def run_initial_research(self, research_state: dict) -> dict[str, Any]:
        return {"initial_research": f"notes on {research_state.get('task')['query']}"}

    async def run_depth_research(self, draft_state: dict) -> dict[str, Any]:
        return {"draft": {draft_state.get("topic"): "findings"}}


class EditorAgent:
    def __init__(self, research: ResearchAgent) -> None:
        self.research = research

    async def plan_research(self, research_state: dict) -> dict[str, Any]:
        feedback = research_state.get("human_feedback")
        sections = ["background", "methods"] + (["extra"] if feedback else [])
        return {"title": "report", "sections": sections}

    async def run_parallel_research(self, research_state: dict) -> dict[str, Any]:
        workflow = StateGraph(DraftState)
        workflow.add_node("researcher", self.research.run_depth_research)
        workflow.set_entry_point("researcher")
        workflow.add_edge("researcher", END)
        chain = workflow.compile()
        drafts = [
            chain.ainvoke({"task": research_state.get("task"), "topic": topic})
            for topic in research_state.get("sections")
        ]
        return {"research_data": [result["draft"] for result in await asyncio.gather(*drafts)]}


class HumanAgent:
    def __init__(self, feedback: list[str | None]) -> None:
        self.feedback = feedback

    async def review_plan(self, research_state: dict) -> dict[str, Any]:
        user_feedback = self.feedback.pop(0) if self.feedback else None
        plan_revision_count = research_state.get("plan_revision_count", 0)
        if user_feedback:
            plan_revision_count += 1
        return {"human_feedback": user_feedback, "plan_revision_count": plan_revision_count}


class WriterAgent:
    async def run(self, research_state: dict) -> dict[str, Any]:
        parts = [next(iter(d)) for d in research_state.get("research_data")]
        return {"report": f"{research_state.get('title')}: {', '.join(parts)}"}


class PublisherAgent:
    async def run(self, research_state: dict) -> dict[str, Any]:
        return {"report": research_state.get("report") + " (published)"}


MAX_REVISIONS = 5


def gpt_researcher(feedback: list[str | None] | None = None) -> Any:
    research = ResearchAgent()
    editor, human = EditorAgent(research), HumanAgent(list(feedback or []))
    writer, publisher = WriterAgent(), PublisherAgent()
    workflow = StateGraph(ResearchState)
    workflow.add_node("browser", research.run_initial_research)
    workflow.add_node("planner", editor.plan_research)
    workflow.add_node("researcher", editor.run_parallel_research)
    workflow.add_node("writer", writer.run)
    workflow.add_node("publisher", publisher.run)
    workflow.add_node("human", human.review_plan)
    workflow.add_edge("browser", "planner")
    workflow.add_edge("planner", "human")
    workflow.add_edge("researcher", "writer")
    workflow.add_edge("writer", "publisher")
    workflow.set_entry_point("browser")
    workflow.add_edge("publisher", END)
    workflow.add_conditional_edges(
        "human",
        lambda state: (
            "accept"
            if state["human_feedback"] is None
            else "force_accept"
            if state.get("revisions_count", 0) >= MAX_REVISIONS
            else "revise"
        ),
        {"accept": "researcher", "force_accept": "researcher", "revise": "planner"},
    )
    return workflow.compile()


def prove_gpt_researcher() -> Proof:
    task = {"task": {"query": "tides"}}
    done = asyncio.run(gpt_researcher([None]).ainvoke(task))
    try:
        asyncio.run(gpt_researcher(["more"] * 40).ainvoke(task, {"recursion_limit": 25}))
        looped = False
    except GraphRecursionError:
        looped = True
    return Proof(
        frozenset(
            {"unseen-key-read"} if looped and done["report"].endswith("(published)") else set()
        ),
        "accepted at once it published; a reviewer who keeps asking was never force-accepted "
        f"after {MAX_REVISIONS} revisions: {'GraphRecursionError' if looped else 'it stopped'}",
    )


# --- open_deep_research's researcher tools: a helper caches an OAuth token in the store -------
# Follows langchain-ai/open_deep_research src/open_deep_research/deep_researcher.py
# (researcher_tools runs the reply's tool calls itself, asyncio.gather over them) and utils.py
# (get_all_tools -> load_mcp_tools -> fetch_tokens, which reads and writes the user's tokens
# with store.aget/aput at (user_id, "tokens")). The model never chooses what that writes.


class ResearcherState(TypedDict):
    researcher_messages: Annotated[list, add_messages]
    tool_call_iterations: int


@tool
async def think_tool(reflection: str) -> str:
    """Reflect on the research so far."""
    return f"Reflection recorded: {reflection}"


async def get_tokens(config: RunnableConfig) -> dict[str, Any] | None:
    store = get_store()
    user_id = config.get("configurable", {}).get("owner")
    found = await store.aget((user_id, "tokens"), "data")
    return found.value if found is not None else None


async def set_tokens(config: RunnableConfig, tokens: dict[str, Any]) -> None:
    store = get_store()
    user_id = config.get("configurable", {}).get("owner")
    await store.aput((user_id, "tokens"), "data", tokens)


async def fetch_tokens(config: RunnableConfig) -> dict[str, Any]:
    tokens = await get_tokens(config)
    if tokens is None:
        tokens = {"access_token": "exchanged-token", "expires_in": 3600}
        await set_tokens(config, tokens)
    return tokens


async def get_all_tools(config: RunnableConfig) -> list[Any]:
    await fetch_tokens(config)
    return [think_tool]


MODEL: dict[str, Any] = {"researcher": scripted(reply(text="done"))}


async def researcher(state: ResearcherState, config: RunnableConfig) -> dict[str, Any]:
    tools = await get_all_tools(config)
    model = MODEL["researcher"].bind_tools(tools)
    return {"researcher_messages": [await model.ainvoke(state["researcher_messages"])]}


async def researcher_tools(state: ResearcherState, config: RunnableConfig) -> dict[str, Any]:
    most_recent = state["researcher_messages"][-1]
    tools = {t.name: t for t in await get_all_tools(config)}
    observations = await asyncio.gather(
        *[tools[call["name"]].ainvoke(call["args"], config) for call in most_recent.tool_calls]
    )
    return {
        "researcher_messages": [
            ToolMessage(str(text), name=call["name"], tool_call_id=call["id"])
            for text, call in zip(observations, most_recent.tool_calls, strict=True)
        ],
        "tool_call_iterations": state.get("tool_call_iterations", 0) + 1,
    }


def route_researcher(state: ResearcherState) -> str:
    return "researcher_tools" if state["researcher_messages"][-1].tool_calls else END


def deep_researcher(store: Any = None) -> Any:
    builder = StateGraph(ResearcherState)
    builder.add_node("researcher", researcher)
    builder.add_node("researcher_tools", researcher_tools)
    builder.add_edge(START, "researcher")
    builder.add_conditional_edges("researcher", route_researcher, ["researcher_tools", END])
    builder.add_edge("researcher_tools", "researcher")
    return builder.compile(store=store or InMemoryStore())


def prove_deep_researcher() -> Proof:
    store = InMemoryStore()
    held = MODEL["researcher"]
    MODEL["researcher"] = ScriptedChatModel(
        script=[
            reply(tool_call("think_tool", reflection="the user likes tea")),
            reply(tool_call("think_tool", reflection="the user likes tea")),
            reply(text="done"),
        ]
    )
    try:
        asyncio.run(
            deep_researcher(store).ainvoke(
                {"researcher_messages": USER["messages"]}, {"configurable": {"owner": "u1"}}
            )
        )
    finally:
        MODEL["researcher"] = held
    stored = [item.value for item in store.search(("u1",))]
    chosen = any("tea" in str(value) for value in stored)
    return Proof(
        frozenset({"memory-in-react-loop"} if chosen else set()),
        f"the store holds {stored} only: the token code fetched, nothing the model said",
    )


CASES = [
    case(
        "quickstart research: Send workers hand their query back; router typed narrower",
        "google-gemini/gemini-fullstack-langgraph-quickstart backend/src/agent/graph.py",
        {"list-doubled-by-subagent", "unseen-key-read"},
        gemini_quickstart,
        prove_gemini,
    ),
    case(
        "multi-agent editor: router counts `revisions_count`, human writes another key",
        "assafelovic/gpt-researcher multi_agents/agents/orchestrator.py",
        {"unseen-key-read"},
        gpt_researcher,
        prove_gpt_researcher,
    ),
    case(
        "deep researcher: tool loop whose helper caches an OAuth token in the store",
        "langchain-ai/open_deep_research deep_researcher.py + utils.py (fetch_tokens)",
        set(),
        deep_researcher,
        prove_deep_researcher,
    ),
]

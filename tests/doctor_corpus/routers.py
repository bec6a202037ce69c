"""Routers: conditional edges that pick one node, and one that names a node or Sends work.

Each route below writes the same plain key; only one route runs per step, so no
run can raise. Written for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from tests.doctor_corpus._kit import case, raises_invalid_update, shown

# --- a router RAG: the question goes to the index or to the web, never both -----------------
# Follows the LangGraph tutorial "Adaptive RAG" (langchain-ai/langgraph, examples/rag):
# route_question picks web_search or retrieve, both fill `documents`, then generate.


class RagState(TypedDict, total=False):
    question: str
    documents: list[str]
    generation: str


def route_question(state: RagState) -> str:
    if "recent" in state["question"]:
        return "web_search"
    return "vectorstore"


def rag_graph() -> Any:
    graph = StateGraph(RagState)
    graph.add_node("web_search", lambda s: {"documents": [f"web: {s['question']}"]})
    graph.add_node("retrieve", lambda s: {"documents": [f"index: {s['question']}"]})
    graph.add_node("generate", lambda s: {"generation": " / ".join(s["documents"])})
    graph.add_conditional_edges(
        START, route_question, {"web_search": "web_search", "vectorstore": "retrieve"}
    )
    graph.add_edge("web_search", "generate")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def prove_rag() -> Any:
    web = rag_graph().invoke({"question": "recent news"})
    index = rag_graph().invoke({"question": "what is RAG"})
    intact = web["documents"] == ["web: recent news"] and index["documents"] == [
        "index: what is RAG"
    ]
    return shown(
        "unreduced-parallel-write",
        not intact,
        "both routes ran; each wrote `documents` alone",
    )


# --- a support router with a Literal return annotation and no path map ----------------------
# Follows NirDiamant/GenAI_Agents "customer_support_agent_langgraph": categorize the query,
# then one handler (technical, billing, general) writes the response.


class SupportState(TypedDict, total=False):
    query: str
    category: str
    response: str


def route_query(state: SupportState) -> Literal["technical", "billing", "general"]:
    if state["category"] == "Technical":
        return "technical"
    elif state["category"] == "Billing":
        return "billing"
    return "general"


def support_graph() -> Any:
    graph = StateGraph(SupportState)
    graph.add_node("categorize", lambda s: {"category": s["query"].split(":")[0]})
    for name in ("technical", "billing", "general"):
        graph.add_node(name, lambda s, name=name: {"response": f"{name} answer"})
        graph.add_edge(name, END)
    graph.add_edge(START, "categorize")
    graph.add_conditional_edges("categorize", route_query)
    return graph.compile()


def prove_support() -> Any:
    answers = [
        support_graph().invoke({"query": f"{c}: help"})["response"]
        for c in ("Technical", "Billing", "Other")
    ]
    ok = answers == ["technical answer", "billing answer", "general answer"]
    return shown("unreduced-parallel-write", not ok, "three queries, three routes, one writer each")


# --- a grader with a bool path map ---------------------------------------------------------
# Follows the LangGraph tutorial "Corrective RAG" (decide_to_generate picks generate or
# transform_query), written here with a `{True: ..., False: ...}` path map.


class GradeState(TypedDict, total=False):
    question: str
    relevant: bool
    generation: str


def grade_graph() -> Any:
    graph = StateGraph(GradeState)
    graph.add_node("grade", lambda s: {"relevant": "rag" in s["question"]})
    graph.add_node("generate", lambda s: {"generation": "answer from documents"})
    graph.add_node("transform_query", lambda s: {"generation": "better question"})
    graph.add_edge(START, "grade")
    graph.add_conditional_edges(
        "grade", lambda s: s["relevant"], {True: "generate", False: "transform_query"}
    )
    graph.add_edge("generate", END)
    graph.add_edge("transform_query", END)
    return graph.compile()


def prove_grade() -> Any:
    yes = grade_graph().invoke({"question": "what is rag"})["generation"]
    no = grade_graph().invoke({"question": "weather"})["generation"]
    ok = (yes, no) == ("answer from documents", "better question")
    return shown("unreduced-parallel-write", not ok, "both branches ran alone")


# --- plan first, then one Send per section ---------------------------------------------------
# Follows langchain-ai/open_deep_research (the workflow graph: plan the report's sections,
# then Send one writer per section; sections gathered with operator.add).


class ReportState(TypedDict, total=False):
    topic: str
    plan: list[str]
    sections: Annotated[list[str], operator.add]


def next_step(state: ReportState) -> Any:
    if not state.get("plan"):
        return "plan_sections"
    return [Send("write_section", {"section": s}) for s in state["plan"]]


def report_graph() -> Any:
    graph = StateGraph(ReportState)
    graph.add_node("plan_sections", lambda s: {"plan": ["intro", "body", "outro"]})
    graph.add_node("write_section", lambda s: {"sections": [s["section"]]})
    graph.add_conditional_edges(START, next_step, ["plan_sections", "write_section"])
    graph.add_conditional_edges("plan_sections", next_step, ["plan_sections", "write_section"])
    graph.add_edge("write_section", END)
    return graph.compile()


def prove_report() -> Any:
    out = report_graph().invoke({"topic": "state"})
    ok = sorted(out["sections"]) == ["body", "intro", "outro"] and out["plan"] == [
        "intro",
        "body",
        "outro",
    ]
    return shown("unreduced-parallel-write", not ok, "one plan write, three Sends, three sections")


# --- a router that Sends to whichever sources a classifier picks ------------------------------
# Follows the LangChain docs' multi-agent "router" pattern (classify the query, then Send it to
# each source the classifier picked, run in parallel), with each source writing a plain
# `context` instead of a reduced list. Which sources run is the model's choice: the doctor can
# only say it cannot tell, and a run that picks two raises.


class SourcesState(TypedDict, total=False):
    query: str
    classifications: list[dict[str, str]]
    context: str


def route_to_sources(state: SourcesState) -> list[Send]:
    return [Send(c["source"], {"query": c["query"]}) for c in state["classifications"]]


def sources_graph() -> Any:
    graph = StateGraph(SourcesState)
    graph.add_node("classify", lambda s: {"classifications": PICKED})
    for source in ("github", "notion", "slack"):
        graph.add_node(source, lambda s, source=source: {"context": f"{source}: {s['query']}"})
        graph.add_edge(source, END)
    graph.add_edge(START, "classify")
    graph.add_conditional_edges("classify", route_to_sources, ["github", "notion", "slack"])
    return graph.compile()


PICKED = [{"source": "github", "query": "q"}, {"source": "notion", "query": "q"}]


def prove_sources() -> Any:
    raised = raises_invalid_update(lambda: sources_graph().invoke({"query": "q"}), "context")
    return shown("unreduced-parallel-write", raised, "the classifier picked two sources: raised")


CASES = [
    case(
        "router RAG: index or web search",
        "LangGraph tutorial Adaptive RAG (langchain-ai/langgraph)",
        set(),
        rag_graph,
        prove_rag,
    ),
    case(
        "support router, Literal annotation, no path map",
        "NirDiamant/GenAI_Agents customer_support_agent_langgraph",
        set(),
        support_graph,
        prove_support,
    ),
    case(
        "grader with a bool path map",
        "LangGraph tutorial Corrective RAG (decide_to_generate)",
        set(),
        grade_graph,
        prove_grade,
    ),
    case(
        "plan, then Send one writer per section",
        "langchain-ai/open_deep_research (workflow graph)",
        set(),
        report_graph,
        prove_report,
    ),
    case(
        "router Sending to the sources a classifier picks, plain key",
        "LangChain docs multi-agent router (classify, Send to the picked sources)",
        {"unreduced-parallel-write"},
        sources_graph,
        prove_sources,
    ),
]

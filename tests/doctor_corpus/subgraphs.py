"""Subgraphs as nodes: parallel subgraphs, a research fan-out, and keys handed back doubled.

A compiled graph used as a node returns its whole state, received keys included.
Written for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from tests.doctor_corpus._kit import case, raises_invalid_update, shown

# --- two analysis subgraphs run in parallel on the same logs ---------------------------------
# Follows LangChain Academy module 4 "sub-graphs" (langchain-ai/langchain-academy): failure
# analysis and question summarization subgraphs, each with an output schema, and
# `processed_logs` gathered with operator.add.


class EntryState(TypedDict, total=False):
    raw_logs: list[str]
    cleaned_logs: list[str]
    fa_summary: str
    report: str
    processed_logs: Annotated[list[str], operator.add]


class FailureState(TypedDict, total=False):
    cleaned_logs: list[str]
    fa_summary: str
    processed_logs: list[str]


class FailureOut(TypedDict, total=False):
    fa_summary: str
    processed_logs: list[str]


class SummaryState(TypedDict, total=False):
    cleaned_logs: list[str]
    report: str
    processed_logs: list[str]


class SummaryOut(TypedDict, total=False):
    report: str
    processed_logs: list[str]


def _analysis(schema: type, out: type | None, key: str, tag: str) -> Any:
    graph = StateGraph(schema, output_schema=out)
    graph.add_node(
        "analyse",
        lambda s: {key: f"{tag}: {len(s['cleaned_logs'])}", "processed_logs": [f"{tag}-1"]},
    )
    graph.add_edge(START, "analyse")
    return graph.compile()


def logs_graph(*, output_schemas: bool) -> Any:
    graph = StateGraph(EntryState)
    graph.add_node("clean_logs", lambda s: {"cleaned_logs": [x.strip() for x in s["raw_logs"]]})
    graph.add_node(
        "failure_analysis",
        _analysis(FailureState, FailureOut if output_schemas else None, "fa_summary", "fa"),
    )
    graph.add_node(
        "question_summarization",
        _analysis(SummaryState, SummaryOut if output_schemas else None, "report", "qs"),
    )
    graph.add_edge(START, "clean_logs")
    graph.add_edge("clean_logs", "failure_analysis")
    graph.add_edge("clean_logs", "question_summarization")
    graph.add_edge("failure_analysis", END)
    graph.add_edge("question_summarization", END)
    return graph.compile()


def prove_logs_fixed() -> Any:
    out = logs_graph(output_schemas=True).invoke({"raw_logs": [" a ", " b "]})
    ok = sorted(out["processed_logs"]) == ["fa-1", "qs-1"] and out["cleaned_logs"] == ["a", "b"]
    return shown("unreduced-parallel-write", not ok, "both subgraphs ran; nothing lost")


def prove_logs_broken() -> Any:
    raised = raises_invalid_update(
        lambda: logs_graph(output_schemas=False).invoke({"raw_logs": ["a"]}), "cleaned_logs"
    )
    return shown(
        "unreduced-parallel-write", raised, "both subgraphs handed back `cleaned_logs`: raised"
    )


# --- a research assistant: one interview subgraph per analyst --------------------------------
# Follows LangChain Academy module 4 "research assistant": Send("conduct_interview",
# {"analyst": ..., "messages": [...]}) per analyst; the interview subgraph writes its
# section and the parent gathers `sections` with operator.add.


class ResearchState(TypedDict, total=False):
    topic: str
    analysts: list[str]
    sections: Annotated[list[str], operator.add]
    final_report: str


class InterviewState(TypedDict, total=False):
    analyst: str
    messages: list[BaseMessage]
    sections: list[str]


def interview_graph() -> Any:
    graph = StateGraph(InterviewState)
    graph.add_node("ask", lambda s: {"messages": [*s["messages"], AIMessage("an answer")]})
    graph.add_node("write_section", lambda s: {"sections": [f"section by {s['analyst']}"]})
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "write_section")
    return graph.compile()


def initiate_all_interviews(state: ResearchState) -> list[Send]:
    return [
        Send(
            "conduct_interview",
            {"analyst": analyst, "messages": [HumanMessage(f"about {state['topic']}")]},
        )
        for analyst in state["analysts"]
    ]


def research_graph() -> Any:
    graph = StateGraph(ResearchState)
    graph.add_node("create_analysts", lambda s: {"analysts": ["ana", "bo"]})
    graph.add_node("conduct_interview", interview_graph())
    graph.add_node("write_report", lambda s: {"final_report": "\n".join(sorted(s["sections"]))})
    graph.add_edge(START, "create_analysts")
    graph.add_conditional_edges("create_analysts", initiate_all_interviews, ["conduct_interview"])
    graph.add_edge("conduct_interview", "write_report")
    graph.add_edge("write_report", END)
    return graph.compile()


def prove_research() -> Any:
    out = research_graph().invoke({"topic": "agents"})
    doubled = sorted(out["sections"]) != ["section by ana", "section by bo"]
    return shown("list-doubled-by-subagent", doubled, "two interviews, two sections, none twice")


# --- a research agent whose researcher subgraph shares the parent's messages ----------------
# Follows the LangGraph tutorial "multi-agent collaboration" state
# (`messages: Annotated[Sequence[BaseMessage], operator.add]`), with the researcher run as a
# subgraph node over the same state.


class TeamState(TypedDict, total=False):
    messages: Annotated[Sequence[BaseMessage], operator.add]
    sender: str


def researcher_graph() -> Any:
    graph = StateGraph(TeamState)
    graph.add_node("research", lambda s: {"messages": [AIMessage("findings")], "sender": "r"})
    graph.add_edge(START, "research")
    return graph.compile()


def team_graph() -> Any:
    graph = StateGraph(TeamState)
    graph.add_node("researcher", researcher_graph())
    graph.add_edge(START, "researcher")
    graph.add_edge("researcher", END)
    return graph.compile()


def prove_team() -> Any:
    out = team_graph().invoke({"messages": [HumanMessage("question")]})
    kinds = [m.type for m in out["messages"]]
    return shown("list-doubled-by-subagent", kinds == ["human", "human", "ai"], f"messages {kinds}")


# --- a podcast planner: the topic through a planning subgraph and Send-ed interviews --------
# Follows NirDiamant/GenAI_Agents "generate_podcast_agent_langgraph": a planning subgraph and
# one interview subgraph per subtopic, the parent's `topic` reduced by operator.add.


class PodcastState(TypedDict, total=False):
    topic: Annotated[str, operator.add]
    subtopics: list[str]
    scripts: Annotated[list[str], operator.add]


class PlanningState(TypedDict, total=False):
    topic: str
    subtopics: list[str]


class SegmentState(TypedDict, total=False):
    topic: str
    subtopic: str
    scripts: list[str]


def podcast_graph() -> Any:
    planning = StateGraph(PlanningState)
    planning.add_node("plan", lambda s: {"subtopics": [f"{s['topic']} history", "future"]})
    planning.add_edge(START, "plan")
    segment = StateGraph(SegmentState)
    segment.add_node("write", lambda s: {"scripts": [f"{s['topic']}: {s['subtopic']}"]})
    segment.add_edge(START, "write")
    graph = StateGraph(PodcastState)
    graph.add_node("planning", planning.compile())
    graph.add_node("segment", segment.compile())
    graph.add_edge(START, "planning")
    graph.add_conditional_edges(
        "planning",
        lambda s: [Send("segment", {"topic": s["topic"], "subtopic": t}) for t in s["subtopics"]],
        ["segment"],
    )
    graph.add_edge("segment", END)
    return graph.compile()


def prove_podcast() -> Any:
    topic = podcast_graph().invoke({"topic": "T"})["topic"]
    return shown("list-doubled-by-subagent", topic != "T", f"`topic` ended as {topic!r}")


CASES = [
    case(
        "parallel subgraphs with output schemas",
        "LangChain Academy module 4 sub-graphs (langchain-ai/langchain-academy)",
        set(),
        lambda: logs_graph(output_schemas=True),
        prove_logs_fixed,
    ),
    case(
        "parallel subgraphs without output schemas",
        "LangChain Academy module 4 sub-graphs, before its output schemas",
        {"unreduced-parallel-write"},
        lambda: logs_graph(output_schemas=False),
        prove_logs_broken,
    ),
    case(
        "research assistant: Send an interview subgraph per analyst",
        "LangChain Academy module 4 research assistant",
        set(),
        research_graph,
        prove_research,
    ),
    case(
        "research agent: researcher subgraph over operator.add messages",
        "LangGraph tutorial multi-agent collaboration (its operator.add messages state)",
        {"list-doubled-by-subagent"},
        team_graph,
        prove_team,
    ),
    case(
        "podcast: planning subgraph and Send-ed segments, str topic with operator.add",
        "NirDiamant/GenAI_Agents generate_podcast_agent_langgraph",
        {"list-doubled-by-subagent"},
        podcast_graph,
        prove_podcast,
    ),
]

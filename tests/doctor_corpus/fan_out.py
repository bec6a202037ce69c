"""Fan-outs: ``Send`` per item (map-reduce) and plain edges that start two nodes at once.

The reduced versions keep every value; the plain ones raise ``InvalidUpdateError``
in the step where two writers meet. Written for this corpus after the public
shapes named per graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from tests.doctor_corpus._kit import case, raises_invalid_update, shown

# --- map-reduce: one joke per subject, gathered with operator.add ---------------------------
# Follows the LangGraph how-to "map-reduce" (generate_topics, Send("generate_joke"), best_joke).


class JokeState(TypedDict, total=False):
    topic: str
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]
    best: str


def continue_to_jokes(state: JokeState) -> list[Send]:
    return [Send("generate_joke", {"subject": s}) for s in state["subjects"]]


def jokes_graph() -> Any:
    graph = StateGraph(JokeState)
    graph.add_node("generate_topics", lambda s: {"subjects": [f"{s['topic']} {i}" for i in "ab"]})
    graph.add_node("generate_joke", lambda s: {"jokes": [f"a joke about {s['subject']}"]})
    graph.add_node("best_joke", lambda s: {"best": max(s["jokes"])})
    graph.add_edge(START, "generate_topics")
    graph.add_conditional_edges("generate_topics", continue_to_jokes, ["generate_joke"])
    graph.add_edge("generate_joke", "best_joke")
    graph.add_edge("best_joke", END)
    return graph.compile()


def prove_jokes() -> Any:
    out = jokes_graph().invoke({"topic": "cats"})
    return shown("unreduced-parallel-write", len(out["jokes"]) != 2, "two Sends, two jokes kept")


# --- map-reduce where each mapped task writes a plain key ------------------------------------
# Follows LangChain Academy module 4 "map-reduce" (langchain-ai/langchain-academy), with the
# mapped node writing the plain `best_selected_joke` instead of the reduced `jokes`.


class PlainJokeState(TypedDict, total=False):
    subjects: list[str]
    best_selected_joke: str


def plain_jokes_graph() -> Any:
    graph = StateGraph(PlainJokeState)
    graph.add_node("generate_joke", lambda s: {"best_selected_joke": f"on {s['subject']}"})
    graph.add_conditional_edges(
        START,
        lambda s: [Send("generate_joke", {"subject": x}) for x in s["subjects"]],
        ["generate_joke"],
    )
    return graph.compile()


def prove_plain_jokes() -> Any:
    raised = raises_invalid_update(
        lambda: plain_jokes_graph().invoke({"subjects": ["a", "b"]}), "best_selected_joke"
    )
    return shown("unreduced-parallel-write", raised, "two Sends in one step raised")


# --- parallel branches b and c after a --------------------------------------------------------
# Follows LangChain Academy module 4 "parallelization": first a plain `state: list` (the
# lesson's InvalidUpdateError), then `Annotated[list, operator.add]`.


class PlainFan(TypedDict):
    state: list[str]


class AddFan(TypedDict):
    state: Annotated[list[str], operator.add]


def fan_graph(schema: type) -> Any:
    graph = StateGraph(schema)
    for name in "abcd":
        graph.add_node(name, lambda s, name=name: {"state": [f"I'm {name}"]})
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "d")
    graph.add_edge("c", "d")
    graph.add_edge("d", END)
    return graph.compile()


def prove_plain_fan() -> Any:
    raised = raises_invalid_update(lambda: fan_graph(PlainFan).invoke({"state": []}), "state")
    return shown("unreduced-parallel-write", raised, "b and c in one step raised")


def prove_add_fan() -> Any:
    out = fan_graph(AddFan).invoke({"state": []})["state"]
    return shown(
        "unreduced-parallel-write",
        sorted(out) != ["I'm a", "I'm b", "I'm c", "I'm d"],
        "b and c both kept",
    )


CASES = [
    case(
        "map-reduce with Send, reduced list",
        "LangGraph how-to map-reduce (langchain-ai/langgraph)",
        set(),
        jokes_graph,
        prove_jokes,
    ),
    case(
        "map-reduce with Send, plain key",
        "LangChain Academy module 4 map-reduce (langchain-ai/langchain-academy)",
        {"unreduced-parallel-write"},
        plain_jokes_graph,
        prove_plain_jokes,
    ),
    case(
        "parallel branches, plain list",
        "LangChain Academy module 4 parallelization (first version)",
        {"unreduced-parallel-write"},
        lambda: fan_graph(PlainFan),
        prove_plain_fan,
    ),
    case(
        "parallel branches, operator.add",
        "LangChain Academy module 4 parallelization (fixed version)",
        set(),
        lambda: fan_graph(AddFan),
        prove_add_fan,
    ),
]

"""The doctor on idioms met in third-party agents (issue 32): each repro checked by a run.

Every test builds the smallest graph with the idiom, shows what a run does with it
(a raise, a lost or doubled value, or nothing lost), and checks that ``diagnose``
(and ``Watch`` where it applies) says the same: no false error, no missed hazard.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.errors import InvalidUpdateError
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from agentstate.doctor import Watch, diagnose


def errors(report: Any) -> list[tuple[str, str]]:
    return [(f.code, f.subject) for f in report.errors]


# --- StateGraph(dict): one root value ---------------------------------------------------------


def dict_graph() -> Any:
    graph = StateGraph(dict)

    def left(state: dict) -> dict:
        return {"res": "left"}

    def right(state: dict) -> dict:
        return {"res": "right"}

    graph.add_node("left", left)
    graph.add_node("right", right)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    return graph.compile()


def test_state_graph_dict_two_writers_from_start_is_the_root_parallel_write():
    with pytest.raises(InvalidUpdateError, match="__root__"):
        dict_graph().invoke({"q": 1})
    report = diagnose(dict_graph())
    assert errors(report) == [("unreduced-parallel-write", "__root__")]
    assert "StateGraph(dict)" in report.errors[0].message


def test_state_graph_dict_under_watch_names_the_root_and_no_undeclared_key():
    graph = dict_graph()
    watch = Watch(graph)
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"q": 1}, {"callbacks": [watch]})
    assert errors(watch.report()) == [("unreduced-parallel-write", "__root__")]


def test_state_graph_dict_with_one_writer_per_step_is_clean():
    graph = StateGraph(dict)

    def first(state: dict) -> dict:
        return {**state, "res": 1}

    graph.add_node("first", first)
    graph.add_edge(START, "first")
    compiled = graph.compile()
    assert compiled.invoke({"q": 1}) == {"q": 1, "res": 1}
    assert diagnose(compiled).findings == []


# --- a declared key with ':' in its name -------------------------------------------------------

Colon = TypedDict("Colon", {"user:profile": int, "user:name": str})


def colon_graph() -> Any:
    graph = StateGraph(Colon)

    def one(state: Colon) -> dict[str, Any]:
        return {"user:profile": 1}

    def two(state: Colon) -> dict[str, Any]:
        return {"user:profile": 2}

    def named(state: Colon) -> dict[str, Any]:
        return {"user:name": "Ada"}

    graph.add_node("one", one)
    graph.add_node("two", two)
    graph.add_node("named", named)
    graph.add_edge(START, "one")
    graph.add_edge(START, "two")
    graph.add_edge("one", "named")
    return graph.compile()


def test_a_declared_key_with_a_colon_is_declared_and_its_parallel_write_found():
    with pytest.raises(InvalidUpdateError, match="user:profile"):
        colon_graph().invoke({})
    assert errors(diagnose(colon_graph())) == [("unreduced-parallel-write", "user:profile")]


# --- nodes renamed by a factory, and callable objects ------------------------------------------


class Plain(TypedDict):
    summary: str


def renamed(label: str) -> Any:
    def node(state: Plain) -> dict[str, Any]:
        return {"summary": label}

    node.__name__ = node.__qualname__ = f"summarise_{label}"
    return node


class Summariser:
    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, state: Plain) -> dict[str, Any]:
        return {"summary": self.label}


@pytest.mark.parametrize(
    "make", [renamed, Summariser], ids=["renamed-by-a-factory", "callable-object"]
)
def test_parallel_writers_renamed_or_callable_objects_are_found(make: Any):
    def build() -> Any:
        graph = StateGraph(Plain)
        graph.add_node("a", make("a"))
        graph.add_node("b", make("b"))
        graph.add_edge(START, "a")
        graph.add_edge(START, "b")
        return graph.compile()

    with pytest.raises(InvalidUpdateError, match="summary"):
        build().invoke({})
    report = diagnose(build())
    assert errors(report) == [("unreduced-parallel-write", "summary")]
    assert report.errors[0].file == __file__

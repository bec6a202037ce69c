"""``unreduced-parallel-write``'s message names the step a run fails in and offers a last-wins
reducer for a scalar (issue 41 item 6, issue 43 item 7).

Each graph is run first: the step it fails in is the one the message must name.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from agentstate.doctor import diagnose


class Plain(TypedDict, total=False):
    verdict: str
    topic: str


def both_entries() -> Any:
    """A conditional entry and ``set_entry_point``: two nodes start the run together; two later
    nodes (named to sort first) write the key again in a later step."""
    builder = StateGraph(Plain)
    for name in ("x_screen", "y_score", "a_review", "b_edit"):
        builder.add_node(name, lambda s, n=name: {"verdict": n})
    builder.set_conditional_entry_point(lambda s: "x_screen", ["x_screen"])
    builder.set_entry_point("y_score")
    builder.add_edge("x_screen", "a_review")
    builder.add_edge("y_score", "b_edit")
    builder.add_edge("a_review", END)
    builder.add_edge("b_edit", END)
    return builder.compile()


def test_the_message_names_the_first_step_where_the_writers_collide():
    seen: list[set[str]] = []
    with pytest.raises(InvalidUpdateError, match="verdict"):
        for step in both_entries().stream({"topic": "t"}, stream_mode="updates"):
            seen.append(set(step))
    # the run fails in its first step: only the two entry nodes ran, nothing after them
    assert seen == [{"x_screen"}, {"y_score"}] or seen == [{"y_score"}, {"x_screen"}]
    (found,) = diagnose(both_entries()).of("unreduced-parallel-write")
    assert found.severity == "error"
    assert "`x_screen` and `y_score`" in found.message
    assert "the run's first step" in found.message
    assert "a_review" not in found.message and "b_edit" not in found.message


def test_a_later_collision_names_the_step_before_it():
    builder = StateGraph(Plain)
    for name in ("plan", "left", "right"):
        builder.add_node(name, lambda s, n=name: {"verdict": n})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "left")
    builder.add_edge("plan", "right")
    graph = builder.compile()
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"topic": "t"})
    (found,) = diagnose(graph).of("unreduced-parallel-write")
    assert "`left` and `right`" in found.message and "the step after `plan`" in found.message


def last_wins_reducer(message: str) -> str:
    """The reducer the message offers, as its code (between the backticks)."""
    return message.split("a last-wins reducer, `", 1)[1].split("`", 1)[0]


class Score(TypedDict, total=False):
    verdict: int


def two_writers(schema: type, value: Any) -> Any:
    builder = StateGraph(schema)
    builder.add_node("left", lambda s: {"verdict": value})
    builder.add_node("right", lambda s: {"verdict": value})
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    return builder.compile()


@pytest.mark.parametrize(("schema", "kind", "value"), [(Plain, "str", "x"), (Score, "int", 3)])
def test_a_scalars_message_offers_a_last_wins_reducer_that_runs(
    schema: type, kind: str, value: Any
):
    with pytest.raises(InvalidUpdateError):
        two_writers(schema, value).invoke({})
    (found,) = diagnose(two_writers(schema, value)).of("unreduced-parallel-write")
    assert "one writer per step" in found.message.lower()
    offered = last_wins_reducer(found.message)
    assert offered == f"Annotated[{kind}, lambda _, new: new]"
    # the offer, pasted into the schema, runs: both writers in one step, one value kept
    reduced = eval(offered, {"Annotated": Annotated, "str": str, "int": int})  # noqa: S307
    fixed = TypedDict("Fixed", {"verdict": reduced}, total=False)  # type: ignore[misc]  # noqa: UP013
    assert two_writers(fixed, value).invoke({})["verdict"] == value
    assert diagnose(two_writers(fixed, value)).of("unreduced-parallel-write") == []


def test_a_list_keeps_its_own_reducers():
    class Lists(TypedDict, total=False):
        found: list[str]

    builder = StateGraph(Lists)
    builder.add_node("left", lambda s: {"found": ["l"]})
    builder.add_node("right", lambda s: {"found": ["r"]})
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    (found,) = diagnose(builder.compile()).of("unreduced-parallel-write")
    assert "operator.add" in found.message and "last-wins" not in found.message
    assert operator.add  # the reducer the message names

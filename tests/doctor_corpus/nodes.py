"""Nodes whose writes LangGraph drops: an ``except`` branch, and a key chosen at run time.

Written for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from agentstate.doctor import Watch
from tests.doctor_corpus._kit import case, shown

# --- a node that reports its failure in a key the state lacks ---------------------------------
# Follows NirDiamant/GenAI_Agents notebooks' try/except nodes (a tool call wrapped in try,
# the except branch returning {"error": ...}).


class WeatherState(TypedDict, total=False):
    city: str
    forecast: str


def fetch_forecast(state: WeatherState) -> dict[str, Any]:
    try:
        if not state["city"]:
            raise ValueError("no city given")
        return {"forecast": f"sunny in {state['city']}"}
    except ValueError as err:
        return {"error": str(err)}


def weather_graph() -> Any:
    graph = StateGraph(WeatherState)
    graph.add_node("fetch_forecast", fetch_forecast)
    graph.add_edge(START, "fetch_forecast")
    graph.add_edge("fetch_forecast", END)
    return graph.compile()


def prove_weather() -> Any:
    out = weather_graph().invoke({"city": ""})
    return shown("undeclared-key", "error" not in out, f"the failure was lost: state {out}")


# --- a correction node that writes whichever field the human corrects -------------------------
# Follows the LangGraph quickstart "customize state" (a human corrects the name or the
# birthday), with the corrected field named at run time: only a run can tell it is undeclared.


class ProfileState(TypedDict, total=False):
    name: str
    birthday: str
    correction: dict[str, str]


def apply_correction(state: ProfileState) -> dict[str, Any]:
    fix = state["correction"]
    return {fix["field"]: fix["value"]}


def profile_graph() -> Any:
    graph = StateGraph(ProfileState)
    graph.add_node("apply_correction", apply_correction)
    graph.add_edge(START, "apply_correction")
    graph.add_edge("apply_correction", END)
    return graph.compile()


EMAIL = {"correction": {"field": "email", "value": "ada@example.org"}}


def prove_profile() -> Any:
    out = profile_graph().invoke(EMAIL)
    return shown("undeclared-key", "email" not in out, "the corrected `email` was dropped")


def watch_profile() -> Any:
    graph = profile_graph()
    watch = Watch(graph)
    graph.invoke(EMAIL, {"callbacks": [watch]})
    return watch.report()


CASES = [
    case(
        "node with an except branch returning an undeclared key",
        "NirDiamant/GenAI_Agents try/except nodes",
        {"undeclared-key"},
        weather_graph,
        prove_weather,
    ),
    case(
        "node writing a key named at run time (Watch)",
        "LangGraph quickstart customize state (a correction node)",
        {"undeclared-key"},
        profile_graph,
        prove_profile,
        watch=watch_profile,
    ),
]

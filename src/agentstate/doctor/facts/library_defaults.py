"""The library defaults the doctor must find clean: deepagents' and ``create_agent``'s own.

Shared by ``tests/test_doctor_series.py`` (no finding at all) and
``scripts/bench_doctor.py`` (timed with the series' graphs). Each builder
makes a fresh graph on a scripted model; nothing is built at import. The doctor
checks them for the hazards of notebooks 01-06.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    SummarizationMiddleware,
    TodoListMiddleware,
)
from langchain_core.tools import tool

from agentstate._extras import needs
from agentstate.models import ScriptedChatModel, reply

__all__ = ["LIBRARY_DEFAULTS"]


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(script=[reply(text="ok")])


@tool("lookup")
def _lookup(query: str) -> str:
    """Look something up."""
    return query


def _create_agent_with_middleware() -> Any:
    middleware: list[Any] = [
        TodoListMiddleware(),
        HumanInTheLoopMiddleware(interrupt_on={"lookup": True}),
        SummarizationMiddleware(model=_model(), trigger=("tokens", 1000)),
    ]
    return create_agent(_model(), tools=[_lookup], middleware=middleware)


def _deep_agent_default() -> Any:
    with needs("deepagents", "the deepagents default"):
        from deepagents import create_deep_agent

    return create_deep_agent(_model())


LIBRARY_DEFAULTS: dict[str, Callable[[], Any]] = {
    "deepagents default": _deep_agent_default,
    "create_agent with built-in middleware": _create_agent_with_middleware,
}

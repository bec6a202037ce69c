"""Lesson 01's toy graph: two nodes in one super-step, each rewriting one shared file.

Notebook 01 (``notebooks/_src/01_file_based_storage.py``) writes the toy's
state class and its reducers on the page, where the mechanism is, and builds
the graph with :func:`two_writers`; its first exercise swaps the reducer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableLambda
from langgraph.graph import START, StateGraph

from agentstate.rds.storage import REQUIREMENTS_PATH

WRITES = (("engine", "postgres"), ("username", "dbadmin"))


def _writer(field: str, value: str, path: str) -> Callable[[Any], dict[str, Any]]:
    def store(state: Any) -> dict[str, Any]:  # read, add a field, write it whole
        current = state["files"].get(path, {})
        new = {**current, field: value}
        return {"files": {path: new}, "log": [f"store {field}: read {current}, wrote {new}"]}

    return store


def two_writers(state_schema: type, path: str = REQUIREMENTS_PATH) -> Any:
    """The toy, compiled on ``state_schema``: ``store_engine`` and ``store_username``, both
    after START (one super-step). Each reads ``files[path]``, adds its field, writes the
    whole file back to ``files`` and logs what it read to ``log``; the schema's reducers
    combine the two writes. Run it with ``invoke`` or ``ainvoke``."""
    graph: StateGraph[Any] = StateGraph(state_schema)
    for field, value in WRITES:
        graph.add_node(f"store_{field}", RunnableLambda(_writer(field, value, path)))
        graph.add_edge(START, f"store_{field}")
    return graph.compile()

"""One state schema for a parent agent and its subagents (notebook 04).

deepagents' ``task`` tool sends a subagent the parent's state restricted to
the keys the subagent declares, and returns only the changed keys the
subagent declares. A key only the parent declares is dropped silently on the
way back: the subagent's writes vanish with no error. The fix is to declare
the key, with the same reducer, on both sides:

- ``create_deep_agent(..., state_schema=S)`` forwards ``S`` to declarative
  subagents (the one line the lesson shows);
- :func:`share_state` adds a :class:`SharedStateMiddleware` to each
  subagent spec, for subagents that do not inherit the parent's schema;
- :func:`undeclared_keys` turns the silent drop into a check you can assert
  on a compiled subagent graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware


class SharedStateMiddleware(AgentMiddleware):
    """Declares ``schema``'s keys (and their reducers) on the agent it is attached to."""

    def __init__(self, schema: type) -> None:
        super().__init__()
        self.state_schema = schema


def share_state(subagents: Sequence[Mapping[str, Any]], schema: type) -> list[dict[str, Any]]:
    """Copies of deepagents subagent specs that also declare ``schema``'s keys."""
    return [
        {**spec, "middleware": [*spec.get("middleware", ()), SharedStateMiddleware(schema)]}
        for spec in subagents
    ]


def undeclared_keys(graph: Any, keys: Iterable[str]) -> list[str]:
    """The ``keys`` a compiled graph does not declare: writes to them would be dropped."""
    channels = getattr(graph, "channels", None)
    if channels is None:
        raise TypeError(f"expected a compiled LangGraph graph, got {type(graph).__name__}")
    return [k for k in keys if k not in channels]

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
    """Copies of deepagents subagent specs that also declare ``schema``'s keys.

    A declarative spec gets a :class:`SharedStateMiddleware`. A compiled one
    (``"runnable"``) or a remote one (``"graph_id"``) cannot be changed: it is
    passed on as it is when it already declares every key, and refused with a
    ``ValueError`` naming it and the missing keys otherwise (its writes to them
    would be dropped silently).
    """
    keys = list(getattr(schema, "__annotations__", {}))
    return [_shared(spec, schema, keys) for spec in subagents]


def _shared(spec: Mapping[str, Any], schema: type, keys: list[str]) -> dict[str, Any]:
    name = spec.get("name", "?")
    if "graph_id" in spec and "runnable" not in spec:
        raise ValueError(
            f"share_state cannot change async subagent {name!r}: it runs the remote graph "
            f"{spec['graph_id']!r}; declare {schema.__name__}'s keys in that graph instead"
        )
    if "runnable" not in spec:
        return {**spec, "middleware": [*spec.get("middleware", ()), SharedStateMiddleware(schema)]}
    try:
        missing = undeclared_keys(spec["runnable"], keys)
    except TypeError as error:
        raise ValueError(f"share_state cannot check compiled subagent {name!r}: {error}") from None
    if missing:
        raise ValueError(
            f"share_state cannot change compiled subagent {name!r}: its graph does not "
            f"declare {', '.join(missing)}, so its writes to them would be dropped. Compile it "
            f"with the shared keys (create_agent(..., state_schema={schema.__name__}) or "
            f"middleware=[SharedStateMiddleware({schema.__name__})]) and pass that runnable."
        )
    return dict(spec)


def undeclared_keys(graph: object, keys: Iterable[str]) -> list[str]:
    """The ``keys`` a compiled graph does not declare: writes to them would be dropped."""
    channels = getattr(graph, "channels", None)
    if channels is None:
        raise TypeError(f"expected a compiled LangGraph graph, got {type(graph).__name__}")
    return [k for k in keys if k not in channels]

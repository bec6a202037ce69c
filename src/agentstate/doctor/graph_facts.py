"""What a compiled graph declares: channels and reducers, nodes, tools, middleware, subagents.

Read from the compiled graph only (``graph.channels``, ``graph.builder``), so it
works on what ``create_agent``, ``create_deep_agent`` and a plain
``StateGraph(...).compile()`` return (notebooks 01-06). Middleware is found
where LangChain's ``create_agent`` keeps it: bound to hook nodes, and inside
the model node's and ``ToolNode``'s wrappers; deepagents' subagents in the
``task`` tool (the compiled graphs it invokes).
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool
from langgraph.channels import BinaryOperatorAggregate, LastValue
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from agentstate.doctor.tool_facts import (
    CodeFacts,
    Memo,
    function_facts,
    is_library,
    tool_facts,
    tool_functions,
)

Reducer = Callable[[object, object], object]
CONCATENATIONS: tuple[object, ...] = (operator.add, operator.concat, operator.iadd)
"""Reducers that append whatever comes back: a returned whole list is appended again."""

EXCLUDED_BY_TASK = frozenset(
    {"messages", "todos", "structured_response", "skills_metadata", "pinned_skills"}
)
"""Keys deepagents' ``task`` tool neither hands down nor returns (0.7.32)."""


Graph = CompiledStateGraph[Any, Any, Any, Any]
"""A compiled graph, whatever its state, context, input and output types."""


class NotAGraphError(TypeError):
    """What :func:`graph_facts` raises for anything but a compiled LangGraph graph."""


@dataclass(frozen=True)
class ChannelFacts:
    """One declared state key and how parallel writes to it combine."""

    key: str
    kind: str
    """``plain`` (one value per step), ``reduced`` or ``other`` (ephemeral, untracked)."""
    reducer: Reducer | None = None

    @property
    def concatenates(self) -> bool:
        """True when the reducer appends (``operator.add``): not idempotent."""
        return self.reducer is not None and self.reducer in CONCATENATIONS


@dataclass
class ToolFacts:
    """One tool of the agent and what its code reads and writes."""

    name: str
    tool: BaseTool
    code: CodeFacts
    library: bool
    """True for the tools LangChain and deepagents ship (their own guards apply)."""


@dataclass
class NodeFacts:
    """One node of the graph and, for the user's own nodes, what it returns."""

    name: str
    code: CodeFacts | None
    """None for LangChain/LangGraph internals (model node, middleware of the libraries)."""


@dataclass
class GraphFacts:
    """Everything the checks need to know about one compiled graph (and its subagents)."""

    name: str
    graph: Graph
    channels: dict[str, ChannelFacts]
    nodes: dict[str, NodeFacts]
    tools: dict[str, ToolFacts]
    tool_nodes: list[str]
    middleware: list[AgentMiddleware]
    react_loop: bool
    """A model node whose tool calls go straight to a ToolNode that loops back to it."""
    send_targets: set[str]
    """Nodes a conditional edge may ``Send`` to several times in one super-step."""
    siblings: list[set[str]]
    """Groups of nodes that plain edges start in the same super-step."""
    subagents: dict[str, GraphFacts] = field(default_factory=dict)
    parent: GraphFacts | None = None

    def declares(self, key: str) -> bool:
        """True when the graph has a channel for ``key``."""
        return key in self.channels

    def middleware_of(self, kind: type[AgentMiddleware]) -> list[AgentMiddleware]:
        """The attached middleware of one class (subclasses included)."""
        return [m for m in self.middleware if isinstance(m, kind)]

    def prefix(self) -> str:
        """``"<subagent>:"`` for a subagent's findings, ``""`` at the top."""
        return f"{self.name}:" if self.parent is not None else ""


def as_compiled(graph: object) -> Graph:
    """The compiled graph itself (a ``with_config`` binding unwrapped), or NotAGraphError."""
    seen = 0
    while isinstance(graph, RunnableBinding) and seen < 5:
        graph, seen = graph.bound, seen + 1
    if not isinstance(graph, CompiledStateGraph):
        raise NotAGraphError(
            f"expected a compiled LangGraph graph (create_agent, create_deep_agent or "
            f"StateGraph(...).compile()), got {type(graph).__name__}"
        )
    return graph


def _channel(key: str, channel: object) -> ChannelFacts:
    if isinstance(channel, BinaryOperatorAggregate):
        return ChannelFacts(key, "reduced", channel.operator)
    if isinstance(channel, LastValue) or type(channel).__name__.startswith("LastValue"):
        return ChannelFacts(key, "plain")
    name = type(channel).__name__
    if name in ("DeltaChannel", "Topic"):
        return ChannelFacts(key, "reduced", getattr(channel, "reducer", None))
    return ChannelFacts(key, "other")


def _declared(graph: Graph) -> dict[str, ChannelFacts]:
    return {
        key: _channel(key, channel)
        for key, channel in graph.channels.items()
        if not key.startswith(("__", "branch:")) and ":" not in key
    }


def _children(obj: object) -> Iterator[object]:
    """What a function, bound method or partial closes over."""
    if isinstance(obj, types.MethodType):
        yield obj.__self__
        yield obj.__func__
    elif isinstance(obj, functools.partial):
        yield obj.func
        yield from obj.args
        yield from obj.keywords.values()
    elif isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                yield cell.cell_contents
            except ValueError:
                continue
    elif isinstance(obj, list | tuple):
        yield from obj


def _find(roots: list[object], wanted: type | tuple[type, ...], depth: int = 6) -> list[object]:
    """Instances of ``wanted`` reachable through closures, bound methods and lists."""
    found: list[object] = []
    seen: set[int] = set()
    frontier = list(roots)
    for _ in range(depth):
        nxt: list[object] = []
        for obj in frontier:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, wanted):
                found.append(obj)
                continue
            nxt.extend(_children(obj))
        frontier = nxt
    return found


def _node_callables(runnable: object) -> list[object]:
    out: list[object] = []
    for name in ("func", "afunc", "_wrap_tool_call", "_awrap_tool_call"):
        value = getattr(runnable, name, None)
        if value is not None:
            out.append(value)
    return out


def _user_function(runnable: object) -> Callable[..., object] | None:
    """The user's own function behind a node (None for library nodes)."""
    for name in ("func", "afunc"):
        fn: object = getattr(runnable, name, None)
        if not callable(fn):
            continue
        target = fn.__func__ if isinstance(fn, types.MethodType) else fn
        if callable(target) and not is_library(target):
            return fn
    return None


def _library_tool(tool: BaseTool) -> bool:
    """True when every function behind the tool is LangChain's, deepagents' or an adapter's."""
    functions = tool_functions(tool)
    if not functions:
        return is_library(type(tool))
    return all(is_library(getattr(fn, "__func__", fn)) for fn in functions)


def _subagent_graphs(task: BaseTool) -> dict[str, Graph]:
    graphs: dict[str, Graph] = {}
    for fn in (getattr(task, "func", None), getattr(task, "coroutine", None)):
        if not isinstance(fn, types.FunctionType):
            continue
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
        if "subagent_graphs" not in cells:
            continue
        for name, runnable in cells["subagent_graphs"].cell_contents.items():
            try:
                graphs[name] = as_compiled(runnable)
            except NotAGraphError:
                continue
    return graphs


def _sends(path: object) -> bool:
    """True when a conditional edge's function may return ``Send``s (source mentions it)."""
    roots = _find([getattr(path, "func", None), getattr(path, "afunc", None)],
                  types.FunctionType, depth=3)  # fmt: skip
    for fn in roots:
        if not isinstance(fn, types.FunctionType):
            continue
        if "Send" in fn.__code__.co_names or "Send" in fn.__code__.co_freevars:
            return True
        try:
            if "Send(" in inspect.getsource(fn):
                return True
        except (OSError, TypeError):
            continue
    return False


def _has_model(runnable: object) -> bool:
    fn = getattr(runnable, "func", None)
    if getattr(fn, "__qualname__", "") in ("create_agent.<locals>.model_node",):
        return True
    return bool(_find(_node_callables(runnable), (BaseChatModel, RunnableBinding), depth=3))


def graph_facts(
    graph: object, name: str | None = None, parent: GraphFacts | None = None
) -> GraphFacts:
    """Read what ``graph`` declares; raises :class:`NotAGraphError` for anything else."""
    compiled = as_compiled(graph)
    builder = compiled.builder
    nodes: dict[str, NodeFacts] = {}
    tools: dict[str, ToolFacts] = {}
    tool_nodes: list[str] = []
    roots: list[object] = []
    memo: Memo = {}
    for node_name, spec in builder.nodes.items():
        runnable: object = spec.runnable
        roots.extend(_node_callables(runnable))
        if isinstance(runnable, ToolNode):
            tool_nodes.append(node_name)
            for tool_name, tool in runnable.tools_by_name.items():
                tools[tool_name] = ToolFacts(
                    tool_name, tool, tool_facts(tool, memo), _library_tool(tool)
                )
            nodes[node_name] = NodeFacts(node_name, None)
            continue
        fn = _user_function(runnable)
        nodes[node_name] = NodeFacts(
            node_name, function_facts(fn, node=True, memo=memo) if fn else None
        )
    middleware = [m for m in _find(roots, AgentMiddleware) if isinstance(m, AgentMiddleware)]
    middleware = list({id(m): m for m in middleware}.values())

    send_targets: set[str] = set()
    successors: dict[str, set[str]] = {}
    for source, target in builder.edges:
        successors.setdefault(source, set()).add(target)
    for source, branches in builder.branches.items():
        for branch in branches.values():
            ends = set((branch.ends or {}).values())
            successors.setdefault(source, set()).update(ends)
            if _sends(branch.path):
                send_targets |= ends
    siblings = [targets for targets in successors.values() if len(targets) > 1]
    react = any(
        tool_node in successors.get(other, set())
        and other in successors.get(tool_node, set())
        and _has_model(builder.nodes[other].runnable)
        for tool_node in tool_nodes
        for other in builder.nodes
        if other != tool_node
    )
    facts = GraphFacts(
        name=name or compiled.get_name(),
        graph=compiled,
        channels=_declared(compiled),
        nodes=nodes,
        tools=tools,
        tool_nodes=tool_nodes,
        middleware=middleware,
        react_loop=react,
        send_targets={t for t in send_targets if t in builder.nodes},
        siblings=siblings,
        parent=parent,
    )
    if parent is None:
        for known in tools.values():
            for sub_name, sub in _subagent_graphs(known.tool).items():
                facts.subagents[sub_name] = graph_facts(sub, sub_name, parent=facts)
    return facts


def task_writes(facts: GraphFacts) -> set[str]:
    """The keys deepagents' ``task`` tool may write in the parent: what subagents return."""
    keys: set[str] = set()
    for sub in facts.subagents.values():
        for tool in sub.tools.values():
            keys |= {k for k in tool.code.writes if sub.declares(k)}
    return keys - EXCLUDED_BY_TASK

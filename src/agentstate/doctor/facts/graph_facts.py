"""What a compiled graph declares: channels and reducers, nodes, tools, middleware, subagents.

Read from the compiled graph only (``graph.channels``, ``graph.builder``), so it
works on what ``create_agent``, ``create_deep_agent`` and a plain
``StateGraph(...).compile()`` return (notebooks 01-06). Middleware is found
where LangChain's ``create_agent`` keeps it: bound to hook nodes, and inside
the model node's and ``ToolNode``'s wrappers; deepagents' subagents in the
``task`` tool (the compiled graphs it invokes); compiled graphs used as nodes
(or called by a node's function) are read the same way, as ``nested`` graphs.
Which nodes share a super-step is :mod:`.steps`; ReAct loops are :mod:`.react`.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool
from langgraph.channels import BinaryOperatorAggregate, LastValue
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from agentstate.doctor.facts import sources
from agentstate.doctor.facts.bindings import binder, installed, own_file, subagent_spec
from agentstate.doctor.facts.code_source import closed_over, is_library, tool_functions
from agentstate.doctor.facts.key_kinds import Kind, key_kind
from agentstate.doctor.facts.locate import NOWHERE, Place, function_of, locate
from agentstate.doctor.facts.names import code_names
from agentstate.doctor.facts.react import holds_model, loops, reachable
from agentstate.doctor.facts.replies import one_call_setting
from agentstate.doctor.facts.steps import Steps
from agentstate.doctor.facts.tool_facts import CodeFacts, Memo, function_facts, tool_facts

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
        """True when the reducer appends (``operator.add``, or a reducer of the user's that
        doubles a value given twice): a returned whole value is appended again."""
        return self.reducer is not None and appends(self.reducer)


def appends(reducer: Reducer) -> bool:
    """True for a concatenation, or a user reducer that returns ``x`` twice for ``x`` given twice.

    Reducers are pure (LangGraph calls them on throwaway copies), so trying one on
    a one-item list and a one-letter string is safe; the libraries' own reducers
    (``add_messages`` merges by id) are not tried.
    """
    if reducer in CONCATENATIONS:
        return True
    if is_library(reducer) or not callable(reducer):
        return False
    for value, doubled in ((["x"], ["x", "x"]), ("T", "TT")):
        try:
            if reducer(value, value) == doubled:
                return True
        except Exception:  # noqa: BLE001, S112 - a reducer for another type: not this one
            continue
    return False


@dataclass
class ToolFacts:
    """One tool of the agent and what its code reads and writes."""

    name: str
    tool: BaseTool
    code: CodeFacts
    library: bool
    """True for the tools LangChain and deepagents ship (their own guards apply)."""
    file: str | None = None
    line: int | None = None


@dataclass
class NodeFacts:
    """One node of the graph and, for the user's own nodes, what it returns."""

    name: str
    code: CodeFacts | None
    """None for LangChain/LangGraph internals (model node, middleware of the libraries)."""
    file: str | None = None
    line: int | None = None
    subgraph: bool = False
    """True when the node is a compiled graph itself (it returns that graph's state)."""


@dataclass
class GraphFacts:
    """Everything the checks need to know about one compiled graph (and the graphs in it)."""

    name: str
    graph: Graph
    channels: dict[str, ChannelFacts]
    nodes: dict[str, NodeFacts]
    tools: dict[str, ToolFacts]
    tool_nodes: list[str]
    middleware: list[AgentMiddleware]
    steps: Steps
    """Which nodes can share a super-step (:mod:`agentstate.doctor.facts.steps`)."""
    loops: list[tuple[str, str]]
    """``(model node, tool runner)`` pairs of the ReAct loops (:mod:`.facts.react`)."""
    kind: str = "graph"
    """``graph`` (the one diagnosed), ``subagent`` (behind deepagents' ``task``) or ``node``
    (a compiled graph used as a node, or called by one)."""
    subagents: dict[str, GraphFacts] = field(default_factory=dict)
    nested: dict[str, GraphFacts] = field(default_factory=dict)
    """The graphs run by this graph's nodes, by node name."""
    parent: GraphFacts | None = None
    kinds: dict[str, Kind] = field(default_factory=dict, repr=False)
    one_call: dict[str, str] = field(default_factory=dict)
    """Model nodes whose replies carry one tool call at most, with the setting that says so
    (:mod:`agentstate.doctor.facts.replies`)."""

    model_nodes: set[str] = field(default_factory=set)
    """Nodes that call a chat model (:func:`agentstate.doctor.facts.react.holds_model`)."""

    origin: tuple[object, ...] = field(default=(), repr=False)
    """The graph as it was given (a ``with_config`` binding) and compiled: what a module of the
    reader's may hold."""
    _places: dict[str, Place] = field(default_factory=dict, repr=False)
    _files: list[set[str]] = field(default_factory=list, repr=False)

    def _top(self) -> GraphFacts:
        top = self
        while top.parent is not None:
            top = top.parent
        return top

    def own_files(self) -> set[str]:
        """The reader's source files behind the whole graph (read once, when a place is asked)."""
        top = self._top()
        if not top._files:
            top._files.append(_own_files(top))
        return top._files[0]

    def where_built(self) -> Place:
        """Where the reader's code builds the graph this one belongs to: the line that binds its
        tools, or the module global holding it (``(None, None)`` when it cannot be told)."""
        top = self._top()
        if "built" not in top._places:
            top._places["built"] = binder(self.own_files(), top.origin or (top.graph,))
        return top._places["built"]

    def where_declared(self) -> Place:
        """Where the reader's code declares this subagent (:mod:`agentstate.doctor.facts.bindings`):
        its spec's ``"name"``, or, for the general-purpose subagent deepagents adds itself, the
        ``create_deep_agent`` call; the graph's own place for anything else."""
        if self.kind != "subagent":
            return self.where_built()
        if "declared" not in self._places:
            place = subagent_spec(self.own_files(), self.name)
            if place == NOWHERE:
                top = self._top()
                deep = frozenset({"create_deep_agent"})
                place = binder(self.own_files(), top.origin or (top.graph,), deep)
            self._places["declared"] = place
        return self._places["declared"]

    def leads_back(self, node: str, target: str) -> bool:
        """True when ``node`` starts ``target`` again, directly or through one other node."""
        after = self.steps.successors.get(node, set())
        return target in after or any(target in self.steps.successors.get(n, set()) for n in after)

    def one_call_for(self, runner: str) -> str | None:
        """The setting that keeps every model looping through ``runner`` to one tool call per
        reply (None when one of them may make several)."""
        models = [model for model, r in self.loops if r == runner]
        if not models or not all(m in self.one_call for m in models):
            return None
        return self.one_call[models[0]]

    @property
    def react_loop(self) -> bool:
        """True when a model node and a node running its tool calls form a cycle."""
        return bool(self.loops)

    @property
    def root(self) -> bool:
        """True when the state is one value (``StateGraph(dict)``): every key is part of it."""
        return ROOT in self.channels

    def declares(self, key: str) -> bool:
        """True when the graph has a channel for ``key`` (any key, when the state is one value)."""
        return key in self.channels or self.root

    def channels_written(self, keys: set[str]) -> set[str]:
        """The channels a write of ``keys`` updates: the keys, or ``__root__`` when the state is
        one value (a node's whole return replaces it)."""
        if self.root:
            return {ROOT} if keys else set()
        return set(keys)

    def middleware_of(self, kind: type[AgentMiddleware]) -> list[AgentMiddleware]:
        """The attached middleware of one class (subclasses included)."""
        return [m for m in self.middleware if isinstance(m, kind)]

    def prefix(self) -> str:
        """What a finding's subject starts with: ``""`` at the top, ``"<subagent>:"`` inside a
        subagent, ``"<node> > "`` inside a graph run by a node (nested: ``"a > b > "``)."""
        if self.parent is None:
            return ""
        if self.kind == "subagent":
            return f"{self.parent.prefix()}{self.name}:"
        return f"{self.parent.prefix()}{self.name} > "

    def scopes(self) -> Iterator[GraphFacts]:
        """This graph, then every subagent and nested graph in it, depth first."""
        yield self
        for sub in (*self.subagents.values(), *self.nested.values()):
            yield from sub.scopes()

    def key_kind(self, key: str) -> Kind:
        """The declared kind of ``key`` (``dict``, ``list``, ``str``...), for the fix to suggest."""
        if key not in self.kinds:
            self.kinds[key] = key_kind(self.graph, key)
        return self.kinds[key]

    def runners_in_loops(self) -> set[str]:
        """The nodes that run a model's tool calls in a ReAct loop."""
        return {runner for _, runner in self.loops}

    def where_tool(self, name: str) -> Place:
        """``(file, line)`` of a tool's function; for a tool whose code is not the reader's (MCP,
        site-packages, ``exec``), the reader's line that binds it (issue 41 item 9)."""
        tool = self.tools.get(name)
        if tool is None:
            return NOWHERE
        if tool.file is not None and not installed(tool.file):
            return tool.file, tool.line
        place = self.where_declared()
        return place if place != NOWHERE else self.where_built()

    def where_node(self, name: str) -> Place:
        """``(file, line)`` of a node's function; for a function of the reader's with no file of
        its own (``exec``), the line that builds the graph."""
        node = self.nodes.get(name)
        if node is None:
            return NOWHERE
        if node.file is None and node.code is not None:
            return self.where_built()
        return node.file, node.line


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


ROOT = "__root__"
"""The one channel of a graph whose state is a single value (``StateGraph(dict)``)."""


def _declared(graph: Graph) -> dict[str, ChannelFacts]:
    """The state keys the builder declares (a key may hold ``:``; LangGraph's own channels,
    ``branch:to:...`` and ``__start__``, are not the builder's), and ``__root__``."""
    keys = getattr(graph.builder, "channels", None) or {}
    return {
        key: _channel(key, graph.channels.get(key, channel))
        for key, channel in keys.items()
        if key == ROOT or not key.startswith("__")
    }


def _children(obj: object) -> Iterator[object]:
    """What a function, bound method or partial closes over, and a list's items."""
    if isinstance(obj, list | tuple):
        yield from obj
    else:
        yield from closed_over(obj)


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


def _nested_graph(runnable: object) -> tuple[Graph | None, bool]:
    """The compiled graph a node is (True), or the one its function calls (False), if any."""
    try:
        return as_compiled(runnable), True
    except NotAGraphError:
        pass
    fn = getattr(runnable, "func", None) or getattr(runnable, "afunc", None)
    plain = function_of(fn)
    if plain is None or is_library(plain) or not code_names(plain) & RUN_CALLS:
        return None, False  # a node that calls a graph calls invoke, stream or batch
    graphs = {id(g): g for g in reachable(fn) if isinstance(g, CompiledStateGraph)}
    if len(graphs) == 1:
        (found,) = graphs.values()
        return as_compiled(found), False
    return None, False


MAX_NESTING = 4
RUN_CALLS = frozenset({"invoke", "ainvoke", "stream", "astream", "batch", "abatch"})


def _depth(facts: GraphFacts | None) -> int:
    depth = 0
    while facts is not None:
        depth, facts = depth + 1, facts.parent
    return depth


def graph_facts(
    graph: object, name: str | None = None, parent: GraphFacts | None = None, kind: str = "graph"
) -> GraphFacts:
    """Read what ``graph`` declares; raises :class:`NotAGraphError` for anything else."""
    compiled = as_compiled(graph)
    builder = compiled.builder
    nodes: dict[str, NodeFacts] = {}
    tools: dict[str, ToolFacts] = {}
    tool_nodes: list[str] = []
    roots: list[object] = []
    memo: Memo = {}
    inner: dict[str, tuple[Graph, bool]] = {}
    for node_name, spec in builder.nodes.items():
        runnable: object = spec.runnable
        roots.extend(_node_callables(runnable))
        if isinstance(runnable, ToolNode):
            tool_nodes.append(node_name)
            for tool_name, tool in runnable.tools_by_name.items():
                file, line = locate(tool)
                tools[tool_name] = ToolFacts(
                    tool_name, tool, tool_facts(tool, memo), _library_tool(tool), file, line
                )
            nodes[node_name] = NodeFacts(node_name, None)
            continue
        sub, direct = _nested_graph(runnable)
        if sub is not None and sub is not compiled:
            inner[node_name] = (sub, direct)
        fn = _user_function(runnable)
        file, line = locate(fn) if fn is not None else NOWHERE
        nodes[node_name] = NodeFacts(
            node_name,
            function_facts(fn, node=True, memo=memo) if fn else None,
            file,
            line,
            subgraph=sub is not None and direct,
        )
    middleware = [m for m in _find(roots, AgentMiddleware) if isinstance(m, AgentMiddleware)]
    middleware = list({id(m): m for m in middleware}.values())
    kinds: dict[str, Kind] = {}

    def kind_of_key(key: str) -> str:
        if key not in kinds:
            kinds[key] = key_kind(compiled, key)
        return kinds[key]

    steps = Steps(builder, kind_of_key)
    facts = GraphFacts(
        name=name or compiled.get_name(),
        graph=compiled,
        channels=_declared(compiled),
        nodes=nodes,
        tools=tools,
        tool_nodes=tool_nodes,
        middleware=middleware,
        steps=steps,
        loops=loops(builder, steps.successors),
        kind=kind,
        parent=parent,
        kinds=kinds,
    )
    facts.model_nodes = {
        n for n, spec in builder.nodes.items() if n in nodes and holds_model(spec.runnable)
    }
    for model_node, _ in facts.loops:
        setting = one_call_setting(builder.nodes[model_node].runnable)
        if setting is not None:
            facts.one_call[model_node] = setting
    if kind != "subagent" and _depth(parent) < MAX_NESTING:
        for known in tools.values():
            for sub_name, sub in _subagent_graphs(known.tool).items():
                facts.subagents[sub_name] = graph_facts(sub, sub_name, facts, "subagent")
        for node_name, (sub, _) in inner.items():
            facts.nested[node_name] = graph_facts(sub, node_name, facts, "node")
    if parent is None:
        facts.origin = (graph, compiled)
    return facts


def _own_files(facts: GraphFacts) -> set[str]:
    """The reader's source files behind the graph: its functions', middleware's and schemas'."""
    files: set[str] = set()
    for scope in facts.scopes():
        places = [n.file for n in scope.nodes.values()] + [t.file for t in scope.tools.values()]
        files |= {f for f in places if f and not installed(f)}
        builder = scope.graph.builder
        owners: list[object] = [type(m) for m in scope.middleware]
        owners += [builder.state_schema, *builder.schemas]
        files |= {f for f in map(own_file, owners) if f}
    if any(sources.is_cell(f) for f in files):  # a notebook's cells are one module
        files |= set(sources.cells())
    return files


def task_writes(facts: GraphFacts) -> set[str]:
    """The keys deepagents' ``task`` tool may write in the parent: what subagents return."""
    keys: set[str] = set()
    for sub in facts.subagents.values():
        for tool in sub.tools.values():
            keys |= {k for k in tool.code.writes if sub.declares(k)}
    return keys - EXCLUDED_BY_TASK

"""What a compiled graph used as a node hands back to its parent (notebooks 02 and 04).

A subgraph node returns its whole output state, not what it changed: every key
of its output schema that has a value, the ones it received from the parent
included. The parent applies that like any node's return, so a key it
concatenates (``operator.add``) gets the received part appended again, and a
plain key two such nodes return in one step raises ``InvalidUpdateError``.
An output schema without the key (``StateGraph(S, output_schema=Out)``) is the
fix LangChain Academy's sub-graph lesson uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstate.doctor.facts.graph_facts import GraphFacts


def io_keys(graph: Any) -> tuple[set[str], set[str]]:
    """The input and output keys of a compiled graph."""
    builder = graph.builder
    inputs = set(builder.schemas.get(builder.input_schema, {}))
    outputs = graph.output_channels
    out = {outputs} if isinstance(outputs, str) else set(outputs)
    return inputs, out


def _written_inside(sub: GraphFacts) -> set[str]:
    keys: set[str] = set()
    for node in sub.nodes.values():
        if node.code is not None:
            keys |= node.code.writes
        elif not node.subgraph:
            keys.add("messages")  # a library node (a model, a middleware hook)
    for tool in sub.tools.values():
        keys |= tool.code.writes
    return keys


def received(parent: GraphFacts, node: str) -> set[str]:
    """Keys of the parent a subgraph node is given and returns: its value goes in and comes back.

    A node started by an edge gets the parent's state; one started by ``Send`` gets
    the payload (its keys, where the doctor can read them).
    """
    sub = parent.nested.get(node)
    if sub is None or not parent.nodes[node].subgraph:
        return set()
    inputs, outputs = io_keys(sub.graph)
    shared = inputs & outputs & set(parent.channels)
    given: set[str] = set()
    if parent.steps.started_by_name(node):
        given |= shared
    for keys in parent.steps.sends(node):
        given |= shared if keys is None else shared & keys
    return given


def handed_back(parent: GraphFacts, node: str) -> set[str]:
    """Keys a subgraph node is given and returns with the given value still in them.

    A key the subgraph overwrites (a plain channel its own code writes) comes back
    replaced; one it leaves alone, or appends to, comes back with the parent's part.
    """
    sub = parent.nested.get(node)
    if sub is None:
        return set()
    inside = _written_inside(sub)
    return {
        key
        for key in received(parent, node)
        if not (key in inside and sub.channels.get(key) and sub.channels[key].kind == "plain")
    }


def returned(parent: GraphFacts, node: str) -> set[str]:
    """Every key of the parent a subgraph node writes when it ends."""
    sub = parent.nested.get(node)
    if sub is None or not parent.nodes[node].subgraph:
        return set()
    _, outputs = io_keys(sub.graph)
    mine = outputs & set(parent.channels)
    return received(parent, node) | (mine & _written_inside(sub))


def writes(parent: GraphFacts, node: str) -> set[str]:
    """The keys of the parent a node writes: its function's returns, or a subgraph's state."""
    facts = parent.nodes.get(node)
    if facts is None:
        return set()
    if facts.subgraph:
        return returned(parent, node)
    return set(facts.code.writes) if facts.code is not None else set()

"""``undeclared-key`` (notebook 02): a tool's ``Command`` or a node's return writes a key the
graph lacks.

LangGraph drops such a write silently: no error, no hint in the ToolMessage, and
the next step sees nothing. A node's ``except`` branch that returns
``{"error": ...}`` is read like its other returns. Inside a deepagents subagent
the same drop is ``subagent-drops-key``; inside a graph run by a node, the
inner graph's own schema is the one that counts.
"""

from __future__ import annotations

from agentstate.doctor.facts.graph_facts import GraphFacts
from agentstate.doctor.report.findings import Finding, finding, info

CODE = "undeclared-key"


def _tools(facts: GraphFacts) -> list[Finding]:
    out: list[Finding] = []
    for tool in facts.tools.values():
        if tool.library:
            continue
        for key in sorted(tool.code.writes):
            if not facts.declares(key):
                out.append(
                    finding(
                        CODE,
                        f"{facts.prefix()}{key}",
                        f"`{tool.name}` updates `{key}` through `Command`, but the graph does "
                        f"not declare `{key}`: LangGraph drops the write silently. Add it to "
                        "the state schema (or a middleware's `state_schema`).",
                        file=facts.where_tool(tool.name)[0],
                        line=facts.where_tool(tool.name)[1],
                    )
                )
        for what in tool.code.dynamic:
            if what.startswith("writes"):
                out.append(
                    info(
                        CODE, f"{facts.prefix()}{tool.name}", f"`{tool.name}` {what}; not checked."
                    )
                )
    return out


def _nodes(facts: GraphFacts) -> list[Finding]:
    out: list[Finding] = []
    for node in sorted(facts.nodes.values(), key=lambda n: n.name):
        if node.code is None:
            continue
        for key in sorted(k for k in node.code.writes if not k.startswith("__")):
            if not facts.declares(key):
                out.append(
                    finding(
                        CODE,
                        f"{facts.prefix()}{key}",
                        f"node `{node.name}` returns `{key}`, but the graph does not declare "
                        f"`{key}`: LangGraph drops the write silently. Add it to the state "
                        "schema.",
                        file=facts.where_node(node.name)[0],
                        line=facts.where_node(node.name)[1],
                    )
                )
        for what in node.code.dynamic:
            if what.startswith("writes a state key"):
                out.append(
                    info(
                        CODE,
                        f"{facts.prefix()}{node.name}",
                        f"node `{node.name}` {what}; not checked.",
                    )
                )
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """Errors for keys written and not declared; info for keys built at run time."""
    if facts.kind == "subagent":
        return []
    return _tools(facts) + _nodes(facts)

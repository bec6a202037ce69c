"""``undeclared-key`` (notebook 02): a tool's ``Command`` updates a key the graph lacks.

LangGraph drops such a write silently: no error, no hint in the ToolMessage.
Inside a subagent the same drop is ``subagent-drops-key``.
"""

from __future__ import annotations

from agentstate.doctor.findings import Finding, finding, info
from agentstate.doctor.graph_facts import GraphFacts

CODE = "undeclared-key"


def check(facts: GraphFacts) -> list[Finding]:
    """Errors for keys written and not declared; info for keys built at run time."""
    if facts.parent is not None:
        return []
    out: list[Finding] = []
    for tool in facts.tools.values():
        if tool.library:
            continue
        for key in sorted(tool.code.writes):
            if not facts.declares(key):
                out.append(
                    finding(
                        CODE,
                        key,
                        f"`{tool.name}` updates `{key}` through `Command`, but the graph does "
                        f"not declare `{key}`: LangGraph drops the write silently. Add it to "
                        "the state schema (or a middleware's `state_schema`).",
                    )
                )
        for what in tool.code.dynamic:
            if what.startswith("writes"):
                out.append(info(CODE, tool.name, f"`{tool.name}` {what}; not checked."))
    return out

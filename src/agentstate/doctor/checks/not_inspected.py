"""``not-inspected`` (info, notebook 02): a node, tool or router whose source cannot be read.

The checks read code, never run it: a function compiled from a string (``exec``,
``python -c``), typed at a prompt, or from a package shipped without its
sources gives them nothing to read, so a hazard in it would go unreported. A
linter that cannot see says so: one ``info`` finding per node, tool or router
(a helper it calls included) naming what was not inspected and why, so
"no findings" means everything was read.
"""

from __future__ import annotations

from agentstate.doctor.facts.code_source import function_ast, is_library, unreadable
from agentstate.doctor.facts.graph_facts import GraphFacts
from agentstate.doctor.facts.locate import Place, function_of, locate
from agentstate.doctor.report.findings import Finding, finding

CODE = "not-inspected"


def _finding(facts: GraphFacts, what: str, name: str, unread: set[str], place: Place) -> Finding:
    file, line = place if place[0] is not None else facts.where_built()
    functions = sorted(unread)
    joined = (
        functions[0] if len(functions) == 1 else f"{', '.join(functions[:-1])} and {functions[-1]}"
    )
    return finding(
        CODE,
        f"{facts.prefix()}{name}",
        f"{what} `{name}` was not inspected: the source of {joined} cannot be read, so what "
        f"it reads and writes is not checked. Define it in a file the graph imports to have "
        f"it checked.",
        file=file,
        line=line,
    )


def _routers(facts: GraphFacts) -> list[Finding]:
    out: list[Finding] = []
    for source, branches in sorted(facts.graph.builder.branches.items()):
        for name, spec in sorted(branches.items()):
            fn = function_of(spec.path)
            if fn is None or is_library(fn) or function_ast(fn) is not None:
                continue
            label = f"{source} > {name}" if name != getattr(fn, "__name__", name) else name
            out.append(_finding(facts, "router", label, {unreadable(fn)}, locate(fn)))
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """One info finding per node, tool and router of the graph whose code could not be read."""
    out: list[Finding] = []
    for tool in sorted(facts.tools.values(), key=lambda t: t.name):
        if not tool.library and tool.code.unread:
            out.append(
                _finding(facts, "tool", tool.name, tool.code.unread, facts.where_tool(tool.name))
            )
    for node in sorted(facts.nodes.values(), key=lambda n: n.name):
        if node.code is not None and node.code.unread:
            out.append(
                _finding(facts, "node", node.name, node.code.unread, facts.where_node(node.name))
            )
    return out + _routers(facts)

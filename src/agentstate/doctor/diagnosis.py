"""``diagnose(graph)``: the series' hazards in a compiled graph, without running it.

No model call, no tool run: the checks read the graph's channels, nodes,
tools, middleware and subagents (:mod:`agentstate.doctor.graph_facts`) and
the tools' own source (:mod:`agentstate.doctor.tool_facts`). Every hazard is
taught in one of notebooks 01-06; see ``docs/doctor/``.
"""

from __future__ import annotations

from agentstate.doctor.checks import CHECKS
from agentstate.doctor.findings import Finding, Report
from agentstate.doctor.graph_facts import graph_facts


def diagnose(graph: object, name: str | None = None) -> Report:
    """Every finding about ``graph``, its subagents and the graphs its nodes run.

    Raises ``NotAGraphError`` for anything but a compiled graph.
    """
    facts = graph_facts(graph, name)
    findings: list[Finding] = []
    for scope in facts.scopes():
        for check in CHECKS.values():
            findings.extend(check(scope))
    return Report(facts.name, findings)

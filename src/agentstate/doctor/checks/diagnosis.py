"""``diagnose(graph)``: the series' hazards in a compiled graph, without running it.

No model call, no tool run: the checks read the graph's channels, nodes,
tools, middleware and subagents (:mod:`agentstate.doctor.facts.graph_facts`) and
the tools' own source (:mod:`agentstate.doctor.facts.tool_facts`). Every hazard is
taught in one of notebooks 01-06; see ``docs/doctor/``.
"""

from __future__ import annotations

from agentstate._extras import DIST
from agentstate.doctor.checks import CHECKS
from agentstate.doctor.facts.graph_facts import GraphFacts, graph_facts
from agentstate.doctor.facts.tool_facts import backend_protocol
from agentstate.doctor.report.findings import Finding, Report

WITHOUT_DEEPAGENTS = (
    "deepagents is not installed, so a tool's read-modify-write through a deepagents "
    "backend object is not checked (file-read-modify-write); "
    f"pip install '{DIST}[deepagents]' to check it"
)
"""The note of a report when the ``deepagents`` extra is missing."""


def diagnose(graph: object, name: str | None = None) -> Report:
    """Every finding about ``graph``, its subagents and the graphs its nodes run.

    Raises ``NotAGraphError`` for anything but a compiled graph. Every finding
    the checks make: :func:`agentstate.doctor.check_project` applies the
    project's ``[tool.agentstate.doctor]`` and ``# agentstate: ignore`` comments.
    """
    return diagnose_facts(graph_facts(graph, name))


def diagnose_facts(facts: GraphFacts) -> Report:
    """Every finding about the graph ``facts`` were read from (:func:`diagnose`, for a caller
    that keeps the facts: the CLI reads them once per graph for the checks, the suppression
    comments and the fixes)."""
    findings: list[Finding] = []
    for scope in facts.scopes():
        for check in CHECKS.values():
            findings.extend(check(scope))
    notes = () if backend_protocol() is not None else (WITHOUT_DEEPAGENTS,)
    return Report(facts.name, findings, notes)

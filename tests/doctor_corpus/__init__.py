"""A corpus of real shapes for the doctor (issue 22): graphs it was never tuned on.

Each graph is written in this project's own code after the shape of a public
LangGraph, LangChain or deepagents agent (tutorials, templates, a course,
community notebooks, examples), named in a comment and in ``Case.follows``.
Each declares its verdict (the hazard codes a run reproduces, or none) and a
scripted run that proves it: a raise, a lost, stale or doubled value, or all
values intact. ``tests/test_doctor_corpus.py`` checks that the doctor agrees;
``scripts/doctor_corpus.py`` prints the table and its precision and recall.
"""

from __future__ import annotations

from tests.doctor_corpus import (
    advisors,
    architectures,
    courses,
    deep,
    documents,
    editors,
    fan_out,
    memory,
    memory_template,
    multi_agent,
    nodes,
    react_loops,
    research,
    routers,
    subgraphs,
    trading,
)
from tests.doctor_corpus._kit import Case, Proof

CASES: list[Case] = [
    *routers.CASES,
    *fan_out.CASES,
    *subgraphs.CASES,
    *multi_agent.CASES,
    *react_loops.CASES,
    *memory.CASES,
    *memory_template.CASES,
    *deep.CASES,
    *advisors.CASES,
    *editors.CASES,
    *nodes.CASES,
    *research.CASES,
    *trading.CASES,
    *courses.CASES,
    *documents.CASES,
    *architectures.CASES,
]

__all__ = ["CASES", "Case", "Proof"]

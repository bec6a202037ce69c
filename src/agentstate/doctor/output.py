"""The doctor's reports as the CLI prints them: a table, JSON, or GitHub annotations.

Each report comes with the place its graph is defined (``agent = ...`` in the
target's file), where a finding without a place of its own is annotated, so a
pull request shows every finding on a line. A graph that could not be loaded
is a :class:`Diagnosed` with an ``error`` and no findings: the others are
reported all the same. Every finding carries its code's page reference
(``agentstate doctor --explain CODE``), readable with the wheel alone. SARIF
for code scanning is :mod:`agentstate.doctor.sarif`. The hazards are taught
in notebooks 01-06.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentstate.doctor import places
from agentstate.doctor.explain import reference
from agentstate.doctor.findings import Finding, Report

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}
"""A finding's severity as a GitHub annotation's level."""

JSON_SHAPE = 1
"""The version of the JSON document's shape (``"format"`` in it)."""


@dataclass(frozen=True)
class Diagnosed:
    """One graph's report and where the graph is defined (either may be unknown).

    ``error`` is the one line saying why the graph could not be loaded or
    checked (its report is then empty); ``label`` names the target as errors do
    (``langgraph.json > agent``).
    """

    report: Report
    file: str | None = None
    line: int | None = None
    label: str = ""
    error: str | None = None


def place(finding: Finding, diagnosed: Diagnosed, base: Path) -> tuple[str | None, int | None]:
    """Where to show ``finding``: its own place under ``base``, else its graph's, as relative paths.

    A place outside ``base`` (a library's tool, a path on another machine) cannot
    be annotated, so its graph's place stands in; ``(None, None)`` when neither is
    under ``base``.
    """
    if finding.file and (own := places.under(finding.file, base)):
        return own, finding.line
    if diagnosed.file and (graph := places.under(diagnosed.file, base)):
        return graph, diagnosed.line
    return None, None


def explained(codes: Sequence[str]) -> list[str]:
    """One ``see: agentstate doctor --explain CODE`` line per code, in order."""
    return [f"see: {reference(code)}" for code in dict.fromkeys(codes)]


def text(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), *, quiet: bool = False
) -> str:
    """Every loaded graph's table and its codes' references, then the unused suppressions.

    ``quiet``: the graphs without findings are left out. A graph that could not
    be loaded has its line on stderr, not here.
    """
    blocks = []
    for d in diagnosed:
        if d.error is not None or (quiet and not d.report.findings):
            continue
        lines = [d.report.text(notes=False)]
        lines += explained([f.code for f in d.report.findings])
        blocks.append("\n".join(lines))
    if unused:
        here = Path.cwd()
        lines = [f"{len(unused)} unused suppression(s)"]
        lines += [f"{places.where(f.file, f.line, here)}: {f.message}" for f in unused]
        lines += explained([f.code for f in unused])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def finding_dict(f: Finding) -> dict[str, object]:
    """A finding as JSON: its fields and ``explain``, the command that prints its page."""
    return {**f.to_dict(), "explain": reference(f.code)}


def graph_dict(d: Diagnosed) -> dict[str, object]:
    """One graph as JSON: the same keys whether it loaded (``error`` null) or not."""
    report = d.report
    return {
        "graph": report.graph,
        "target": d.label or report.graph,
        "error": d.error,
        "codes": report.codes(),
        "findings": [finding_dict(f) for f in report.findings],
        "notes": list(report.notes),
    }


def document(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), version: str | None = None
) -> dict[str, object]:
    """The JSON document: one object, one entry per graph however many there are."""
    return {
        "tool": "agentstate doctor",
        "version": version,
        "format": JSON_SHAPE,
        "graphs": [graph_dict(d) for d in diagnosed],
        "unused_suppressions": [finding_dict(f) for f in unused],
    }


def json_text(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), version: str | None = None
) -> str:
    """:func:`document` as indented JSON."""
    return json.dumps(document(diagnosed, unused, version), indent=2)


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str, title: str, message: str, file: str | None = None, line: int | None = None
) -> str:
    """One GitHub Actions workflow command (``::error file=...,line=...,title=...::message``)."""
    props = [f"file={_escape_property(file)}"] if file else []
    props += [f"line={line}"] if file and line else []
    props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def github_lines(diagnosed: Diagnosed, base: Path | None = None) -> list[str]:
    """GitHub Actions workflow commands, one annotation per finding, on its file and line."""
    base = places.root() if base is None else base
    report = diagnosed.report
    if diagnosed.error is not None:
        return [annotation("error", "doctor could not check a graph", diagnosed.error)]
    lines = []
    for f in report.findings:
        file, line = place(f, diagnosed, base)
        message = (
            f"{report.graph}: {f.subject}: {f.message} (notebook {f.notebook}; {reference(f.code)})"
        )
        lines.append(annotation(LEVELS[f.severity], f"doctor {f.code}", message, file, line))
    return lines


def github(diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = ()) -> str:
    """Every report's annotations, one a line, then the unused suppressions'."""
    lines = [line for d in diagnosed for line in github_lines(d)]
    base = places.root()
    for f in unused:
        file = places.under(f.file, base) if f.file else None
        message = f"{f.message} ({reference(f.code)})"
        lines.append(annotation(LEVELS[f.severity], f"doctor {f.code}", message, file, f.line))
    return "\n".join(lines)

"""The doctor's reports as the CLI prints them: a table, JSON, or GitHub annotations.

Each report comes with the place its graph is defined (``agent = ...`` in the
target's file), where a finding without a place of its own is annotated, so a
pull request shows every finding on a line. SARIF for code scanning is
:mod:`agentstate.doctor.sarif`. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentstate.doctor import places
from agentstate.doctor.findings import Finding, Report

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}
"""A finding's severity as a GitHub annotation's level."""


@dataclass(frozen=True)
class Diagnosed:
    """One graph's report and where the graph is defined (either may be unknown)."""

    report: Report
    file: str | None = None
    line: int | None = None


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


def text(diagnosed: Sequence[Diagnosed]) -> str:
    """Every report's table, a blank line between them."""
    return "\n\n".join(d.report.text(notes=False) for d in diagnosed)


def json_text(diagnosed: Sequence[Diagnosed]) -> str:
    """One report's dict as JSON, or a list of them for several graphs."""
    data = [d.report.to_dict() for d in diagnosed]
    return json.dumps(data[0] if len(data) == 1 else data, indent=2)


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github_lines(diagnosed: Diagnosed, base: Path | None = None) -> list[str]:
    """GitHub Actions workflow commands, one annotation per finding, on its file and line."""
    base = places.root() if base is None else base
    report = diagnosed.report
    lines = []
    for f in report.findings:
        file, line = place(f, diagnosed, base)
        props = [f"file={_escape_property(file)}"] if file else []
        props += [f"line={line}"] if file and line else []
        props.append(f"title={_escape_property(f'doctor {f.code}')}")
        message = f"{report.graph}: {f.subject}: {f.message} (notebook {f.notebook})"
        lines.append(f"::{LEVELS[f.severity]} {','.join(props)}::{_escape_data(message)}")
    return lines


def github(diagnosed: Sequence[Diagnosed]) -> str:
    """Every report's annotations, one a line."""
    return "\n".join(line for d in diagnosed for line in github_lines(d))

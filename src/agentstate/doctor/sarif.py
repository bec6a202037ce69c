"""The doctor's reports as SARIF 2.1.0, the format code scanning reads.

One rule per finding code (its title, its lesson, its page under
``docs/doctor/`` as ``helpUri``), one result per finding at its file and line
relative to the project (``%SRCROOT%``), the severity as SARIF's level
(``info`` is a ``note``). Upload the file with GitHub's ``upload-sarif`` action
and the findings show on the lines of a pull request and in the repository's
code scanning alerts. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Sequence
from pathlib import Path

from agentstate.doctor import places
from agentstate.doctor.findings import CODES, NOTEBOOKS, Code, Finding
from agentstate.doctor.output import Diagnosed, place

SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
VERSION = "2.1.0"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
"""A finding's severity as a SARIF result's level."""

SRCROOT = "%SRCROOT%"


def docs_url() -> str | None:
    """The ``file:`` URI of ``docs/doctor/`` beside the package (a checkout), if it is there."""
    folder = Path(__file__).resolve().parents[3] / "docs" / "doctor"
    return folder.as_uri() + "/" if (folder / "README.md").is_file() else None


def _version() -> str:
    try:
        return importlib.metadata.version("agentstate")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def rule(code: Code, docs: str | None) -> dict[str, object]:
    """A SARIF ``reportingDescriptor`` for one code: what it is, its lesson, its page."""
    lesson = f"notebook {code.notebook} ({NOTEBOOKS.get(code.notebook, code.notebook)})"
    page = f"docs/doctor/{code.name}.md"
    out: dict[str, object] = {
        "id": code.name,
        "name": "".join(word.capitalize() for word in code.name.split("-")),
        "shortDescription": {"text": code.title},
        "fullDescription": {"text": f"{code.title}; taught in {lesson}."},
        "defaultConfiguration": {"level": LEVELS[code.severity]},
        "help": {
            "text": f"{code.title}. Why it happens and the fix: {page}; taught in {lesson}.",
            "markdown": f"{code.title}. Why it happens and the fix: `{page}`; taught in {lesson}.",
        },
        "properties": {"tags": ["langgraph", "agent-state"], "notebook": code.notebook},
    }
    if docs:
        out["helpUri"] = f"{docs}{code.name}.md"
    return out


def _location(file: str, line: int | None, relative: bool) -> dict[str, object]:
    artifact: dict[str, object] = (
        {"uri": file, "uriBaseId": SRCROOT} if relative else {"uri": Path(file).as_uri()}
    )
    physical: dict[str, object] = {"artifactLocation": artifact}
    if line:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def _locations(f: Finding, diagnosed: Diagnosed, base: Path) -> list[dict[str, object]]:
    file, line = place(f, diagnosed, base)
    if file:
        return [_location(file, line, relative=True)]
    own = (f.file, f.line) if f.file else (diagnosed.file, diagnosed.line)
    if own[0] and Path(own[0]).is_absolute():
        return [_location(own[0], own[1], relative=False)]
    return []


def result(f: Finding, diagnosed: Diagnosed, index: int, base: Path) -> dict[str, object]:
    """A SARIF ``result`` for one finding of one graph's report."""
    graph = diagnosed.report.graph
    key = "\0".join((graph, f.code, f.subject)).encode()
    properties: dict[str, object] = {
        "graph": graph,
        "subject": f.subject,
        "severity": f.severity,
        "notebook": f.notebook,
    }
    if f.evidence:
        properties["evidence"] = list(f.evidence)
    return {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": LEVELS[f.severity],
        "message": {"text": f"{graph}: {f.subject}: {f.message}"},
        "locations": _locations(f, diagnosed, base),
        "partialFingerprints": {"agentstateDoctor/v1": hashlib.sha256(key).hexdigest()[:32]},
        "properties": properties,
    }


def sarif_log(
    diagnosed: Sequence[Diagnosed], base: Path | None = None, docs: str | None = None
) -> dict[str, object]:
    """One SARIF log with one run: every code as a rule, every finding as a result.

    ``base`` is the project's root (``$GITHUB_WORKSPACE`` or the current
    directory); ``docs`` the URL of ``docs/doctor/`` (default: the checkout's
    pages, as ``file:`` URIs, when agentstate runs from one).
    """
    base = places.root() if base is None else base
    docs = docs if docs is not None else docs_url()
    known = dict(CODES)
    for d in diagnosed:  # a Finding made by hand may carry a code of its own
        for f in d.report.findings:
            known.setdefault(f.code, Code(f.code, f.severity, f.notebook, f.code))
    codes = list(known)
    driver: dict[str, object] = {
        "name": "agentstate doctor",
        "version": _version(),
        "rules": [rule(known[c], docs) for c in codes],
    }
    if docs:
        driver["informationUri"] = f"{docs}README.md"
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {SRCROOT: {"uri": base.resolve().as_uri() + "/"}},
                "results": [
                    result(f, d, codes.index(f.code), base)
                    for d in diagnosed
                    for f in d.report.findings
                ],
            }
        ],
    }

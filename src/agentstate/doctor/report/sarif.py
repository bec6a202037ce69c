"""The doctor's reports as SARIF 2.1.0, the format code scanning reads.

One rule per finding code (its title, its lesson, ``agentstate doctor
--explain CODE``, its page under ``docs/doctor/`` as ``helpUri``), one result
per finding at its file and line relative to the project (``%SRCROOT%``, the
path percent-encoded as a URI reference must be), the severity as SARIF's
level (``info`` is a ``note``), a fingerprint that tells two results apart and
follows a result when its line moves. A graph that could not be loaded is a
tool execution notification of the run's invocation. Upload the file with
GitHub's ``upload-sarif`` action and the findings show on the lines of a pull
request and in the repository's code scanning alerts. The hazards are taught
in notebooks 01-06.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from agentstate.doctor.report import places
from agentstate.doctor.report.explain import reference
from agentstate.doctor.report.findings import CODES, NOTEBOOKS, Code, Finding
from agentstate.doctor.report.output import Diagnosed, place
from agentstate.doctor.report.suppression import UNUSED
from agentstate.doctor.report.version import version

SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
VERSION = "2.1.0"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
"""A finding's severity as a SARIF result's level."""

SRCROOT = "%SRCROOT%"


def docs_url() -> str | None:
    """The ``file:`` URI of ``docs/doctor/`` beside the package (a checkout), if it is there."""
    folder = Path(__file__).resolve().parents[4] / "docs" / "doctor"
    return folder.as_uri() + "/" if (folder / "README.md").is_file() else None


def rule(code: Code, docs: str | None) -> dict[str, object]:
    """A SARIF ``reportingDescriptor`` for one code: what it is, its lesson, its page."""
    lesson = (
        f"; taught in notebook {code.notebook} ({NOTEBOOKS.get(code.notebook, code.notebook)})"
        if code.notebook
        else ""
    )
    explain = reference(code.name)
    out: dict[str, object] = {
        "id": code.name,
        "name": "".join(word.capitalize() for word in code.name.split("-")),
        "shortDescription": {"text": code.title},
        "fullDescription": {"text": f"{code.title}{lesson}."},
        "defaultConfiguration": {"level": LEVELS[code.severity]},
        "help": {
            "text": f"{code.title}. Why it happens and the fix: {explain}{lesson}.",
            "markdown": f"{code.title}. Why it happens and the fix: `{explain}`{lesson}.",
        },
        "properties": {"tags": ["langgraph", "agent-state"], "notebook": code.notebook},
    }
    if docs:
        out["helpUri"] = f"{docs}{code.name}.md"
    return out


def uri(relative: str) -> str:
    """A relative POSIX path as a URI reference: ``a b/c#1%.py`` -> ``a%20b/c%231%25.py``."""
    return urllib.parse.quote(relative, safe="/")


def _location(file: str, line: int | None, relative: bool) -> dict[str, object]:
    artifact: dict[str, object] = (
        {"uri": uri(file), "uriBaseId": SRCROOT} if relative else {"uri": Path(file).as_uri()}
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


def line_text(file: str | None, line: int | None) -> str:
    """The text of ``file``'s line ``line``, stripped (``""`` when it cannot be read).

    Read afresh each time (no cache that a file rewritten in the same clock tick
    could outlive); a report has a handful of findings.
    """
    if not file or not line:
        return ""
    try:
        with open(file, encoding="utf-8", errors="replace") as source:
            for number, text in enumerate(source, 1):
                if number == line:
                    return text.strip()
    except (OSError, ValueError):
        return ""
    return ""


def fingerprint(f: Finding, diagnosed: Diagnosed, base: Path) -> str:
    """What identifies a result across runs: graph, code, subject, file and the line's text.

    The text of the line (not its number) keeps an alert on its code when lines
    above it move; two results on two lines (two nodes) differ. Results that
    still coincide are told apart by :func:`sarif_log` with an occurrence number.
    """
    file, line = place(f, diagnosed, base)
    own = f.file if f.file and file and places.under(f.file, base) == file else diagnosed.file
    text = line_text(own, line)
    key = "\0".join((diagnosed.report.graph, f.code, f.subject, file or "", text))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def result(f: Finding, diagnosed: Diagnosed, index: int, base: Path) -> dict[str, object]:
    """A SARIF ``result`` for one finding of one graph's report."""
    graph = diagnosed.report.graph
    properties: dict[str, object] = {
        "graph": graph,
        "subject": f.subject,
        "severity": f.severity,
        "notebook": f.notebook,
    }
    if f.evidence:
        properties["evidence"] = list(f.evidence)
    if f.fix:
        properties["fix"] = f.fix  # `agentstate doctor --fix` writes it (unsafe: --unsafe-fixes)
    return {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": LEVELS[f.severity],
        "message": {"text": f"{graph}: {f.subject}: {f.message}"},
        "locations": _locations(f, diagnosed, base),
        "partialFingerprints": {"agentstateDoctor/v2": fingerprint(f, diagnosed, base)},
        "properties": properties,
    }


def _unused_result(f: Finding, index: int, base: Path) -> dict[str, object]:
    file = places.under(f.file, base) if f.file else None
    locations = [_location(file, f.line, relative=True)] if file else []
    text = line_text(f.file, f.line)
    key = "\0".join((f.code, file or f.file or "", text, f.subject))
    return {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": LEVELS[f.severity],
        "message": {"text": f.message},
        "locations": locations,
        "partialFingerprints": {
            "agentstateDoctor/v2": hashlib.sha256(key.encode()).hexdigest()[:32]
        },
    }


def _distinct(results: list[dict[str, object]]) -> None:
    """Number the fingerprints that coincide, so code scanning never folds two results."""
    seen: dict[str, int] = {}
    for r in results:
        prints = r["partialFingerprints"]
        assert isinstance(prints, dict)
        value = prints["agentstateDoctor/v2"]
        seen[value] = seen.get(value, 0) + 1
        if seen[value] > 1:
            prints["agentstateDoctor/v2"] = f"{value}:{seen[value]}"


def sarif_log(
    diagnosed: Sequence[Diagnosed],
    base: Path | None = None,
    docs: str | None = None,
    unused: Sequence[Finding] = (),
) -> dict[str, object]:
    """One SARIF log with one run: every code as a rule, every finding as a result.

    ``base`` is the project's root (``$GITHUB_WORKSPACE`` or the current
    directory); ``docs`` the URL of ``docs/doctor/`` (default: the checkout's
    pages, as ``file:`` URIs, when agentstate runs from one).
    """
    base = places.root() if base is None else base
    docs = docs if docs is not None else docs_url()
    known = {**CODES, UNUSED.name: UNUSED}
    for d in diagnosed:  # a Finding made by hand may carry a code of its own
        for f in d.report.findings:
            known.setdefault(f.code, Code(f.code, f.severity, f.notebook, f.code))
    codes = list(known)
    driver: dict[str, object] = {
        "name": "agentstate doctor",
        "version": version(),
        "semanticVersion": version(),
        "rules": [rule(known[c], docs) for c in codes],
    }
    if docs:
        driver["informationUri"] = f"{docs}README.md"
    results = [
        result(f, d, codes.index(f.code), base) for d in diagnosed for f in d.report.findings
    ]
    results += [_unused_result(f, codes.index(f.code), base) for f in unused]
    _distinct(results)
    failed = [d.error for d in diagnosed if d.error is not None]
    invocation: dict[str, object] = {"executionSuccessful": not failed}
    if failed:
        invocation["toolExecutionNotifications"] = [
            {"level": "error", "message": {"text": message}} for message in failed
        ]
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [
            {
                "tool": {"driver": driver},
                "invocations": [invocation],
                "originalUriBaseIds": {SRCROOT: {"uri": base.resolve().as_uri() + "/"}},
                "results": results,
            }
        ],
    }

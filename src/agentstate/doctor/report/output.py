"""The doctor's reports as the CLI prints them: full or concise text, JSON, GitHub annotations.

Each report comes with the place its graph is defined (``agent = ...`` in the
target's file), where a finding without a place of its own is shown (a
subagent's finding: the line that declares the subagent, when the graph's file
has one), so every finding has a location and a pull request shows it on a
line. The text formats end with a summary line and fit a 100-column terminal
(wrapped at word boundaries); JSON, GitHub and SARIF carry every name whole.
A graph that could not be loaded is a :class:`Diagnosed` with an ``error``
and no findings: the others are reported all the same. Every finding
carries its code's page reference (``agentstate doctor --explain CODE``),
readable with the wheel alone. SARIF for code scanning is
:mod:`agentstate.doctor.report.sarif`. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import ast
import json
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentstate.doctor.report import places
from agentstate.doctor.report.explain import reference
from agentstate.doctor.report.findings import Finding, Report

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}
"""A finding's severity as a GitHub annotation's level."""

JSON_SHAPE = 1
"""The version of the JSON document's shape (``"format"`` in it)."""

WIDTH = 100
"""The columns the full text fits: a message wraps at a word boundary before it."""

INDENT = "    "


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
    suppressed: int = 0
    """How many of its findings a ``# agentstate: ignore[...]`` comment silenced."""


def declared(file: str, name: str) -> int | None:
    """The line of ``file`` that declares a subagent called ``name``: a dict with
    ``"name": name`` or a call with ``name=name`` (the last one, as Python binds it)."""
    try:
        tree = ast.parse(Path(file).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    found = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict | ast.Call):
            continue
        named = False
        if isinstance(node, ast.Dict):
            named = any(
                isinstance(k, ast.Constant)
                and k.value == "name"
                and isinstance(v, ast.Constant)
                and v.value == name
                for k, v in zip(node.keys, node.values, strict=True)
            )
        elif isinstance(node, ast.Call):
            named = any(
                k.arg == "name" and isinstance(k.value, ast.Constant) and k.value.value == name
                for k in node.keywords
            )
        if named and (found is None or node.lineno > found):
            found = node.lineno
    return found


def graph_place(finding: Finding, diagnosed: Diagnosed) -> tuple[str | None, int | None]:
    """Where a finding without a place of its own shows: its subagent's declaration in the
    graph's file (the subject's ``<subagent>:`` prefix), else the graph's own line."""
    if not diagnosed.file:
        return None, None
    subagent, sep, _ = finding.subject.partition(":")
    line = declared(diagnosed.file, subagent) if sep and subagent else None
    return diagnosed.file, line or diagnosed.line


def located(finding: Finding, diagnosed: Diagnosed) -> tuple[str | None, int | None]:
    """The finding's own place (absolute) when it has one, else :func:`graph_place`."""
    if finding.file:
        return finding.file, finding.line
    return graph_place(finding, diagnosed)


def column(file: str | None, line: int | None) -> int:
    """The column of the first character of ``file``'s line ``line`` (1 when unknown)."""
    if not file or not line:
        return 1
    try:
        with open(file, encoding="utf-8", errors="replace") as source:
            for number, text in enumerate(source, 1):
                if number == line:
                    return len(text) - len(text.lstrip(" \t")) + 1
    except (OSError, ValueError):
        return 1
    return 1


def location(finding: Finding, diagnosed: Diagnosed, here: Path) -> tuple[str, int, int]:
    """``(path, line, column)`` as text shows them: relative to ``here`` when under it."""
    file, line = located(finding, diagnosed)
    if not file:
        return (diagnosed.label or diagnosed.report.graph), 0, 0
    return nearby(file, here), line or 1, column(file, line)


def nearby(file: str, here: Path) -> str:
    """``file`` as the current directory reaches it (``../app.py``), absolute when the two
    share only the file system's root (a library's tool)."""
    shown = places.under(file, here)
    if shown is not None:
        return shown
    if os.path.commonpath([os.path.abspath(file), str(here)]) in ("/", os.path.abspath(os.sep)):
        return file
    return Path(os.path.relpath(file, here)).as_posix()


def place(finding: Finding, diagnosed: Diagnosed, base: Path) -> tuple[str | None, int | None]:
    """Where to show ``finding``: its own place under ``base``, else its graph's, as relative paths.

    A place outside ``base`` (a library's tool, a path on another machine) cannot
    be annotated, so its graph's place stands in (:func:`graph_place`: a
    subagent's declaration, else the graph's line); ``(None, None)`` when neither is
    under ``base``.
    """
    if finding.file and (own := places.under(finding.file, base)):
        return own, finding.line
    file, line = graph_place(finding, diagnosed)
    if file and (graph := places.under(file, base)):
        return graph, line
    return None, None


def explained(codes: Sequence[str]) -> list[str]:
    """One ``see: agentstate doctor --explain CODE`` line per code, in order."""
    return [f"see: {reference(code)}" for code in dict.fromkeys(codes)]


FIX_FLAGS = {"safe": "--fix", "unsafe": "--unsafe-fixes"}
"""The flag that writes a finding's fix (``agentstate doctor --fix``), by its kind."""


def fixable(f: Finding) -> str:
    """`` (fixable: --fix)`` when the doctor can write the finding's fix, else ``""``."""
    return f" (fixable: {FIX_FLAGS[f.fix]})" if f.fix else ""


def fix_counts(found: Sequence[Finding]) -> str:
    """``; 2 fixable with --fix, 1 more with --unsafe-fixes`` (``""`` when none is)."""
    safe = sum(f.fix == "safe" for f in found)
    unsafe = sum(f.fix == "unsafe" for f in found)
    if not safe and not unsafe:
        return ""
    more = f", {unsafe} more with --unsafe-fixes" if unsafe else ""
    return f"; {safe} fixable with --fix{more}"


def plural(count: int, word: str) -> str:
    """``1 error``, ``2 errors``, ``0 infos``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def checked(diagnosed: Sequence[Diagnosed]) -> bool:
    """True when a graph was checked: with none, stdout stays empty (the errors are on stderr)."""
    return any(d.error is None for d in diagnosed)


def summary(diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = ()) -> str:
    """The last line of a text report: what was found, silenced, checked and not loaded."""
    found = [f for d in diagnosed for f in d.report.findings] + list(unused)
    counts = {s: sum(f.severity == s for f in found) for s in ("error", "warning", "info")}
    failed = sum(d.error is not None for d in diagnosed)
    return (
        f"{plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')}, "
        f"{plural(counts['info'], 'info')}, {sum(d.suppressed for d in diagnosed)} suppressed; "
        f"{plural(len(diagnosed) - failed, 'graph')} checked, {failed} failed to load"
        f"{fix_counts(found)}"
    )


def wrapped(text: str, indent: str = INDENT, width: int = WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken only between words."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def full_lines(d: Diagnosed, here: Path) -> list[str]:
    """One graph in full: a heading, each finding's place, code and message, its pages."""
    findings = d.report.findings
    name = d.label or d.report.graph
    if not findings:
        return [f"{name}: no findings"]
    lines = [f"{name}: {plural(len(findings), 'finding')}"]
    for f in findings:
        path, line, col = location(f, d, here)
        where = f"{path}:{line}:{col}" if line else path
        lines += wrapped(f"{where}: {f.code} {f.severity} `{f.subject}`{fixable(f)}", "")
        lines += wrapped(f.message)
    lines += explained([f.code for f in findings])
    return lines


def text(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), *, quiet: bool = False
) -> str:
    """Every loaded graph's findings in full, the unused suppressions, then the summary line.

    ``quiet``: the graphs without findings and the summary are left out. A graph
    that could not be loaded has its line on stderr, not here; when none loaded,
    nothing is printed here at all.
    """
    here = Path.cwd()
    blocks = []
    for d in diagnosed:
        if d.error is not None or (quiet and not d.report.findings):
            continue
        blocks.append("\n".join(full_lines(d, here)))
    if unused:
        lines = [f"{plural(len(unused), 'unused suppression')}"]
        for f in unused:
            where = nearby(f.file, here) if f.file else "?"
            lines += wrapped(
                f"{where}:{f.line or 1}:{column(f.file, f.line)}: {f.code} {f.severity}", ""
            )
            lines += wrapped(f.message)
        lines += explained([f.code for f in unused])
        blocks.append("\n".join(lines))
    if not quiet and checked(diagnosed):
        blocks.append(summary(diagnosed, unused))
    return "\n\n".join(blocks)


def concise(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), *, quiet: bool = False
) -> str:
    """One line per finding, ``path:line:col: code severity message``, sorted by path and line;
    then the summary line (not with ``quiet``)."""
    here = Path.cwd()
    rows: list[tuple[str, int, int, str]] = []
    for d in diagnosed:
        for f in d.report.findings:
            path, line, col = location(f, d, here)
            message = f"{d.report.graph}: {f.subject}: {f.message}{fixable(f)}"
            rows.append((path, line, col, f"{f.code} {f.severity} {message}"))
    for f in unused:
        path, line = nearby(f.file, here) if f.file else "?", f.line or 1
        rows.append((path, line, column(f.file, f.line), f"{f.code} {f.severity} {f.message}"))
    lines = [f"{p}:{n}:{c}: {rest}" for p, n, c, rest in sorted(rows)]
    if not quiet and checked(diagnosed):
        lines.append(summary(diagnosed, unused))
    return "\n".join(lines)


def finding_dict(f: Finding) -> dict[str, object]:
    """A finding as JSON: its fields and ``explain``, the command that prints its page."""
    return {**f.to_dict(), "explain": reference(f.code)}


def graph_dict(d: Diagnosed) -> dict[str, object]:
    """One graph as JSON: the same keys whether it loaded (``error`` null) or not."""
    report = d.report
    return {
        "graph": report.graph,
        "target": d.label or report.graph,
        "file": d.file,
        "line": d.line,
        "error": d.error,
        "suppressed": d.suppressed,
        "codes": report.codes(),
        "findings": [finding_dict(f) for f in report.findings],
        "notes": list(report.notes),
    }


def document(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), version: str | None = None
) -> dict[str, object]:
    """The JSON document: one object, one entry per graph however many there are."""
    found = [f for d in diagnosed for f in d.report.findings] + list(unused)
    failed = sum(d.error is not None for d in diagnosed)
    return {
        "tool": "agentstate doctor",
        "version": version,
        "format": JSON_SHAPE,
        "graphs": [graph_dict(d) for d in diagnosed],
        "unused_suppressions": [finding_dict(f) for f in unused],
        "summary": {
            "errors": sum(f.severity == "error" for f in found),
            "warnings": sum(f.severity == "warning" for f in found),
            "infos": sum(f.severity == "info" for f in found),
            "suppressed": sum(d.suppressed for d in diagnosed),
            "graphs": len(diagnosed) - failed,
            "failed": failed,
        },
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


def docs_page(code: str, docs_url: str | None = None) -> str:
    """Where ``code``'s page is read: ``docs_url`` + ``CODE.md`` when given, else its path in
    agentstate's repository (``docs/doctor/CODE.md``)."""
    return f"{docs_url}{code}.md" if docs_url else f"docs/doctor/{code}.md"


def github_lines(
    diagnosed: Diagnosed, base: Path | None = None, docs_url: str | None = None
) -> list[str]:
    """GitHub Actions workflow commands, one annotation per finding, on its file and line."""
    base = places.root() if base is None else base
    report = diagnosed.report
    if diagnosed.error is not None:
        return [annotation("error", "doctor could not check a graph", diagnosed.error)]
    lines = []
    for f in report.findings:
        file, line = place(f, diagnosed, base)
        message = (
            f"{report.graph}: {f.subject}: {f.message}{fixable(f)} "
            f"(docs: {docs_page(f.code, docs_url)}; {reference(f.code)})"
        )
        lines.append(annotation(LEVELS[f.severity], f"doctor {f.code}", message, file, line))
    return lines


def github(
    diagnosed: Sequence[Diagnosed], unused: Sequence[Finding] = (), docs_url: str | None = None
) -> str:
    """Every report's annotations, one a line, then the unused suppressions'."""
    lines = [line for d in diagnosed for line in github_lines(d, docs_url=docs_url)]
    base = places.root()
    for f in unused:
        file = places.under(f.file, base) if f.file else None
        message = f"{f.message} (docs: {docs_page(f.code, docs_url)}; {reference(f.code)})"
        lines.append(annotation(LEVELS[f.severity], f"doctor {f.code}", message, file, f.line))
    return "\n".join(lines)

"""What the doctor reports: a :class:`Finding` per hazard, gathered in a :class:`Report`.

Every code is one hazard of the series and names the notebook that teaches it
(notebooks 01-06); :data:`CODES` is the one table of codes, severities and
lessons that the checks, the watch, the CLI and the docs pages share.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
FixKind = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Code:
    """One hazard: its stable name, its usual severity, the lesson and a one-line title."""

    name: str
    severity: Severity
    notebook: str
    title: str


CODES: dict[str, Code] = {
    c.name: c
    for c in (
        Code("file-read-modify-write", "error", "01", "a tool reads a file and writes it back"),
        Code(
            "unreduced-parallel-write", "error", "02", "parallel writers of a key without a reducer"
        ),
        Code("undeclared-key", "error", "02", "a tool or a node writes a key the graph lacks"),
        Code("unseen-key-read", "error", "02", "a router or a node reads a key it never sees"),
        Code("same-batch-read", "warning", "03", "a reader blind to its own batch's writes"),
        Code("subagent-drops-key", "error", "04", "a subagent writes a key its schema lacks"),
        Code(
            "list-doubled-by-subagent",
            "error",
            "04",
            "a concatenated key a subagent or a subgraph node hands back whole",
        ),
        Code("prefix-not-invariant", "warning", "05", "prompts diverge before a large shared part"),
        Code("memory-in-react-loop", "warning", "06", "a ReAct loop writes long-term memory"),
        Code("not-inspected", "info", "02", "code whose source the doctor cannot read"),
    )
}
"""Every code the doctor knows, in the order of the series."""

NOTEBOOKS = {
    "01": "01_file_based_storage",
    "02": "02_state_reducer",
    "03": "03_same_turn_visibility",
    "04": "04_subagents",
    "05": "05_prefix_cached_experts",
    "06": "06_tool_only_memory_capture",
}


def listed(names: Iterable[str]) -> str:
    """Names in backticks as a reader says them: "`a`", "`a` and `b`", "`a`, `b` and `c`"."""
    quoted = [f"`{n}`" for n in names]
    return " and ".join(quoted) if len(quoted) < 3 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def they(names: Iterable[str], singular: str, plural: str) -> str:
    """Names and a verb that agrees: ``they(["a"], "writes", "write")`` -> "`a` writes"."""
    names = list(names)
    return f"{listed(names)} {singular if len(names) == 1 else plural}"


@dataclass(frozen=True)
class Finding:
    """One hazard found: ``code``, what it is about, how bad, what to do, where it is taught.

    ``subject`` is the key, tool or file path the finding is about (prefixed by
    ``<subagent>:`` inside a subagent); ``evidence`` is filled by
    :class:`~agentstate.doctor.watch.Watch` with what the run showed; ``file`` and
    ``line`` say where the tool or node the finding is about is defined (``None``
    when the doctor cannot tell), so a pull-request annotation lands on its line.
    """

    code: str
    subject: str
    severity: Severity
    message: str
    notebook: str
    evidence: tuple[str, ...] = field(default=())
    file: str | None = None
    line: int | None = None
    fix: FixKind | None = None
    """Whether ``agentstate doctor --fix`` has an edit for it: ``safe`` (applied by ``--fix``),
    ``unsafe`` (also changes what other writes do: applied with ``--unsafe-fixes``), or
    ``None`` (the code's page shows the fix in words)."""

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (``evidence`` as a list)."""
        out = asdict(self)
        out["evidence"] = list(self.evidence)
        return out


def finding(
    code: str,
    subject: str,
    message: str,
    *,
    severity: Severity | None = None,
    evidence: Iterable[str] = (),
    file: str | None = None,
    line: int | None = None,
) -> Finding:
    """A :class:`Finding` with the code's own severity and notebook unless told otherwise."""
    known = CODES[code]
    return Finding(
        code=code,
        subject=subject,
        severity=severity or known.severity,
        message=message,
        notebook=known.notebook,
        evidence=tuple(evidence),
        file=file,
        line=line,
    )


def info(code: str, subject: str, message: str) -> Finding:
    """An ``info`` finding: something the doctor could not tell, said plainly, never an alarm."""
    return finding(code, subject, message, severity="info")


@dataclass
class Report:
    """The findings about one graph (or one run), sorted: errors first, then by code.

    ``notes`` say what the doctor could not check here (a check skipped because
    its library is not installed); they are not findings.
    """

    graph: str
    findings: list[Finding] = field(default_factory=list)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unique = list(dict.fromkeys(self.findings))
        order = {s: i for i, s in enumerate(SEVERITIES)}
        self.findings = sorted(unique, key=lambda f: (order[f.severity], f.code, f.subject))

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    @property
    def errors(self) -> list[Finding]:
        """The ``error`` findings: data lost or the run fails."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """The ``warning`` findings: likely wrong."""
        return [f for f in self.findings if f.severity == "warning"]

    def codes(self) -> list[str]:
        """The sorted codes of every error and warning (``info`` left out)."""
        return sorted({f.code for f in self.findings if f.severity != "info"})

    def of(self, code: str) -> list[Finding]:
        """The findings with ``code``."""
        return [f for f in self.findings if f.code == code]

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict: the graph's name, its codes and every finding."""
        return {
            "graph": self.graph,
            "codes": self.codes(),
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def rows(self) -> list[dict[str, str]]:
        """One row per finding: code, severity, subject, where (``path:line``), message.

        ``where`` is relative to the current directory when the file is under it
        (``""`` when the doctor cannot tell where the tool or node is defined).
        """
        from pathlib import Path

        from agentstate.doctor.report.places import where

        here = Path.cwd()
        return [
            {
                "code": f.code,
                "severity": f.severity,
                "subject": f.subject,
                "where": where(f.file, f.line, here),
                "message": f.message,
            }
            for f in self.findings
        ]

    def text(self, *, notes: bool = True, where: bool = True) -> str:
        """The table, then the notes (``notes=False``: the table only)."""
        after = [f"note: {n}" for n in self.notes] if notes else []
        return "\n".join([self.table(where=where), *after])

    def table(self, *, where: bool = True) -> str:
        """The findings as a plain-text table; a ``where`` column when a finding has a place."""
        if not self.findings:
            return f"{self.graph}: no findings"
        rows = self.rows()
        columns = ["code", "severity", "subject"]
        if where and any(r["where"] for r in rows):
            columns.append("where")
        widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in columns}
        widths["subject"] = min(40, widths["subject"])
        head = {k: k for k in (*columns, "message")}
        lines = [f"{self.graph}: {len(rows)} finding(s)"]
        for r in (head, *rows):
            lines.append("  ".join(f"{r[k]:<{widths[k]}}" for k in columns) + f"  {r['message']}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        """The table without ``where``: a notebook shows the same output on every machine."""
        return self.text(where=False)

    def _repr_markdown_(self) -> str:
        notes = "".join(f"\n\n*note: {n}*" for n in self.notes)
        return self._markdown_table() + notes

    def _markdown_table(self) -> str:
        if not self.findings:
            return f"**{self.graph}**: no findings"
        lines = [
            f"**{self.graph}**: {len(self.findings)} finding(s)",
            "",
            "| code | severity | subject | message |",
            "|:--|:--|:--|:--|",
        ]
        for r in self.rows():
            keys = ("code", "severity", "subject", "message")  # no place: notebooks show it
            cells = [r[k].replace("|", "\\|").replace("\n", " ") for k in keys]
            lines.append(
                "| "
                + " | ".join(f"`{cells[0]}`" if i == 0 else c for i, c in enumerate(cells))
                + " |"
            )
        return "\n".join(lines)

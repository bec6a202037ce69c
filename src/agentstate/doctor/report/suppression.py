"""Inline suppressions: ``# agentstate: ignore[code]`` where a finding points, as ``# noqa``.

A comment ``# agentstate: ignore[code, ...]`` (or a bare ``# agentstate:
ignore`` for every code) silences a finding of those codes when it sits

- on the line the finding points at (a tool's or node's ``def``, or, for a
  finding without a place of its own in the project, the line that defines
  the graph), or
- on the declaration of the state key the finding is about, in a class body
  (``docs: list  # agentstate: ignore[unreduced-parallel-write]``) or a
  functional ``TypedDict("S", {"docs": list})``, when that class declares
  only keys of the graph (so the same name in another graph's schema is not
  silenced).

Comments are read with ``tokenize`` (a docstring that quotes one is not one)
from the project's own modules: those the target imported from its
directories, never an installed library. A suppression that silences
nothing, or names an unknown code, is reported as ``unused-suppression``
(ruff's ``unused-noqa``, RUF100). Used by :mod:`agentstate.doctor.report.cli` (the
hazards of notebooks 01-06).
"""

from __future__ import annotations

import ast
import functools
import io
import os
import re
import sys
import sysconfig
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentstate.doctor.report.config import UNUSED_SUPPRESSION, known_codes
from agentstate.doctor.report.findings import Code, Finding, Severity

PATTERN = re.compile(
    r"#\s*agentstate:\s*ignore(?:\[(?P<codes>[^\]]*)\]|(?![\w\[-]))", re.IGNORECASE
)
MARK = b"agentstate"

UNUSED = Code(UNUSED_SUPPRESSION, "warning", "", "a suppression comment that silences nothing")
"""The CLI's own code, beside the registry's (it has a page but no lesson)."""

_SELF = Path(__file__).resolve().parents[1]  # the doctor package


@dataclass(frozen=True)
class Suppression:
    """One ``# agentstate: ignore`` comment: where, which codes (``None``: every code)."""

    file: str
    line: int
    codes: tuple[str, ...] | None
    text: str

    def covers(self, code: str) -> bool:
        """True when this comment silences ``code``."""
        return self.codes is None or code in self.codes


@dataclass(frozen=True)
class Declaration:
    """A state key declared in a class body or a functional ``TypedDict``."""

    key: str
    fields: frozenset[str]
    """Every key the same schema declares."""
    first: int
    last: int


@dataclass
class Source:
    """The suppressions of one file, and the key declarations they sit on."""

    path: str
    suppressions: dict[int, Suppression] = field(default_factory=dict)
    declarations: list[Declaration] = field(default_factory=list)
    definitions: frozenset[int] = frozenset()
    """The lines a ``def`` or a module-level assignment (a graph's definition) is on: a
    comment there belongs to the function or graph, which this run may not check."""


def comments(path: str, text: str) -> dict[int, Suppression]:
    """Every suppression comment of ``text`` by line (real comments only, via ``tokenize``)."""
    found: dict[int, Suppression] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = PATTERN.search(token.string)
        if match is None:
            continue
        listed = match.group("codes")
        codes = None if listed is None else tuple(c.strip() for c in listed.split(",") if c.strip())
        found[token.start[0]] = Suppression(path, token.start[0], codes, match.group(0))
    return found


def _typed_dict_call(node: ast.Call) -> ast.Dict | None:
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name != "TypedDict" or len(node.args) < 2 or not isinstance(node.args[1], ast.Dict):
        return None
    return node.args[1]


def definitions(tree: ast.Module) -> frozenset[int]:
    """The ``def`` lines of every function, and every line of a module-level assignment."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines.add(node.lineno)
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign):
            lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return frozenset(lines)


def declarations(text: str | ast.Module) -> list[Declaration]:
    """Every key a class body or a functional ``TypedDict`` declares, with its lines."""
    try:
        tree = ast.parse(text) if isinstance(text, str) else text
    except (SyntaxError, ValueError):
        return []
    out: list[Declaration] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            fields = [
                (s.target.id, s)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            ]
            names = frozenset(name for name, _ in fields)
            for name, s in fields:
                out.append(Declaration(name, names, s.lineno, s.end_lineno or s.lineno))
        elif isinstance(node, ast.Call) and (table := _typed_dict_call(node)) is not None:
            pairs = [
                (k.value, k.lineno, v.end_lineno or k.lineno)
                for k, v in zip(table.keys, table.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
            names = frozenset(key for key, _, _ in pairs)
            out.extend(Declaration(key, names, first, last) for key, first, last in pairs)
    return out


def scan(path: str) -> Source:
    """The suppressions of the file at ``path`` (none when it cannot be read as Python)."""
    source = Source(path)
    try:
        data = Path(path).read_bytes()
    except OSError:
        return source
    if MARK not in data.lower():
        return source
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return source
    source.suppressions = comments(path, text)
    if source.suppressions:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return source
        source.declarations = declarations(tree)
        source.definitions = definitions(tree)
    return source


@functools.cache
def _installed_roots() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    return tuple(Path(r).resolve() for r in roots if r)


def is_project_file(path: str, roots: Iterable[Path]) -> bool:
    """True for a ``.py`` under one of ``roots`` that is not an installed library's or ours."""
    try:
        resolved = Path(path).resolve()
    except (OSError, ValueError):
        return False
    if resolved.suffix != ".py" or resolved.is_relative_to(_SELF):
        return False
    if any(part in ("site-packages", "dist-packages") for part in resolved.parts):
        return False
    if any(resolved.is_relative_to(r) for r in _installed_roots()):
        return False
    return any(resolved.is_relative_to(Path(r).resolve()) for r in roots)


def project_files(roots: Iterable[Path]) -> list[str]:
    """The files of every imported module that lies under ``roots`` (the project's own)."""
    roots = tuple(roots)
    prefixes = tuple({str(r) for r in roots} | {str(Path(r).resolve()) for r in roots})
    files = []
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.startswith(prefixes):
            continue  # most modules are the libraries': not even resolved
        if is_project_file(file, roots):
            files.append(os.path.abspath(file))
    return sorted(set(files))


def key_candidates(subject: str) -> list[str]:
    """The state keys a finding's subject may name, its scope prefix (``sub:``, ``a > ``) off."""
    tail = subject.rsplit(" > ", 1)[-1]
    parts = tail.split(":")
    return [":".join(parts[i:]) for i in range(len(parts))]


class Ledger:
    """The suppressions of a run: which finding each silenced, and which silenced nothing."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self.used: dict[tuple[str, int], set[str]] = {}
        self.enabled: set[str] = set()
        """Codes some graph of the run reports: a suppression of another code is not unused."""
        self.places: set[tuple[str, int]] = set()
        """The ``def`` lines of the checked graphs' nodes and tools, and the lines defining
        the graphs: a comment on another ``def`` or assignment serves a graph not checked."""
        self.schemas: list[frozenset[str]] = []
        """The keys of every checked graph (and graph inside one)."""

    def checked(
        self, places: Iterable[tuple[str | None, int | None]], schemas: Iterable[frozenset[str]]
    ) -> None:
        """Record what one checked graph is made of (see :meth:`unused`)."""
        self.places.update((os.path.abspath(f), n) for f, n in places if f and n)
        self.schemas.extend(schemas)

    def source(self, path: str) -> Source:
        """The scanned file at ``path`` (scanned once)."""
        path = os.path.abspath(path)
        if path not in self.sources:
            self.sources[path] = scan(path)
        return self.sources[path]

    def add(self, files: Iterable[str]) -> None:
        """Scan ``files`` (the project's modules), so their unused suppressions are reported."""
        for file in files:
            self.source(file)

    def _use(self, s: Suppression, code: str) -> Suppression:
        self.used.setdefault((s.file, s.line), set()).add(code)
        return s

    def silences(
        self,
        finding: Finding,
        places: Iterable[tuple[str | None, int | None]],
        channels: frozenset[str],
        roots: Iterable[Path],
    ) -> Suppression | None:
        """The suppression that silences ``finding`` (and records it), or None.

        ``places`` are the lines it points at, in order; ``channels`` the
        graph's keys (a top-level key's schema must declare only those).
        """
        roots = tuple(roots)
        for file, line in places:
            if file and line and is_project_file(file, roots):
                s = self.source(file).suppressions.get(line)
                if s is not None and s.covers(finding.code):
                    return self._use(s, finding.code)
        candidates = key_candidates(finding.subject)
        top = finding.subject in channels
        for source in list(self.sources.values()):
            for d in source.declarations:
                if d.key not in candidates or (top and d.key != finding.subject):
                    continue
                if top and not d.fields <= channels:
                    continue
                for line in range(d.first, d.last + 1):
                    s = source.suppressions.get(line)
                    if s is not None and s.covers(finding.code):
                        return self._use(s, finding.code)
        return None

    def judged(self, source: Source, s: Suppression) -> bool:
        """False for a comment that may serve a graph this run does not check.

        That is a comment on a key of a schema no checked graph has, or on a
        ``def`` or module-level assignment that is no checked graph's node, tool
        or definition. Any other comment is judged (one left behind by a move),
        and so is an unknown code anywhere.
        """
        covering = [d for d in source.declarations if d.first <= s.line <= d.last]
        if covering:
            return any(d.fields <= keys for d in covering for keys in self.schemas)
        if s.line in source.definitions:
            return (source.path, s.line) in self.places
        return True

    def unused(self) -> list[Finding]:
        """A finding per suppression that silenced nothing, or names an unknown code."""
        known = set(known_codes())
        out = []
        for source in self.sources.values():
            for s in source.suppressions.values():
                typo = s.codes is not None and any(c not in known for c in s.codes)
                if not typo and not self.judged(source, s):  # a typo is wrong anywhere
                    continue
                message = self._why_unused(s, known)
                if message is not None:
                    out.append(unused_finding(s, message))
        return sorted(out, key=lambda f: (f.file or "", f.line or 0))

    def _why_unused(self, s: Suppression, known: set[str]) -> str | None:
        used = self.used.get((s.file, s.line), set())
        if s.codes is None:
            return None if used else "it silences no finding on this line or on the key it declares"
        if UNUSED_SUPPRESSION in s.codes:
            return None
        unknown = [c for c in s.codes if c not in known]
        if unknown:
            return f"unknown code {', '.join(f'`{c}`' for c in unknown)}"
        idle = [c for c in s.codes if c in self.enabled and c not in used]
        if not idle:
            return None
        return (
            f"no {', '.join(f'`{c}`' for c in idle)} finding on this line or on the key it declares"
        )


def unused_finding(s: Suppression, why: str, severity: Severity = "warning") -> Finding:
    """The report of one suppression that silences nothing."""
    return Finding(
        code=UNUSED_SUPPRESSION,
        subject=s.text,
        severity=severity,
        message=f"`{s.text}` is unused: {why}; remove it (or fix the code)",
        notebook="",
        file=s.file,
        line=s.line,
    )

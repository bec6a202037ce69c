"""What ``agentstate doctor --diff`` would print for an agent in memory, written nowhere.

The command line loads a graph from a file; a lesson builds its broken agent
in notebook cells, whose code no file on disk holds. :func:`preview_fix`
reads the agent's code where it lives (a file, or a cell ``linecache`` keeps:
:mod:`agentstate.doctor.facts.sources`), runs the checks and the same plan
and edits as ``--fix`` (:mod:`.plan`, :mod:`.apply`), and returns the diff,
each fixed source and the findings left without an edit, with the doctor's
one line why. It writes nothing. Notebooks 01-04 show it beside the fix each
lesson writes by hand, and run the fixed code to prove it.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentstate.doctor.checks.diagnosis import diagnose_facts
from agentstate.doctor.facts import sources
from agentstate.doctor.facts.graph_facts import graph_facts
from agentstate.doctor.fix.apply import FileEdit, Refused, prepare, unified_diff
from agentstate.doctor.fix.plan import Fix, NoFix, plan


class NoSourceError(ValueError):
    """The code behind a graph cannot be read: no file on disk, no cell in ``linecache``."""


@dataclass
class FixPreview:
    """What ``--fix`` (``unsafe``: with ``--unsafe-fixes``) would write, and what it leaves."""

    diff: str
    """The unified diff ``--diff`` prints; a cell is labelled by what it defines."""
    edits: list[FileEdit] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    """The fixes the diff makes."""
    withheld: list[Fix] = field(default_factory=list)
    """Unsafe fixes left out (``unsafe=False``)."""
    no_fix: list[NoFix] = field(default_factory=list)
    """Findings with no automatic edit, each with the doctor's one line why."""
    refused: list[Refused] = field(default_factory=list)

    def fixed(self, name: str) -> str:
        """The fixed code of the top-level class or function ``name``, after the imports of
        its file or cell: what to run to rebuild the agent the fixed way."""
        for edit in self.edits:
            body = ast.parse(edit.after).body
            imports = [n for n in body if isinstance(n, ast.Import | ast.ImportFrom)]
            for node in body:
                if isinstance(node, _DEFINITIONS) and node.name == name:
                    parts = [ast.get_source_segment(edit.after, n) or "" for n in imports]
                    lines = edit.after.splitlines()[_first_line(node) - 1 : node.end_lineno]
                    return "\n".join([*parts, "", *lines, ""])
        edited = ", ".join(cell_label(e) or e.file for e in self.edits) or "nothing"
        raise KeyError(f"preview_fix: no fixed class or function {name!r} (it edits {edited})")

    def load(self, name: str, namespace: Mapping[str, Any]) -> Any:
        """The fixed ``name``, run in a copy of ``namespace`` (a notebook's ``globals()``): the
        class or builder to run the fixed way, while the reader's own ``name`` stays as it was
        (lessons 02 and 03 run what ``--fix`` would write this way)."""
        scope = dict(namespace)
        code = compile(self.fixed(name), f"<fixed {name}>", "exec", dont_inherit=True)
        exec(code, scope)  # as a cell runs it: this module's ``from __future__`` not inherited
        return scope[name]


_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _first_line(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _root(file: str) -> Path:
    """A file's project: the nearest folder above it with ``pyproject.toml`` or ``.git``."""
    folder = Path(file).resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
            return candidate
    return folder


def cell_label(edit: FileEdit) -> str | None:
    """``cell defining PlainState`` for a cell: the first top-level class or function a change
    is in (None for a file: its path names it)."""
    if not sources.is_cell(edit.file):
        return None
    matcher = difflib.SequenceMatcher(None, edit.before.splitlines(), edit.after.splitlines())
    changed = {i + 1 for op, i1, i2, *_ in matcher.get_opcodes() if op != "equal"
               for i in range(i1, max(i2, i1 + 1))}  # fmt: skip
    names = [
        (_first_line(node), node.end_lineno or node.lineno, node.name)
        for node in ast.parse(edit.before).body
        if isinstance(node, _DEFINITIONS)
    ]
    touched = [n for start, end, n in names if changed & set(range(start, end + 1))]
    return f"cell defining {(touched or [n for *_, n in names] or ['code'])[0]}"


def no_edit(code: str, subject: str) -> NoFix:
    """The line a finding of a code without an automatic edit gets."""
    return NoFix(
        code, subject, f"no automatic fix: docs/doctor/{code}.md shows the fix to write by hand"
    )


def preview_fix(graph: object, *, unsafe: bool = False, name: str | None = None) -> FixPreview:
    """The diff ``agentstate doctor --diff`` (``unsafe``: ``--unsafe-fixes``) prints for
    ``graph``, whose code is in files or notebook cells; nothing is written.

    Raises ``NotAGraphError`` for anything but a compiled graph and :class:`NoSourceError`
    when none of its code can be read.
    """
    with sources.reading_cells():
        facts = graph_facts(graph, name)
        files = sorted(facts.own_files())
        if not files:
            raise NoSourceError(
                f"preview_fix: no code of yours behind graph {facts.name!r} can be read (none "
                "in a file outside installed packages, none in a notebook cell linecache holds)"
            )
        roots = tuple(dict.fromkeys(_root(f) for f in files))
        findings = [f for f in diagnose_facts(facts).findings if f.severity != "info"]
        plans = plan(facts, findings, roots)
        planned = {(p.code, p.subject) for p in plans}
        out = FixPreview("")
        out.no_fix = [p for p in plans if isinstance(p, NoFix)] + [
            no_edit(f.code, f.subject) for f in findings if (f.code, f.subject) not in planned
        ]
        fixes = [p for p in plans if isinstance(p, Fix)]
        chosen = [f for f in fixes if f.applicability == "safe" or unsafe]
        out.withheld = [f for f in fixes if f not in chosen]
        out.edits, out.refused = prepare(chosen, roots, source=sources.read)
        out.fixes = [f for e in out.edits for f in e.fixes]
        out.diff = unified_diff(out.edits, roots[0], cell_label)
    return out

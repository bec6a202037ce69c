"""Run a lesson's own definitions in a test, so the test checks the code the reader sees.

:func:`definitions` executes the imports and the named top-level definitions
(functions, classes, simple assignments) of a notebook source in
``notebooks/_src/``, and nothing else: no cell that runs an agent for minutes.
Each cell is parsed at its line in the file, so ``inspect.getsource`` (which
the doctor uses to read a tool's code) finds every definition. Used by
``tests/test_lesson_01.py`` to ``test_lesson_03.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jupytext

LESSONS = Path(__file__).resolve().parents[1] / "notebooks" / "_src"


def _kept(node: ast.stmt, names: set[str]) -> bool:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return node.name in names
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return all(isinstance(t, ast.Name) and t.id in names for t in targets)
    return False


def definitions(lesson: str, names: Iterable[str]) -> dict[str, Any]:
    """The namespace of ``lesson``'s imports and its definitions named in ``names``."""
    path = next(LESSONS.glob(f"{lesson}*.py"))
    wanted, text = set(names), path.read_text()
    kept: list[ast.stmt] = []
    for cell in jupytext.read(path, fmt="py:percent").cells:
        if cell.cell_type != "code":
            continue
        offset = text[: text.index(cell.source)].count("\n")
        tree = ast.parse("\n" * offset + cell.source)
        kept += [node for node in tree.body if _kept(node, wanted)]
    namespace: dict[str, Any] = {}
    module = ast.Module(body=kept, type_ignores=[])
    exec(compile(module, str(path), "exec", dont_inherit=True), namespace)
    missing = wanted - set(namespace)
    assert not missing, f"{path.name} no longer defines {sorted(missing)}"
    return namespace


def code_cells(lesson: str) -> list[str]:
    """The sources of ``lesson``'s code cells, in order."""
    path = next(LESSONS.glob(f"{lesson}*.py"))
    return [c.source for c in jupytext.read(path, fmt="py:percent").cells if c.cell_type == "code"]

"""Print cells, words, imports, asserts, figures and estimated minutes per notebook.

A main lesson is read and run in about 20 minutes: at most 40 cells and 1,200
words of markdown, at most 8 visible asserts and at least one picture
(CONTRIBUTING.md; ``tests/test_lesson_limits.py`` keeps every lesson within
them). ``agentstate`` counts the names a notebook imports from the package: the
fewer, the more of the agent under study a reader sees built on the page.
``figures`` counts Mermaid diagrams in markdown plus images in the built
notebook's committed outputs. The estimate reads prose at 200 words a
minute and code at 20 lines a minute, and adds a quarter of a minute per code
cell for running it and reading its output; it is a yardstick to compare
lessons, not a stopwatch. Used for every notebook.

    python scripts/lesson_stats.py              # every notebook source
    python scripts/lesson_stats.py 03 05        # by number prefix
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks" / "_src"
FOLDERS = {"lesson": SOURCES, "going further": SOURCES / "going_further"}
MAX_CELLS = 40
MAX_WORDS = 1200
MAX_ASSERTS = 8
PROSE_WPM = 200
CODE_LPM = 20
RUN_MINUTES_PER_CELL = 0.25
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")
_ASSERT = re.compile(r"^\s*assert\b", re.M)
_IMAGES = ("image/png", "image/svg+xml")


@dataclass(frozen=True)
class LessonStats:
    """What a reader meets in one notebook: cells, prose, code, and a time estimate."""

    name: str
    kind: str
    cells: int
    code_cells: int
    words: int
    code_lines: int
    asserts: int = 0
    agentstate_names: int = 0
    figures: int = 0

    @property
    def minutes(self) -> float:
        reading = self.words / PROSE_WPM + self.code_lines / CODE_LPM
        return round(reading + self.code_cells * RUN_MINUTES_PER_CELL, 1)

    @property
    def within_limits(self) -> bool:
        return (
            self.cells <= MAX_CELLS
            and self.words <= MAX_WORDS
            and self.asserts <= MAX_ASSERTS
            and self.figures >= 1
        )


def markdown_words(text: str) -> int:
    """Words a reader reads: links count by their text, code spans as words, markup not at all."""
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's address is not read
    text = re.sub(r"^#+ |^\s*[-*] |^\s*\d+\. |\|", " ", text, flags=re.M)
    return len(_WORD.findall(text))


def imported_names(source: str) -> set[str]:
    """The names a cell imports from ``agentstate`` (``from agentstate.x import a, b``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython syntax (``%magic``, top-level ``await`` is fine)
        return set()
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agentstate"
        for alias in node.names
    }


def built_notebook(path: Path) -> Path:
    """The committed ``.ipynb`` built from a source in ``notebooks/_src``."""
    return ROOT / "notebooks" / path.relative_to(SOURCES).with_suffix(".ipynb")


def figures_in(notebook: Path) -> int:
    """Pictures of a built notebook: images in its outputs, and Mermaid diagrams in its
    markdown cells and in markdown outputs (a cell may display a graph's ``draw_mermaid()``).
    0 if it is not built."""
    if not notebook.exists():
        return 0
    cells = json.loads(notebook.read_text())["cells"]
    outputs = [out.get("data", {}) for c in cells for out in c.get("outputs", [])]
    images = sum(1 for data in outputs if any(kind in data for kind in _IMAGES))
    texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    texts += ["".join(data.get("text/markdown", "")) for data in outputs]
    return images + sum(text.count("```mermaid") for text in texts)


def stats_of(path: Path, kind: str = "lesson") -> LessonStats:
    cells = jupytext.read(path, fmt="py:percent").cells
    code = [c for c in cells if c.cell_type == "code"]
    markdown = [c.source for c in cells if c.cell_type == "markdown"]
    built = built_notebook(path) if path.is_relative_to(SOURCES) else path.with_suffix(".ipynb")
    return LessonStats(
        name=path.stem,
        kind=kind,
        cells=len(cells),
        code_cells=len(code),
        words=sum(markdown_words(text) for text in markdown),
        code_lines=sum(1 for c in code for line in c.source.splitlines() if line.strip()),
        asserts=sum(len(_ASSERT.findall(c.source)) for c in code),
        agentstate_names=len(set().union(*(imported_names(c.source) for c in code))),
        figures=figures_in(built),
    )


def all_stats(selection: list[str] | None = None) -> list[LessonStats]:
    found = [
        stats_of(path, kind)
        for kind, folder in FOLDERS.items()
        for path in sorted(folder.glob("[0-9][0-9]_*.py"))
    ]
    if selection:
        found = [s for s in found if any(s.name.startswith(p) for p in selection)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="number prefixes, e.g. 01 02")
    args = parser.parse_args(argv)
    rows = all_stats(args.only)
    print(
        f"{'notebook':<42} {'kind':<14} {'cells':>5} {'words':>6} {'code':>5} "
        f"{'agentstate':>10} {'asserts':>7} {'figures':>7} {'min':>5}  limits"
    )
    for s in rows:
        mark = "ok" if s.within_limits else "OVER"
        print(
            f"{s.name:<42} {s.kind:<14} {s.cells:>5} {s.words:>6} {s.code_lines:>5} "
            f"{s.agentstate_names:>10} {s.asserts:>7} {s.figures:>7} "
            f"{s.minutes:>5}  {mark if s.kind == 'lesson' else '-'}"
        )
    print(
        f"limits for a main lesson: {MAX_CELLS} cells, {MAX_WORDS} words of markdown, "
        f"{MAX_ASSERTS} visible asserts, at least one figure"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

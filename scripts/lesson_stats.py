"""Print cells, markdown words and estimated minutes per notebook of the series.

A main lesson is read and run in about 20 minutes: at most 40 cells and 1,200
words of markdown (CONTRIBUTING.md; ``tests/test_lesson_limits.py``
keeps every lesson within them). The estimate reads prose at 200 words a
minute and code at 20 lines a minute, and adds a quarter of a minute per code
cell for running it and reading its output; it is a yardstick to compare
lessons, not a stopwatch. Used for every notebook.

    python scripts/lesson_stats.py              # every notebook source
    python scripts/lesson_stats.py 03 05        # by number prefix
"""

from __future__ import annotations

import argparse
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
PROSE_WPM = 200
CODE_LPM = 20
RUN_MINUTES_PER_CELL = 0.25
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


@dataclass(frozen=True)
class LessonStats:
    """What a reader meets in one notebook: cells, prose, code, and a time estimate."""

    name: str
    kind: str
    cells: int
    code_cells: int
    words: int
    code_lines: int

    @property
    def minutes(self) -> float:
        reading = self.words / PROSE_WPM + self.code_lines / CODE_LPM
        return round(reading + self.code_cells * RUN_MINUTES_PER_CELL, 1)

    @property
    def within_limits(self) -> bool:
        return self.cells <= MAX_CELLS and self.words <= MAX_WORDS


def markdown_words(text: str) -> int:
    """Words a reader reads: links count by their text, code spans as words, markup not at all."""
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's address is not read
    text = re.sub(r"^#+ |^\s*[-*] |^\s*\d+\. |\|", " ", text, flags=re.M)
    return len(_WORD.findall(text))


def stats_of(path: Path, kind: str = "lesson") -> LessonStats:
    cells = jupytext.read(path, fmt="py:percent").cells
    code = [c for c in cells if c.cell_type == "code"]
    return LessonStats(
        name=path.stem,
        kind=kind,
        cells=len(cells),
        code_cells=len(code),
        words=sum(markdown_words(c.source) for c in cells if c.cell_type == "markdown"),
        code_lines=sum(1 for c in code for line in c.source.splitlines() if line.strip()),
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
    print(f"{'notebook':<42} {'kind':<14} {'cells':>5} {'words':>6} {'code':>5} {'min':>5}  limits")
    for s in rows:
        mark = "ok" if s.kind != "lesson" or s.within_limits else "OVER"
        print(
            f"{s.name:<42} {s.kind:<14} {s.cells:>5} {s.words:>6} {s.code_lines:>5} "
            f"{s.minutes:>5}  {mark if s.kind == 'lesson' else '-'}"
        )
    print(f"limits for a main lesson: {MAX_CELLS} cells, {MAX_WORDS} words of markdown")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Print, per notebook, what a reader meets and how long a careful newcomer needs for it.

Columns: cells, words of markdown, lines of code, lines of code inside a
function or class written on the page (``defined``), names imported from
``agentstate``, visible ``assert`` lines, pictures (images in the built
notebook's saved outputs plus Mermaid diagrams), printed proofs (code cells
whose saved text output nbval compares: not tagged ``nbval-ignore-output``)
and the estimated minutes. A main lesson stays within 40 cells, 1,200 words,
3 visible asserts and at least 3 pictures, its markdown cells at most 45 words
at the median (``median``) and 150 the longest (``longest``), one idea a cell
(``tests/test_lesson_limits.py``);
the series aims at about 25 minutes a lesson.

The yardstick is calibrated on a careful newcomer who reads and runs every
cell (reading, re-reading the figures, waiting for the slow cells). Issue 31
timed one on lessons 01-06 as they stood at commit 569601a: 35-40, 30, 50-60,
40, 30 and 45 minutes. Those lessons' words (1,071-1,157) barely differ, so
prose cannot explain the spread; what does is code the reader must follow
line by line. The constants were fitted by least squares on those six
lessons, with prose fixed at 150 words a minute (a careful reader who
re-reads) and a minute per picture, then rounded:

    minutes = words / 150 + pictures * 1.0 + code cells * 0.4
              + agentstate names * 0.4 + lines defined on the page * 0.28

(0.4 min to run a cell and read its output, 0.4 min to look up each name the
package provides, about 17 s per line of a function or class written in a
cell). On commit 569601a it gives 36.0, 31.2, 55.8, 39.4, 31.4 and 43.7
minutes, each within 1.5 minutes of the measured times (``CALIBRATION``
keeps those inputs; ``tests/test_lesson_limits.py`` checks the fit still
holds). Lines outside a definition got no weight: the per-cell term covers
them. It is a yardstick to compare lessons, not a stopwatch. Used for every
notebook.

A second count, ``cold``, is the cost a cold reader of issue 42 charged, cell
by cell, reading the built notebook with its outputs (the brief those readers
followed): prose at 150 words a minute, a minute a Mermaid diagram, 2.75 for
an image (a super-step figure or a chart), 10 s a code line outside a
definition (imports and call arguments included; comments not), 25 s a line
inside one, 20 s an output:

    cold = words / 150 + diagrams * 1.0 + images * 2.75 + plain lines / 6
           + lines defined on the page * 25 / 60 + outputs / 3

It leaves out the look-ups a reader makes (a term used before it is
defined, a claim checked against an output), so it is a floor. The cold
readings of November 2026 (``COLD_READINGS``: each a helper new to the lesson,
with the inputs the count saw at that commit; six lessons at 67cc60b, 8b667a5
and b76fb81, then lessons 03 and 06 as they were cut) came 1.1 to 10.6 minutes
above it; the 21 that also gave a time without look-ups came within 2.2
minutes below and 5.7 above it (19 within 3). The README's lesson times are
this count, to the nearest 5 minutes.

    python scripts/lesson_stats.py              # every notebook source
    python scripts/lesson_stats.py 03 05        # by number prefix
    python scripts/lesson_stats.py --lessons    # main lessons only, as a Markdown table
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks" / "_src"
FOLDERS = {"lesson": SOURCES, "going further": SOURCES / "going_further"}
MAX_CELLS = 40
MAX_WORDS = 1200
MAX_ASSERTS = 3
MIN_PICTURES = 3  # the mechanism carried by pictures, each replacing prose (issue 42)
MAX_MEDIAN_CELL_WORDS = 45  # one idea a markdown cell
MAX_CELL_WORDS = 150
TARGET_MINUTES = 25
# The yardstick (see the module docstring for how it was fitted).
PROSE_WPM = 150
MINUTES_PER_PICTURE = 1.0
MINUTES_PER_CODE_CELL = 0.4
MINUTES_PER_PACKAGE_NAME = 0.4
MINUTES_PER_DEFINED_LINE = 0.28
# What the newcomer of issue 31 measured, and the inputs the yardstick saw then (commit 569601a):
# name -> (measured minutes low, high), (words, pictures, code cells, agentstate names, defined).
CALIBRATION: dict[str, tuple[tuple[float, float], tuple[int, int, int, int, int]]] = {
    "01_file_based_storage": ((35, 40), (1121, 2, 16, 11, 56)),
    "02_state_reducer": ((30, 30), (1071, 3, 14, 10, 41)),
    "03_same_turn_visibility": ((50, 60), (1157, 3, 18, 12, 118)),
    "04_subagents": ((40, 40), (1157, 1, 15, 10, 74)),
    "05_prefix_cached_experts": ((30, 30), (1132, 2, 11, 15, 41)),
    "06_tool_only_memory_capture": ((45, 45), (1143, 2, 13, 19, 76)),
}
# The cold readers of issue 42, each a helper new to the lesson reading the built notebook at one
# commit: (commit, name, minutes with look-ups, minutes without them or None if not reported,
# the inputs the count saw: words, diagrams, images, plain code lines, lines defined, outputs).
COLD_READINGS: list[tuple[str, str, float, float | None, tuple[int, int, int, int, int, int]]] = [
    ("67cc60b", "01_file_based_storage", 40, None, (833, 3, 1, 74, 27, 7)),
    ("67cc60b", "02_state_reducer", 39, None, (824, 2, 1, 76, 27, 9)),
    ("67cc60b", "03_same_turn_visibility", 44, None, (544, 2, 1, 69, 39, 6)),
    ("67cc60b", "04_subagents", 42, None, (815, 4, 0, 68, 19, 8)),
    ("67cc60b", "05_prefix_cached_experts", 37, None, (823, 2, 2, 66, 23, 7)),
    ("67cc60b", "06_tool_only_memory_capture", 35, None, (715, 3, 0, 60, 31, 7)),
    ("8b667a5", "01_file_based_storage", 30.7, 27.1, (870, 3, 1, 38, 15, 7)),
    ("8b667a5", "02_state_reducer", 33.4, 29.6, (635, 2, 1, 44, 20, 7)),
    ("8b667a5", "03_same_turn_visibility", 33.0, 28.6, (528, 2, 1, 35, 26, 6)),
    ("8b667a5", "04_subagents", 28.3, 25.2, (999, 4, 0, 42, 12, 8)),
    ("8b667a5", "05_prefix_cached_experts", 29.4, 24.8, (671, 2, 2, 29, 18, 8)),
    ("8b667a5", "06_tool_only_memory_capture", 34.2, 28.4, (760, 3, 0, 39, 22, 8)),
    ("b76fb81", "01_file_based_storage", 28.3, 26.2, (902, 3, 1, 38, 15, 7)),
    ("b76fb81", "02_state_reducer", 28.2, 27.0, (669, 2, 1, 43, 20, 7)),
    ("b76fb81", "03_same_turn_visibility", 34.0, 30.2, (541, 2, 1, 35, 26, 6)),
    ("b76fb81", "04_subagents", 29.8, 26.8, (1053, 4, 0, 46, 12, 8)),
    ("b76fb81", "05_prefix_cached_experts", 31.3, 26.6, (674, 2, 2, 29, 18, 8)),
    ("b76fb81", "06_tool_only_memory_capture", 37.2, 32.5, (795, 3, 0, 40, 22, 8)),
    ("b734b90", "03_same_turn_visibility", 34.5, 27.9, (494, 2, 1, 33, 26, 6)),
    ("b734b90", "03_same_turn_visibility", 36.1, 29.3, (494, 2, 1, 33, 26, 6)),
    ("b734b90", "06_tool_only_memory_capture", 30.0, 26.0, (759, 3, 0, 38, 18, 7)),
    ("b734b90", "06_tool_only_memory_capture", 30.4, 25.9, (759, 3, 0, 38, 18, 7)),
    ("ed6f9e6", "03_same_turn_visibility", 32.3, 28.2, (535, 2, 1, 34, 26, 6)),
    ("ed6f9e6", "03_same_turn_visibility", 34.9, 27.5, (535, 2, 1, 34, 26, 6)),
    ("ed6f9e6", "06_tool_only_memory_capture", 30.7, 26.7, (792, 3, 0, 38, 18, 7)),
    ("b6d7e1f", "03_same_turn_visibility", 31.4, 27.6, (585, 2, 1, 34, 26, 6)),
    ("b6d7e1f", "03_same_turn_visibility", 30.9, 27.6, (585, 2, 1, 34, 26, 6)),
]
COLD_SECONDS_PER_LINE = 10
COLD_SECONDS_PER_DEFINED_LINE = 25
COLD_SECONDS_PER_OUTPUT = 20
COLD_MINUTES_PER_IMAGE = 2.75
IGNORE_OUTPUT = "nbval-ignore-output"
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")
_MERMAID = re.compile(r"^```mermaid\n.*?^```", re.M | re.S)
_ASSERT = re.compile(r"^\s*assert\b", re.M)
_IMAGES = ("image/png", "image/svg+xml")
_TEXT = ("text/plain", "text/html", "text/markdown")


def estimate(words: int, pictures: int, code_cells: int, names: int, defined: int) -> float:
    """The yardstick, in minutes (see the module docstring)."""
    minutes = (
        words / PROSE_WPM
        + pictures * MINUTES_PER_PICTURE
        + code_cells * MINUTES_PER_CODE_CELL
        + names * MINUTES_PER_PACKAGE_NAME
        + defined * MINUTES_PER_DEFINED_LINE
    )
    return round(minutes, 1)


def cold_estimate(
    words: int, diagrams: int, images: int, plain: int, defined: int, outputs: int
) -> float:
    """The cold reader's count, in minutes, without look-ups (see the module docstring)."""
    seconds = (
        plain * COLD_SECONDS_PER_LINE
        + defined * COLD_SECONDS_PER_DEFINED_LINE
        + outputs * COLD_SECONDS_PER_OUTPUT
    )
    minutes = words / PROSE_WPM + diagrams * MINUTES_PER_PICTURE
    return round(minutes + images * COLD_MINUTES_PER_IMAGE + seconds / 60, 1)


@dataclass(frozen=True)
class LessonStats:
    """What a reader meets in one notebook: cells, prose, code, proofs, and a time estimate."""

    name: str
    kind: str
    cells: int
    code_cells: int
    words: int
    code_lines: int
    defined_lines: int = 0
    asserts: int = 0
    agentstate_names: int = 0
    figures: int = 0
    printed_proofs: int = 0
    median_cell_words: float = 0
    longest_cell_words: int = 0
    plain_lines: int = 0
    images: int = 0
    outputs: int = 0

    @property
    def minutes(self) -> float:
        return estimate(
            self.words, self.figures, self.code_cells, self.agentstate_names, self.defined_lines
        )

    @property
    def cold_minutes(self) -> float:
        return cold_estimate(
            self.words,
            self.figures - self.images,
            self.images,
            self.plain_lines,
            self.defined_lines,
            self.outputs,
        )

    @property
    def within_limits(self) -> bool:
        return (
            self.cells <= MAX_CELLS
            and self.words <= MAX_WORDS
            and self.asserts <= MAX_ASSERTS
            and self.figures >= MIN_PICTURES
            and self.median_cell_words <= MAX_MEDIAN_CELL_WORDS
            and self.longest_cell_words <= MAX_CELL_WORDS
        )


def markdown_words(text: str) -> int:
    """Words a reader reads: links count by their text, code spans as words, markup not at all.

    A Mermaid diagram is a picture (it counts, with its minute, among the pictures), not words.
    """
    text = _MERMAID.sub(" ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's address is not read
    text = re.sub(r"^#+ |^\s*[-*] |^\s*\d+\. |\|", " ", text, flags=re.M)
    return len(_WORD.findall(text))


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:  # a cell with IPython syntax (``%magic``; top-level ``await`` is fine)
        return None


def imported_names(source: str) -> set[str]:
    """The names a cell imports from ``agentstate`` (``from agentstate.x import a, b``)."""
    tree = _tree(source)
    if tree is None:
        return set()
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agentstate"
        for alias in node.names
    }


def defined_lines(source: str) -> int:
    """Non-blank lines of the functions and classes a cell defines at its top level."""
    tree = _tree(source)
    if tree is None:
        return 0
    lines = source.splitlines()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return sum(
        1
        for node in tree.body
        if isinstance(node, kinds)
        for line in lines[node.lineno - 1 : node.end_lineno]
        if line.strip()
    )


def plain_lines(source: str) -> int:
    """Code lines read outside a definition: not blank, not a comment, not a cell magic."""
    read = sum(
        1 for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )
    tree = _tree(source)
    if tree is None:
        return read
    lines = source.splitlines()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    inside = sum(
        1
        for node in tree.body
        if isinstance(node, kinds)
        for line in lines[node.lineno - 1 : node.end_lineno]
        if line.strip() and not line.lstrip().startswith("#")
    )
    return read - inside


def built_notebook(path: Path) -> Path:
    """The committed ``.ipynb`` built from a source in ``notebooks/_src``."""
    return ROOT / "notebooks" / path.relative_to(SOURCES).with_suffix(".ipynb")


def _built_cells(notebook: Path) -> list[dict]:
    return json.loads(notebook.read_text())["cells"] if notebook.exists() else []


def figures_in(notebook: Path) -> int:
    """Pictures of a built notebook: images in its outputs, and Mermaid diagrams in its
    markdown cells and in markdown outputs (a cell may display a graph's ``draw_mermaid()``).
    0 if it is not built."""
    cells = _built_cells(notebook)
    outputs = [out.get("data", {}) for c in cells for out in c.get("outputs", [])]
    images = sum(1 for data in outputs if any(kind in data for kind in _IMAGES))
    texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    texts += ["".join(data.get("text/markdown", "")) for data in outputs]
    return images + sum(text.count("```mermaid") for text in texts)


def images_in(notebook: Path) -> int:
    """Images among a built notebook's saved outputs (figures, charts)."""
    outputs = [out.get("data", {}) for c in _built_cells(notebook) for out in c.get("outputs", [])]
    return sum(1 for data in outputs if any(kind in data for kind in _IMAGES))


def outputs_in(notebook: Path) -> int:
    """Code cells of a built notebook with a saved output to read."""
    return sum(1 for c in _built_cells(notebook) if c["cell_type"] == "code" and c.get("outputs"))


def printed_proofs(notebook: Path) -> int:
    """Code cells of a built notebook whose saved text output nbval compares strictly."""
    count = 0
    for cell in _built_cells(notebook):
        if cell["cell_type"] != "code" or IGNORE_OUTPUT in cell.get("metadata", {}).get("tags", []):
            continue
        outputs = cell.get("outputs", [])
        if any(o.get("output_type") == "stream" for o in outputs) or any(
            kind in o.get("data", {}) and not set(_IMAGES) & set(o.get("data", {}))
            for o in outputs
            for kind in _TEXT
        ):
            count += 1
    return count


def stats_of(path: Path, kind: str = "lesson") -> LessonStats:
    cells = jupytext.read(path, fmt="py:percent").cells
    code = [c for c in cells if c.cell_type == "code"]
    markdown = [c.source for c in cells if c.cell_type == "markdown"]
    per_cell = [markdown_words(text) for text in markdown]
    built = built_notebook(path) if path.is_relative_to(SOURCES) else path.with_suffix(".ipynb")
    return LessonStats(
        name=path.stem,
        kind=kind,
        cells=len(cells),
        code_cells=len(code),
        words=sum(markdown_words(text) for text in markdown),
        code_lines=sum(1 for c in code for line in c.source.splitlines() if line.strip()),
        defined_lines=sum(defined_lines(c.source) for c in code),
        asserts=sum(len(_ASSERT.findall(c.source)) for c in code),
        agentstate_names=len(set().union(*(imported_names(c.source) for c in code))),
        figures=figures_in(built),
        printed_proofs=printed_proofs(built),
        median_cell_words=statistics.median(per_cell) if per_cell else 0,
        longest_cell_words=max(per_cell, default=0),
        plain_lines=sum(plain_lines(c.source) for c in code),
        images=images_in(built),
        outputs=outputs_in(built),
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


def markdown_table(rows: list[LessonStats]) -> str:
    """The main lessons as the closing notes of issue 31 report them."""
    head = (
        "| lesson | cells | words | median cell | longest cell | visible asserts | pictures "
        "| printed proofs | code lines | minutes | cold |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [
        f"| {s.name} | {s.cells} | {s.words} | {s.median_cell_words:g} | "
        f"{s.longest_cell_words} | {s.asserts} | {s.figures} | {s.printed_proofs} | "
        f"{s.code_lines} | {s.minutes} | {s.cold_minutes} |"
        for s in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="number prefixes, e.g. 01 02")
    parser.add_argument("--lessons", action="store_true", help="main lessons, as Markdown")
    args = parser.parse_args(argv)
    rows = all_stats(args.only)
    if args.lessons:
        print(markdown_table([s for s in rows if s.kind == "lesson"]))
        return 0
    print(
        f"{'notebook':<32} {'kind':<13} {'cells':>5} {'words':>5} {'median':>6} {'longest':>7} "
        f"{'code':>4} {'defined':>7} {'agentstate':>10} {'asserts':>7} {'pictures':>8} "
        f"{'proofs':>6} {'min':>5} {'cold':>5}  limits"
    )
    for s in rows:
        mark = "ok" if s.within_limits else "OVER"
        print(
            f"{s.name:<32} {s.kind:<13} {s.cells:>5} {s.words:>5} {s.median_cell_words:>6g} "
            f"{s.longest_cell_words:>7} {s.code_lines:>4} "
            f"{s.defined_lines:>7} {s.agentstate_names:>10} {s.asserts:>7} {s.figures:>8} "
            f"{s.printed_proofs:>6} {s.minutes:>5} {s.cold_minutes:>5}  "
            f"{mark if s.kind == 'lesson' else '-'}"
        )
    print(
        f"limits for a main lesson: {MAX_CELLS} cells, {MAX_WORDS} words of markdown, "
        f"{MAX_ASSERTS} visible asserts, at least {MIN_PICTURES} pictures, markdown cells of "
        f"at most {MAX_MEDIAN_CELL_WORDS} words at the median and {MAX_CELL_WORDS} the longest; "
        "target about "
        f"{TARGET_MINUTES} minutes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every main lesson is read and run in about 20 minutes, with the test machinery out of sight.

Limits of the series' design (CONTRIBUTING.md): at most 40 cells and 1,200 words of
markdown (``scripts/lesson_stats.py`` prints them with an estimate in
minutes). Depth that does not fit lives in ``notebooks/_src/going_further/``,
linked from the lesson's Summary. Lesson and going-further cells carry nbval's
cell tags instead of comment markers, and no lint pragma.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks" / "_src"
LESSONS = sorted(SOURCES.glob("[0-9][0-9]_*.py"))
FURTHER = sorted((SOURCES / "going_further").glob("[0-9][0-9]_*.py"))
READER_FACING = LESSONS + FURTHER
MACHINERY = re.compile(r"#\s*(NBVAL_\w+|fmt:\s*\w+|noqa\b|ruff:\s*noqa|type:\s*ignore)", re.I)

_spec = importlib.util.spec_from_file_location("lesson_stats", ROOT / "scripts/lesson_stats.py")
lesson_stats = importlib.util.module_from_spec(_spec)
sys.modules["lesson_stats"] = lesson_stats  # dataclasses look their module up
_spec.loader.exec_module(lesson_stats)


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_main_lesson_fits_in_twenty_minutes(path):
    s = lesson_stats.stats_of(path)
    assert s.cells <= lesson_stats.MAX_CELLS, f"{path.name}: {s.cells} cells"
    assert s.words <= lesson_stats.MAX_WORDS, f"{path.name}: {s.words} words of markdown"


@pytest.mark.parametrize("path", READER_FACING, ids=[p.stem for p in READER_FACING])
def test_no_test_machinery_in_reader_cells(path):
    cells = jupytext.read(path, fmt="py:percent").cells
    found = [
        f"cell {i}: {m.group(0)}"
        for i, cell in enumerate(cells)
        if cell.cell_type == "code"
        for m in MACHINERY.finditer(cell.source)
    ]
    assert found == [], f"{path.name}: use cell tags (nbval-ignore-output), not comments"


@pytest.mark.parametrize("path", FURTHER, ids=[p.stem for p in FURTHER])
def test_a_going_further_notebook_is_linked_from_its_lesson_summary(path):
    lesson = next((p for p in LESSONS if p.name[:2] == path.name[:2]), None)
    assert lesson is not None, f"{path.name}: no main lesson {path.name[:2]}"
    text = lesson.read_text()
    summary = text.split("## Summary", 1)[-1]
    assert f"going_further/{path.stem}.ipynb" in summary, (
        f"{lesson.name}'s Summary does not link going_further/{path.stem}.ipynb"
    )
    first = jupytext.read(path, fmt="py:percent").cells[0].source.splitlines()[0]
    assert re.fullmatch(rf"# {path.name[:2]}\w? · Going further: \S.*", first), first


def test_the_word_count_reads_prose_not_markup():
    text = (
        "## Goals\n- Reproduce [the loss](01_file_based_storage.ipynb) in `five` calls.\n| a | b |"
    )
    assert lesson_stats.markdown_words(text) == 9  # Goals Reproduce the loss in five calls a b


def test_the_limits_check_catches_a_long_lesson(tmp_path):
    long = tmp_path / "07_long.py"
    long.write_text("".join(f"# %% [markdown]\n# {'word ' * 40}\n\n" for _ in range(41)))
    s = lesson_stats.stats_of(long)
    assert (s.cells, s.words, s.within_limits) == (41, 1640, False)

"""Every main lesson is read and run in about 25 minutes, with the test machinery out of sight.

Limits of the series' design (CONTRIBUTING.md): at most 40 cells and 1,200 words of
markdown (``scripts/lesson_stats.py`` prints them with an estimate in
minutes), at most 3 visible ``assert`` lines (a printed value is a checked
value: nbval compares it; exhaustive checks live in pytest), at least one
picture (a saved figure or a Mermaid diagram; at least 3 a lesson, issue 42),
markdown cells of one idea (median at most 45 words, none over 150), in
lessons 01-03 at least one
state-flow picture (``draw_superstep``), and no private library name (one
with a leading underscore). The yardstick of ``lesson_stats.py`` still
reproduces the newcomer's measured times it was fitted on.
Depth that does not fit lives in ``notebooks/_src/going_further/``,
linked from the lesson's Summary. Lesson and going-further cells carry nbval's
cell tags instead of comment markers, and no lint pragma.
"""

from __future__ import annotations

import importlib.util
import json
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
STATE_FLOW = ("01", "02", "03")  # the lessons that draw a super-step as state flow
ASSERT = re.compile(r"^\s*assert\b", re.M)
# A name with one leading underscore, as a word or an attribute (`_x`, `obj._x`); dunders
# such as `__name__` are not private.
PRIVATE = re.compile(r"(?<![\w.])_[A-Za-z]\w*|\._[A-Za-z]\w*")
MACHINERY = re.compile(r"#\s*(NBVAL_\w+|fmt:\s*\w+|noqa\b|ruff:\s*noqa|type:\s*ignore)", re.I)

_spec = importlib.util.spec_from_file_location("lesson_stats", ROOT / "scripts/lesson_stats.py")
lesson_stats = importlib.util.module_from_spec(_spec)
sys.modules["lesson_stats"] = lesson_stats  # dataclasses look their module up
_spec.loader.exec_module(lesson_stats)


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_main_lesson_fits_in_the_cell_and_word_limits(path):
    s = lesson_stats.stats_of(path)
    assert s.cells <= lesson_stats.MAX_CELLS, f"{path.name}: {s.cells} cells"
    assert s.words <= lesson_stats.MAX_WORDS, f"{path.name}: {s.words} words of markdown"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_main_lesson_carries_its_mechanism_in_pictures_and_short_cells(path):
    """At least 3 pictures; markdown cells of one idea: median 45 words, none over 150."""
    s = lesson_stats.stats_of(path)
    assert s.figures >= lesson_stats.MIN_PICTURES, f"{path.name}: {s.figures} pictures"
    assert s.median_cell_words <= lesson_stats.MAX_MEDIAN_CELL_WORDS, (
        f"{path.name}: median markdown cell {s.median_cell_words} words"
    )
    cells = jupytext.read(path, fmt="py:percent").cells
    long = [
        (i, n)
        for i, c in enumerate(cells)
        if c.cell_type == "markdown"
        and (n := lesson_stats.markdown_words(c.source)) > lesson_stats.MAX_CELL_WORDS
    ]
    assert long == [], f"{path.name}: (cell, words) over {lesson_stats.MAX_CELL_WORDS}: {long}"


def test_the_cell_length_limits_catch_long_cells(tmp_path):
    long = tmp_path / "07_long.py"
    cells = ["# %% [markdown]\n# " + "word " * n + "\n\n" for n in (10, 46, 151)]
    long.write_text("".join(cells))
    s = lesson_stats.stats_of(long)
    assert (s.median_cell_words, s.longest_cell_words, s.within_limits) == (46, 151, False)


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
    drawn = "Two steps:\n```mermaid\nflowchart LR\n    a[one] --> b[two]\n```\nthen more."
    assert lesson_stats.markdown_words(drawn) == 4  # a diagram is a picture, not words


def test_the_limits_check_catches_a_long_lesson(tmp_path):
    long = tmp_path / "07_long.py"
    long.write_text("".join(f"# %% [markdown]\n# {'word ' * 40}\n\n" for _ in range(41)))
    s = lesson_stats.stats_of(long)
    assert (s.cells, s.words, s.within_limits) == (41, 1640, False)


def pictures(path: Path) -> int:
    """Saved figures and Mermaid diagrams (in markdown cells or outputs) of a built notebook."""
    return lesson_stats.figures_in(path)


def visible_asserts(path: Path) -> int:
    cells = jupytext.read(path, fmt="py:percent").cells
    return sum(len(ASSERT.findall(c.source)) for c in cells if c.cell_type == "code")


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_main_lesson_proves_with_few_asserts_and_shows_a_picture(path):
    built = ROOT / "notebooks" / f"{path.stem}.ipynb"
    limit = lesson_stats.MAX_ASSERTS
    assert visible_asserts(path) <= limit, (
        f"{path.name}: {visible_asserts(path)} assert lines; keep {limit} a reader learns "
        "from, print the rest, and move equality checks to tests/test_lesson_NN.py"
    )
    assert pictures(built) >= 1, f"{built.name}: no saved figure and no Mermaid diagram"


def state_flow_pictures(built: Path) -> int:
    """Saved images drawn by a cell that calls ``draw_superstep``."""
    cells = json.loads(built.read_text())["cells"]
    return sum(
        1
        for c in cells
        if c["cell_type"] == "code" and "draw_superstep(" in "".join(c["source"])
        for out in c.get("outputs", [])
        if "image/png" in out.get("data", {})
    )


@pytest.mark.parametrize("number", STATE_FLOW)
def test_lessons_01_to_03_draw_a_super_step_as_state_flow(number):
    built = next((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    assert state_flow_pictures(built) >= 1, f"{built.name}: no draw_superstep picture saved"


def test_the_yardstick_reproduces_the_newcomers_measured_times():
    for name, ((low, high), inputs) in lesson_stats.CALIBRATION.items():
        minutes = lesson_stats.estimate(*inputs)
        assert low - 2 <= minutes <= high + 2, f"{name}: {minutes} min, measured {low}-{high}"


def test_the_cold_count_is_a_floor_close_under_every_cold_reading():
    """Look-ups are not counted, so a reader takes longer; never by more than 11 minutes."""
    for commit, name, read, _, inputs in lesson_stats.COLD_READINGS:
        minutes = lesson_stats.cold_estimate(*inputs)
        assert minutes <= read <= minutes + 11, f"{name}@{commit}: counted {minutes}, read {read}"


def test_the_cold_count_is_within_minutes_of_a_reading_without_look_ups():
    """Without look-ups the count is what a reader spends, give or take one reader's pace."""
    without = [r for r in lesson_stats.COLD_READINGS if r[3] is not None]
    assert len(without) >= 12
    for commit, name, _, read, inputs in without:
        minutes = lesson_stats.cold_estimate(*inputs)
        assert minutes - 3 <= read <= minutes + 6, f"{name}@{commit}: {minutes} vs {read}"


def test_the_cold_count_reads_code_lines_outside_definitions_and_skips_comments():
    source = "import a\n# why\ndef f(x):\n    # stall\n    return x\n\ny = f(\n    2,\n)\n"
    assert lesson_stats.plain_lines(source) == 4  # import, y = f(, 2, ), not f's lines
    assert lesson_stats.defined_lines(source) == 3  # def, its comment, return
    assert lesson_stats.plain_lines("%%time\nx = 1\n") == 2  # a magic cell: every line read
    words, diagrams, images, plain, defined, outputs = 150, 1, 1, 6, 12, 3
    counted = lesson_stats.cold_estimate(words, diagrams, images, plain, defined, outputs)
    assert counted == 11.8  # 1 + 1 + 2.75 + 1 + 5 + 1 minutes


def test_the_yardstick_counts_lines_defined_on_the_page_and_printed_proofs(tmp_path):
    source = "def f(x):\n    y = x\n\n    return y\n\nclass C:\n    a = 1\nz = f(2)\n"
    assert lesson_stats.defined_lines(source) == 5  # 3 of f, 2 of C; the call is not
    built = tmp_path / "07_x.ipynb"
    cells = [
        {"cell_type": "code", "source": ["1"], "metadata": {}, "outputs": [
            {"output_type": "execute_result", "data": {"text/plain": ["1"]}}]},
        {"cell_type": "code", "source": ["p"], "metadata": {"tags": ["nbval-ignore-output"]},
         "outputs": [{"output_type": "stream", "text": ["varies"]}]},
        {"cell_type": "code", "source": ["fig"], "metadata": {}, "outputs": [
            {"output_type": "display_data", "data": {"image/png": "", "text/plain": ["<F>"]}}]},
        {"cell_type": "code", "source": ["print(1)"], "metadata": {}, "outputs": [
            {"output_type": "stream", "text": ["1"]}]},
    ]  # fmt: skip
    built.write_text(json.dumps({"cells": cells}))
    assert lesson_stats.printed_proofs(built) == 2  # the value and the print, not the figure


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_main_lesson_names_no_private_library_name(path):
    cells = jupytext.read(path, fmt="py:percent").cells
    texts = [re.sub(r"\]\([^)]*\)", "]", c.source) for c in cells]  # not in a link's address
    found = sorted({m.group(0) for text in texts for m in PRIVATE.finditer(text)})
    assert found == [], f"{path.name}: private names {found}; move such depth to going further"


def test_the_picture_assert_and_private_name_checks_are_not_vacuous(tmp_path):
    source = tmp_path / "07_x.py"
    source.write_text(
        "# %%\n" + "assert True\n" * 4 + "from m import _hidden\nx.__name__, obj._field\n"
    )
    assert visible_asserts(source) == 4 > lesson_stats.MAX_ASSERTS
    text = source.read_text()
    assert {m.group(0) for m in PRIVATE.finditer(text)} == {"_hidden", "._field"}
    built = tmp_path / "07_x.ipynb"
    built.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["text"]}]}))
    assert pictures(built) == 0
    built.write_text(
        json.dumps(
            {"cells": [{"cell_type": "markdown", "source": ["```mermaid\n", "graph LR\n```"]}]}
        )
    )
    assert pictures(built) == 1


def test_the_readmes_lesson_times_are_the_cold_count():
    """The README's "about N min" per lesson is lesson_stats' cold count to the nearest 5."""
    readme = (ROOT / "README.md").read_text()
    for path in LESSONS:
        minutes = lesson_stats.stats_of(path).cold_minutes
        row = next(line for line in readme.splitlines() if line.startswith(f"| {path.stem[:2]} "))
        assert row.endswith(f"| about {5 * round(minutes / 5)} min |"), (path.stem, minutes, row)

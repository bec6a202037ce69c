"""A saved notebook reads sensibly where widgets are not drawn (issue 31, item 8).

Two outputs used to read badly in a saved notebook: a tqdm bar frozen at
"0%| 0/200", as if the cell never ran, and a knob shown as
``interactive(children=...`` in an untrusted notebook (plain ``jupyter lab``,
GitHub). :func:`agentstate.lessons.display.progress` leaves a line of text where its
bar was; ``scripts/build_notebooks.py`` writes a knob's text form from its
saved state. These tests run both for real and check every committed notebook.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from agentstate.lessons.display import progress

ROOT = Path(__file__).resolve().parents[1]
SAVED = sorted((ROOT / "notebooks").rglob("[0-9][0-9]_*.ipynb"))
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FROZEN = ("0%|", "| 0/")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

_spec = importlib.util.spec_from_file_location(
    "build_notebooks", ROOT / "scripts/build_notebooks.py"
)
build = importlib.util.module_from_spec(_spec)
sys.modules["build_notebooks"] = build
_spec.loader.exec_module(build)


def texts(path: Path) -> list[str]:
    """The text form of every saved output of a notebook."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            found.append("".join(out.get("text", "")))
            found.append("".join(out.get("data", {}).get("text/plain", "")))
    return found


@pytest.mark.parametrize("path", SAVED, ids=[str(p.relative_to(ROOT / "notebooks")) for p in SAVED])
def test_no_saved_output_is_a_frozen_bar_or_a_knob_as_raw_widget_text(path):
    outputs = texts(path)
    assert not [t for t in outputs if all(mark in t for mark in FROZEN)], "a bar frozen at 0%"
    assert not [t for t in outputs if t.startswith("interactive(children=")], "a knob as a repr"


def test_a_bar_run_in_a_kernel_is_saved_as_its_summary_line(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from agentstate.lessons.display import progress\n"
            "total = sum(i for i in progress(range(40), desc='turns', done='40 turns run'))\n"
            "total"
        ),
        nbformat.v4.new_code_cell(
            "with progress(total=3, desc='agents', unit='agents') as bar:\n"
            "    for _ in range(3):\n"
            "        bar.update()"
        ),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    first, second = ([o for o in c.outputs] for c in nb.cells)
    # the bar's display, emptied when the loop ended, then the printed line and the value
    assert [o.output_type for o in first] == ["display_data", "stream", "execute_result"]
    assert first[0].data == {} and first[1].text == "40 turns run\n"
    assert first[2].data["text/plain"] == "780"
    assert second[0].data == {} and second[1].text.startswith("agents: 3 of 3 agents in ")
    frozen = [o for c in nb.cells for o in c.outputs if "0%|" in str(o)]
    assert frozen == []


def test_outside_a_kernel_the_bar_counts_and_yields_everything(capsys):
    bar = progress(range(5), desc="turns")
    assert list(bar) == [0, 1, 2, 3, 4] and bar.n == 5
    assert bar.summary().startswith("turns: 5 of 5 it in ")
    with pytest.raises(TypeError, match="progress"):
        list(progress(total=3))


def test_a_knob_reads_as_its_settings_and_what_it_shows():
    interact = {"_dom_classes": ["widget-interact"], "children": ["IPY_MODEL_s", "IPY_MODEL_d"]}
    interact["children"].append("IPY_MODEL_o")
    slider = {"description": "calls", "value": 5, "min": 1, "max": 20}
    dropdown = {"description": "layout", "_options_labels": ["one", "many"], "index": 1}
    shown = {"outputs": [{"output_type": "display_data", "data": {"text/plain": "kept  5"}}]}
    state = {
        "k": {"model_name": "VBoxModel", "state": interact},
        "s": {"model_name": "IntSliderModel", "state": slider},
        "d": {"model_name": "DropdownModel", "state": dropdown},
        "o": {"model_name": "OutputModel", "state": shown},
    }
    assert build.knob_text("k", state).splitlines() == [
        build.KNOB_NOTE,
        "Its settings: calls = 5 (1 to 20); layout = many (one of: one, many).",
        "At these settings it shows:",
        "kept  5",
    ]
    assert build.knob_text("s", state) is None  # a slider alone is not an interact knob


def saved_knobs(path: Path) -> list[str]:
    """The text form of each widget a notebook's knob cell (the one importing ipywidgets) saved."""
    return [
        "".join(out["data"]["text/plain"])
        for cell in json.loads(path.read_text())["cells"]
        if cell["cell_type"] == "code" and "import ipywidgets" in "".join(cell["source"])
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]


# Each main lesson's knob as saved: a setting it starts at, and the last line it shows there
# (what the lesson claims at that setting; nbval does not compare a widget's output).
KNOBS = {
    "01_file_based_storage": ("layout = one file", "1"),  # one field of five kept
    "02_state_reducer": ("state_class = plain", "'InvalidUpdateError'"),
    "03_same_turn_visibility": ("turn_cache = True", "5"),
    "04_subagents": ("declared by = the parent only", "the parent only none 0 fields"),
    "05_prefix_cached_experts": (
        "chapter = 0 (0 to 28)",
        "the desk's instructions 290 0.3% system message 1, line 4: Request id: 000|0 / 1 / 2",
    ),
    "06_tool_only_memory_capture": (  # message 8: the guard's one entry is the chat's message
        "msg_idx = 8 (1 to 14)",
        "guard assistant Book the Pena Palace timed ticket a few days… ok",
    ),
}


def test_every_main_lesson_has_its_knob_listed():
    assert sorted(KNOBS) == [p.stem for p in LESSONS]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_each_lessons_saved_knob_reads_as_its_settings_and_what_it_shows(path):
    """A plain ``widgets.interact`` in every main lesson: as GitHub or an untrusted JupyterLab
    shows it, its one saved knob reads as its settings and what the cell showed at them (the
    build took both from the saved widget state), never as ``interactive(children=...``."""
    (text,) = saved_knobs(path)
    lines = text.splitlines()
    setting, shows = KNOBS[path.stem]
    assert lines[0] == build.KNOB_NOTE
    assert lines[1].startswith("Its settings: ") and setting in lines[1]
    assert lines[2] == "At these settings it shows:"
    assert " ".join(lines[-1].split()) == shows
    source = (ROOT / "notebooks" / "_src" / f"{path.stem}.py").read_text()
    assert "widgets.interact(" in source and "agentstate.knobs" not in source

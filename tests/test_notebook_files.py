"""The committed notebooks as files: what JupyterLab would write, and widgets that render.

Opening a notebook in JupyterLab starts its kernel and copies the kernel's
``language_info`` and kernelspec into the notebook; if the committed metadata
differs, the notebook is marked modified and autosave rewrites it. So the
committed metadata must equal what the kernel reports. And every knob's
widget view must point at saved widget state, or JupyterLab, GitHub and
nbviewer show the text ``interactive(children=...`` instead of the widget.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import uuid
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parents[1]
# The lessons and their going-further notebooks (distinct names, so they can sit side by side).
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks" / "going_further").glob("[0-9][0-9]_*.ipynb")
)
IDS = [p.stem for p in NOTEBOOKS]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
REFERENCE = re.compile(r"IPY_MODEL_([0-9a-f]+)")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def build_script():
    path = ROOT / "scripts" / "build_notebooks.py"
    spec = importlib.util.spec_from_file_location("build_notebooks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernel_reports() -> dict:
    """What JupyterLab would write: the kernelspec it starts and the kernel's language_info."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reply = client.kernel_info(reply=True, timeout=60)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    kernelspec = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    return {"kernelspec": kernelspec, "language_info": reply["content"]["language_info"]}


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_metadata_is_what_the_kernel_reports(path, kernel_reports):
    metadata = load(path)["metadata"]
    assert set(metadata) <= {"kernelspec", "language_info", "widgets"}
    assert metadata["kernelspec"] == kernel_reports["kernelspec"]
    assert metadata["language_info"] == kernel_reports["language_info"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_widget_view_has_saved_state(path):
    nb = load(path)
    views = [
        out["data"][WIDGET_VIEW]["model_id"]
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]
    if not views and path.parent.name == "going_further":
        return  # a going-further notebook needs no knob (DESIGN.md); a lesson does
    assert views, "no knob: every lesson has a widget"
    saved = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {})
    assert (saved.get("version_major"), saved.get("version_minor")) == (2, 0)
    state = saved.get("state", {})
    missing = [v for v in views if v not in state]
    dangling = sorted(set(REFERENCE.findall(json.dumps(state))) - set(state))
    assert (missing, dangling) == ([], [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_knob_shows_its_result_before_it_is_run(path):
    """A knob's output area is saved with its first result, so an unrun notebook shows it.

    ``widgets.interactive(...)`` left as a cell's value computes its first result before
    the widget is displayed, and the build saved an empty output area; ``interact`` does not.
    """
    state = load(path)["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    areas = [m["state"] for m in state.values() if m["model_name"] == "OutputModel"]
    assert [bool(area["outputs"]) for area in areas] == [True] * len(areas)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_execution_counts_run_one_to_n(path):
    code = [c for c in load(path)["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))


def fake_executed_notebook():
    """Two widgets as nbclient saves them: a random id per model, references by id."""
    box, slider = uuid.uuid4().hex, uuid.uuid4().hex
    state = {
        box: {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{slider}"]}},
        slider: {"model_name": "IntSliderModel", "state": {"value": 5}},
    }
    view = {"model_id": box, "version_major": 2, "version_minor": 0}
    return {
        "cells": [{"outputs": [{"data": {WIDGET_VIEW: view, "text/plain": "VBox()"}}]}],
        "metadata": {"widgets": {WIDGET_STATE: {"state": state, "version_major": 2}}},
    }


def test_build_gives_widgets_the_same_ids_on_every_build():
    import nbformat

    build = build_script()
    first = build.renumber_widgets(nbformat.from_dict(fake_executed_notebook()), "01_x")
    second = build.renumber_widgets(nbformat.from_dict(fake_executed_notebook()), "01_x")
    assert first == second
    state = first.metadata.widgets[WIDGET_STATE]["state"]
    box = first.cells[0].outputs[0].data[WIDGET_VIEW]["model_id"]
    (slider,) = REFERENCE.findall(json.dumps(state[box]))
    assert set(state) == {box, slider}
    assert state[slider]["state"] == {"value": 5}


def test_build_keeps_what_jupyterlab_writes_and_drops_the_rest():
    import nbformat

    nb = nbformat.from_dict(copy.deepcopy(fake_executed_notebook()))
    language_info = {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"}
    nb.metadata.update(language_info=language_info, papermill={"x": 1})
    nb.cells[0].update(cell_type="code", source="", metadata={"tags": ["t"], "scrolled": True})
    cleaned = build_script().clean(nb, "01_x")
    assert set(cleaned.metadata) == {"kernelspec", "language_info", "widgets"}
    assert cleaned.metadata.language_info == language_info
    assert cleaned.cells[0].metadata == {"tags": ["t"]}

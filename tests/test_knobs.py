"""``agentstate.knobs.knob``: a knob that reads well where widgets are not drawn.

An untrusted notebook (GitHub, a JupyterLab that has not trusted the file) shows a saved
widget output as its ``text/plain``: for ``ipywidgets.interact`` that was
``interactive(children=(Dropdown(...``. The knob keeps the widget view and replaces the
text with what the knob turns, its positions, and what it showed at its starting position.
"""

from __future__ import annotations

import json
from pathlib import Path

import ipywidgets as widgets
import pytest

from agentstate.display import Table
from agentstate.knobs import describe, knob

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KNOB_LESSONS = ["04_subagents", "05_prefix_cached_experts", "06_tool_only_memory_capture"]


def shown(who: str = "the parent only") -> Table:
    return Table([{"declared by": who, "fields": len(who)}])


def test_the_text_names_each_control_its_positions_and_the_first_result():
    panel = widgets.interactive(
        shown,
        {"auto_display": True},
        who=widgets.Dropdown(options=["the parent only", "both"], description="declared by"),
    )
    text = describe(panel)
    assert text.splitlines()[:2] == [
        "A knob (run the notebook to turn it):",
        "- declared by: the parent only (positions: the parent only / both)",
    ]
    assert text.endswith(repr(shown()))
    slider = widgets.interactive(
        lambda chapter=0: chapter, chapter=widgets.IntSlider(min=0, max=28, description="chapter")
    )
    assert "- chapter: 0 (positions: 0 to 28)" in describe(slider)


def test_the_knob_is_still_a_widget_with_a_readable_text(monkeypatch):
    displayed = []
    monkeypatch.setattr("IPython.display.display", displayed.append)
    panel = knob(shown, who=widgets.Dropdown(options=["the parent only", "both"]))
    (readable,) = displayed
    bundle = readable._repr_mimebundle_()
    assert bundle[WIDGET_VIEW]["model_id"] == panel.model_id
    assert bundle["text/plain"] == describe(panel)
    assert not bundle["text/plain"].startswith("interactive(")
    panel.kwargs_widgets[0].value = "both"  # turning it calls the function again
    assert panel.result.rows == shown("both").rows


@pytest.mark.parametrize("name", KNOB_LESSONS)
def test_the_saved_knob_of_a_lesson_reads_as_text_and_draws_as_a_widget(name):
    """The committed notebook, as GitHub or an untrusted JupyterLab shows it."""
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    outputs = [
        o
        for c in nb["cells"]
        if c["cell_type"] == "code" and "import ipywidgets" in "".join(c["source"])
        for o in c["outputs"]
        if WIDGET_VIEW in o.get("data", {})
    ]
    assert len(outputs) == 1
    text = "".join(outputs[0]["data"]["text/plain"])
    assert text.startswith("A knob (run the notebook to turn it):")
    assert "At this position it shows:" in text and "interactive(" not in text

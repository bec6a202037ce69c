"""Every saved figure reads where it is drawn: at most 1,000 px wide, no type under 12 px.

JupyterLab shrinks a figure wider than its output area (about 1,000 px in a
1,400 px window with the file browser open): a 1,450 px figure shows at 65%
and its 8 pt labels at 7 px (issue 42). So every figure in every notebook
(lessons, solutions, going further) is drawn for about 950 px with type of
12 px or more at 100%.

How it is checked, from the saved notebook alone: the width is the PNG's own.
The type sizes are recorded while the figure is drawn, by
``scripts/figure_record.py``, which ``scripts/build_notebooks.py`` runs in the
kernel: it writes the smallest size of any text matplotlib drew into a
``tEXt`` chunk of the PNG, in points and in pixels at the figure's dpi
(``points * dpi / 72``). A figure without that record was not saved by the
build (a notebook edited by hand, or saved from JupyterLab): rebuild it.
The package's own figure helpers are also drawn here on a lesson's scenario.
"""

from __future__ import annotations

import base64
import io
import json
import runpy
from pathlib import Path

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
MAX_WIDTH_PX = 1000
MIN_TYPE_PX = 12
PATH = "/requirements.json"
record = runpy.run_path(str(ROOT / "scripts" / "figure_record.py"))
FONT_KEY = record["FONT_KEY"]


def saved_figures(notebook: Path) -> list[tuple[str, Image.Image]]:
    """(cell id, image) for every PNG a notebook saved; an SVG figure is refused outright."""
    found = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            assert "image/svg+xml" not in data, f"{notebook.name} {cell['id']}: save PNG, not SVG"
            if "image/png" in data:
                png = base64.b64decode("".join(data["image/png"]))
                found.append((cell["id"], Image.open(io.BytesIO(png))))
    return found


def problems(image: Image.Image) -> list[str]:
    """What makes a saved figure unreadable where JupyterLab draws it (empty: nothing)."""
    found = []
    if image.width > MAX_WIDTH_PX:
        found.append(f"{image.width} px wide (at most {MAX_WIDTH_PX})")
    sizes = getattr(image, "text", {}).get(FONT_KEY)
    if sizes is None:
        found.append("no record of its type sizes: rebuild with scripts/build_notebooks.py")
    elif json.loads(sizes)["min_px"] < MIN_TYPE_PX:
        found.append(f"type of {json.loads(sizes)['min_px']} px (at least {MIN_TYPE_PX})")
    return found


@pytest.mark.parametrize(
    "notebook", NOTEBOOKS, ids=[str(p.relative_to(ROOT / "notebooks")) for p in NOTEBOOKS]
)
def test_every_saved_figure_is_at_most_1000_px_wide_with_type_of_12_px_or_more(notebook):
    found = {
        f"{cell}: {', '.join(bad)}"
        for cell, image in saved_figures(notebook)
        if (bad := problems(image))
    }
    assert found == set(), f"{notebook.relative_to(ROOT)}: {sorted(found)}"


def recorded_png(figure) -> Image.Image:
    """The figure as the build saves it: IPython's print_figure wrapped by the recorder."""
    from IPython.core.pylabtools import print_figure

    png = record["recording"](print_figure)(figure, "png")
    return Image.open(io.BytesIO(png))


def test_the_check_catches_a_wide_figure_small_type_and_a_figure_saved_outside_the_build():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(14, 2), dpi=100)
    ax.set_title("a title", fontsize=8)
    ax.set_xlabel("x", fontsize=12)
    plt.close(fig)
    image = recorded_png(fig)
    assert json.loads(image.text[FONT_KEY])["min_pt"] == 8  # the ticks are 10 pt, the title 8
    assert problems(image) == [
        f"{image.width} px wide (at most 1000)",
        "type of 11.11 px (at least 12)",
    ]
    plain = io.BytesIO()
    fig.savefig(plain, format="png")
    assert problems(Image.open(plain))[-1].startswith("no record of its type sizes")


def test_text_an_axis_turned_off_does_not_draw_is_not_counted():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 2), dpi=100)
    ax.text(0.1, 0.5, "drawn", fontsize=10)
    ax.tick_params(labelsize=6)  # tick labels of an axis that is turned off
    ax.axis("off")
    plt.close(fig)
    image = recorded_png(fig)
    assert json.loads(image.text[FONT_KEY])["min_pt"] == 10
    assert image.width <= 400 and problems(image) == []


def test_the_state_flow_and_run_pictures_fit_when_drawn_on_a_lesson_run():
    from deepagents.backends.utils import file_data_to_string

    from agentstate.lessons.fixtures import (
        POSTGRES_FIELDS,
        one_batch_model,
        user_turn,
    )
    from agentstate.lessons.simulation import FinishOrder
    from agentstate.rds import build_file_storage_agent
    from agentstate.tracing import ToolTimeline, draw_run, draw_superstep

    def fields_in(files):
        return json.loads(file_data_to_string(files[PATH])) if files and PATH in files else {}

    timeline = ToolTimeline()
    agent = build_file_storage_agent(
        one_batch_model(POSTGRES_FIELDS),
        between=FinishOrder(timeline, list(POSTGRES_FIELDS)[::-1]),  # as lesson 01 runs it
        middleware=[timeline],
    )
    state = agent.invoke(user_turn())
    show = {"show": lambda files: str(fields_in(files))}  # as lesson 01 draws it
    pictures = {
        "draw_superstep": draw_superstep(timeline, key="files", title="one reply", **show),
        "two panels": draw_superstep({"a": timeline, "b": timeline}, key="files", **show),
        "the default text": draw_superstep(timeline, key="files"),
        "draw_run": draw_run(timeline, state, key="files", title="one reply"),
    }
    found = {name: problems(recorded_png(fig)) for name, fig in pictures.items()}
    assert found == dict.fromkeys(pictures, [])


def test_the_capture_picture_draws_the_store_as_the_auditor_reads_it():
    from agentstate.memory import draw_capture, load
    from agentstate.memory.drawing import capture_columns

    chat = load("solo_travel")
    messages = chat.messages("trip")
    entry = {"raw_entry": messages[0].content, "tags": {"role": "user", "msg_idx": 1}}
    swapped = {"raw_entry": messages[1].content, "tags": {"role": "user", "msg_idx": 2}}
    stored = {
        "entries": [entry, entry, swapped, {"raw_entry": "Sure!", "tags": {}}],
        "ops": [{"tool": "get_context"}] * 2
        + [{"tool": "add_entry", "tags": {"msg_idx": 2}}, {"tool": "put_context"}],
    }
    row = capture_columns(chat, "trip", stored)
    assert row["roles"][1] == "uu" and row["roles"][2] == "u" and row["roles"][3] == ""
    assert (row["extra"], row["bootstraps"], row["flushes"]) == (1, 2, [2])
    rules = capture_columns(chat, "trip", None)
    assert (rules["roles"][2], rules["bootstraps"], rules["flushes"]) == ("a", 1, [6, 8, 12, 14])
    figure = draw_capture(chat, "trip", {"ReAct": stored, "another": stored})
    assert problems(recorded_png(figure)) == []


def test_the_capture_picture_refuses_what_it_cannot_draw_legibly():
    from agentstate.memory import draw_capture, load, synthetic

    chat = load("solo_travel")
    with pytest.raises(
        ValueError, match="no thread 'nope' in this conversation; its threads: 'trip'"
    ):
        draw_capture(chat, "nope", {})
    with pytest.raises(ValueError, match="pass read_memory"):
        draw_capture(chat, "trip", {"run": {"entries": []}})
    long = synthetic(40)
    (thread,) = long.threads
    with pytest.raises(ValueError, match="has 40 in msg_idx 1-40: pass messages"):
        draw_capture(long, thread, {})
    part = draw_capture(long, thread, {}, messages=(1, 24))
    assert problems(recorded_png(part)) == []

"""The state-flow picture of one super-step draws what the run did, read from a real run.

``superstep`` reads a :class:`ToolTimeline` into the state before a step,
what each call was handed and wrote, and the state after; ``draw_superstep``
draws it (notebooks 01-03). Each test runs a real agent and checks the
picture's values against the run: the reads, the writes and the kept result.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, NotRequired

import pytest
from deepagents import create_deep_agent
from deepagents.backends.utils import create_file_data, file_data_to_string
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from agentstate.lessons.fixtures import POSTGRES_FIELDS, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import KEPT, LOST, ToolTimeline, draw_superstep, superstep

PATH = "/requirements.json"
ORDER = list(POSTGRES_FIELDS)


@tool
def store_in_file(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Read /requirements.json, add one field, write the whole file back."""
    files = runtime.state.get("files") or {}
    current = json.loads(file_data_to_string(files[PATH])) if PATH in files else {}
    current[field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps(current))
    return Command(update={"files": {PATH: data}, "messages": [done]})


def merge(current: dict | None, write: dict | None) -> dict:
    return {**(current or {}), **(write or {})}


class MergedState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge]


@tool
def store(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one field in the requirements key."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool
def count_fields(runtime: ToolRuntime) -> str:
    """How many fields the requirements key holds."""
    return f"{len(runtime.state.get('requirements', {}))} fields"


def stores(fields: dict, name: str = "store") -> list[dict]:
    return [tool_call(name, field_name=f, value=v) for f, v in fields.items()]


def in_file(files: Any) -> dict:
    return json.loads(file_data_to_string(files[PATH])) if files and PATH in files else {}


def texts(fig) -> str:
    """Every string drawn in the figure: boxes, labels, titles and the legend."""
    found = [t.get_text() for ax in fig.axes for t in ax.texts]
    found += [ax.get_title(loc="left") for ax in fig.axes]
    found += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return "\n".join(found)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_file_loss_is_drawn_as_the_run_did_it(mode):
    timeline = ToolTimeline()
    model = ScriptedChatModel(script=[reply(*stores(POSTGRES_FIELDS, "store_in_file")), reply()])
    agent = create_deep_agent(model, tools=[store_in_file], middleware=[timeline])
    turn = user_turn()
    state = agent.invoke(turn) if mode == "sync" else asyncio.run(agent.ainvoke(turn))
    flow = superstep(timeline, "files")
    assert in_file(flow.before) == {} and [in_file(c.read) for c in flow.calls] == [{}] * 5
    assert [in_file(c.wrote) for c in flow.calls] == [{f: v} for f, v in POSTGRES_FIELDS.items()]
    assert [c.kept for c in flow.calls] == [False] * 4 + [True]
    assert in_file(flow.after) == in_file(state["files"]) == {ORDER[-1]: POSTGRES_FIELDS[ORDER[-1]]}
    drawn = texts(draw_superstep(timeline, key="files", show=lambda f: str(in_file(f))))
    assert drawn.count("read {}") == 5
    for field, value in POSTGRES_FIELDS.items():
        assert f"wrote {{{field!r}: {value!r}}}" in drawn
    assert f"files: {{{ORDER[-1]!r}: {POSTGRES_FIELDS[ORDER[-1]]!r}}}" in drawn  # the after box
    assert "1 of 5 writes kept" in drawn


def merged_run_with_a_reader() -> ToolTimeline:
    """Five stores into a merging reducer and one reader, in one reply: its timeline."""
    timeline = ToolTimeline()
    calls = [*stores(POSTGRES_FIELDS), tool_call("count_fields")]
    model = ScriptedChatModel(script=[reply(*calls), reply()])
    agent = create_agent(
        model, tools=[store, count_fields], state_schema=MergedState, middleware=[timeline]
    )
    agent.invoke(user_turn())
    return timeline


def test_a_merging_reducer_is_drawn_keeping_every_write_and_a_reader_seeing_the_old_state():
    flow = superstep(merged_run_with_a_reader(), "requirements")
    assert [c.kept for c in flow.writers] == [True] * 5 and flow.after == POSTGRES_FIELDS
    (reader,) = flow.readers
    assert not reader.read and (reader.reply, reader.kept, reader.position) == ("0 fields", None, 5)
    drawn = texts(draw_superstep(flow, reducer=merge))
    assert "replied 0 fields" in drawn and "merge\nfolds the writes" in drawn
    assert "5 of 5 writes kept" in drawn and "write lost" not in drawn


def test_the_state_after_is_the_one_after_that_step_not_the_end_of_the_run():
    timeline = ToolTimeline()
    first, second = {"engine": "postgres"}, {"username": "dbadmin"}
    model = ScriptedChatModel(script=[reply(*stores(first)), reply(*stores(second)), reply()])
    agent = create_agent(model, tools=[store], state_schema=MergedState, middleware=[timeline])
    final = agent.invoke(user_turn())
    early = superstep(timeline, "requirements")
    late = superstep(timeline, "requirements", step=max(e.step for e in timeline.events))
    assert not early.before and early.after == first
    assert late.before == late.calls[0].read == first
    assert late.after == final["requirements"] == {**first, **second}


def test_two_runs_stack_one_above_the_other_with_their_own_titles():
    runs = {}
    for name, schema in (("merge", MergedState), ("plain", None)):
        timeline = ToolTimeline()
        model = ScriptedChatModel(script=[reply(*stores({"engine": "postgres"})), reply()])
        options = {"state_schema": schema} if schema else {}
        create_agent(model, tools=[store], middleware=[timeline], **options).invoke(user_turn())
        runs[name] = timeline
    fig = draw_superstep(runs, key="requirements")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert len(fig.axes) == 2 and titles[0].startswith("merge: ") and titles[1].startswith("plain")
    assert "1 of 1 writes kept" in titles[0] and "0 of 1 writes kept" in titles[1]
    # the legend reads first: above the first run's title (lesson 02's two-run figure)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    (legend,) = fig.legends
    first_run = fig.axes[0].get_tightbbox(renderer)  # its title included
    assert legend.get_window_extent(renderer).y0 >= first_run.y1


def test_a_timeline_that_saw_nothing_or_a_step_without_calls_is_a_clear_error():
    with pytest.raises(ValueError, match="recorded no tool call"):
        superstep(ToolTimeline(), "files")
    timeline = ToolTimeline()
    model = ScriptedChatModel(script=[reply(*stores({"engine": "postgres"})), reply()])
    agent = create_agent(model, tools=[store], state_schema=MergedState, middleware=[timeline])
    agent.invoke(user_turn())
    with pytest.raises(ValueError, match="no tool call ran in super-step 99"):
        superstep(timeline, "requirements", step=99)
    with pytest.raises(ValueError, match="key="):
        draw_superstep(timeline)


def write_arrows_and_boxes(fig) -> list[tuple[list, list]]:
    """Per panel: each write's arrow as (tail, head) in pixels, and every box's pixel extent."""
    canvas = FigureCanvasAgg(fig)  # the figure was closed: draw it on a canvas of its own
    canvas.draw()
    renderer = canvas.get_renderer()
    panels = []
    for ax in fig.axes:
        boxes = [
            t.get_bbox_patch().get_window_extent(renderer) for t in ax.texts if t.get_bbox_patch()
        ]
        boxes += [p.get_window_extent(renderer) for p in ax.patches]
        arrows = [
            shaft(a.arrow_patch.get_path())
            for a in ax.texts
            if getattr(a, "arrow_patch", None) is not None
            and a.arrow_patch.get_edgecolor()[:3] in (to_rgb(KEPT), to_rgb(LOST))
        ]
        panels.append((arrows, boxes))
    return panels


def shaft(path) -> tuple:
    """The (tail, head) of an arrow as drawn, in pixels: its path up to where its head begins."""
    moves = [i for i, code in enumerate(path.codes) if code == path.MOVETO]
    line = path.vertices[: moves[1] if len(moves) > 1 else len(path.vertices)]
    return line[0], line[-1]


def crosses(tail, head, box, margin: float = 2.0) -> bool:
    """Whether the segment, less ``margin`` px at each end, passes inside ``box``."""
    length = float(((head - tail) ** 2).sum() ** 0.5)
    inner = box.padded(-1.0)
    for i in range(1, 200):
        t = margin / length + (1 - 2 * margin / length) * i / 200
        x, y = tail + (head - tail) * t
        if inner.x0 < x < inner.x1 and inner.y0 < y < inner.y1:
            return True
    return False


@pytest.mark.parametrize("panels", ["one run", "two runs stacked, with a reader"])
def test_each_write_has_its_own_arrow_into_the_reducer_crossing_no_box(panels):
    """Cold read of issue 42: writes #3-#5 merged into one arrow across their neighbours' boxes."""
    timeline = ToolTimeline()
    model = ScriptedChatModel(script=[reply(*stores(POSTGRES_FIELDS, "store_in_file")), reply()])
    create_deep_agent(model, tools=[store_in_file], middleware=[timeline]).invoke(user_turn())
    show = {"show": lambda f: str(in_file(f))}
    if panels == "one run":
        fig = draw_superstep(timeline, key="files", **show)
    else:
        merged = merged_run_with_a_reader()
        runs = {"file": superstep(timeline, "files"), "merge": superstep(merged, "requirements")}
        fig = draw_superstep(runs, show=lambda v: str(in_file(v) if "/" in str(v) else v))
    drawn = write_arrows_and_boxes(fig)
    assert [len(arrows) for arrows, _ in drawn] == [5] * len(drawn)
    for arrows, boxes in drawn:
        for tail, head in arrows:
            assert [b for b in boxes if crosses(tail, head, b)] == []
        heads = sorted(head[1] for _, head in arrows)
        gaps = [b - a for a, b in zip(heads[:-1], heads[1:], strict=True)]
        assert min(gaps) >= 10  # apart where they land

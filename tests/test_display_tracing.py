"""Deterministic displays and the tool timeline used by the notebooks."""

import pytest

from agentstate.display import Mermaid, Table, graph_mermaid
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    one_batch_model,
    timeline_rows,
    user_turn,
)
from agentstate.rds import build_reducer_agent
from agentstate.tracing import ToolTimeline


def test_table_text_and_html_are_aligned_and_escaped():
    table = Table([{"field": "engine", "n": 1.23456}, {"field": "<b>", "extra": [1, 2]}])
    assert repr(table).splitlines() == [
        "field   n     extra",
        "------  ----  -----",
        "engine  1.23",
        "<b>           1, 2",
    ]
    assert "&lt;b&gt;" in table._repr_html_() and "<b>" not in table._repr_html_()
    assert table.column("field") == ["engine", "<b>"]


def test_mermaid_renders_as_a_fenced_block_without_remote_calls():
    diagram = graph_mermaid(build_reducer_agent(one_batch_model({})))
    assert diagram._repr_markdown_().startswith("```mermaid\n")
    assert "tools" in repr(diagram)
    assert repr(Mermaid("  graph TD; a-->b  ")) == "graph TD; a-->b"


def test_timeline_records_step_position_and_threads():
    timeline = ToolTimeline()
    agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline])
    agent.invoke(user_turn())
    rows = timeline_rows(timeline.events)
    assert [r["call #"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["field"] for r in rows] == list(POSTGRES_FIELDS)
    assert len({r["step"] for r in rows}) == 1
    assert {r["thread"] for r in rows} <= {"T1", "T2", "T3", "T4", "T5"}
    assert sorted(r["finished"] for r in rows) == [1, 2, 3, 4, 5]
    timeline.clear()
    assert timeline.events == []


def test_state_by_step_names_the_keys_each_step_changed():
    from langgraph.checkpoint.memory import InMemorySaver

    from agentstate.tracing import state_by_step

    agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(user_turn(), config)
    rows = state_by_step(agent, config, lambda v: {"n": len(v.get("requirements", {}))})
    wrote_requirements = [r for r in rows if "requirements" in r["changed"]]
    assert len(wrote_requirements) == 1 and wrote_requirements[0]["n"] == 5
    assert "files" in rows[-2]["changed"] or "files" in rows[-1]["changed"]
    assert [r["step"] for r in rows] == sorted(r["step"] for r in rows)


def test_show_source_displays_the_packages_own_code_and_selects_a_part():
    from agentstate.core import merge_fields
    from agentstate.core.turn_cache import TurnCacheMiddleware
    from agentstate.display import show_source

    whole = show_source(merge_fields)
    assert whole.text.startswith("def merge_fields(") and "return {**(left or {})" in whole
    assert whole._repr_markdown_().startswith("`agentstate.core.reducers.merge_fields`")
    part = show_source(TurnCacheMiddleware, start="def wrap_tool_call", stop="async def")
    assert part.text.startswith("def wrap_tool_call(") and "async def" not in part.text
    assert "\n    name, call_id = " in part.text  # the body keeps its indentation
    with pytest.raises(ValueError, match="is not in the source"):
        show_source(merge_fields, start="no such line")


def test_table_html_aligns_every_cell_left():
    """JupyterLab's stylesheet right-aligns table cells; text columns must read left-aligned."""
    html = Table([{"field": "engine", "n": 5}])._repr_html_()
    assert html.count('style="text-align: left"') == 4  # two headers, two cells
    assert "<td>" not in html and "<th>" not in html

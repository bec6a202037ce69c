"""Deterministic displays and the tool timeline used by the notebooks."""

import pytest

from agentstate.lessons.display import Mermaid, Table, graph_mermaid
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    one_batch_model,
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


def test_table_stacks_the_rows_of_tables_given_as_rows():
    """Notebook 04 stacks one-row tables: ``Table(t for t in ...)``, rows in order, mixed
    with plain dicts; a Table row is copied, not shared."""
    one, two = Table([{"who": "a", "n": 1}]), Table([{"who": "b"}, {"who": "c", "x": 2}])
    stacked = Table([one, {"who": "d"}, two])
    assert stacked.rows == [{"who": "a", "n": 1}, {"who": "d"}, {"who": "b"}, {"who": "c", "x": 2}]
    assert stacked.columns == ["who", "n", "x"]
    stacked.rows[0]["n"] = 9
    assert one.rows == [{"who": "a", "n": 1}]


def test_mermaid_renders_as_a_fenced_block_without_remote_calls():
    diagram = graph_mermaid(build_reducer_agent(one_batch_model({})))
    assert diagram._repr_markdown_().startswith("```mermaid\n")
    assert "tools" in repr(diagram)
    assert repr(Mermaid("  graph TD; a-->b  ")) == "graph TD; a-->b"


def test_timeline_records_step_position_and_threads():
    timeline = ToolTimeline()
    agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline])
    agent.invoke(user_turn())
    events = timeline.events
    assert [e.position for e in events] == [0, 1, 2, 3, 4]
    assert [e.args["field_name"] for e in events] == list(POSTGRES_FIELDS)
    assert len({e.step for e in events}) == 1
    assert 1 <= timeline.thread_count() <= 5
    assert sorted(timeline.finish_order(), key=lambda e: e.position) == events
    timeline.clear()
    assert timeline.events == [] and timeline.model_calls == []


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
    from agentstate.lessons.display import show_source

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


# --- draw_run: the picture of a run ---


def _bars(fig) -> list[tuple[str, str]]:
    """(y tick label, bar colour) per bar of a draw_run figure, top to bottom."""
    from matplotlib.colors import to_hex

    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    out = []
    for container in ax.containers:
        bar = container.patches[0]
        row = round(bar.get_y() + bar.get_height() / 2)
        out.append((labels[row], to_hex(bar.get_facecolor())))
    return out


def _notes(fig) -> list[str]:
    return [t.get_text().strip() for t in fig.axes[0].texts]


def test_draw_run_marks_the_one_kept_write_of_a_shared_file_and_names_threads_1_to_n():
    from agentstate.lessons.simulation import FinishOrder
    from agentstate.rds import build_file_storage_agent
    from agentstate.tracing import KEPT, LOST, MODEL, draw_run

    timeline = ToolTimeline()
    order = list(POSTGRES_FIELDS)
    agent = build_file_storage_agent(
        one_batch_model(POSTGRES_FIELDS),
        between=FinishOrder(timeline, order[::-1]),  # five threads at once, whatever the load
        middleware=[timeline],
    )
    state = agent.invoke(user_turn())
    fig = draw_run(timeline, state, key="files", title="t")
    assert str(fig) == "Figure(930x412)"  # fixed size: 1 model row + 5 calls, under 1,000 px
    tools = [(label, colour) for label, colour in _bars(fig) if label != "model"]
    assert tools == [
        (f"#{i + 1} store_requirement({f})", LOST) for i, f in enumerate(order[:-1])
    ] + [(f"#5 store_requirement({order[-1]})", KEPT)]
    assert {colour for label, colour in _bars(fig) if label == "model"} == {MODEL}
    notes = _notes(fig)
    threads = {n.split(" · ")[0] for n in notes if n.startswith("thread")}
    assert threads == {f"thread {i}" for i in range(1, 6)}
    assert sum(n.endswith("· kept") for n in notes) == 1
    assert sum(n.endswith("· lost") for n in notes) == 4
    assert "super-step 3: 5 tool calls" in notes
    assert not any("ThreadPool" in n or "MainThread" in n for n in notes)


def test_draw_run_keeps_every_write_through_a_merging_reducer_and_labels_what_readers_saw():
    from agentstate.lessons.fixtures import reader_batch_model
    from agentstate.tracing import KEPT, READ, draw_run

    timeline = ToolTimeline()
    agent = build_reducer_agent(reader_batch_model(POSTGRES_FIELDS, 1), middleware=[timeline])
    state = agent.invoke(user_turn())
    fig = draw_run(timeline, state, key="requirements", saw=lambda e: f"saw {e.reply}")
    colours = dict(_bars(fig))
    assert [colours[f"#{i + 1} store_requirement({f})"] for i, f in enumerate(POSTGRES_FIELDS)] == [
        KEPT
    ] * 5
    assert colours["#6 get_collected_requirements"] == READ
    assert any(n.endswith("· saw {}") for n in _notes(fig))  # the reader saw the empty state


def test_draw_run_without_a_state_draws_plain_calls_and_refuses_bad_input():
    import matplotlib.pyplot as plt

    from agentstate.tracing import READ, draw_run

    timeline = ToolTimeline()
    with pytest.raises(ValueError, match="recorded no call"):
        draw_run(timeline)
    build_reducer_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline]).invoke(user_turn())
    with pytest.raises(ValueError, match="needs the run's final state"):
        draw_run(timeline, key="requirements")
    fig, (top, bottom) = plt.subplots(2, 1)
    plt.close(fig)
    assert draw_run(timeline, ax=bottom) is fig  # drawn into the reader's own axes
    assert not top.containers and {c for label, c in _bars_of(bottom) if label != "model"} == {READ}


def _bars_of(ax) -> list[tuple[str, str]]:
    from matplotlib.colors import to_hex

    labels = [t.get_text() for t in ax.get_yticklabels()]
    return [
        (
            labels[round(c.patches[0].get_y() + c.patches[0].get_height() / 2)],
            to_hex(c.patches[0].get_facecolor()),
        )
        for c in ax.containers
    ]


def test_timeline_records_model_calls_writes_and_replies_sync_and_async():
    import asyncio

    for run in ("sync", "async"):
        timeline = ToolTimeline()
        agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline])
        if run == "sync":
            agent.invoke(user_turn())
        else:
            asyncio.run(agent.ainvoke(user_turn()))
        steps = [m.step for m in timeline.model_calls]
        tool_step = {e.step for e in timeline.events}
        assert len(steps) == 2 and tool_step == {steps[0] + 1} and steps[1] == steps[0] + 2, run
        first = timeline.events[0]
        assert first.update == {"requirements": {"engine": "postgres"}}, run
        assert first.status == "success" and "engine" in first.reply, run


def test_write_survived_reads_dict_merges_list_appends_and_whole_values():
    from agentstate.tracing import ToolEvent, write_survived

    def event(update):
        return ToolEvent(0, 0, "c", "t", {}, "T", 0.0, 1.0, update=update)

    assert write_survived(event({"k": {"a": 1}}), "k", {"k": {"a": 1, "b": 2}}) is True
    assert write_survived(event({"k": {"a": 1}}), "k", {"k": {"a": 2}}) is False
    assert write_survived(event({"k": 3}), "k", {"k": 3}) is True
    assert write_survived(event({"k": ["b"]}), "k", {"k": ["a", "b"]}) is True
    assert write_survived(event({"k": ["c"]}), "k", {"k": ["a", "b"]}) is False
    assert write_survived(event({"other": 3}), "k", {"k": 3}) is None


# --- compare_findings: the doctor's reports side by side ---


def test_compare_findings_puts_a_subagents_finding_on_the_row_of_the_same_hazard():
    from agentstate.doctor import diagnose
    from agentstate.lessons.display import compare_findings
    from agentstate.lessons.fixtures import PerFieldFileStorage
    from agentstate.rds import assemble_rds_agent, build_file_storage_agent

    broken = diagnose(build_file_storage_agent(one_batch_model(POSTGRES_FIELDS)))
    subjects = [f.subject for f in broken.of("file-read-modify-write")]
    assert "general-purpose:store_requirement:/requirements.json" in subjects
    fixed = diagnose(assemble_rds_agent(one_batch_model(POSTGRES_FIELDS), PerFieldFileStorage()))
    table = compare_findings({"broken": broken, "fixed": fixed})
    assert table.columns == ["hazard", "what it means", "on", "broken", "fixed"]
    assert not any(r["on"].startswith("general-purpose") for r in table.rows)
    rows = [r for r in table.rows if r["on"] == "store_requirement /requirements.json"]
    assert len(rows) == 1 and rows[0]["hazard"] == "file-read-modify-write"
    assert rows[0]["broken"] == "error in the agent and in its general-purpose subagent"
    assert rows[0]["fixed"] == "none"
    assert rows[0]["what it means"] == "a tool reads a file and writes it back"


def test_compare_findings_reads_a_named_subagent_and_keeps_the_doctors_order_of_codes():
    from agentstate.doctor import CODES, Report
    from agentstate.doctor.report.findings import finding
    from agentstate.lessons.display import compare_findings

    report = Report(
        "g",
        [
            finding("same-batch-read", "requirements", "m"),
            finding("subagent-drops-key", "collector:requirements", "m"),
            finding("file-read-modify-write", "store:/a.json", "m"),
        ],
    )
    table = compare_findings({"agent": report, "clean": Report("h")}, subagents=["collector"])
    order = list(CODES)
    assert table.column("hazard") == sorted(table.column("hazard"), key=order.index)
    by_code = {r["hazard"]: r for r in table.rows}
    assert by_code["subagent-drops-key"]["agent"] == "error in its collector subagent"
    assert by_code["subagent-drops-key"]["on"] == "requirements"
    assert by_code["file-read-modify-write"]["on"] == "store /a.json"  # a path, not a subagent
    assert set(table.column("clean")) == {"none"}


def test_compare_findings_names_the_whole_as_asked_and_still_puts_it_first():
    from agentstate.doctor import Report
    from agentstate.doctor.report.findings import finding
    from agentstate.lessons.display import compare_findings

    report = Report(
        "g",
        [
            finding("same-batch-read", "c:requirements", "m"),
            finding("same-batch-read", "requirements", "m"),
        ],
    )
    table = compare_findings({"desk": report}, subagents=["c"], whole="the graph")
    assert table.rows[0]["desk"] == "warning in the graph and in its c subagent"

"""Notebook 05's claims in pytest: the teaching prompt order, the knob, the library pins.

The lesson's code cells are executed from its jupytext source (all but the
live engine cell, the chart and the widget), so a change on the page is
tested here: the teaching ``expert_prompt`` must give the package's bytes for
every expert, the page's desk must share the manual only with the fixed
order, and the knob's ``request_id_after`` must share one more chapter at each
of its positions. The LangGraph behaviours the
old lesson asserted cell by cell (super-steps per execution mode, update
chunks, ``InvalidUpdateError`` without a reducer) are pinned here, and the
README's cold/warm figures are checked against ``data/results``.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.errors import InvalidUpdateError

from agentstate.engine import count_tokens, engine_installed
from agentstate.engine.tokens import _vocab
from agentstate.experts import (
    EXPERTS,
    ExpertsConfig,
    build_experts_graph,
    build_messages,
    load_manual,
    load_results,
    plot_ttft,
    system_prefix,
    ttft_points,
    user_turn,
)
from agentstate.experts.prompts import utc_clock
from agentstate.fixtures import plain_dict_fan_out, prompt_text, shared_by_all, super_steps

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks/_src/05_prefix_cached_experts.py"
MANUAL = load_manual()
ALL3 = "Last night's batch outage sent a SEPA file twice, a customer complains: what to report?"


@pytest.fixture(scope="module")
def lesson() -> dict:
    """The lesson's namespace after its offline code cells ran (not the engine cell, not the
    recorded figures, not the widget)."""
    namespace: dict = {}
    skipped = ("EngineServer", "plot_ttft", "ipywidgets")
    for cell in jupytext.read(LESSON).cells:
        if cell.cell_type != "code" or any(word in cell.source for word in skipped):
            continue
        exec(compile(cell.source, str(LESSON), "exec", dont_inherit=True), namespace)
    return namespace


@pytest.mark.parametrize("expert", list(EXPERTS))
def test_teaching_prompt_is_the_package_prompt_byte_for_byte(lesson, expert):
    history = [HumanMessage("Who approves a waiver?"), AIMessage("The desk lead, chapter 4.")]
    for turn in ((), history):
        taught = lesson["expert_prompt"](MANUAL.text, EXPERTS[expert].system_text(), ALL3, turn)
        package = build_messages(system_prefix(MANUAL), expert, ALL3, turn)
        assert prompt_text(taught) == prompt_text(package)


def test_the_knob_shares_one_more_chapter_at_each_position(lesson):
    """The knob's whole range teaches: every position shares more, and stops at the id line."""
    knob, chapters = lesson["request_id_after"], lesson["chapters"]
    rows = [knob(c).rows[0] for c in range(len(chapters) + 1)]
    shared = [r["bytes shared"] for r in rows]
    assert shared == sorted(set(shared))  # strictly more at each position
    before = len(f"system: {lesson['GLOBAL_INSTRUCTIONS']}Request id: 000".encode())
    assert shared[0] == before and rows[0]["of the prompt"] == "0.3%"
    assert shared[-1] == before + MANUAL.size and rows[-1]["of the prompt"] == "99.7%"
    assert all("Request id: 000|0" in r["they part at"] for r in rows)


def test_the_desk_on_the_page_shares_the_manual_only_with_the_fixed_order(lesson):
    """The page's desk, run sync and async: the scripted experts see what the prompt built."""
    import asyncio

    from agentstate.fixtures import shared_prefix
    from agentstate.models import ScriptedChatModel

    def shared(prompt, run):
        model = ScriptedChatModel(script=[AIMessage("a note")] * 3)
        state = run(lesson["build_desk"](model, prompt))
        assert sorted(state["notes"]) == sorted(EXPERTS)
        return shared_prefix(model.seen)["bytes shared"]

    def sync(desk):
        return desk.invoke({"question": ALL3})

    def in_a_loop(desk):
        return asyncio.run(desk.ainvoke({"question": ALL3}))

    for run in (sync, in_a_loop):
        assert shared(lesson["clock_first"], run) < 100
        assert shared(lesson["expert_prompt"], run) > MANUAL.size


def test_the_doctor_tells_the_two_desks_apart(lesson):
    reports = lesson["reports"]
    assert reports["clock first"].codes() == ["prefix-not-invariant"]
    assert reports["manual first"].codes() == []


def test_the_lessons_time_figures_come_from_the_recorded_sweep():
    """ "6 to 41 times" and "41 s at 5,949 tokens" in the lesson are the sweep's numbers."""
    text = LESSON.read_text()
    points = ttft_points(load_results())
    ratios = [p["cold / warm"] for p in points]
    assert f"{round(min(ratios))} to {round(max(ratios))} times" in text.replace("\n# ", " ")
    biggest = points[-1]
    assert f"({round(biggest['cold s'])} s at {biggest['prefix tokens']:,} tokens here)" in text


def test_the_ttft_chart_draws_the_recorded_points_the_same_every_time():
    import io

    results = load_results()
    figures = [plot_ttft(results), plot_ttft(results)]
    (ax,) = figures[0].axes
    points = ttft_points(results)
    assert [list(line.get_ydata()) for line in ax.lines] == [
        [p[k] for p in points] for k in ("cold s", "warm s", "floor s")
    ]
    assert [t.get_text() for t in ax.texts] == [f"{p['cold / warm']:g}x" for p in points]
    pngs = []
    for figure in figures:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        pngs.append(buffer.getvalue())
    assert pngs[0] == pngs[1]


def test_the_chart_refuses_results_without_a_sweep():
    results = {**load_results(), "sweep": {"points": []}}
    with pytest.raises(ValueError, match="no sweep points"):
        plot_ttft(results)


def test_a_real_clock_line_first_parts_the_prompts_before_the_manual():
    first, second = (system_prefix(MANUAL, "timestamp_first", clock=utc_clock) for _ in range(2))
    if first.text == second.text:  # the same microsecond: read once more
        second = system_prefix(MANUAL, "timestamp_first", clock=utc_clock)
    shared = shared_by_all([first.text.encode(), second.text.encode()])
    assert shared < len(first.text.splitlines()[0]) < MANUAL.size


def test_persona_or_query_first_shares_almost_nothing():
    question = "The overnight batch outage: what must we report to the regulator?"
    swapped = []
    for expert in EXPERTS:
        system1, system2, *rest = build_messages(system_prefix(MANUAL), expert, question)
        swapped.append(prompt_text([system2, system1, *rest]))
    assert shared_by_all(swapped) < 100
    turns = [
        build_messages(system_prefix(MANUAL), "compliance_auditor", q) for q in (question, ALL3)
    ]
    assert shared_by_all([prompt_text([m[-1], *m[:-1]]) for m in turns]) < 20


def test_super_steps_and_update_chunks_per_execution_mode():
    """LangGraph pins: Send runs the experts in one super-step; an update chunk is a node run."""
    steps, chunks, answers = {}, {}, set()
    for execution in ("sequential", "parallel", "primed"):
        graph = build_experts_graph(ExpertsConfig(manual=MANUAL, execution=execution))
        steps[execution] = super_steps(graph, user_turn(ALL3))
        chunks[execution] = len(list(graph.stream(user_turn(ALL3), stream_mode="updates")))
        answers.add(graph.invoke(user_turn(ALL3))["response"])
    assert [len(s) for s in steps.values()] == [6, 4, 5]
    assert list(chunks.values()) == [6, 6, 7]
    assert steps["parallel"][2] == ["expert"] * 3 and steps["primed"][2] == ["prime"]
    assert len(answers) == 1


def test_a_plain_dict_key_written_by_the_fan_out_is_refused():
    with pytest.raises(InvalidUpdateError):
        plain_dict_fan_out(list(EXPERTS)).invoke({"experts": list(EXPERTS)})


def test_readme_cold_warm_figures_come_from_the_recorded_run():
    results = load_results()
    sizes = [round(s["cold_ms"] / s["warm_ms"], 1) for s in results["sizes"]]
    sweep = [round(p["cold_ms"] / p["warm_ms"], 1) for p in results["sweep"]["points"]]
    row = next(
        line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| 05 ")
    )
    ratio = r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)x"
    recorded = re.search(rf"cold/warm time to first token {ratio}", row)
    swept = re.search(rf"sweep to [\d,]+ tokens: {ratio}", row)
    assert recorded and swept, row
    assert (float(recorded[1]), float(recorded[2])) == (min(sizes), max(sizes))
    assert (float(swept[1]), float(swept[2])) == (min(sweep), max(sweep))


@pytest.mark.skipif(not engine_installed(), reason="needs the engine (make engine)")
def test_counting_tokens_writes_nothing_to_stderr(capfd):
    """The vocabulary load's llama.cpp warning stays out of notebook outputs (issue 18)."""
    _vocab.cache_clear()
    assert (
        count_tokens(system_prefix(MANUAL.leading(1)).text)
        == load_results()["sizes"][0]["prefix_tokens"]
    )
    assert capfd.readouterr().err == ""

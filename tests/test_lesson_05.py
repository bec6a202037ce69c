"""Notebook 05's claims in pytest: the teaching prompt order, the knob, the library pins.

The lesson's code cells are executed from its jupytext source (all but the
live engine cell, the chart and the widget), so a change on the page is
tested here: the teaching ``expert_prompt`` must give the package's bytes for
every expert (the page says so in a sentence; this is the comparison), the
page's desk must share the manual only with the fixed order, and the knob's
``request_id_after`` (in ``agentstate.lessons.desk``) must share one more
chapter at each of its positions. The recorded figures default to the
recorded run, so the page shows them with one import. The LangGraph behaviours the
old lesson asserted cell by cell (super-steps per execution mode, update
chunks, ``InvalidUpdateError`` without a reducer) are pinned here, and the
README's cold/warm figures are checked against ``data/results``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import jupytext
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
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
    question_seconds,
    system_prefix,
    ttft_points,
    user_turn,
)
from agentstate.experts.prompts import utc_clock
from agentstate.hazards import hazard
from agentstate.lessons.desk import (
    DESK_QUESTION,
    adoctor_reports,
    ashares,
    atokens_reused,
    doctor_reports,
    shares,
    tokens_reused,
)
from agentstate.lessons.fixtures import plain_dict_fan_out, prompt_text, shared_by_all, super_steps
from agentstate.models import ScriptedChatModel

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
        taught = lesson["expert_prompt"](MANUAL, EXPERTS[expert].system_text(), ALL3, turn)
        package = build_messages(system_prefix(MANUAL), expert, ALL3, turn)
        assert prompt_text(taught) == prompt_text(package)


def test_the_pages_fixed_desk_sends_the_packages_messages_sync_and_async(lesson):
    """ "The package's ``build_messages`` sends the same bytes", the page says: what its fixed
    desk sent (one call per expert, run with ``invoke`` and ``ainvoke``) is, byte for byte,
    ``build_messages(system_prefix(manual), expert, question)``; the clock desk's is not."""
    import asyncio

    question = DESK_QUESTION  # the question the page's helpers ask
    package = sorted(
        prompt_text(build_messages(system_prefix(MANUAL), e, question)) for e in EXPERTS
    )

    def sent(prompt, run):
        model = ScriptedChatModel(script=[AIMessage("a note")] * 3)
        run(lesson["build_desk"](model, prompt), {"question": question})
        return sorted(prompt_text(call) for call in model.seen)

    def sync(desk, state):
        return desk.invoke(state)

    def in_a_loop(desk, state):
        return asyncio.run(desk.ainvoke(state))

    for run in (sync, in_a_loop):
        assert sent(lesson["expert_prompt"], run) == package
        assert sent(lesson["clock_first"], run) != package


def test_the_knob_shares_one_more_chapter_at_each_position():
    """The knob's whole range teaches: every position shares more, and stops at the id line
    (the slider's range, 0 to 28 on the page, is checked in tests/test_readable_outputs.py)."""
    from agentstate.experts.prompts import GLOBAL_INSTRUCTIONS
    from agentstate.lessons.desk import request_id_after

    chapters = MANUAL.chapter_titles()
    rows = [request_id_after(c).rows[0] for c in range(len(chapters) + 1)]
    shared = [r["bytes shared"] for r in rows]
    assert shared == sorted(set(shared))  # strictly more at each position
    before = len(f"system: {GLOBAL_INSTRUCTIONS}Request id: 000".encode())
    assert shared[0] == before and rows[0]["of the prompt"] == "0.3%"
    assert shared[-1] == before + MANUAL.size and rows[-1]["of the prompt"] == "99.7%"
    assert all("Request id: 000|0" in r["they part at"] for r in rows)
    # the 290 bytes at 0 are the desk's instructions, before the manual: the label says so
    assert [r["id line after"] for r in rows] == ["the desk's instructions", *chapters]
    assert rows[0]["they part at"] == "system message 1, line 4: Request id: 000|0 / 1 / 2"
    # each position adds exactly the chapter the line moved past
    sizes = [0] + [MANUAL.leading(c).size for c in range(1, len(chapters) + 1)]
    assert [s - before for s in shared] == sizes


@pytest.mark.parametrize("chapter", [-1, 29, 1.0, True, "3", None])
def test_the_knob_refuses_a_chapter_the_manual_has_not(chapter):
    from agentstate.lessons.desk import request_id_after

    with pytest.raises(ValueError, match=r"^chapter must be an int from 0 to 28, got "):
        request_id_after(chapter)


def test_the_recorded_figures_default_to_the_recorded_run():
    """The page calls ``question_seconds()`` and ``plot_ttft()`` with no argument: the same
    rows and the same picture as with ``load_results()`` passed in; other results are used
    when given."""
    import io

    results = load_results()
    assert question_seconds() == question_seconds(results)
    assert ttft_points() == ttft_points(results)
    assert question_seconds(experts=1) == question_seconds(results, experts=1)
    pngs = []
    for figure in (plot_ttft(), plot_ttft(results)):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        pngs.append(buffer.getvalue())
    assert pngs[0] == pngs[1]
    halved = json.loads(json.dumps(results))
    for point in halved["sweep"]["points"]:
        point["cold_ms"] /= 2
    assert question_seconds(halved) != question_seconds()


def test_the_desk_on_the_page_shares_the_manual_only_with_the_fixed_order(lesson):
    """The page's desk, run sync and async: the scripted experts see what the prompt built."""
    import asyncio

    from agentstate.lessons.fixtures import shared_prefix
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


def test_the_hazard_row_the_lesson_links_shows_what_the_lesson_shows(lesson):
    """agentstate.hazards' prefix-not-invariant (the row the lesson's opening links to) and
    the page's clock-first desk agree: the calls' prompts part before the manual starts, so
    none of it is shared; the page's manual-first order shares all of it."""
    result = hazard("prefix-not-invariant").run()
    assert result.outcome == "reproduced", result.evidence
    assert re.search(r"shared manual 0 of \d+ characters$", result.evidence)
    from agentstate.lessons.fixtures import shared_prefix
    from agentstate.models import ScriptedChatModel

    def desk_shares(prompt):
        model = ScriptedChatModel(script=[AIMessage("a note")] * 3)
        lesson["build_desk"](model, prompt).invoke({"question": ALL3})
        text = prompt_text(model.seen[0])  # b"system: " + system message 1 + ...
        return shared_prefix(model.seen)["bytes shared"], text.index(MANUAL.text.encode())

    shared, manual_at = desk_shares(lesson["clock_first"])
    assert shared < manual_at  # they part before the manual, as in the reproduction
    assert lesson["busted"].column("bytes shared")[0] < manual_at  # what the page printed
    shared, manual_at = desk_shares(lesson["expert_prompt"])
    assert shared > manual_at + MANUAL.size


def test_the_doctor_tells_the_two_desks_apart_sync_and_async(lesson):
    """The page's doctor table (``doctor_reports``, run with invoke and ainvoke): only the
    clock-first desk warns, and the table names the desk (a plain StateGraph), not an agent."""
    build, orders = lesson["build_desk"], lesson["ORDERS"]
    for table in (
        doctor_reports(build, orders, ALL3),
        asyncio.run(adoctor_reports(build, orders, ALL3)),
    ):
        assert table.column("hazard") == ["prefix-not-invariant"]
        assert table.column("clock first") == ["warning in the desk"]
        assert table.column("manual first") == ["none"]


def test_shares_reads_the_pages_desk_the_same_sync_and_async(lesson):
    """``shares`` (the page's sections 1 and 3): the clock-first prompts part in system message
    1 before the manual, the fixed ones in system message 2, the same with invoke and ainvoke."""
    build = lesson["build_desk"]
    for prompt, shares_manual in ((lesson["clock_first"], False), (lesson["expert_prompt"], True)):
        rows = [
            shares(build, prompt, ALL3).rows[0],
            asyncio.run(ashares(build, prompt, ALL3)).rows[0],
        ]
        assert all((row["bytes shared"] > MANUAL.size) is shares_manual for row in rows)
        if shares_manual:  # clock first: how many digits two clocks share depends on when they ran
            assert rows[0]["bytes shared"] == rows[1]["bytes shared"]
        where = "system message 2, line 1: " if shares_manual else "system message 1, line 1: "
        assert all(row["they part at"].startswith(where) for row in rows)


def test_shared_prefix_names_the_message_and_line_where_the_prompts_part():
    """ "they part at" says where: a message past the first, a line past the first, and a
    difference in the role label itself (never a negative window)."""
    from agentstate.lessons.fixtures import shared_prefix

    a = [SystemMessage("same\nline two A"), HumanMessage("q")]
    b = [SystemMessage("same\nline two B"), HumanMessage("q")]
    assert shared_prefix([b, a])["they part at"] == "system message 1, line 2: line two |A / B"
    c = [SystemMessage("same"), HumanMessage("q1")]
    d = [SystemMessage("same"), HumanMessage("q2")]
    assert shared_prefix([c, d])["they part at"] == "human message 2, line 1: q|1 / 2"
    e = [SystemMessage("same"), AIMessage("x")]
    assert shared_prefix([c, e])["they part at"].startswith("ai message 2, line 1: |")
    with pytest.raises(ValueError, match="at least one message"):
        shared_prefix([[], c])


@pytest.mark.engine
@pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`")
def test_tokens_reused_on_the_engine_sync_and_async(lesson):
    """The page's live cell (``tokens_reused``) and its async twin on the real engine: the
    clock-first desk reuses only tokens before the clock, the fixed one the manual's first
    chapter and the instructions, whichever runs it (counts, not timings)."""
    from agentstate.engine import EngineServer

    chapter1 = MANUAL.leading(1)
    before_clock = count_tokens("Current time:")  # generous: the role tokens come first too
    with EngineServer(verbose=True) as server:
        for table in (
            tokens_reused(server, lesson["build_desk"], lesson["ORDERS"], chapter1, ALL3),
            asyncio.run(
                atokens_reused(server, lesson["build_desk"], lesson["ORDERS"], chapter1, ALL3)
            ),
        ):
            assert table.column("prompt") == ["clock first", "manual first"]
            clock, fixed = table.column("tokens reused")
            assert clock < before_clock + 30
            assert fixed >= count_tokens(system_prefix(chapter1).text)


def test_the_live_cells_model_talks_to_its_own_engine_with_the_measured_settings():
    from agentstate.engine import EngineServer
    from agentstate.experts import engine_model

    server = EngineServer(port=18123)  # not started: the model only needs its address
    model = engine_model(server, max_tokens=8)
    assert str(model.openai_api_base) == server.base_url == "http://127.0.0.1:18123/v1"
    assert model.extra_body == {"max_tokens": 8} and model.temperature == 0
    assert model.max_retries == 0


def test_every_ratio_label_of_the_ttft_chart_stays_inside_its_axes():
    """The rightmost label (40.6x) used to cross the right edge of the per-call panel; none
    may hide under a legend either."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = plot_ttft(load_results())
    renderer = FigureCanvasAgg(figure).get_renderer()
    for axes in figure.axes:
        box, legend = (
            axes.get_window_extent(renderer),
            axes.get_legend().get_window_extent(renderer),
        )
        for text in axes.texts:
            extent = text.get_window_extent(renderer)
            assert box.x0 <= extent.x0 and extent.x1 <= box.x1, text.get_text()
            assert box.y0 <= extent.y0 and extent.y1 <= box.y1, text.get_text()
            assert not extent.overlaps(legend), f"{text.get_text()} is under the legend"


def test_the_lessons_time_figures_come_from_the_recorded_sweep():
    """Per question first ("2.3 to 2.9 times faster"), per call after ("6 to 41 times"), in
    the lesson's Summary (the table and the figure print them above, the prose does not
    repeat them): the sweep's numbers, not typed ones."""
    text = " ".join(LESSON.read_text().replace("\n# ", " ").split())
    results = load_results()
    ratios = [p["cold / warm"] for p in ttft_points(results)]
    faster = [q["faster"].rstrip("x") for q in question_seconds(results)]
    per_question = f"{min(faster)} to {max(faster)} times faster"
    per_call = f"{round(min(ratios))} to {round(max(ratios))} times"
    assert text.count(per_question) == 1 and text.count(per_call) == 1
    assert text.index(per_question) < text.index(per_call)  # the honest figure first


def test_question_seconds_are_three_cold_calls_against_one_cold_and_two_warm():
    """The issue's figures (7.41 -> 3.25 s up to 123 -> 42.9 s, 2.3-2.9x), from the data."""
    results = load_results()
    points, rows = ttft_points(results), question_seconds(results)
    for p, q in zip(points, rows, strict=True):
        assert q["clock first, s"] == round(3 * p["cold s"], 2)
        assert q["invariant, s"] == round(p["cold s"] + 2 * p["warm s"], 2)
    assert (rows[0]["clock first, s"], rows[0]["invariant, s"], rows[0]["faster"]) == (
        7.41,
        3.25,
        "2.3x",
    )
    assert (round(rows[-1]["clock first, s"]), rows[-1]["invariant, s"]) == (123, 42.88)
    assert rows[-1]["faster"] == "2.9x"
    assert question_seconds(results, experts=1)[0]["faster"] == "1.0x"


def test_the_ttft_chart_draws_the_recorded_points_the_same_every_time():
    """Left, per question: bars of the recorded sums. Right, per call on a log scale: cold,
    warm and the floor, which is drawn above the others with its own markers (it used to
    hide under the warm line on a linear scale)."""
    import io

    results = load_results()
    figures = [plot_ttft(results), plot_ttft(results)]
    ask, call = figures[0].axes
    points, rows = ttft_points(results), question_seconds(results)
    heights = [bar.get_height() for bar in ask.patches]
    assert heights == [q["clock first, s"] for q in rows] + [q["invariant, s"] for q in rows]
    assert [t.get_text() for t in ask.texts] == [q["faster"] for q in rows]
    assert [list(line.get_ydata()) for line in call.lines] == [
        [p[k] for p in points] for k in ("cold s", "warm s", "floor s")
    ]
    cold, warm, floor = call.lines
    assert call.get_yscale() == "log" and call.get_ylim()[0] < min(p["floor s"] for p in points)
    assert floor.get_zorder() > warm.get_zorder() and floor.get_marker() != warm.get_marker()
    assert [t.get_text() for t in call.texts] == [f"{p['cold / warm']:g}x" for p in points]
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


def test_readme_per_question_figure_comes_from_the_recorded_run():
    """The README's row for 05 carries one figure (issue 42): the per-question ratio."""
    results = load_results()
    row = next(
        line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| 05 ")
    )
    ratio = r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)x"
    faster = [float(q["faster"].removesuffix("x")) for q in question_seconds(results)]
    per_question = re.search(rf"three-expert question waits {ratio} less", row)
    assert per_question and (float(per_question[1]), float(per_question[2])) == (
        min(faster),
        max(faster),
    )
    assert len(re.findall(ratio, row)) == 1, row


@pytest.mark.skipif(not engine_installed(), reason="needs the engine (make engine)")
def test_counting_tokens_writes_nothing_to_stderr(capfd):
    """The vocabulary load's llama.cpp warning stays out of notebook outputs (issue 18)."""
    _vocab.cache_clear()
    assert (
        count_tokens(system_prefix(MANUAL.leading(1)).text)
        == load_results()["sizes"][0]["prefix_tokens"]
    )
    assert capfd.readouterr().err == ""


def test_the_layout_picture_lines_the_manual_up_in_one_column():
    """Both orders drawn part by part: the manual's box has the same x and width in both rows;
    the clock-first manual is read again (grey), the invariant one reused (green)."""
    from agentstate.experts import plot_prompt_layouts
    from agentstate.experts.charts import LAYOUT_COLOURS

    figure = plot_prompt_layouts(109_128)
    (ax,) = figure.axes
    boxes = [p for p in ax.patches if p.get_width() > 0]
    labelled = {t.get_text(): t for t in ax.texts}
    assert "instructions + manual\n109,128 bytes" in labelled
    manuals = [b for b in boxes if b.get_width() > 4]
    assert len(manuals) == 2
    top, bottom = sorted(manuals, key=lambda b: -b.get_y())
    assert (top.get_x(), top.get_width()) == (bottom.get_x(), bottom.get_width())
    face = {kind: colour for kind, (colour, _) in LAYOUT_COLOURS.items()}
    from matplotlib.colors import to_rgba

    assert top.get_facecolor() == to_rgba(face["read again"])
    assert bottom.get_facecolor() == to_rgba(face["reused"])
    parted = [t for t in ax.texts if "part here" in t.get_text()]
    assert [round(t.get_position()[0], 2) for t in parted] == [0.05, round(0.05 + 1.6 + 4.4, 2)]


def test_they_part_at_shows_whole_words_never_a_cut_value(lesson):
    """The clock cell and the fix's cell name where the calls part with whole words: each
    clock reading to its end (it showed `+00:0` cut before), each expert's title whole."""
    from agentstate.lessons.fixtures import shared_prefix
    from agentstate.models import ScriptedChatModel

    def parted(prompt):
        model = ScriptedChatModel(script=[AIMessage("a note")] * 3)
        lesson["build_desk"](model, prompt).invoke({"question": ALL3})
        return shared_prefix(model.seen)["they part at"]

    before, after = parted(lesson["clock_first"]).split("|")
    assert before.startswith("system message 1, line 1: Current time: ")
    assert all(re.fullmatch(r"\d*\+00:00", word) for word in after.split(" / "))
    before, after = parted(lesson["expert_prompt"]).split("|")
    assert before == "system message 2, line 1: You are the "
    assert after == "compliance / support / technical"  # by name, not by which thread ran first


def test_the_desk_puts_the_threads_history_from_state_after_the_manual(lesson):
    """The desk's tie to state: a thread's history in ``DeskState`` reaches every expert after
    the persona, so two turns of the thread still share the whole manual."""
    from agentstate.lessons.fixtures import shared_prefix
    from agentstate.models import ScriptedChatModel

    history = [HumanMessage("Who approves a waiver?"), AIMessage("The desk lead, chapter 4.")]
    turns = []
    for state in ({"question": ALL3}, {"question": "And to whom?", "history": history}):
        model = ScriptedChatModel(script=[AIMessage("a note")] * 3)
        lesson["build_desk"](model, lesson["expert_prompt"]).invoke(state)
        turns.append(model.seen)
    assert all(call[2:-1] == history for call in turns[1])
    first_expert = [turns[0][0], turns[1][0]]
    assert shared_prefix(first_expert)["bytes shared"] > MANUAL.size


def test_the_page_lists_the_parallel_experts_by_name_whatever_order_they_ran(lesson):
    """Issue 39/42: the three experts run in parallel, so the order of ``model.seen`` is the
    order their threads reached the model. The page prints "they part at" of
    ``shared_prefix(model.seen)``, which sorts the prompts: the same text, the experts by
    name, for every order the calls can arrive in."""
    import itertools

    from agentstate.lessons.fixtures import shared_prefix

    model = ScriptedChatModel(script=[AIMessage("a note")] * 3)
    lesson["build_desk"](model, lesson["expert_prompt"]).invoke({"question": ALL3})
    shown = {
        shared_prefix(list(order))["they part at"] for order in itertools.permutations(model.seen)
    }
    assert len(shown) == 1
    titles = shown.pop().split("|")[1].split(" / ")
    assert titles == ["compliance", "support", "technical"]

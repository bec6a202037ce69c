"""Issue 39 item 1: nothing a notebook prints depends on which parallel call ends first.

:func:`parallel_cells` lists every code cell of ``notebooks/_src`` that runs calls
in parallel (a ``Send`` fan-out, one reply's parallel tool calls, ``max_concurrency``,
``asyncio.gather``, threads). Each one must be named in :data:`COVERED` with the
proof that its output is fixed, so a new parallel cell without one fails
``test_every_parallel_cell_is_covered``. The proofs run the cell's code (the
lesson's own definitions, or the package function it prints) with the
scheduling turned around (experts that answer in reversed order, tools slowed
in reversed order, one thread against many) and compare what it prints; the
rest check what makes the cell's output fixed (it sorts, or nbval ignores a
timing it prints). Lesson 05's "they part at" listed the experts in the order
their threads reached the model (CI: ``compliance / support / technical``).
"""

from __future__ import annotations

import json
import re
import threading
from functools import cache
from pathlib import Path
from typing import Any

import jupytext
import pytest
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import PrivateAttr

from agentstate.experts.personas import EXPERTS
from agentstate.lessons.desk import DESK_QUESTION
from agentstate.lessons.fixtures import POSTGRES_FIELDS, fields_seen_by_reader, shared_prefix
from agentstate.lessons.served import (
    build_served_reducer,
    build_served_subagents,
    build_served_turn_cache,
)
from agentstate.models import ScriptedChatModel
from tests.lesson_source import definitions

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks" / "_src"
PARALLEL = re.compile(
    r"Send\(|max_concurrency|asyncio\.gather|\bgather\(|threading\.Thread|ThreadPoolExecutor"
    r"|\.batch\(|\*stores\(|store_calls\(|delegate\(|parallel_calls"
    # the package's scripted replies whose first reply holds parallel tool calls
    r"|one_batch_model\(|store_then_read_model\(|same_turn_model\(|fields_kept\(|reader_saw\("
    r"|requirements_kept\(|run_read_last\("
)


def parallel_cells() -> dict[str, str]:
    """``file: first parallel line`` -> the cell's source, for every parallel code cell."""
    found = {}
    for path in sorted(SOURCES.rglob("*.py")):
        if path.name.startswith("_"):
            continue  # the template for a new lesson: no reader runs it
        for cell in jupytext.read(path, fmt="py:percent").cells:
            if cell.cell_type != "code":
                continue
            lines = [line.strip() for line in cell.source.splitlines()]
            hits = [line for line in lines if PARALLEL.search(line) and not line.startswith("#")]
            if hits:
                found[f"{path.relative_to(SOURCES)}: {hits[0]}"] = cell.source
    return found


# every parallel cell and the proof that its output does not depend on scheduling
DESK = "05_prefix_cached_experts.py"
COVERED = {
    f"{DESK}: " + 'return [Send("expert", {**state, "expert": e}) for e in EXPERTS]': "desk",
    "01_file_based_storage.py: one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], "
    "middleware=[timeline, last_first]": "held_reads",
    "01_file_based_storage.py: store_then_read_model(POSTGRES_FIELDS), tools=[store_in_own_file, "
    "get_collected_requirements]": "files",
    "01_file_based_storage.py: {layout: fields_kept(layout, 20) for layout in LAYOUTS}": "files",
    "02_state_reducer.py: model = one_batch_model(fields)  # first reply: one "
    "store_requirement call per field": "rds",
    '02_state_reducer.py: package = build_reducer_agent(one_batch_model(labels)).invoke(TURN)["'
    'requirements"]': "rds",
    "02_state_reducer.py: {r.__name__: reader_saw(r) for r in (merge_fields, merge_in_place)}": (
        "purity"
    ),
    "03_same_turn_visibility.py: model = same_turn_model(fields, READS, next_reply=next_reply, "
    "turns=turns)": "same_turn",
    "going_further/01_inside_a_super_step.py: agent = build_file_storage_agent(one_batch_model("
    "POSTGRES_FIELDS), checkpointer=InMemorySaver())": "files",
    "going_further/01_inside_a_super_step.py: one_batch_model(POSTGRES_FIELDS),": "drawn",
    "going_further/01_inside_a_super_step.py: serial = build_file_storage_agent(one_batch_model("
    "POSTGRES_FIELDS), middleware=[timeline])": "drawn",
    'going_further/02_file_sync_and_secrets.py: one_batch_model({**VALID_REQUIREMENTS, "password":'
    " plain}),": "rds",
    "going_further/02_file_sync_and_secrets.py: state = build_reducer_agent(one_batch_model(mixed))"
    ".invoke(user_turn())": "rds",
    "going_further/03_caches_that_fail.py: one_batch_model(POSTGRES_FIELDS, extra=readers),": (
        "drawn"
    ),
    "01_file_based_storage.py: knob_widget = widgets.interact(fields_kept, layout=LAYOUTS, "
    "parallel_calls=(1, 20))": "ignored_widget",
    "02_state_reducer.py: knob_widget = widgets.interact(requirements_kept, state_class=SCHEMAS, "
    "parallel_calls=(1, 50))": "ignored_widget",
    "02_state_reducer.py: {name: {n: requirements_kept(s, n) for n in (1, 2, 50)} for name, s in "
    "SCHEMAS.items()}": "rds",
    "03_same_turn_visibility.py: print(run_read_last(my_agent, TURN, reader, store, writers=5))": (
        "read_last"
    ),
    'solutions/03_same_turn_visibility.py: ).invoke(TURN, {"max_concurrency": 4})': "rds",
    "solutions/03_same_turn_visibility.py: threading.Thread(target=one_turn, args=(fields, "
    "results))": "sorted",
    "going_further/02_file_sync_and_secrets.py: calls = [*store_calls(POSTGRES_FIELDS), "
    "*([overwrite] if model_writes_file else [])]": "rds",
    "going_further/02_file_sync_and_secrets.py: reply(*store_calls({**VALID_REQUIREMENTS, "
    '"password": plain})),': "rds",
    'going_further/02_file_sync_and_secrets.py: script=[reply(*store_calls({"engine": '
    '"postgres", "engine_version": "15.5"})), reply(text="ok")]': "rds",
    'going_further/03_caches_that_fail.py: user_turn(), {"max_concurrency": 1}': "rds",
    'going_further/03_caches_that_fail.py: calls = [tool_call("get_collected_requirements"), '
    "*store_calls(POSTGRES_FIELDS)]": "rds",
    "going_further/04_lists_and_fork_mode.py: parent = ScriptedChatModel(script=["
    'delegate(POSTGRES_FIELDS), reply(text="ok")])': "rds",
    "going_further/06_memory_fleet.py: positions = sorted(int(p) for p in await "
    "asyncio.gather(*asked))": "sorted",
}


def test_every_parallel_cell_is_covered():
    """A new parallel cell (or a changed one) must be added here with its proof."""
    found = set(parallel_cells())
    assert sorted(found - set(COVERED)) == [], "parallel cells without a proof of fixed output"
    assert sorted(set(COVERED) - found) == [], "proofs for cells that no longer exist"


# --- the proofs ---


class InTurnModel(ScriptedChatModel):
    """A scripted expert that lets the experts reach it in ``order``: each waits (on a
    condition, no sleep) until the experts before it in ``order`` were called, so the
    arrival order is the one given whatever the load."""

    order: list[str]
    _turn: threading.Condition = PrivateAttr(default_factory=threading.Condition)

    def reply_to(self, messages: list[BaseMessage]) -> AIMessage:  # type: ignore[override]
        persona = str(messages[1].content)
        name = next(n for n, e in EXPERTS.items() if e.system_text() == persona)
        with self._turn:
            if not self._turn.wait_for(lambda: len(self.seen) == self.order.index(name), 60):
                raise TimeoutError(f"{name} never got its turn: the experts did not run at once")
            reply = super().reply_to(messages)  # recorded in ``seen`` before the next turn
            self._turn.notify_all()
        return reply


def arrival(model: ScriptedChatModel) -> list[str]:
    texts = {e.system_text(): n for n, e in EXPERTS.items()}
    return [texts[str(call[1].content)] for call in model.seen]


@cache
def desk_prints() -> list[tuple[list[str], str, dict]]:
    """Lesson 05's desk with its experts reaching the model in order, then reversed."""
    lesson = definitions("05_prefix", ["manual", "DeskState", "build_desk"])
    prompt = definitions("05_prefix", ["expert_prompt"])["expert_prompt"]
    names = list(EXPERTS)
    runs = []
    for order in (names, names[::-1]):
        model = InTurnModel(script=[AIMessage("a note")] * 3, order=order)
        state = lesson["build_desk"](model, prompt).invoke({"question": DESK_QUESTION})
        runs.append((arrival(model), json.dumps(shared_prefix(model.seen)), state["notes"]))
    return runs


def prove_desk(source: str) -> None:
    (first_order, first, notes), (second_order, second, notes2) = desk_prints()
    assert first_order != second_order, "the scheduling did not change: no proof"
    assert first == second and list(notes) == list(notes2)
    assert "compliance / support / technical" in first  # by name


@cache
def tool_batch_files() -> list[dict]:
    """Lesson 01's two tools on one reply of 20 stores, run on 1, 3 and 20 threads."""
    import contextlib
    import io

    from deepagents import create_deep_agent

    from agentstate.lessons.fixtures import one_batch_model

    names = ["TURN", "store_requirement", "store_in_own_file", "PATH", "fields_in"]
    lesson = definitions("01_file", names)
    fields = {f"labels.k{i:02d}": str(i) for i in range(20)}
    results = []
    for threads in (1, 3, 20):
        kept = {}
        for layout in ("store_requirement", "store_in_own_file"):
            agent = create_deep_agent(one_batch_model(fields), tools=[lesson[layout]])
            with contextlib.redirect_stdout(io.StringIO()):  # the broken tool prints its read
                files = agent.invoke(lesson["TURN"], {"max_concurrency": threads})["files"]
            kept[layout] = [(path, data["content"]) for path, data in files.items()]
        results.append(kept)
    return results


def prove_files(source: str) -> None:
    one, three, twenty = tool_batch_files()
    assert one == three == twenty
    assert len(one["store_requirement"]) == 1 and len(one["store_in_own_file"]) == 20


@cache
def rds_prints() -> dict[str, list[Any]]:
    """The package's agents of lessons 02-04 on one parallel batch, at 1, 2 and 16 threads."""
    out: dict[str, list[Any]] = {}
    for build in (build_served_reducer, build_served_turn_cache, build_served_subagents):
        runs = []
        for threads in (1, 2, 16):
            state = build(environ={}).invoke(
                {"messages": [("user", json.dumps(POSTGRES_FIELDS))]}, {"max_concurrency": threads}
            )
            runs.append(
                (
                    list(state["requirements"].items()),
                    [(m.type, getattr(m, "name", None), m.text) for m in state["messages"][1:]],
                )
            )
        out[build.__name__] = runs
    return out


def prove_rds(source: str) -> None:
    for name, runs in rds_prints().items():
        assert runs[0] == runs[1] == runs[2], name
        assert dict(runs[0][0]) == POSTGRES_FIELDS


def prove_sorted(source: str) -> None:
    """What the threads or the gather produce is printed sorted."""
    assert re.search(r"sorted\(", source), source


def prove_ignored_timing(source: str) -> None:
    """The cell prints timings (they vary by nature): nbval ignores its output, and its
    fixed facts are asserted in the cell, not printed."""
    tagged = [c for c in all_cells() if c.source == source]
    assert tagged and all("nbval-ignore-output" in c.metadata.get("tags", []) for c in tagged)


prove_ignored_widget = prove_ignored_timing


@cache
def all_cells() -> list[Any]:
    return [
        cell
        for path in sorted(SOURCES.rglob("*.py"))
        for cell in jupytext.read(path, fmt="py:percent").cells
    ]


def prove_held_reads(source: str) -> None:
    """Lesson 01's broken agent prints each store's read from its thread. ``FinishOrder``
    holds every call until all five run, then lets them end last call first (a wait on
    the timeline, no sleep), so the lines come in that order and five threads ran, with
    the worker pool at 5 or 16; on 2 workers the hold says so instead of hanging."""
    import contextlib
    import io

    from deepagents import create_deep_agent

    from agentstate.lessons.fixtures import one_batch_model
    from agentstate.lessons.simulation import FinishOrder
    from agentstate.tracing import ToolTimeline

    lesson = definitions("01_file", ["TURN", "store_requirement", "PATH", "fields_in"])
    assert "last_first = FinishOrder(timeline, order=list(POSTGRES_FIELDS)[::-1])" in source
    order = list(POSTGRES_FIELDS)
    printed, threads = [], []
    for concurrency in (5, 16, 2):
        timeline, out = ToolTimeline(), io.StringIO()
        hold = FinishOrder(timeline, order[::-1], timeout=1 if concurrency == 2 else 60)
        agent = create_deep_agent(
            one_batch_model(POSTGRES_FIELDS),
            tools=[lesson["store_requirement"]],
            middleware=[timeline, hold],
        )
        with contextlib.redirect_stdout(out):
            if concurrency == 2:  # a timeout on a path that can never pass: no race
                with pytest.raises(TimeoutError, match=r"[234] of 5 calls ran at once"):
                    agent.invoke(lesson["TURN"], {"max_concurrency": concurrency})
                continue
            state = agent.invoke(lesson["TURN"], {"max_concurrency": concurrency})
        printed.append((out.getvalue(), lesson["fields_in"](state["files"])))
        threads.append(timeline.thread_count())
    assert printed[0] == printed[1] and threads == [5, 5]
    assert printed[0][0].splitlines() == [f"store_requirement({f}) read {{}}" for f in order[::-1]]
    assert printed[0][1] == {"username": "dbadmin"}


def prove_purity(source: str) -> None:
    """Lesson 02's impure reducer: ``reader_saw`` holds the reader until the stores ran
    (``HoldReaderMiddleware``, a wait on a condition), so the counts are the same run
    after run."""
    from agentstate.lessons.purity import reader_saw

    lesson = definitions("02_state", ["merge_fields", "merge_in_place"])
    runs = [
        {r.__name__: reader_saw(r) for r in (lesson["merge_fields"], lesson["merge_in_place"])}
        for _ in range(3)
    ]
    assert runs == [{"merge_fields": 0, "merge_in_place": 5}] * 3


def prove_same_turn(source: str) -> None:
    """Lesson 03's first run: the reader in the stores' own reply sees the state from before
    the step, 0 fields, whatever the worker count; the five stores all land."""
    from agentstate.tracing import ToolTimeline
    from tests.test_lesson_03 import TEACHING

    lesson = definitions("03_same", TEACHING)
    seen = []
    for workers in (1, 7, 16):
        state = lesson["my_agent"](ToolTimeline()).invoke(
            lesson["TURN"], {"max_concurrency": workers}
        )
        seen.append((fields_seen_by_reader(state), len(state["requirements"])))
    assert seen == [(0, 5)] * 3


def prove_drawn(source: str) -> None:
    """The cell's text output is only a figure's repr (nbval compares no pixels); what
    depends on the order is asserted in the cell itself, under the hold it sets up."""
    cells = [c for c in all_built_cells() if c.source == source]
    assert cells, "the cell is not in any built notebook"
    for cell in cells:
        texts = [o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", [])]
        texts += [o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream"]
        assert all(t.startswith("<Figure size") for t in texts if t), texts


@cache
def all_built_cells() -> list[Any]:
    import nbformat

    return [
        cell
        for path in sorted((ROOT / "notebooks").rglob("*.ipynb"))
        if ".ipynb_checkpoints" not in path.parts
        for cell in nbformat.read(path, as_version=4).cells
    ]


def prove_read_last(source: str) -> None:
    """Lesson 03's late reader: ``ReadLast`` holds it until the timeline recorded all five
    stores (and the stores until it waits), so what the cell prints (``run_read_last``'s
    report and the next reply's count) is the same run after run, and its report past the
    threads line is the same with 16 workers as with the 6 it passes, with no sleep to
    outlast."""
    from agentstate.lessons.simulation import ReadLast, run_read_last
    from agentstate.tracing import ToolTimeline
    from tests.test_lesson_03 import TEACHING

    late = ("get_collected_requirements", "store_requirement")
    assert f'reader, store = "{late[0]}", "{late[1]}"' in source
    assert "print(run_read_last(my_agent, TURN, reader, store, writers=5))" in source
    lesson = definitions("03_same", TEACHING)
    printed = []
    for _ in range(2):
        nxt = lesson["my_agent"](next_reply=True).invoke(lesson["TURN"])
        report = run_read_last(lesson["my_agent"], lesson["TURN"], *late, 5)
        printed.append((report, fields_seen_by_reader(nxt)))
    assert printed[0] == printed[1]
    assert printed[0][0].splitlines()[2].endswith("ended: True") and printed[0][1] == 5
    timeline = ToolTimeline()
    hold = ReadLast(timeline, *late, writers=5)
    lesson["my_agent"](hold, timeline).invoke(lesson["TURN"], {"max_concurrency": 16})
    assert hold.report().splitlines() == printed[0][0].splitlines()[2:]


PROOFS = {
    "read_last": prove_read_last,
    "held_reads": prove_held_reads,
    "purity": prove_purity,
    "same_turn": prove_same_turn,
    "drawn": prove_drawn,
    "desk": prove_desk,
    "files": prove_files,
    "rds": prove_rds,
    "sorted": prove_sorted,
    "ignored_timing": prove_ignored_timing,
    "ignored_widget": prove_ignored_widget,
}


@pytest.mark.parametrize("cell", sorted(COVERED))
def test_each_parallel_cell_prints_in_a_fixed_order(cell):
    source = parallel_cells().get(cell)
    assert source is not None, f"no such parallel cell: {cell}"
    PROOFS[COVERED[cell]](source)


def test_shared_prefix_is_the_same_for_every_order_of_the_prompts():
    """The package function the desk prints: every permutation of three prompts."""
    from itertools import permutations

    from agentstate.experts import load_manual
    from agentstate.experts.prompts import build_messages, system_prefix

    prefix = system_prefix(load_manual())
    prompts = [build_messages(prefix, name, "Who approves?", []) for name in EXPERTS]
    shown = {json.dumps(shared_prefix(list(p))) for p in permutations(prompts)}
    assert len(shown) == 1

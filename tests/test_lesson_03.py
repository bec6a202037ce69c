"""Notebook 03 (same-turn visibility): the library behaviour the lesson relies on, pinned here
so a LangGraph / LangChain / deepagents upgrade that changes it turns CI red; the lesson's
teaching turn cache, executed from the notebook's own source, against the package's
``TurnCacheMiddleware``; and the knob's fixed settings."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.core import TurnCacheBase, TurnCacheMiddleware, merge_fields, written_value
from agentstate.doctor import diagnose
from agentstate.hazards import hazard
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    VALID_REQUIREMENTS,
    ConfigCacheStorage,
    all_in_one_reply_model,
    build_get_config_cache_agent,
    fields_seen_by_reader,
    overlapping_calls,
    reader_batch_model,
    reader_replies,
    reader_summary,
    user_turn,
)
from agentstate.lessons.simulation import (
    ReadLast,
    SlowToolMiddleware,
    Together,
    ToolLatencyMiddleware,
    arun_read_last,
    run_read_last,
)
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import READER_TOOLS, WRITER_TOOLS, build_reducer_agent
from agentstate.tracing import ToolTimeline, state_by_step
from tests.lesson_source import code_cells, definitions

# What the lesson defines and the tests run: its agent, its cache, its knob.
TEACHING = (
    "RequirementsState",
    "store_requirement",
    "get_collected_requirements",
    "validate_manifest",
    "TURN",
    "TOOLS",
    "READS",
    "my_agent",
    "TurnCache",
    "CACHE",
    "reader_sees",
)


def seen(state) -> int:
    """What the lesson prints of a turn: how many fields ``get_collected_requirements`` listed."""
    return fields_seen_by_reader(state)


def reply_of(state, tool_name: str) -> str:
    return reader_replies(state)[tool_name]


def latency() -> ToolLatencyMiddleware:
    """The lesson's seeded 0-5 ms before each tool call (its proof cell uses the same)."""
    return ToolLatencyMiddleware(0.005, seed=3)


def teaching_cache(lesson: dict, **options):
    """The lesson's ``TurnCache`` with the lesson's settings (``CACHE``)."""
    return lesson["TurnCache"](**{**lesson["CACHE"], **options})


def package_cache(lesson: dict, **options) -> TurnCacheMiddleware:
    return TurnCacheMiddleware(**{**lesson["CACHE"], **options})


class NeverWait(threading.Condition):
    """A condition whose readers never wait: step 1 of the teaching cache taken away."""

    def wait_for(self, predicate, timeout=None):
        return True


@pytest.fixture(scope="module")
def lesson() -> dict:
    """The teaching definitions of notebook 03, executed from its own source."""
    return definitions("03", TEACHING)


def seen_per_turn(lesson: dict, agent, turns: int, config=dict) -> list[int]:
    return [seen(agent.invoke(lesson["TURN"], config())) for _ in range(turns)]


# --- the library behaviour the lesson shows ---


def test_the_readers_run_in_the_tools_step_before_any_write_lands():
    agent = build_reducer_agent(all_in_one_reply_model(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "lesson-03"}}
    agent.invoke(user_turn(), config)
    rows = state_by_step(agent, config, lambda v: {"n": len(v.get("requirements", {}))})
    after = {rows[i - 1]["next"]: rows[i] for i in range(1, len(rows))}
    tools = next(i for i, r in enumerate(rows) if r["next"] == "tools x11")
    assert rows[tools]["n"] == 0 and rows[tools + 1]["n"] == 8
    assert "requirements" in rows[tools + 1]["changed"]
    assert after["PatchToolCallsMiddleware.before_agent"]["changed"] == []
    assert after["RequirementsSyncMiddleware.after_agent"]["changed"] == ["files"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_reader_that_starts_after_every_store_still_sees_nothing(mode):
    late = ToolTimeline()
    n = len(VALID_REQUIREMENTS)
    hold = ReadLast(late, "get_collected_requirements", "store_requirement", writers=n)
    agent = build_reducer_agent(all_in_one_reply_model(), middleware=[hold, late])
    config = {"max_concurrency": n + 3}  # a thread per call
    state = (
        agent.invoke(user_turn(), config)
        if mode == "sync"
        else asyncio.run(agent.ainvoke(user_turn(), config))
    )
    reader = next(e for e in late.events if e.name == "get_collected_requirements")
    stores = [e for e in late.events if e.name == "store_requirement"]
    assert len(stores) == n and reader.start > max(e.end for e in stores)
    if mode == "sync":  # the stores ran while the reader's thread waited
        assert reader.thread not in {e.thread for e in stores}
    assert fields_seen_by_reader(state) == 0 and state["requirements"] == VALID_REQUIREMENTS


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_calls_of_one_reply_overlap_on_several_threads(mode):
    # Together(2) lets a store run only beside another (a barrier of two), where 0.1 s
    # stores bet that the pool starts the next store before one ends
    timeline = ToolTimeline()
    agent = build_reducer_agent(
        all_in_one_reply_model(), middleware=[timeline, Together(2, "store_requirement")]
    )
    if mode == "sync":
        agent.invoke(user_turn())
    else:
        asyncio.run(agent.ainvoke(user_turn()))
    assert overlapping_calls(timeline.events, "store_requirement") == 8
    if mode == "sync":  # under ainvoke the timeline records the event loop's thread
        assert timeline.thread_count() > 1


def test_together_refuses_to_pass_a_call_that_runs_alone():
    """One worker (the calls one by one): the first store waits alone, and says so."""
    agent = build_reducer_agent(
        all_in_one_reply_model(), middleware=[Together(2, "store_requirement", timeout=0.5)]
    )
    with pytest.raises(TimeoutError, match="found fewer than 1 to run beside"):
        agent.invoke(user_turn(), {"max_concurrency": 1})


def test_the_get_config_repair_never_reaches_a_tool():
    storage = ConfigCacheStorage()
    agent = build_get_config_cache_agent(reader_batch_model(POSTGRES_FIELDS, 1), storage)
    state = agent.invoke(user_turn())
    assert storage.found == [False] * 6 and fields_seen_by_reader(state) == 0


# --- the teaching turn cache of the notebook against the package's ---


def test_the_teaching_cache_is_one_cell_of_a_screen_at_most():
    cells = [c for c in code_cells("03") if "\nclass TurnCache(" in f"\n{c}"]
    assert len(cells) == 1, "the teaching cache of notebook 03 was renamed or split"
    code = [line for line in cells[0].splitlines() if line.strip() and line.strip()[0] != "#"]
    in_class = code[code.index("class TurnCache(TurnCacheBase):") :]
    # issue 42: the mechanism only (wait, merge, record, drop); the settings, the reply's ids,
    # the view a tool reads and the value a Command wrote come from agentstate.core
    assert len(code) <= 19 and len(in_class) <= 17, (len(code), len(in_class))


def test_the_plain_agent_of_the_lesson_reads_nothing_without_a_cache(lesson):
    agent = lesson["my_agent"](latency(), turns=20)
    assert seen_per_turn(lesson, agent, 20) == [0] * 20


def test_the_shared_dict_of_going_further_03_races():
    from agentstate.lessons.simulation import ToolLatencyMiddleware
    from agentstate.rds import assemble_rds_agent
    from agentstate.rds.storage import NAIVE_KEY, NaiveSharedCacheStorage

    agent = assemble_rds_agent(
        reader_batch_model(POSTGRES_FIELDS, 100),
        NaiveSharedCacheStorage(),
        middleware=[ToolLatencyMiddleware(0.005, seed=3)],
    )
    config = {"configurable": {NAIVE_KEY: {}}}
    seen = [
        fields_seen_by_reader(
            agent.invoke(user_turn(), {**config, "configurable": {NAIVE_KEY: {}}})
        )
        for _ in range(100)
    ]
    assert min(seen) < 5 and max(seen) > 0


def test_teaching_and_package_turn_caches_agree_under_latency(lesson):
    teaching = teaching_cache(lesson)
    package = package_cache(lesson)
    seen_teaching = seen_per_turn(lesson, lesson["my_agent"](teaching, latency(), turns=100), 100)
    seen_package = seen_per_turn(lesson, lesson["my_agent"](package, latency(), turns=100), 100)
    assert seen_teaching == seen_package == [5] * 100
    assert teaching.batches == {} and package.open_batches == 0


def test_the_teaching_cache_without_its_wait_races_again(lesson):
    """Exercise 3 of the lesson: a condition that never waits (no step 1) brings the race
    back."""
    no_wait = teaching_cache(lesson)
    no_wait.changed = NeverWait()
    agent = lesson["my_agent"](no_wait, latency(), turns=100)
    assert min(seen_per_turn(lesson, agent, 100)) < 5


def test_the_teaching_cache_merges_in_call_order_with_the_keys_reducer(lesson):
    """Two stores of one field in one reply: the reader sees the later one, as the state keeps."""
    stores = [tool_call("store_requirement", field_name="engine", value=v) for v in ("a", "b")]
    model = ScriptedChatModel(
        script=[reply(*stores, tool_call("get_collected_requirements")), reply(text="Done.")]
    )
    state = create_agent(
        model,
        tools=lesson["TOOLS"],
        state_schema=lesson["RequirementsState"],
        middleware=[teaching_cache(lesson), SlowToolMiddleware("store_requirement", 0.05)],
    ).invoke(lesson["TURN"])
    read = reply_of(state, "get_collected_requirements")
    assert read == '{"engine": "b"}' and state["requirements"] == {"engine": "b"}


def test_lesson_02s_state_and_writer_imported_by_03_keep_what_02s_page_keeps(lesson):
    """03 imports 02's state and writer from the package as a recap: the same tool schema the
    model sees, the same replies and the same kept fields as the ones 02 builds on its page."""
    page = definitions("02", ("RequirementsState", "store_requirement", "merge_fields", "TURN"))
    ours = lesson["store_requirement"]
    assert ours.name == page["store_requirement"].name
    assert ours.description == page["store_requirement"].description
    schema = ours.tool_call_schema.model_json_schema()
    assert schema == page["store_requirement"].tool_call_schema.model_json_schema()

    def run(state_schema, store):
        calls = [
            tool_call("store_requirement", field_name=f, value=v)
            for f, v in {**POSTGRES_FIELDS, "engine": "mysql"}.items()
        ]
        model = ScriptedChatModel(script=[reply(*calls), reply(text="Done.")])
        state = create_agent(model, tools=[store], state_schema=state_schema).invoke(page["TURN"])
        return state["requirements"], [m.text for m in state["messages"] if m.type == "tool"]

    assert run(lesson["RequirementsState"], ours) == run(
        page["RequirementsState"], page["store_requirement"]
    )
    assert run(lesson["RequirementsState"], ours)[0] == {**POSTGRES_FIELDS, "engine": "mysql"}


def test_teaching_and_package_turn_caches_agree_on_the_rds_reply(lesson):
    def summary(kind):
        cache = kind(
            writers=WRITER_TOOLS,
            readers=READER_TOOLS,
            key="requirements",
            reducer=merge_fields,
        )
        state = build_reducer_agent(all_in_one_reply_model(), middleware=[cache]).invoke(
            user_turn()
        )
        return reader_summary(state), state["requirements"]

    teaching, package = summary(lesson["TurnCache"]), summary(TurnCacheMiddleware)
    assert teaching == package
    assert teaching[0]["validate_manifest"] == "valid: all rules pass"


def test_both_readers_of_the_lesson_see_every_field_with_the_teaching_cache(lesson):
    state = lesson["my_agent"](teaching_cache(lesson)).invoke(lesson["TURN"])
    assert seen(state) == 5
    assert reply_of(state, "validate_manifest") == "valid"


def test_the_package_gives_the_teaching_result_under_ainvoke_too(lesson):
    """Async is what the package adds: the same turn through ``ainvoke``."""
    agent = lesson["my_agent"](package_cache(lesson))
    state = asyncio.run(agent.ainvoke(lesson["TURN"]))
    assert seen(state) == 5


def test_the_teaching_reader_times_out_instead_of_hanging(lesson):
    """The teaching cache's reader gives up after ``timeout`` with an error naming itself (the
    package's cache answers the model with an error instead; see tests/test_turn_cache.py)."""
    cache = teaching_cache(lesson, timeout=0.1)
    agent = lesson["my_agent"](cache, SlowToolMiddleware("store_requirement", 0.5))
    with pytest.raises(TimeoutError, match=r"get_collected_requirements: writers still busy"):
        agent.invoke(lesson["TURN"])


def test_the_doctor_names_the_plain_agent_and_passes_it_with_the_package_cache(lesson):
    broken = diagnose(lesson["my_agent"]())
    fixed = diagnose(lesson["my_agent"](package_cache(lesson)))
    assert broken.codes() == ["same-batch-read"] and fixed.codes() == []


def test_the_knob_over_its_range_sees_nothing_without_the_cache_and_everything_with_it(lesson):
    seen = [lesson["reader_sees"](n, cache) for n in (1, 5, 30) for cache in (False, True)]
    assert seen == [0, 1, 0, 5, 0, 30]


# --- the thread pool under a batch (going further 03, and the lesson's exercise 2) ---


def test_the_default_tool_pool_is_min_32_cpu_count_plus_4_threads():
    import os

    from langchain_core.runnables.config import get_executor_for_config

    with get_executor_for_config({}) as executor:
        assert executor._max_workers == min(32, (os.cpu_count() or 1) + 4)
    with get_executor_for_config({"max_concurrency": 7}) as executor:
        assert executor._max_workers == 7


def _cached_run(
    lesson,
    threads: int,
    readers_first: bool = False,
    timeout: float = 10.0,
    together: int = 0,
):
    timeline = ToolTimeline()
    fields = POSTGRES_FIELDS
    stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    reads = [tool_call(name) for name in lesson["READS"]]
    calls = [*reads, *stores] if readers_first else [*stores, *reads]
    model = ScriptedChatModel(script=[reply(*calls), reply(text="Done.")])
    agent = create_agent(
        model,
        tools=lesson["TOOLS"],
        state_schema=lesson["RequirementsState"],
        middleware=[
            timeline,
            *([Together(together)] if together else []),  # before the cache's wait
            teaching_cache(lesson, timeout=timeout),
            SlowToolMiddleware("store_requirement", 0.05),
        ],
    )
    state = agent.invoke(lesson["TURN"], {"max_concurrency": threads})
    return timeline, state


def test_with_a_thread_per_call_the_readers_start_with_the_writers(lesson):
    # The 50 ms stores alone bet that the pool starts its 7th thread within 50 ms of
    # the first: lost once under load. Together(7) passes only when all 7 calls
    # are running at once, which takes a thread per call (with 6 it never passes).
    timeline, state = _cached_run(lesson, threads=7, together=7)
    first_end = min(e.end for e in timeline.events)
    assert all(e.start < first_end for e in timeline.events)  # the figure's caption
    assert seen(state) == 5


def test_with_fewer_threads_than_calls_the_last_call_waits_for_a_free_thread(lesson):
    """7 calls on 6 threads: the 7th call is queued behind the other 6, so it starts only once
    one of them has ended. (Not "it starts last": a thread the pool made late can start the
    6th call after a free thread took the 7th, on a busy machine.)"""
    timeline, state = _cached_run(lesson, threads=6)
    *first, seventh = sorted(timeline.events, key=lambda e: e.position)
    assert seventh.position == 6 and seventh.start >= min(e.end for e in first)
    assert seen(state) == 5


def test_readers_first_on_two_threads_hold_them_until_their_timeout(lesson):
    """Two readers first on two threads wait for stores that get no thread: after its
    ``timeout`` the teaching reader stops the turn with its error instead of hanging."""
    import time

    started = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"writers still busy after 1\.0 s"):
        _cached_run(lesson, threads=2, readers_first=True, timeout=1.0)
    assert time.perf_counter() - started >= 1.0


LATE = ("get_collected_requirements", "store_requirement")  # the page's reader and writer


def test_what_lesson_03_prints_instead_of_asserting(lesson):
    assert run_read_last(lesson["my_agent"], lesson["TURN"], *LATE, 5).splitlines() == [
        "run with max_concurrency=6: 5 store_requirement calls wait until "
        "get_collected_requirements waits",
        "(on fewer threads they deadlock; Python's default pool has min(32, cpu_count+4))",
        "get_collected_requirements started after every store_requirement ended: True",
        "super-steps of the 7 calls: [2]",
        "they ran on more than one thread: True",
        "get_collected_requirements replied: {}",
    ]
    nxt = lesson["my_agent"](next_reply=True).invoke(lesson["TURN"])
    assert seen(nxt) == 5


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("stores", [3, 5])
def test_run_read_last_gives_a_thread_to_each_held_call_and_reports_the_run(lesson, mode, stores):
    """``run_read_last`` / ``arun_read_last``: the threads line follows the number of held
    stores (not the page's 6), the reader still reads nothing, and the agent it built ran
    every store. Under ``ainvoke`` the timeline records the event loop's thread for every
    call, and the report says so instead of claiming more."""
    built = []

    def build(*middleware):
        fields = dict(list(POSTGRES_FIELDS.items())[:stores])
        built.append(middleware)
        return lesson["my_agent"](*middleware, fields=fields)

    args = (build, lesson["TURN"], *LATE, stores)
    report = run_read_last(*args) if mode == "sync" else asyncio.run(arun_read_last(*args))
    lines = report.splitlines()
    threads = stores + 1
    assert lines[0].startswith(f"run with max_concurrency={threads}: {stores} store_requirement")
    assert lines[1].startswith("(on fewer threads they deadlock")
    assert lines[2:4] == [
        "get_collected_requirements started after every store_requirement ended: True",
        f"super-steps of the {stores + 2} calls: [2]",
    ]
    hold, timeline = built[0]
    assert isinstance(hold, ReadLast) and hold.timeline is timeline
    assert sum(e.name == "store_requirement" for e in timeline.events) == stores
    assert lines[4] == f"they ran on more than one thread: {timeline.thread_count() > 1}"
    assert lines[5] == "get_collected_requirements replied: {}"


def test_read_last_report_before_a_run_says_what_is_missing():
    hold = ReadLast(ToolTimeline(), "get_collected_requirements", "store_requirement", writers=5)
    with pytest.raises(ValueError, match="no get_collected_requirements or no store_requirement"):
        hold.report()


def _late_run(lesson, stores: int, threads: int, timeout: float = 60.0) -> int:
    """The page's late-reader run with ``stores`` stores on ``threads`` threads: what it saw."""
    timeline = ToolTimeline()
    hold = ReadLast(
        timeline, "get_collected_requirements", "store_requirement", stores, timeout=timeout
    )
    fields = dict(list(POSTGRES_FIELDS.items())[:stores])
    agent = lesson["my_agent"](hold, timeline, fields=fields)
    return seen(agent.invoke(lesson["TURN"], {"max_concurrency": threads}))


@pytest.mark.parametrize("stores", [3, 5])
def test_the_late_reader_needs_a_thread_for_each_store_and_one_for_itself(lesson, stores):
    """The page's rule for its ``max_concurrency``: ``ReadLast`` holds the stores until the
    reader runs, and the reader comes after them in the reply, so the stores and the reader
    run at once. One thread fewer, and every thread holds a store waiting for a reader that
    never gets one (the last call, a second reader, needs no thread of its own)."""
    assert _late_run(lesson, stores, stores + 1) == 0
    with pytest.raises(TimeoutError, match="no get_collected_requirements call came to wait"):
        _late_run(lesson, stores, stores, timeout=0.5)  # no thread left: a certain deadlock


def test_the_pages_late_reader_runs_on_the_fewest_threads_it_needs(lesson):
    """The page's ``run_read_last`` passes what its first printed line says it needs (5 stores
    + the reader), not more: one thread fewer deadlocks."""
    cell = next(c for c in code_cells("03") if "run_read_last(" in c)
    assert "max_concurrency" not in cell  # the printed line carries it
    first = run_read_last(lesson["my_agent"], lesson["TURN"], *LATE, 5).splitlines()[:2]
    threads = int(re.search(r"max_concurrency=(\d+)", first[0])[1])
    assert threads == 6 and first[1].startswith("(on fewer threads they deadlock")
    assert _late_run(lesson, 5, threads) == 0
    with pytest.raises(TimeoutError, match="no get_collected_requirements call came to wait"):
        _late_run(lesson, 5, threads - 1, timeout=0.5)


def test_the_lessons_plain_agent_shows_what_the_hazard_reproduction_shows(lesson):
    """agentstate.hazards' same-batch-read (the row the lesson links to) and the lesson agree."""
    result = hazard("same-batch-read").run()
    assert result.outcome == "reproduced", result.evidence
    state = lesson["my_agent"]().invoke(lesson["TURN"])
    assert seen(state) == 0 and len(state["requirements"]) == 5


# --- what lesson 03 takes from the package, and the library behaviour its notes state ---


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("next_reply", [False, True])
def test_same_turn_model_scripts_the_lessons_replies(mode, next_reply):
    """``same_turn_model``: the stores and the readers in one reply (or the readers in the
    next), each turn ending in "Done."; run through a plain agent with ``invoke`` and
    ``ainvoke``."""
    from agentstate.lessons.fixtures import RequirementsState, same_turn_model, store_requirement

    readers = ["get_collected_requirements"]
    model = same_turn_model(POSTGRES_FIELDS, readers, next_reply=next_reply, turns=2)
    ai = [m for m in model.script if m.tool_calls or m.text]
    names = [[c["name"] for c in m.tool_calls] for m in ai]
    one_turn = (
        [["store_requirement"] * 5, readers, []]
        if next_reply
        else [["store_requirement"] * 5 + readers, []]
    )
    assert names == one_turn * 2 and ai[-1].text == "Done."
    lister = definitions("03", ("get_collected_requirements",))["get_collected_requirements"]
    agent = create_agent(model, tools=[store_requirement, lister], state_schema=RequirementsState)
    run = agent.invoke(user_turn()) if mode == "sync" else asyncio.run(agent.ainvoke(user_turn()))
    assert fields_seen_by_reader(run) == (5 if next_reply else 0)
    assert run["requirements"] == POSTGRES_FIELDS


def test_same_turn_model_refuses_a_string_of_readers_and_no_turns():
    from agentstate.lessons.fixtures import same_turn_model

    with pytest.raises(TypeError, match="list of tool names"):
        same_turn_model(POSTGRES_FIELDS, "validate_manifest")
    with pytest.raises(ValueError, match="turns must be at least 1"):
        same_turn_model(POSTGRES_FIELDS, ["validate_manifest"], turns=0)


def test_batch_of_names_the_reply_its_writer_calls_in_order_and_its_size(lesson):
    """What the teaching cache keys a batch by: the AIMessage holding the call (by id, or its
    call ids joined when it has none), its writer calls in the model's order, its size."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage

    from agentstate.core import batch_of

    seen_batches = []

    class Look(AgentMiddleware):
        def wrap_tool_call(self, request, handler):
            seen_batches.append(batch_of(request, ["store_requirement"]))
            return handler(request)

    state = lesson["my_agent"](Look()).invoke(lesson["TURN"])
    ai = next(m for m in state["messages"] if m.type == "ai" and m.tool_calls)
    stores = [c["id"] for c in ai.tool_calls if c["name"] == "store_requirement"]
    assert len(seen_batches) == 7 and set(seen_batches) == {(ai.id, tuple(stores), 7)}
    call = {"name": "validate_manifest", "args": {}, "id": "c1", "type": "tool_call"}
    anonymous = AIMessage(content="", tool_calls=[call])
    assert anonymous.id is None

    class Request:
        tool_call = {"name": "validate_manifest", "id": "c1"}
        state = {"messages": [anonymous]}

    assert batch_of(Request(), ["store_requirement"]) == ("c1", (), 1)
    with pytest.raises(TypeError, match="writers must be tool names"):
        batch_of(Request(), "store_requirement")
    Request.state = {"messages": []}
    with pytest.raises(ValueError, match="no AIMessage in the state holds tool call 'c1'"):
        batch_of(Request(), ["store_requirement"])


@pytest.mark.parametrize("how", ["state only", "both by hand", "reader_view"])
def test_a_tool_reads_runtime_state_which_overriding_state_alone_leaves(lesson, how):
    """The lesson's note on ``reader_view``: a tool's ``runtime.state`` is not the request's
    ``state``; a middleware that overrides only ``state`` leaves the reader blind, and
    ``reader_view`` (what the teaching cache calls) sets both."""
    from dataclasses import replace

    from langchain.agents.middleware import AgentMiddleware

    from agentstate.core import reader_view

    class View(AgentMiddleware):
        def wrap_tool_call(self, request, handler):
            if how == "reader_view":
                return handler(reader_view(request, "requirements", {"engine": "postgres"}))
            view = {**request.state, "requirements": {"engine": "postgres"}}
            both = how == "both by hand"
            runtime = replace(request.runtime, state=view) if both else request.runtime
            return handler(request.override(state=view, runtime=runtime))

    model = ScriptedChatModel(
        script=[reply(tool_call("get_collected_requirements")), reply(text="Done.")]
    )
    agent = create_agent(
        model, tools=lesson["TOOLS"], state_schema=lesson["RequirementsState"], middleware=[View()]
    )
    assert seen(agent.invoke(lesson["TURN"])) == (0 if how == "state only" else 1)


def test_reader_view_refuses_a_state_that_is_not_a_mapping_and_leaves_the_request():
    from agentstate.core import reader_view

    class Request:
        state = ["not", "a", "mapping"]

    request = Request()
    with pytest.raises(TypeError, match="the request's state is not a mapping"):
        reader_view(request, "requirements", {})
    assert request.state == ["not", "a", "mapping"]


def test_the_solution_copies_the_lessons_reader_cache_and_settings_unchanged():
    """Solution 03 answers with the lesson's own code: the reader, the teaching TurnCache and
    the constants it copies are the lesson's, character for character."""
    import ast

    from tests.lesson_source import LESSONS

    lesson_text = next(LESSONS.glob("03_*.py")).read_text()
    solution = next((LESSONS / "solutions").glob("03_*.py")).read_text()
    wanted = {"get_collected_requirements", "TurnCache", "CACHE", "TURN", "READS", "TOOLS"}
    copied = {}
    for node in ast.parse(solution).body:
        names = [getattr(node, "name", None)] + [
            t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)
        ]
        for name in set(names) & wanted:
            copied[name] = ast.get_source_segment(solution, node)
    assert set(copied) == wanted, sorted(wanted - set(copied))
    assert [n for n, text in copied.items() if text not in lesson_text] == []


def test_the_teaching_cache_forgets_each_batch_and_records_a_readers_finish(lesson):
    """The drop condition of the page: every call of the reply (readers too) leaves an entry,
    and the call that completes the set deletes the batch, so nothing is left after a turn."""
    cache = teaching_cache(lesson)
    recorded = []
    original = cache.changed.notify_all

    def spy():
        recorded.append({k: dict(v) for k, v in cache.batches.items()})
        original()

    cache.changed.notify_all = spy
    state = lesson["my_agent"](cache).invoke(lesson["TURN"])
    last = next(iter(recorded[-1].values()))
    readers = {
        c["id"]: c["name"] for m in state["messages"] if m.type == "ai" for c in m.tool_calls
    }
    assert len(last) == 7 and cache.batches == {}
    assert [last[i] for i, n in readers.items() if n in lesson["READS"]] == [None, None]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"writers": "store_requirement"}, TypeError, "writers must be tool names, not the string"),
        ({"readers": []}, ValueError, "readers must name at least one tool"),
        ({"readers": ["store_requirement"]}, ValueError, "both writer and reader"),
        ({"key": ""}, TypeError, "key must be a state key's name"),
        ({"reducer": "merge_fields"}, TypeError, "reducer must be a function"),
        ({"timeout": 0}, ValueError, "timeout must be positive seconds, got 0"),
        ({"timeout": "10"}, ValueError, "timeout must be positive seconds, got '10'"),
    ],
)
def test_the_teaching_caches_base_refuses_bad_settings_in_one_line(lesson, options, error, message):
    """``TurnCacheBase`` (the settings the page's ``TurnCache`` takes from the package): a bad
    setting fails when the cache is made, with a line naming it, not inside a tool call."""
    with pytest.raises(error, match=re.escape(message)) as raised:
        teaching_cache(lesson, **options)
    assert "\n" not in str(raised.value)


def test_the_teaching_caches_base_holds_what_the_page_uses(lesson):
    cache = teaching_cache(lesson, timeout=0.5)
    assert isinstance(cache, TurnCacheBase) and cache.name == "TurnCache"
    assert cache.writers == {"store_requirement"} and cache.readers == set(lesson["READS"])
    assert cache.key == "requirements" and cache.reducer is merge_fields and cache.batches == {}
    assert cache.changed.acquire(blocking=False)  # a lock of its own, free before any call
    cache.changed.release()
    error = cache.timed_out({"name": "validate_manifest", "args": {}, "id": "c1"})
    assert isinstance(error, TimeoutError)
    assert str(error) == "validate_manifest: writers still busy after 0.5 s"
    assert teaching_cache(lesson).changed is not cache.changed  # no condition shared


def test_written_value_names_what_a_command_wrote_and_a_plain_reply_wrote_nothing():
    """What the page's step 3 records: ``written_value(result, key).value``."""
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command

    done = ToolMessage("Stored engine.", tool_call_id="c1")
    wrote = written_value(Command(update={"requirements": {"engine": "pg"}}), "requirements")
    assert wrote.wrote and wrote.value == {"engine": "pg"}
    assert written_value(done, "requirements") == (False, None)
    assert written_value([done, Command(update={"other": 1})], "requirements").value is None

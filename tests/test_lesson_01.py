"""Notebook 01's library claims, pinned, and its teaching tools agree with the package's.

The lesson shows a few of these in cells; the exhaustive checks live here so a
deepagents or LangGraph upgrade that changes any of them turns CI red, and so
do the knob's fixed settings. The teaching tools are executed from the
lesson's own source (``notebooks/_src/01_file_based_storage.py``), not
copied; the pieces the lesson imports from the package (its fix's reader
``get_collected_requirements``, the knob's ``fields_kept``) are checked here
against them, sync and async.
"""

from __future__ import annotations

import asyncio
import json
import operator
import random
from typing import Annotated, TypedDict

import pytest
from deepagents import create_deep_agent
from deepagents.backends.utils import create_file_data, file_data_to_string
from deepagents.middleware.filesystem import _file_data_delta_reducer

from agentstate.doctor import diagnose
from agentstate.hazards import hazard
from agentstate.lessons.filestate import fields_in, write_file
from agentstate.lessons.fixtures import (
    FILE_LAYOUTS,
    POSTGRES_FIELDS,
    PerFieldFileStorage,
    afields_kept,
    fields_kept,
    file_fields,
    get_collected_requirements,
    label_fields,
    one_batch_model,
    one_call_per_step_model,
    one_reply_model,
    store_then_read_model,
    user_turn,
)
from agentstate.lessons.simulation import FinishOrder
from agentstate.lessons.toy import two_writers
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import REQUIREMENTS_PATH, assemble_rds_agent, build_file_storage_agent
from agentstate.tracing import (
    ToolTimeline,
    arun_by_step,
    run_by_step,
    superstep,
    tool_replies,
)
from tests.lesson_source import definitions

GUARD_ERROR = "Error: parallel file mutations to the same path are not allowed."
ORDER = list(POSTGRES_FIELDS)
TEACHING = (
    "store_requirement",
    "store_in_own_file",
    "PATH",
    "TURN",
    "LAYOUTS",
    "fields_in",
    "replace_path",
    "ToyState",
)


def teaching() -> dict:
    """The lesson's tools and helpers, executed from its own source."""
    return definitions("01", TEACHING)


@pytest.fixture(scope="module")
def lesson() -> dict:
    return teaching()


def run(agent, inp, mode: str):
    return agent.invoke(inp) if mode == "sync" else asyncio.run(agent.ainvoke(inp))


def in_file(state) -> dict:
    return json.loads(file_data_to_string(state["files"][REQUIREMENTS_PATH]))


def per_field_files(state) -> dict:
    return {
        p: json.loads(file_data_to_string(d))
        for p, d in state["files"].items()
        if p.startswith("/requirements/")
    }


# --- the loss, as the pinned libraries produce it ---


def test_the_files_channel_is_deepagents_delta_reducer_and_a_later_write_replaces_a_path():
    agent = create_deep_agent(ScriptedChatModel(script=[reply(text="ok")]))
    channel = agent.channels["files"]
    assert type(channel).__name__ == "DeltaChannel"
    assert channel.reducer is _file_data_delta_reducer
    writes = [{REQUIREMENTS_PATH: create_file_data(json.dumps({f: 1}))} for f in ORDER]
    merged = _file_data_delta_reducer({}, writes)
    assert json.loads(file_data_to_string(merged[REQUIREMENTS_PATH])) == {ORDER[-1]: 1}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_five_calls_run_in_one_step_on_five_threads_and_the_last_in_the_message_survives(
    lesson, mode
):
    timeline = ToolTimeline()
    agent = create_deep_agent(
        one_batch_model(POSTGRES_FIELDS),
        tools=[lesson["store_requirement"]],
        middleware=[timeline, FinishOrder(timeline, ORDER[::-1])],  # as the lesson lists them
    )
    state = run(agent, user_turn(), mode)
    assert in_file(state) == {ORDER[-1]: POSTGRES_FIELDS[ORDER[-1]]}
    assert [m.content for m in tool_replies(state)] == [f"Stored {f}." for f in ORDER]
    assert {e.step for e in timeline.events} == {3}
    # why step 3 (the lesson's diagram): deepagents' node before the model takes step 1
    assert [m.step for m in timeline.model_calls] == [2, 4]
    assert "PatchToolCallsMiddleware.before_agent" in agent.get_graph().nodes
    if mode == "sync":  # under ainvoke the timeline records the event loop's thread
        assert timeline.thread_count() == 5
    assert max(e.start for e in timeline.events) < min(e.end for e in timeline.events)  # overlap
    assert [e.args["field_name"] for e in timeline.finish_order()] == ORDER[::-1]


@pytest.mark.parametrize("seed", [7, 8, 11])
def test_the_teaching_tool_and_the_package_file_storage_lose_the_same_fields(lesson, seed):
    order = random.Random(seed).sample(ORDER, len(ORDER))
    fields = {f: POSTGRES_FIELDS[f] for f in order}
    teaching_state = create_deep_agent(
        one_batch_model(fields), tools=[lesson["store_requirement"]]
    ).invoke(user_turn())
    package_state = build_file_storage_agent(one_batch_model(fields)).invoke(user_turn())
    assert in_file(teaching_state) == file_fields(package_state) == {order[-1]: fields[order[-1]]}


def test_max_concurrency_one_runs_the_calls_apart_and_still_keeps_one_field(lesson):
    timeline = ToolTimeline()
    agent = create_deep_agent(
        one_batch_model(POSTGRES_FIELDS), tools=[lesson["store_requirement"]], middleware=[timeline]
    )
    state = agent.invoke(user_turn(), {"max_concurrency": 1})
    by_start = sorted(timeline.events, key=lambda e: e.start)
    assert all(b.start >= a.end for a, b in zip(by_start, by_start[1:], strict=False))
    assert in_file(state) == {ORDER[-1]: POSTGRES_FIELDS[ORDER[-1]]}


def test_one_call_per_reply_keeps_every_field_at_a_model_call_per_field(lesson):
    model = one_call_per_step_model(POSTGRES_FIELDS)
    state = create_deep_agent(model, tools=[lesson["store_requirement"]]).invoke(user_turn())
    assert in_file(state) == POSTGRES_FIELDS
    assert model.position == len(POSTGRES_FIELDS) + 1


# --- deepagents' own guard (since deepagents 0.7.16: docs/hazards-by-version.md) ---


def test_the_hazard_rows_the_lesson_links_agree_with_the_pins():
    """agentstate.hazards' reproductions of lesson 01: the custom tool loses, deepagents'
    own edit_file refuses (the guard arrived in 0.7.16; the pins are newer)."""
    custom, builtin = hazard("file-read-modify-write").run(), hazard("builtin-parallel-edit").run()
    assert (custom.outcome, custom.evidence) == ("reproduced", "kept 1 of 5 (az)")
    assert builtin.outcome == "refused" and builtin.evidence.startswith("1 of 5 edits applied")


def test_write_file_refuses_every_later_mutation_of_one_path_in_one_reply():
    calls = [
        tool_call("write_file", file_path=REQUIREMENTS_PATH, content=json.dumps({f: v}))
        for f, v in POSTGRES_FIELDS.items()
    ]
    state = create_deep_agent(one_reply_model(*calls)).invoke(user_turn())
    replies = tool_replies(state)
    assert [m.status for m in replies] == ["success"] + ["error"] * 4
    assert {m.content for m in replies[1:]} == {GUARD_ERROR}
    assert in_file(state) == {ORDER[0]: POSTGRES_FIELDS[ORDER[0]]}  # the FIRST call's write


def test_edit_file_is_guarded_too():
    calls = [
        tool_call("edit_file", file_path=REQUIREMENTS_PATH, old_string="{", new_string="{ ")
        for _ in range(3)
    ]
    inp = {**user_turn(), "files": {REQUIREMENTS_PATH: create_file_data("{}")}}
    state = create_deep_agent(one_reply_model(*calls)).invoke(inp)
    assert [m.status for m in tool_replies(state)] == ["success", "error", "error"]
    assert tool_replies(state)[-1].content == GUARD_ERROR


def test_delete_is_guarded_too():
    """deepagents' guard covers its three mutating file tools: a write then a delete of one
    path in one reply, and the delete is refused (the file keeps the write)."""
    calls = [
        tool_call("write_file", file_path=REQUIREMENTS_PATH, content="{}"),
        tool_call("delete", file_path=REQUIREMENTS_PATH),
    ]
    state = create_deep_agent(one_reply_model(*calls)).invoke(user_turn())
    assert [m.status for m in tool_replies(state)] == ["success", "error"]
    assert tool_replies(state)[-1].content == GUARD_ERROR
    assert in_file(state) == {}


def test_the_guard_is_per_reply_and_per_path():
    one_per_reply = [
        reply(tool_call("write_file", file_path=REQUIREMENTS_PATH, content=json.dumps({f: 1})))
        for f in ORDER[:2]
    ]
    state = create_deep_agent(ScriptedChatModel(script=[*one_per_reply, reply(text="ok")])).invoke(
        user_turn()
    )
    assert [m.status for m in tool_replies(state)] == ["success", "success"]
    other_paths = [
        tool_call("write_file", file_path=f"/requirements/{f}.json", content="{}") for f in ORDER
    ]
    state = create_deep_agent(one_reply_model(*other_paths)).invoke(user_turn())
    assert {m.status for m in tool_replies(state)} == {"success"}


def test_a_custom_read_modify_write_tool_is_not_guarded(lesson):
    state = create_deep_agent(
        one_batch_model(POSTGRES_FIELDS), tools=[lesson["store_requirement"]]
    ).invoke(user_turn())
    assert {m.status for m in tool_replies(state)} == {"success"}
    assert GUARD_ERROR not in {m.content for m in tool_replies(state)}
    assert len(in_file(state)) == 1


# --- the fix: one file per field ---


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_teaching_fix_and_the_package_per_field_storage_keep_the_same_files(lesson, mode):
    tools = [lesson["store_in_own_file"], get_collected_requirements]
    teaching_state = run(
        create_deep_agent(store_then_read_model(POSTGRES_FIELDS), tools=tools), user_turn(), mode
    )
    package_state = run(
        assemble_rds_agent(store_then_read_model(POSTGRES_FIELDS), PerFieldFileStorage()),
        user_turn(),
        mode,
    )
    assert per_field_files(teaching_state) == per_field_files(package_state)
    assert len(per_field_files(teaching_state)) == 5
    read_back = tool_replies(teaching_state, "get_collected_requirements")[-1].content
    assert json.loads(read_back) == PerFieldFileStorage().read(package_state, None)
    assert json.loads(read_back) == POSTGRES_FIELDS


def test_the_package_per_field_storage_loses_again_when_every_field_shares_a_path():
    same_path = PerFieldFileStorage(path_for=lambda field: "/requirements/all.json")
    state = assemble_rds_agent(one_batch_model(POSTGRES_FIELDS), same_path).invoke(user_turn())
    assert same_path.read(state, None) == {ORDER[-1]: POSTGRES_FIELDS[ORDER[-1]]}


def test_the_package_per_field_storage_refuses_a_bad_value_and_writes_nothing():
    fields = {"engine": "postgres", "instance_class": "t3.micro"}  # no ``db.`` prefix
    state = assemble_rds_agent(one_batch_model(fields), PerFieldFileStorage()).invoke(user_turn())
    assert [m.status for m in tool_replies(state)] == ["success", "error"]
    assert sorted(per_field_files(state)) == ["/requirements/engine.json"]


# --- the fix's reader, imported from the package ---


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_packages_reader_merges_only_the_per_field_files_in_path_order(mode):
    files = {
        "/requirements/engine.json": create_file_data(json.dumps({"engine": "postgres"})),
        "/requirements/zz.json": create_file_data(json.dumps({"engine": "mysql"})),  # later path
        "/requirements/broken.json": create_file_data("not json"),
        REQUIREMENTS_PATH: create_file_data(json.dumps({"username": "elsewhere"})),
    }
    model = ScriptedChatModel(
        script=[reply(tool_call("get_collected_requirements")), reply(text="ok")]
    )
    agent = create_deep_agent(model, tools=[get_collected_requirements])
    state = run(agent, {**user_turn(), "files": files}, mode)
    (answer,) = tool_replies(state, "get_collected_requirements")
    assert answer.status == "success"
    assert json.loads(answer.content) == {"engine": "mysql"}  # the later path wins, nothing else


def test_the_packages_reader_answers_an_empty_object_before_any_store():
    model = ScriptedChatModel(
        script=[reply(tool_call("get_collected_requirements")), reply(text="ok")]
    )
    state = create_deep_agent(model, tools=[get_collected_requirements]).invoke(user_turn())
    assert tool_replies(state, "get_collected_requirements")[0].content == "{}"


# --- the prove cell and the knob: the package's fields_kept, at fixed settings ---


@pytest.mark.parametrize("parallel_calls", [1, 5, 20])
def test_fields_kept_keeps_one_field_in_the_shared_file_and_every_field_in_files_per_field(
    lesson, parallel_calls
):
    assert list(FILE_LAYOUTS) == lesson["LAYOUTS"]  # the knob's choices are the package's
    kept = {layout: fields_kept(layout, parallel_calls) for layout in lesson["LAYOUTS"]}
    assert kept == {"one file": 1, "one file per field": parallel_calls}


@pytest.mark.parametrize("parallel_calls", [1, 5, 20])
def test_fields_kept_counts_what_the_lessons_own_tools_keep(lesson, parallel_calls):
    """The package's two layouts keep as many fields as the page's two tools."""
    page_tools = {"one file": "store_requirement", "one file per field": "store_in_own_file"}
    for layout, name in page_tools.items():
        state = create_deep_agent(
            one_batch_model(label_fields(parallel_calls)), tools=[lesson[name]]
        ).invoke(user_turn())
        files = state["files"]
        on_page = {f for data in files.values() for f in json.loads(file_data_to_string(data))}
        assert fields_kept(layout, parallel_calls) == len(on_page)


def test_fields_kept_async_twin_agrees():
    kept = {layout: asyncio.run(afields_kept(layout, 7)) for layout in FILE_LAYOUTS}
    assert kept == {"one file": 1, "one file per field": 7}


@pytest.mark.parametrize(
    ("layout", "parallel_calls", "message"),
    [
        ("two files", 5, "layout must be one of 'one file', 'one file per field', not 'two files'"),
        ("one file", 0, "parallel_calls must be a whole number of at least 1, not 0"),
        ("one file", True, "parallel_calls must be a whole number of at least 1, not True"),
        ("one file", "5", "parallel_calls must be a whole number of at least 1, not '5'"),
    ],
)
def test_fields_kept_refuses_bad_settings_with_one_line(layout, parallel_calls, message):
    with pytest.raises(ValueError) as caught:
        fields_kept(layout, parallel_calls)
    assert str(caught.value) == message
    with pytest.raises(ValueError) as caught:
        asyncio.run(afields_kept(layout, parallel_calls))
    assert str(caught.value) == message


# --- the toy, the printed reads, the reducer by hand and the doctor (shown, not asserted) ---


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_toy_keeps_one_field_in_files_and_both_writes_in_the_log(lesson, mode):
    toy = two_writers(lesson["ToyState"])
    assert set(toy.get_graph().nodes) == {"__start__", "store_engine", "store_username", "__end__"}
    for _ in range(20):  # the log's order is the order of the nodes, never the threads'
        result = run(toy, {"files": {}, "log": []}, mode)
        assert result["files"] == {lesson["PATH"]: {"username": "dbadmin"}}
        assert result["log"] == [
            "store engine: read {}, wrote {'engine': 'postgres'}",
            "store username: read {}, wrote {'username': 'dbadmin'}",
        ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_tool_prints_what_it_read_in_the_order_the_calls_finish(lesson, capsys, mode):
    """Each call runs after the ones FinishOrder let finish first, and still reads nothing."""
    timeline = ToolTimeline()
    agent = create_deep_agent(
        one_batch_model(POSTGRES_FIELDS),
        tools=[lesson["store_requirement"]],
        middleware=[timeline, FinishOrder(timeline, ORDER[::-1])],
    )
    run(agent, user_turn(), mode)
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"store_requirement({f}) read {{}}" for f in reversed(ORDER)]


def test_the_recorded_writes_folded_by_the_agents_own_reducer_keep_the_last_call(lesson):
    timeline = ToolTimeline()
    agent = create_deep_agent(
        one_batch_model(POSTGRES_FIELDS),
        tools=[lesson["store_requirement"]],
        middleware=[timeline],
    )
    state = agent.invoke(user_turn())
    reducer = agent.channels["files"].reducer
    writes = [e.update["files"] for e in timeline.events]
    fields_in = lesson["fields_in"]
    assert fields_in(reducer({}, writes)) == fields_in(state["files"]) == {"username": "dbadmin"}
    assert fields_in(reducer({}, writes[::-1])) == {"engine": "postgres"}
    flow = superstep(timeline, "files")
    assert [c.kept for c in flow.calls] == [False, False, False, False, True]
    assert [fields_in(c.read) for c in flow.calls] == [{}] * 5


def test_the_doctor_names_the_shared_file_tool_and_passes_one_file_per_field(lesson):
    broken = create_deep_agent(one_batch_model({}), tools=[lesson["store_requirement"]])
    fixed = create_deep_agent(
        one_batch_model({}),
        tools=[lesson["store_in_own_file"], get_collected_requirements],
    )
    assert diagnose(broken).codes() == ["file-read-modify-write"]
    assert diagnose(fixed).codes() == []


def merge_path(files: dict, write: dict) -> dict:
    return {**files, **{p: {**files.get(p, {}), **f} for p, f in write.items()}}


class Merging(TypedDict):
    files: Annotated[dict[str, dict], merge_path]
    log: Annotated[list[str], operator.add]


def test_a_merging_reducer_in_the_toy_keeps_both_fields():
    """two_writers builds on the reader's state class: exercise 1's reducer keeps both."""
    result = two_writers(Merging).invoke({"files": {}, "log": []})
    assert result["files"] == {REQUIREMENTS_PATH: {"engine": "postgres", "username": "dbadmin"}}


# --- the page's helpers: fields_in, write_file, run_by_step ---


def test_fields_in_reads_the_json_object_a_file_holds_and_empty_otherwise():
    files = {
        REQUIREMENTS_PATH: create_file_data(json.dumps({"engine": "postgres"})),
        "/list.json": create_file_data("[1, 2]"),
        "/broken.json": create_file_data("not json"),
    }
    assert fields_in(files) == {"engine": "postgres"}
    assert fields_in(files, "/list.json") == fields_in(files, "/broken.json") == {}
    assert fields_in(None) == fields_in({}, "/nowhere.json") == {}


def test_write_file_writes_the_whole_file_and_replies_to_the_call():
    class Runtime:
        tool_call_id = "call-7"

    command = write_file(Runtime(), "/a.json", {"engine": "postgres"}, "Stored engine.")
    (done,) = command.update["messages"]
    assert (done.content, done.tool_call_id) == ("Stored engine.", "call-7")
    assert fields_in(command.update["files"], "/a.json") == {"engine": "postgres"}
    assert list(command.update) == ["files", "messages"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_run_by_step_prints_each_super_steps_nodes_and_the_calls_in_reply_order(
    lesson, capsys, mode
):
    timeline = ToolTimeline()
    agent = create_deep_agent(
        one_batch_model(POSTGRES_FIELDS),
        tools=[lesson["store_requirement"]],
        middleware=[timeline, FinishOrder(timeline, ORDER[::-1])],
    )
    if mode == "sync":
        state = run_by_step(agent, user_turn(), timeline)
    else:
        state = asyncio.run(arun_by_step(agent, user_turn(), timeline))
    printed = capsys.readouterr().out.splitlines()[len(ORDER) :]  # after the tool's own prints
    threads = "5 threads" if mode == "sync" else "1 thread"  # ainvoke: the event loop's
    assert printed[:3] == [
        "super-step 1: PatchToolCallsMiddleware.before_agent",
        "super-step 2: model",
        f"super-step 3: tools x5, on {threads}",
    ]
    assert printed[3:8] == [
        f"  #{i} store_requirement({f}) replied 'Stored {f}.'" for i, f in enumerate(ORDER, 1)
    ]
    assert printed[8] == "super-step 4: model"
    assert in_file(state) == {ORDER[-1]: POSTGRES_FIELDS[ORDER[-1]]}


def test_run_by_step_without_a_timeline_prints_the_nodes_only(capsys):
    toy = two_writers(teaching()["ToyState"])
    state = run_by_step(toy, {"files": {}, "log": []})
    assert capsys.readouterr().out.splitlines() == ["super-step 1: store_engine, store_username"]
    assert len(state["log"]) == 2

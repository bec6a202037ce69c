"""Notebook 04 (the subagent boundary): the deepagents / LangChain behaviour the lesson relies
on, pinned here so an upgrade that changes it turns CI red, and the lesson's plain
``create_deep_agent`` fix, executed from the notebook's own source, against the package's
``build_shared_schema_agent``."""

import json
from pathlib import Path

import jupytext
import pytest
from deepagents.middleware.subagents import create_sub_agent
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph import StateGraph

from agentstate.core import SharedStateMiddleware, share_state, undeclared_keys
from agentstate.doctor import diagnose
from agentstate.hazards import hazard
from agentstate.lessons.display import compare_findings
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    collector_model,
    fields_seen_by_reader,
    parent_model,
    user_turn,
    who_sees_what,
)
from agentstate.models import ScriptedChatModel, reply
from agentstate.rds import (
    RdsAgentState,
    RequirementsSyncMiddleware,
    StateStorage,
    assemble_rds_agent,
    build_cache_fix_agent,
    build_shared_schema_agent,
    build_split_schema_agent,
    collector_spec,
)
from agentstate.tracing import CommandRecorder

LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "_src" / "04_subagents.py"
GOING_FURTHER = LESSON.parent / "going_further" / "04_lists_and_fork_mode.py"
DECLARATIONS = ["the parent only", "the collector only", "both, one schema"]


@pytest.fixture(scope="module")
def lesson() -> dict:
    """Notebook 04's namespace after its code cells ran as the reader runs them (not the widget).

    Each cell is padded to its line in the file, so ``inspect.getsource`` (the doctor) finds
    the tools the page defines.
    """
    text = LESSON.read_text()
    namespace: dict = {}
    for cell in jupytext.read(LESSON).cells:
        if cell.cell_type != "code" or "import ipywidgets" in cell.source:
            continue
        padded = "\n" * text[: text.index(cell.source)].count("\n") + cell.source
        exec(compile(padded, str(LESSON), "exec", dont_inherit=True), namespace)
    return namespace


@pytest.fixture(scope="module")
def humans_received():
    """``humans_received(mode)`` from going-further notebook 04, executed from its source: the
    human messages a collector that only answers received, in subagent ``mode``."""
    cells = [c.source for c in jupytext.read(GOING_FURTHER).cells if c.cell_type == "code"]
    (source,) = [s for s in cells if "def humans_received" in s]
    namespace: dict = {"POSTGRES_FIELDS": POSTGRES_FIELDS}
    exec(compile(source, str(GOING_FURTHER), "exec", dont_inherit=True), namespace)
    return namespace["humans_received"]


# --- what crosses the boundary, pinned ---


@pytest.mark.parametrize("mode", [None, "isolated"])
def test_the_default_mode_hands_the_subagent_only_the_task_description(humans_received, mode):
    humans = humans_received(mode)
    assert len(humans) == 1 and json.loads(humans[0]) == POSTGRES_FIELDS


def test_fork_mode_hands_the_subagent_the_parents_conversation(humans_received):
    humans = humans_received("fork")
    assert humans[0] == "Give me a Postgres 15.5 manifest"
    assert len(humans) == 2 and '"engine": "postgres"' in humans[1]  # the task, wrapped


def test_create_agent_not_langgraph_merges_a_middlewares_state_schema():
    class Declares(AgentMiddleware):
        state_schema = RdsAgentState

    model = ScriptedChatModel(script=[reply(text="ok")])
    merged = create_agent(model, middleware=[Declares()])
    assert "requirements" in merged.channels
    plain = StateGraph(AgentState)
    plain.add_node("noop", lambda state: {})
    plain.set_entry_point("noop")
    assert "requirements" not in plain.compile().channels


def test_create_deep_agent_forwards_its_schema_to_declarative_subagents():
    spec = collector_spec(collector_model(), StateStorage())
    assert undeclared_keys(create_sub_agent(spec), ["requirements"]) == ["requirements"]
    forwarded = create_sub_agent(spec, state_schema=RdsAgentState)
    assert undeclared_keys(forwarded, ["requirements"]) == []


def test_split_schema_task_returns_only_messages():
    recorder = CommandRecorder(["task"])
    state = build_split_schema_agent(
        parent_model(POSTGRES_FIELDS), collector_model(), middleware=[recorder]
    ).invoke(user_turn())
    assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]
    assert state.get("requirements", {}) == {}


def test_share_state_declares_the_key_on_a_spec_without_the_parents_schema():
    specs = share_state([collector_spec(collector_model(), StateStorage())], RdsAgentState)
    assert undeclared_keys(create_sub_agent(specs[0]), ["requirements"]) == []
    state = assemble_rds_agent(
        parent_model(POSTGRES_FIELDS),
        StateStorage(),
        middleware=[SharedStateMiddleware(RdsAgentState), RequirementsSyncMiddleware()],
        subagents=specs,
    ).invoke(user_turn())
    assert state["requirements"] == POSTGRES_FIELDS


# --- the lesson's plain agent against the package ---


def broken_agent(lesson, **options):
    """The page's split-schema build: the parent's ``state_schema`` declares ``requirements``,
    the compiled collector (a plain ``create_agent``) does not."""
    return lesson["parent_agent"](lesson["collector_agent"](), **options)


def fixed_agent(lesson, **options):
    """The page's fix: the collector compiled with the parent's schema."""
    return lesson["parent_agent"](lesson["collector_agent"](lesson["RequirementsState"]), **options)


def test_the_lessons_collector_drops_its_own_writes_without_an_error(lesson):
    """The page's evidence, on the collector itself: it runs its five stores, reports them
    stored, and ends with no ``requirements`` key; with the parent's schema it keeps them."""
    from langchain_core.messages import HumanMessage

    task = {"messages": [HumanMessage(json.dumps(POSTGRES_FIELDS))]}
    alone = lesson["collector_agent"]().invoke(task)
    assert sorted(alone) == ["messages"]
    assert alone["messages"][-1].text == "Stored 5 field(s)."
    fixed = lesson["collector_agent"](lesson["RequirementsState"]).invoke(task)
    assert fixed["requirements"] == POSTGRES_FIELDS


def test_the_collector_is_given_the_task_description_only(lesson):
    """The page's "down" table: the collector's model was given one human message, the task
    description holding the five fields (the user's message stays with the parent)."""
    model = collector_model()
    lesson["parent_agent"](lesson["collector_agent"](model=model)).invoke(user_turn())
    (given,) = model.seen[:1]
    assert [m.type for m in given] == ["human"]
    assert json.loads(given[0].text) == POSTGRES_FIELDS


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_task_hands_the_subagent_the_parents_state_not_only_the_description(lesson, run):
    """The page's diagram and "down" table: ``task`` hands the collector the parent's keys
    (``requirements`` and ``files`` too) but ``todos``, with ``messages`` replaced by the task;
    ``TaskInputs`` records that dict, sync and async."""
    import asyncio

    from agentstate.tracing import TaskInputs

    handed = TaskInputs()
    agent = lesson["parent_agent"](lesson["collector_agent"]())
    config = {"callbacks": [handed]}
    if run == "invoke":
        agent.invoke(user_turn(), config=config)
    else:
        asyncio.run(agent.ainvoke(user_turn(), config=config))
    (down,) = handed.inputs
    assert sorted(down) == ["files", "messages", "requirements"]
    assert [m.type for m in down["messages"]] == ["human"]
    assert json.loads(down["messages"][0].text) == POSTGRES_FIELDS


def test_the_page_draws_what_task_hands_down_and_brings_up():
    """The diagram says state goes down (not the description only), minus the kept-out keys
    the "down" table prints."""
    block = LESSON.read_text().split("# ```mermaid\n", 2)[1].split("# ```", 1)[0]
    assert "flowchart LR" in block and "down: all but the kept-out keys" in block
    assert "up: changed keys except messages and kept-out keys" in block


def test_the_hazard_rows_the_lesson_links_show_what_the_lesson_shows(lesson):
    """agentstate.hazards' reproductions of lesson 04 (the rows its opening links to): the
    subagent's writes never reach the parent, as on the page's broken build, and a list handed
    back whole is doubled, as the page's note-taker shows."""
    drops, doubled = hazard("subagent-drops-key").run(), hazard("list-doubled-by-subagent").run()
    assert drops.outcome == "reproduced"
    assert drops.evidence == "the subagent's tools wrote 5 fields; the parent sees 0"
    state = broken_agent(lesson).invoke(user_turn())
    assert fields_seen_by_reader(state) == 0 and state.get("requirements", {}) == {}
    assert doubled.outcome == "reproduced"
    assert doubled.evidence == f"the parent ends with {lesson['notes']}"
    assert lesson["notes"] == ["pre", "pre", "new"]


def test_the_solutions_copy_the_lessons_definitions_unchanged():
    """Solution 04 answers with the learner's own builders: its first cell defines exactly what
    the lesson's first code cell defines (``collector_agent``, ``parent_agent``), character for
    character, and imports the package names that cell imports."""
    import ast

    def first_cell(path: Path) -> tuple[dict[str, str], set[str]]:
        source = next(c.source for c in jupytext.read(path).cells if c.cell_type == "code")
        body = ast.parse(source).body
        defined = {
            n.name: ast.get_source_segment(source, n)
            for n in body
            if isinstance(n, ast.FunctionDef | ast.ClassDef)
        }
        imported = {a.name for n in body if isinstance(n, ast.ImportFrom) for a in n.names}
        return defined, imported

    lesson, lesson_imports = first_cell(LESSON)
    solution, solution_imports = first_cell(LESSON.parent / "solutions" / LESSON.name)
    assert sorted(lesson) == ["collector_agent", "parent_agent"]
    assert solution == lesson
    assert lesson_imports - {"what_each_said"} <= solution_imports


def test_the_lessons_broken_agent_drops_the_key_like_the_split_schema_build(lesson):
    recorder = CommandRecorder(["task"])
    state = broken_agent(lesson, middleware=[recorder]).invoke(user_turn())
    assert fields_seen_by_reader(state) == 0 and state.get("requirements", {}) == {}
    assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]
    package = build_split_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
    assert package.invoke(user_turn()).get("requirements", {}) == {}


def test_the_lessons_fix_and_the_package_give_the_parent_the_same_fields(lesson):
    plain = fixed_agent(lesson).invoke(user_turn())
    package = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model()).invoke(
        user_turn()
    )
    assert plain["requirements"] == package["requirements"] == POSTGRES_FIELDS
    assert fields_seen_by_reader(plain) == 5
    assert lesson["package_holds"] == POSTGRES_FIELDS  # the page's printed comparison


def test_the_doctor_names_the_lessons_broken_agent_and_passes_the_fixed_one(lesson):
    assert diagnose(broken_agent(lesson)).codes() == ["subagent-drops-key"]
    assert diagnose(fixed_agent(lesson)).errors == []
    table = compare_findings(lesson["reports"], subagents=["requirements-collector"])
    rows = {r["hazard"]: r for r in table.rows}
    broken = rows["subagent-drops-key"]["broken build"]
    assert broken == "error in its requirements-collector subagent"
    assert rows["subagent-drops-key"]["fixed build"] == "none"


def test_the_lessons_fix_holds_under_ainvoke_like_the_package(lesson):
    import asyncio

    async def both():
        plain = fixed_agent(lesson)
        package = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
        return await plain.ainvoke(user_turn()), await package.ainvoke(user_turn())

    plain, package = asyncio.run(both())
    assert plain["requirements"] == package["requirements"] == POSTGRES_FIELDS


def test_the_lessons_fix_streams_the_same_fields(lesson):
    """``stream`` (what a UI calls) ends on the same state as ``invoke``."""
    *_, last = fixed_agent(lesson).stream(user_turn(), stream_mode="values")
    assert last["requirements"] == POSTGRES_FIELDS


def test_who_sees_what_on_the_page_runs_the_packages_three_builders(lesson, tmp_path):
    """The page's comparison: the split schema sees nothing, the cache only within the turn,
    the one schema every time (the page prints this table from the package's builders)."""
    assert list(lesson["builds"].values()) == [
        build_split_schema_agent,
        build_cache_fix_agent,
        build_shared_schema_agent,
    ]
    rows = [
        who_sees_what(b, POSTGRES_FIELDS, str(tmp_path / f"{i}.db"))
        for i, b in enumerate(lesson["builds"].values())
    ]
    assert [r["same turn"] for r in rows] == [0, 5, 5]
    assert [r["next turn"] for r in rows] == [0, 0, 5]
    assert [r["after restart"] for r in rows] == [0, 0, 5]
    assert [r["file after restart"] for r in rows] == [0, 5, 5]


@pytest.fixture(scope="module")
def going_further() -> dict:
    """Going-further notebook 04's namespace after its first code cell (the cache written out)."""
    cells = [c.source for c in jupytext.read(GOING_FURTHER).cells if c.cell_type == "code"]
    namespace: dict = {}
    exec(compile(cells[0], str(GOING_FURTHER), "exec", dont_inherit=True), namespace)
    return namespace


def test_the_cache_written_out_in_going_further_is_the_packages_cache_fix(going_further, tmp_path):
    """The write-up's cache, moved from the lesson to going further 04, gives the same table as
    the package's ``build_cache_fix_agent`` (the builder the lesson's table runs)."""
    page = who_sees_what(going_further["cache_fix"], POSTGRES_FIELDS, str(tmp_path / "page.db"))
    package = who_sees_what(build_cache_fix_agent, POSTGRES_FIELDS, str(tmp_path / "pkg.db"))
    assert page == package
    assert page == {"same turn": 5, "next turn": 0, "after restart": 0, "file after restart": 5}
    assert going_further["turn_cache"] == {}  # emptied after each turn


def test_the_declarations_table_shows_what_task_brings_up(lesson):
    """The page's table of the three declarations; the first and last rows are the page's
    broken build and its fix. ``messages`` (task's own answer) is left out of the column,
    and the recorder saw it on every row."""
    assert list(lesson["SCHEMAS"]) == DECLARATIONS
    rows = {who: lesson["declared_by"](who).rows[0] for who in DECLARATIONS}
    assert len(lesson["declared_by"]()) == 1  # one row each: the page stacks three
    assert rows["the parent only"]["state keys brought up"] == "none"
    assert rows["the parent only"]["parent's reader got"] == "0 fields"
    assert rows["the collector only"]["state keys brought up"] == "requirements"
    assert rows["the collector only"]["parent's reader got"] == "0 fields"  # the parent drops it
    assert rows["both, one schema"]["state keys brought up"] == "requirements"
    assert rows["both, one schema"]["parent's reader got"] == "5 fields"
    for who in DECLARATIONS:
        recorder = CommandRecorder(["task"])
        parent_schema, collector_schema = lesson["SCHEMAS"][who]
        agent = lesson["parent_agent"](
            lesson["collector_agent"](collector_schema), parent_schema, middleware=[recorder]
        )
        agent.invoke(user_turn())
        assert "messages" in recorder.updates[0]["update keys"]


def test_task_never_brings_up_the_keys_the_page_names(lesson):
    """The page names what ``task`` keeps out: ``structured_response`` and the parent's private
    keys (``jump_to``, ``_blob_payloads``, two ``_summarization_`` keys), which the "down" table
    prints, and ``todos``, which deepagents always excludes and this parent lacks; a deepagents
    upgrade that changes the sets turns this red."""
    from deepagents.middleware._state import private_state_field_names
    from deepagents.middleware.filesystem import _FilesystemBlobPayloadState
    from deepagents.middleware.subagents import _EXCLUDED_STATE_KEYS
    from deepagents.middleware.summarization import SummarizationState

    assert {"messages", "todos", "structured_response"} <= set(_EXCLUDED_STATE_KEYS)
    (row,) = lesson["what_went_down"](lesson["handed"], lesson["model"], lesson["parent"]).rows
    private = [k for k in row["kept out"] if k != "structured_response"]
    summaries = ["_summarization_event", "_summarization_session_id"]
    assert private == ["_blob_payloads", *summaries, "jump_to"]
    marked = private_state_field_names(AgentState, SummarizationState, _FilesystemBlobPayloadState)
    assert set(private) <= marked  # the keys deepagents' middleware marks private
    assert "todos" not in lesson["parent"].stream_channels_list  # "which this parent lacks"
    page = " ".join(LESSON.read_text().replace("# ", "").split())
    for key in ("structured_response", "jump_to", "todos"):
        assert f"`{key}`" in page
    assert "`jump_to` and the three starting with an underscore" in page
    assert "`messages` is replaced both ways: the task goes down;" in page
    assert "comes up as a ToolMessage" in page


def test_a_collector_without_the_reducer_fails_on_its_own_parallel_stores(lesson):
    """Exercise 1's premise (the old knob position "both, no reducer"): the collector's five
    parallel stores into a key without a reducer raise InvalidUpdateError."""
    from langgraph.errors import InvalidUpdateError

    from agentstate.rds import PlainRequirementsState  # the schema exercise 1 names

    agent = lesson["parent_agent"](lesson["collector_agent"](PlainRequirementsState))
    with pytest.raises(InvalidUpdateError):
        agent.invoke(user_turn())


def test_exercise_1_can_be_done_with_what_the_page_offers(lesson):
    """Exercise 1 as written: ``model=parent_script(one, other)`` makes two parallel ``task``
    calls, each into a collector of ``PlainRequirementsState`` (``collector_model(tasks=2)``);
    the parent's reducer merges both, while one task of two fields raises."""
    from langgraph.errors import InvalidUpdateError

    from agentstate.lessons.subagents import parent_script
    from agentstate.rds import PlainRequirementsState

    def run(*field_sets):
        collector = lesson["collector_agent"](PlainRequirementsState, collector_model(tasks=2))
        agent = lesson["parent_agent"](collector, model=parent_script(*field_sets))
        return agent.invoke(user_turn())["requirements"]

    assert run({"engine": "postgres"}, {"username": "dbadmin"}) == {
        "engine": "postgres",
        "username": "dbadmin",
    }
    with pytest.raises(InvalidUpdateError):
        run({"engine": "postgres", "username": "dbadmin"})


def test_declared_by_rejects_an_unknown_position(lesson):
    with pytest.raises(KeyError):
        lesson["declared_by"]("nobody")


def test_the_glossary_links_of_lessons_04_to_06_land_on_an_anchor():
    """Every ``../docs/glossary.md#anchor`` link in notebooks 04-06 names an anchor that a
    glossary page under docs/ defines (``<a id="anchor">``), so a reader's click lands."""
    import re

    docs = LESSON.parents[2] / "docs"
    anchors = {
        m
        for page in docs.glob("glossary*.md")
        for m in re.findall(r'id="([\w-]+)"', page.read_text())
    }
    linked = {
        (source.name, anchor)
        for source in sorted(LESSON.parent.glob("0[4-6]_*.py"))
        for anchor in re.findall(r"\.\./docs/glossary\.md#([\w-]+)", source.read_text())
    }
    assert len(linked) >= 15
    assert sorted(link for link in linked if link[1] not in anchors) == []


# --- the page's setup and readouts, from agentstate.lessons.subagents ---


def test_parent_script_delegates_each_field_set_in_one_reply_then_reads():
    from agentstate.lessons.subagents import parent_script

    (first, read, done) = parent_script().script
    assert [json.loads(c["args"]["description"]) for c in first.tool_calls] == [POSTGRES_FIELDS]
    assert [c["name"] for c in read.tool_calls] == ["get_collected_requirements"]
    assert done.text == "Done."
    two = parent_script({"engine": "postgres"}, {"username": "dbadmin"}).script[0]
    assert [c["args"]["subagent_type"] for c in two.tool_calls] == ["requirements-collector"] * 2


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_what_each_said_reads_the_collectors_report_and_the_parents_reader(lesson, run):
    """The page's first table, from a sync or an async turn: the collector reports its five
    stores; the parent's reader, over the parent's own state, got nothing."""
    import asyncio

    from agentstate.lessons.subagents import what_each_said

    agent = broken_agent(lesson)
    state = (
        agent.invoke(user_turn()) if run == "invoke" else asyncio.run(agent.ainvoke(user_turn()))
    )
    assert what_each_said(state).rows == [
        {"collector said": "Stored 5 field(s).", "parent's reader got": "{}"}
    ]
    fixed = what_each_said(fixed_agent(lesson).invoke(user_turn())).rows[0]
    assert json.loads(fixed["parent's reader got"]) == POSTGRES_FIELDS


def test_the_readouts_refuse_a_turn_they_cannot_read():
    """A state without the replies, or recorders that saw nothing, get a one-line error that
    says what is missing, not a KeyError or an IndexError."""
    from agentstate.lessons.subagents import task_report, what_each_said, what_went_down
    from agentstate.tracing import TaskInputs

    with pytest.raises(ValueError, match=r"no reply from \['get_collected_requirements', 'task'\]"):
        what_each_said(user_turn())
    with pytest.raises(ValueError, match="run one turn with `handed`"):
        what_went_down(TaskInputs(), collector_model(), None)
    with pytest.raises(ValueError, match="saw no `task` call"):
        task_report("the parent only", {}, CommandRecorder(["task"]))


def test_what_went_down_is_the_dict_task_handed_and_the_collectors_messages(lesson):
    from agentstate.lessons.subagents import what_went_down
    from agentstate.tracing import TaskInputs

    model, handed = collector_model(), TaskInputs()
    agent = lesson["parent_agent"](lesson["collector_agent"](model=model))
    agent.invoke(user_turn(), config={"callbacks": [handed]})
    assert what_went_down(handed, model, agent).rows == [
        {
            "task handed down": ["files", "messages", "requirements"],
            "kept out": ["_blob_payloads", "_summarization_event", "_summarization_session_id"]
            + ["jump_to", "structured_response"],
            "its model got": ['human: {"engine": "postgres", "engine_version"…'],
        }
    ]
    # the human message is the task's description (the fields, as JSON), not the user's turn
    (task,) = model.seen[0]
    assert json.loads(task.text) == dict(POSTGRES_FIELDS)
    with pytest.raises(TypeError, match="expected the compiled parent, got dict"):
        what_went_down(handed, model, {})


def test_who_sees_what_without_a_path_uses_a_temporary_file_and_removes_it(tmp_path, monkeypatch):
    """The page calls ``who_sees_what(build)``: the same row as with a path of one's own, from
    a SQLite file in a temporary folder that is gone afterwards."""
    import tempfile

    given = who_sees_what(build_cache_fix_agent, POSTGRES_FIELDS, str(tmp_path / "a.db"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert who_sees_what(build_cache_fix_agent) == given
    assert list(scratch.iterdir()) == []

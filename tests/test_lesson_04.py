"""Notebook 04 (the subagent boundary): the deepagents / LangChain behaviour the lesson relies
on, pinned here so an upgrade that changes it turns CI red, and the lesson's plain
``create_deep_agent`` fix, executed from the notebook's own source, against the package's
``build_shared_schema_agent``."""

import json
from pathlib import Path
from typing import NotRequired

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

    task = {"messages": [HumanMessage(lesson["FIELDS"])]}
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
    """The diagram says state goes down (not the description only), minus todos."""
    block = LESSON.read_text().split("# ```mermaid\n", 2)[1].split("# ```", 1)[0]
    assert "flowchart LR" in block and "down: all but todos" in block
    assert "up: changed keys but messages and todos" in block


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
    """Solution 04 answers with the learner's own variables: every definition its first cell
    copies (functions, classes, constants) is the lesson's, character for character."""
    import ast

    solution = LESSON.parent / "solutions" / LESSON.name
    first = next(c.source for c in jupytext.read(solution).cells if c.cell_type == "code")
    lesson_text = LESSON.read_text()
    copied = [
        ast.get_source_segment(first, node)
        for node in ast.parse(first).body
        if not isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert len(copied) >= 7  # the constants, the reader tool and the two builders
    assert [c for c in copied if c not in lesson_text] == []


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


def test_task_never_brings_up_the_keys_the_page_names():
    """The page names what ``task`` leaves out: ``messages``, ``todos``, ``structured_response``
    (deepagents' excluded keys); a deepagents upgrade that changes the set turns this red."""
    from deepagents.middleware.subagents import _EXCLUDED_STATE_KEYS

    assert {"messages", "todos", "structured_response"} <= set(_EXCLUDED_STATE_KEYS)
    page = LESSON.read_text()
    left_out = "# Left out both ways: `todos` (deepagents' to-do list),\n# `structured_response`"
    assert left_out in page
    assert "`messages` is replaced: the task going down, one ToolMessage coming up" in page


def test_a_collector_without_the_reducer_fails_on_its_own_parallel_stores(lesson):
    """Exercise 1's premise (the old knob position "both, no reducer"): the collector's five
    parallel stores into a key without a reducer raise InvalidUpdateError."""
    from langchain.agents import AgentState
    from langgraph.errors import InvalidUpdateError

    class PlainState(AgentState):
        requirements: NotRequired[dict]

    agent = lesson["parent_agent"](lesson["collector_agent"](PlainState), PlainState)
    with pytest.raises(InvalidUpdateError):
        agent.invoke(user_turn())


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

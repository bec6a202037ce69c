"""``agentstate.doctor.preview_fix`` (issue 44, item 7): the diff ``--fix`` would write to an
agent in memory, its code in a file or in notebook cells only ``linecache`` holds.

A notebook cell is simulated as ipykernel makes one: its text registered in
``linecache`` under a ``.py`` name that is not on disk, compiled under that name
and run in a module namespace of its own (a kernel's ``__main__`` has no
``__file__``). The lessons' fixes are then proven by the lessons' runs.
"""

from __future__ import annotations

import hashlib
import itertools
import linecache
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstate.doctor import NoSourceError, diagnose, preview_fix

_ids = itertools.count()

FAN_OUT = '''\
"""Two parallel writers of a list."""

from typing import TypedDict

from langgraph.graph import START, StateGraph


class State(TypedDict):
    notes: list[str]  # what the writers found


def left(state: State) -> dict:
    return {"notes": ["left"]}


def right(state: State) -> dict:
    return {"notes": ["right"]}


builder = StateGraph(State)
builder.add_node("left", left)
builder.add_node("right", right)
builder.add_edge(START, "left")
builder.add_edge(START, "right")
graph = builder.compile()
'''


def _run_fixed(code: str, namespace: dict) -> None:
    """``code`` run as a notebook runs it (this file's ``from __future__`` not inherited)."""
    exec(compile(code, "<fixed>", "exec", dont_inherit=True), namespace)


@pytest.fixture
def notebook() -> Iterator[types.ModuleType]:
    """A kernel's namespace; ``notebook.run(text)`` runs one cell in it (removed after)."""
    kernel = types.ModuleType(f"kernel_{next(_ids)}")
    folder = f"/tmp/ipykernel_test_{os.getpid()}_{kernel.__name__}"
    assert not os.path.exists(folder)
    names: list[str] = []

    def run(text: str) -> None:  # named by its text, as ipykernel names a cell
        name = f"{folder}/{hashlib.sha1(text.encode()).hexdigest()[:10]}.py"
        names.append(name)
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        exec(compile(text, name, "exec", dont_inherit=True), kernel.__dict__)

    kernel.run = run  # type: ignore[attr-defined]
    sys.modules[kernel.__name__] = kernel
    yield kernel
    del sys.modules[kernel.__name__]
    for name in names:
        linecache.cache.pop(name, None)
    assert not os.path.exists(folder)  # nothing was written where the cells "live"


def test_the_diff_is_the_one_agentstate_doctor_diff_prints_and_nothing_is_written(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cli = subprocess.run(
        [sys.executable, "-m", "agentstate.doctor", "g.py:graph", "--diff"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert cli.returncode == 1, cli.stderr
    assert "+    notes: Annotated[list[str], operator.add]" in cli.stdout
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__("g")
        stamp = path.stat().st_mtime_ns
        preview = preview_fix(module.graph)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("g", None)
    assert preview.diff == cli.stdout
    assert path.read_text() == FAN_OUT and path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["g.py"]
    assert [(f.code, f.subject) for f in preview.fixes] == [("unreduced-parallel-write", "notes")]


def test_code_in_notebook_cells_gets_a_diff_labelled_by_the_class_and_the_fixed_code_runs(
    notebook,
):
    head, _, rest = FAN_OUT.partition("\n\ndef left")
    notebook.run(head.split('"""\n\n', 1)[1] + "\n")  # cell 1: imports and the state class
    notebook.run("def left" + rest)  # cell 2: the nodes and the graph
    assert "annotated" not in diagnose(notebook.graph).codes()
    preview = preview_fix(notebook.graph)
    assert preview.diff.startswith("--- a/cell defining State\n+++ b/cell defining State\n")
    assert (
        "+    notes: Annotated[list[str], operator.add]  # what the writers found" in preview.diff
    )
    assert "/tmp/" not in preview.diff
    fresh: dict = {}
    _run_fixed(preview.fixed("State"), fresh)
    graph = notebook.builder.__class__(fresh["State"])
    for name in ("left", "right"):
        graph.add_node(name, getattr(notebook, name))
        graph.add_edge("__start__", name)
    assert sorted(graph.compile().invoke({"notes": []})["notes"]) == ["left", "right"]
    with pytest.raises(KeyError, match="no fixed class or function 'left'"):
        preview.fixed("left")


def test_a_cell_run_again_after_an_edit_is_the_one_edited(notebook):
    """Run v1, edit it (v2), run v1 again: linecache keeps both, the live class is v1's."""
    v1 = "from typing import TypedDict\n\nfrom langgraph.graph import START, StateGraph\n\n\n"
    v1 += "class State(TypedDict):\n    notes: list[str]\n"
    v2 = v1 + "    topic: str\n"
    notebook.run(v1)
    notebook.run(v2)
    notebook.run(v1)
    notebook.run("def left" + FAN_OUT.partition("\n\ndef left")[2])
    preview = preview_fix(notebook.graph)
    (edit,) = preview.edits
    assert edit.before == v1 and "topic" not in edit.after
    assert "+    notes: Annotated[list[str], operator.add]" in preview.diff


def test_cells_a_kernel_s_debugger_wrote_to_disk_are_cells_too(tmp_path):
    """With its debugger on, ipykernel also writes each cell to disk: the class is still
    placed in its cell, and the file is not written."""
    kernel = types.ModuleType(f"kernel_{next(_ids)}")
    sys.modules[kernel.__name__] = kernel
    names = []
    try:
        head, _, rest = FAN_OUT.partition("\n\ndef left")
        for i, text in enumerate((head.split('"""\n\n', 1)[1] + "\n", "def left" + rest)):
            path = tmp_path / f"{i}.py"
            path.write_text(text)
            names.append(str(path))
            linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
            exec(compile(text, str(path), "exec", dont_inherit=True), kernel.__dict__)
        before = {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
        preview = preview_fix(kernel.graph)
        assert "+    notes: Annotated[list[str], operator.add]" in preview.diff
        assert preview.diff.startswith("--- a/cell defining State\n")
        assert {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before
    finally:
        del sys.modules[kernel.__name__]
        for name in names:
            linecache.cache.pop(name, None)


def test_outside_preview_fix_a_cell_is_not_a_file(notebook):
    from agentstate.doctor.facts import sources
    from agentstate.doctor.facts.bindings import own_file

    notebook.run(FAN_OUT)
    assert (
        own_file(notebook.left) is None and sources.read(notebook.left.__code__.co_filename) is None
    )
    with sources.reading_cells():
        assert own_file(notebook.left) == notebook.left.__code__.co_filename


def test_a_graph_whose_code_cannot_be_read_is_one_clear_line():
    namespace: dict = {"__name__": f"unread_{next(_ids)}"}
    exec(
        compile(FAN_OUT, "<string>", "exec", dont_inherit=True), namespace
    )  # no file, nothing in linecache
    with pytest.raises(NoSourceError) as raised:
        preview_fix(namespace["graph"])
    message = str(raised.value)
    assert "\n" not in message and "can be read" in message and "notebook cell" in message


def test_a_graph_built_only_by_installed_packages_has_nothing_of_yours_to_fix():
    from agentstate.models import ScriptedChatModel, reply
    from agentstate.rds import build_reducer_agent

    with pytest.raises(NoSourceError, match="no code of yours"):
        preview_fix(build_reducer_agent(ScriptedChatModel(script=[reply(text="ok")])))


def test_lesson_01_the_file_read_modify_write_has_no_edit_and_says_where_the_fix_is(notebook):
    notebook.run(
        "from typing import Any\n"
        "from deepagents import create_deep_agent\n"
        "from agentstate.lessons.fixtures import POSTGRES_FIELDS\n"
        "from agentstate.models import ScriptedChatModel, reply\n"
    )
    source = Path(__file__).parent.parent / "notebooks/_src/01_file_based_storage.py"
    text = source.read_text()
    start = text.index("from langchain.tools import ToolRuntime, tool\n")
    tool_cell = text[start : text.index("# %% [markdown]", start)]
    notebook.run(tool_cell.replace("PATH", '"/requirements.json"'))
    notebook.run(
        "broken_agent = create_deep_agent(\n"
        "    ScriptedChatModel(script=[reply(text='ok')]), tools=[store_requirement]\n)\n"
    )
    preview = preview_fix(notebook.broken_agent, unsafe=True)
    assert preview.diff == "" and preview.fixes == []
    reasons = {(n.code, n.reason) for n in preview.no_fix}
    assert (
        "file-read-modify-write",
        "no automatic fix: docs/doctor/file-read-modify-write.md shows the fix to write by hand",
    ) in reasons


LESSON_02 = '''\
from typing import Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one collected requirement."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


class PlainState(AgentState):
    requirements: NotRequired[dict[str, Any]]
'''

LESSON_02_AGENT = """\
from agentstate.lessons.fixtures import POSTGRES_FIELDS
from agentstate.models import ScriptedChatModel, reply, tool_call

TURN = {"messages": [{"role": "user", "content": "A Postgres manifest"}]}


def agent_with(schema, fields=POSTGRES_FIELDS):
    calls = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    model = ScriptedChatModel(script=[reply(*calls), reply(text="Stored.")])
    return create_agent(model, tools=[store_requirement], state_schema=schema)
"""


def test_lesson_02_the_fixed_state_keeps_what_merge_fields_keeps(notebook):
    from langgraph.errors import InvalidUpdateError

    from agentstate.lessons.fixtures import RequirementsState

    notebook.run(LESSON_02)
    notebook.run(LESSON_02_AGENT)
    with pytest.raises(InvalidUpdateError):
        notebook.agent_with(notebook.PlainState).invoke(notebook.TURN)
    preview = preview_fix(notebook.agent_with(notebook.PlainState))
    assert "+    requirements: Annotated[NotRequired[dict[str, Any]], operator.or_]" in preview.diff
    fresh: dict = {}
    _run_fixed(preview.fixed("PlainState"), fresh)
    kept = notebook.agent_with(fresh["PlainState"]).invoke(notebook.TURN)["requirements"]
    by_hand = notebook.agent_with(RequirementsState).invoke(notebook.TURN)["requirements"]
    assert kept == by_hand == notebook.POSTGRES_FIELDS
    loaded = preview.load("PlainState", vars(notebook))  # what the lessons call
    assert notebook.agent_with(loaded).invoke(notebook.TURN)["requirements"] == kept
    with pytest.raises(InvalidUpdateError):  # the reader's own class is left as it was
        notebook.agent_with(notebook.PlainState).invoke(notebook.TURN)


LESSON_03 = '''\
import json

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from agentstate.lessons.fixtures import POSTGRES_FIELDS, RequirementsState, store_requirement
from agentstate.models import ScriptedChatModel, reply, tool_call

TURN = {"messages": [{"role": "user", "content": "A Postgres manifest"}]}


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


TOOLS = [store_requirement, get_collected_requirements]


def my_agent(*middleware):
    fields = POSTGRES_FIELDS.items()
    stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields]
    read = tool_call("get_collected_requirements")
    model = ScriptedChatModel(script=[reply(*stores, read), reply(text="Done.")])
    used = filter(None, middleware)
    return create_agent(model, tools=TOOLS, state_schema=RequirementsState, middleware=[*used])


def seen(state):
    said = [m.text for m in state["messages"] if m.name == "get_collected_requirements"][-1]
    return len(json.loads(said))
'''


def test_lesson_03_the_fixed_agent_s_reader_sees_what_the_turn_cache_shows(notebook):
    from agentstate.core import TurnCacheMiddleware, merge_fields

    tools, _, agent = LESSON_03.partition("\n\nTOOLS = ")
    notebook.run(tools)  # as in the lesson, the agent is built in a cell of its own
    notebook.run("TOOLS = " + agent)
    assert notebook.seen(notebook.my_agent().invoke(notebook.TURN)) == 0  # the hazard
    assert preview_fix(notebook.my_agent()).diff == ""  # unsafe: held without unsafe=True
    preview = preview_fix(notebook.my_agent(), unsafe=True)
    assert "+from agentstate.core import TurnCacheMiddleware" in preview.diff
    assert "*used," in preview.diff and 'key="requirements"' in preview.diff
    namespace = dict(vars(notebook))
    _run_fixed(preview.fixed("my_agent"), namespace)
    saw = notebook.seen(namespace["my_agent"]().invoke(notebook.TURN))
    cache = TurnCacheMiddleware(
        writers=["store_requirement"],
        readers=["get_collected_requirements"],
        key="requirements",
        reducer=merge_fields,
    )
    assert saw == notebook.seen(notebook.my_agent(cache).invoke(notebook.TURN)) == 5
    loaded = preview.load("my_agent", vars(notebook))  # what lesson 03 calls
    assert notebook.seen(loaded().invoke(notebook.TURN)) == 5
    assert notebook.seen(notebook.my_agent().invoke(notebook.TURN)) == 0  # its own, unchanged


LESSON_04 = '''\
import json

from deepagents import create_deep_agent
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from agentstate.lessons.fixtures import RequirementsState, collector_model, store_requirement
from agentstate.models import ScriptedChatModel, reply


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


def collector_agent(schema=AgentState):
    return create_agent(collector_model(), [store_requirement], state_schema=schema)


def parent_agent(collector, schema=RequirementsState):
    subagent = {"name": "requirements-collector", "description": "Collects RDS requirements."}
    model = ScriptedChatModel(script=[reply(text="Done.")])
    subagents = [{**subagent, "runnable": collector}]
    tools = [get_collected_requirements]
    return create_deep_agent(model, tools, subagents=subagents, state_schema=schema)
'''


def test_lesson_04_a_subagent_compiled_with_the_library_s_schema_gets_no_edit_and_why(notebook):
    notebook.run(LESSON_04)
    broken = notebook.parent_agent(notebook.collector_agent())
    assert "subagent-drops-key" in diagnose(broken).codes()
    preview = preview_fix(broken, unsafe=True)
    assert preview.diff == "" and preview.edits == []
    (why,) = [n for n in preview.no_fix if n.code == "subagent-drops-key"]
    assert "build it with the parent's schema" in why.reason and "\n" not in why.reason

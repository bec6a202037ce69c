"""``agentstate doctor --fix`` (issue 44): each fix written into a file, then proven by a run.

The graphs here are written to a temporary project, diagnosed, fixed, and run
again in a fresh process that imports the fixed file: the proof is what the run
keeps (both writes, the key delivered), never the doctor's own word. Then the
never-harm rules, each with a case that would break it.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentstate.doctor import diagnose
from agentstate.doctor.facts.graph_facts import graph_facts
from agentstate.doctor.fix.apply import prepare, write
from agentstate.doctor.fix.command import annotate, run_fixes
from agentstate.doctor.fix.imports import Name
from agentstate.doctor.fix.plan import Fix, NoFix, plan
from agentstate.doctor.fix.source_edits import OPERATOR, EditError, add_reducer, declare_key

RUFF = Path(sys.executable).with_name("ruff")
_counter = itertools.count()

FAN_OUT = '''\
"""Parallel writers of a list and of a dict; a node writes an undeclared key."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    topic: str
    notes: list[str]  # what the writers found
    facts: dict[str, str]


def left(state: State) -> dict:
    return {"notes": ["left"], "facts": {"l": "1"}}


def right(state: State) -> dict:
    return {"notes": ["right"], "facts": {"r": "2"}}


def summarize(state: State) -> dict:
    return {"summary": f"{len(state['notes'])} notes"}


builder = StateGraph(State)
builder.add_node("left", left)
builder.add_node("right", right)
builder.add_node("summarize", summarize)
builder.add_edge(START, "left")
builder.add_edge(START, "right")
builder.add_edge(["left", "right"], "summarize")
builder.add_edge("summarize", END)
graph = builder.compile()
'''


def _load(path: Path) -> object:
    """Import ``path`` as a module of its own (the doctor reads its classes' source)."""
    name = f"fixme_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fix(path: Path, unsafe: bool = False) -> tuple[list[Fix | NoFix], str]:
    """Diagnose ``path``'s ``graph``, write its fixes; the plans and the diff."""
    graph = _load(path).graph  # type: ignore[attr-defined]
    report = diagnose(graph)
    plans = plan(graph_facts(graph), report.findings, (path.parent,))
    run = run_fixes(plans, (path.parent,), "fix", unsafe=unsafe)
    assert not run.refused, run.refused
    return plans, run.diff


def _run(path: Path, code: str) -> object:
    """``code`` run in a new process beside the (fixed) file; what it prints, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", f"import json\nfrom {path.stem} import *\n{code}"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ruff(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    rules = ["--select", "E,F,W,I"] if args[0] == "check" else []
    return subprocess.run(
        [str(RUFF), *args, "--isolated", *rules, str(path)], capture_output=True, text=True
    )


def test_the_issue_graph_keeps_both_writes_of_each_and_delivers_the_key(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    broken = _run(
        path,
        "try:\n    graph.invoke({'topic': 't'})\n    print(json.dumps('no error'))\n"
        "except Exception as e:\n    print(json.dumps(type(e).__name__))",
    )
    assert broken == "InvalidUpdateError"
    plans, diff = _fix(path)
    assert sorted((p.code, p.subject, type(p).__name__) for p in plans) == [
        ("undeclared-key", "summary", "Fix"),
        ("unreduced-parallel-write", "facts", "Fix"),
        ("unreduced-parallel-write", "notes", "Fix"),
    ]
    assert "+    notes: Annotated[list[str], operator.add]  # what the writers found" in diff
    ran = _run(path, "print(json.dumps(graph.invoke({'topic': 't'})))")
    assert ran == {
        "topic": "t",
        "notes": ["left", "right"],
        "facts": {"l": "1", "r": "2"},
        "summary": "2 notes",
    }
    assert diagnose(_load(path).graph).codes() == []  # type: ignore[attr-defined]
    before = path.read_text()
    _, again = _fix(path)
    assert again == "" and path.read_text() == before  # a second --fix changes nothing
    assert _ruff(path, "check").returncode == 0, _ruff(path, "check").stdout
    assert _ruff(path, "format", "--check").returncode == 0


SHAPES = {
    "typeddict": (
        "from typing import TypedDict\n",
        "class State(TypedDict):\n    notes: list[str]\n",
    ),
    "pydantic": (
        "from pydantic import BaseModel\n",
        "class State(BaseModel):\n    notes: list[str] = []\n",
    ),
    "dataclass": (
        "from dataclasses import dataclass, field\n",
        "@dataclass\nclass State:\n    notes: list[str] = field(default_factory=list)\n",
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_list_reducer_on_each_schema_shape_keeps_both_writes(tmp_path, shape):
    imports, cls = SHAPES[shape]
    path = tmp_path / f"shape_{shape}.py"
    path.write_text(
        f"{imports}\nfrom langgraph.graph import START, StateGraph\n\n\n{cls}\n\n"
        "builder = StateGraph(State)\n"
        'builder.add_node("a", lambda s: {"notes": ["a"]})\n'
        'builder.add_node("b", lambda s: {"notes": ["b"]})\n'
        'builder.add_edge(START, "a")\nbuilder.add_edge(START, "b")\n'
        "graph = builder.compile()\n"
    )
    plans, _ = _fix(path)
    assert [(p.code, p.applicability) for p in plans if isinstance(p, Fix)] == [
        ("unreduced-parallel-write", "safe")
    ]
    out = _run(path, "r = graph.invoke({'notes': []})\nprint(json.dumps(sorted(dict(r)['notes'])))")
    assert out == ["a", "b"]


AGENT = '''\
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.models import ScriptedChatModel, reply, tool_call


class NotesState(AgentState):
    notes: list[str]


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Store a note."""
    return Command(update={
        "notes": [text],
        "messages": [ToolMessage("Stored.", tool_call_id=runtime.tool_call_id)],
    })


model = ScriptedChatModel(script=[
    reply(tool_call("add_note", text="a"), tool_call("add_note", text="b")),
    reply(text="done"),
])
graph = create_agent(model, tools=[add_note], state_schema=NotesState)
'''


def test_an_agent_state_subclass_of_create_agent_gets_the_reducer(tmp_path):
    path = tmp_path / "agent_notes.py"
    path.write_text(AGENT)
    plans, diff = _fix(path)
    assert [p.title for p in plans if isinstance(p, Fix)] == [
        "`NotesState.notes` gets the reducer `operator.add`"
    ]
    out = _run(
        path,
        "r = graph.invoke({'messages': [{'role': 'user', 'content': 'go'}], 'notes': []})\n"
        "print(json.dumps(r['notes']))",
    )
    assert out == ["a", "b"]  # both parallel calls' notes, in tool-call order


def test_a_string_key_gets_no_edit_and_says_why(tmp_path):
    path = tmp_path / "scalar.py"
    path.write_text(FAN_OUT.replace("notes: list[str]", "notes: str").replace('["left"]', '"l"'))
    graph = _load(path).graph  # type: ignore[attr-defined]
    report = diagnose(graph)
    plans = plan(graph_facts(graph), report.findings, (tmp_path,))
    (why,) = [p for p in plans if isinstance(p, NoFix)]
    assert why.subject == "notes" and "no reducer keeps both values" in why.reason
    marked = {f.subject: f.fix for f in annotate(report.findings, plans)}
    assert marked == {"notes": None, "facts": "safe", "summary": "safe"}


def test_a_dict_a_writer_reads_back_is_an_unsafe_fix_held_without_unsafe_fixes(tmp_path):
    path = tmp_path / "rmw.py"
    path.write_text(
        FAN_OUT.replace(
            'return {"notes": ["left"], "facts": {"l": "1"}}',
            'return {"notes": ["left"], "facts": {**state["facts"], "l": "1"}}',
        )
    )
    graph = _load(path).graph  # type: ignore[attr-defined]
    plans = plan(graph_facts(graph), diagnose(graph).findings, (tmp_path,))
    kinds = {p.subject: p.applicability for p in plans if isinstance(p, Fix)}
    assert kinds["facts"] == "unsafe" and kinds["notes"] == "safe"
    run = run_fixes(plans, (tmp_path,), "diff", unsafe=False)
    assert [f.subject for f in run.withheld] == ["facts"]
    assert "operator.or_" not in run.diff and "operator.add" in run.diff
    assert path.read_text().count("operator") == 0  # --diff writes nothing


def test_a_list_a_writer_reads_back_gets_no_edit(tmp_path):
    path = tmp_path / "rmw_list.py"
    path.write_text(FAN_OUT.replace('{"notes": ["left"],', '{"notes": state["notes"] + ["left"],'))
    graph = _load(path).graph  # type: ignore[attr-defined]
    plans = plan(graph_facts(graph), diagnose(graph).findings, (tmp_path,))
    (why,) = [p for p in plans if isinstance(p, NoFix)]
    assert why.subject == "notes" and "`left` read `notes`" in why.reason


def test_the_declared_type_is_what_the_writer_writes(tmp_path):
    path = tmp_path / "typed.py"
    path.write_text(FAN_OUT.replace('f"{len(state', '[f"{len(state').replace('notes"}', 'notes"]}'))
    plans, diff = _fix(path)
    assert "+    summary: NotRequired[list]" in diff


IMPORT_LAYOUTS = {  # (the file's imports, a line after them that uses them)
    "typing already": ("from typing import TypedDict\n", ""),
    "typing_extensions": ("", 'Tag = Annotated[str, "tag"]\n'),
    "future and docstring": (
        '"""Doc."""\n\nfrom __future__ import annotations\n\nfrom typing import TypedDict\n',
        "",
    ),
    "stdlib block": (
        "import os\nimport sys\nfrom typing import TypedDict\n",
        "HOME = (os.sep, sys.prefix)\n",
    ),
}


@pytest.mark.parametrize("layout", sorted(IMPORT_LAYOUTS))
def test_imports_are_added_once_in_the_files_order(tmp_path, layout):
    imports, after = IMPORT_LAYOUTS[layout]
    source = (
        imports
        + ("\n" if imports else "")
        + "from langgraph.graph import StateGraph  # the graph\n"
        + ("" if imports else "from typing_extensions import Annotated, TypedDict\n")
        + "\n"
        + (f"{after}\n" if after else "")
        + "\nclass State(TypedDict):\n    # keys\n    notes: list[str]  # kept\n\n\n"
        + "builder = StateGraph(State)\n"
    )
    path = tmp_path / "layout.py"
    path.write_text(source)
    assert _ruff(path, "check").returncode == 0 and _ruff(path, "format", "--check").returncode == 0
    edited = add_reducer(source, "State", None, "notes", OPERATOR, "add")
    edited = declare_key(edited, "State", None, "summary", "Any", "typeddict")
    edited = add_reducer(
        edited, "State", None, "summary", Name("langgraph.graph.message", "add_messages"), ""
    )
    path.write_text(edited)
    assert _ruff(path, "check").returncode == 0, _ruff(path, "check").stdout + edited
    assert _ruff(path, "format", "--check").returncode == 0, edited
    assert "# keys" in edited and "# kept" in edited and "# the graph" in edited
    assert edited.count("import operator") == 1
    assert add_reducer(edited, "State", None, "notes", OPERATOR, "add") == edited


# --- never harm -------------------------------------------------------------------------


def _one_fix(path: Path, edit=None) -> Fix:  # noqa: ANN001 - a test's stand-in edit
    return Fix(
        "unreduced-parallel-write",
        "notes",
        "safe",
        "`State.notes` gets the reducer `operator.add`",
        str(path),
        edit or (lambda s: add_reducer(s, "State", None, "notes", OPERATOR, "add")),
    )


def test_no_edit_outside_the_project(tmp_path):
    lib = tmp_path / "venv" / "lib" / "site-packages" / "pkg"
    lib.mkdir(parents=True)
    path = lib / "state.py"
    path.write_text(FAN_OUT)
    edits, refused = prepare([_one_fix(path)], (tmp_path,))
    assert edits == [] and [r.reason for r in refused] == ["outside the project: not edited"]
    elsewhere = tmp_path / "other" / "g.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text(FAN_OUT)
    edits, refused = prepare([_one_fix(elsewhere)], (tmp_path / "project",))
    assert edits == [] and refused[0].reason == "outside the project: not edited"
    assert elsewhere.read_text() == FAN_OUT


def test_no_edit_in_a_file_changed_since_it_was_read(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    edits, refused = prepare([_one_fix(path)], (tmp_path,), read={str(path): FAN_OUT + "# old\n"})
    assert edits == [] and refused[0].reason == "changed since the doctor read it: not edited"
    edits, _ = prepare([_one_fix(path)], (tmp_path,), read={str(path): FAN_OUT})
    path.write_text(FAN_OUT + "x = 1\n")  # changed between the plan and the write
    late = write(edits)
    assert [r.reason for r in late] == ["changed while the doctor ran: not edited"]
    assert path.read_text() == FAN_OUT + "x = 1\n"


def test_no_edit_that_leaves_a_syntax_error(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    broken = _one_fix(path, edit=lambda s: s.replace("class State", "class State("))
    edits, refused = prepare([broken], (tmp_path,))
    assert edits == [] and "would not compile" in refused[0].reason
    assert path.read_text() == FAN_OUT


def test_a_fix_that_cannot_be_made_leaves_the_whole_file(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    good = _one_fix(path)
    bad = Fix(
        "undeclared-key",
        "gone",
        "safe",
        "`Missing` declares `gone`",
        str(path),
        lambda s: declare_key(s, "Missing", None, "gone", "str", "typeddict"),
    )
    edits, refused = prepare([good, bad], (tmp_path,))
    assert edits == []
    assert refused[0].reason == "class `Missing` is not defined in this file: not edited"
    with pytest.raises(EditError):
        add_reducer("class State(:\n", "State", None, "notes", OPERATOR, "add")


def test_a_clean_graph_gets_no_edit(tmp_path):
    path = tmp_path / "clean.py"
    path.write_text(
        FAN_OUT.replace("notes: list[str]", "notes: Annotated[list[str], operator.add]")
        .replace("facts: dict[str, str]", "facts: Annotated[dict[str, str], operator.or_]")
        .replace("    facts:", "    summary: str\n    facts:")
        .replace(
            "from typing import TypedDict",
            "import operator\nfrom typing import Annotated, TypedDict",
        )
    )
    before = path.read_text()
    plans, diff = _fix(path)
    assert plans == [] and diff == "" and path.read_text() == before


# --- the corpus, proven by its own runs --------------------------------------------------

_spec = importlib.util.spec_from_file_location(
    "doctor_fix", Path(__file__).resolve().parents[1] / "scripts" / "doctor_fix.py"
)
assert _spec is not None and _spec.loader is not None
doctor_fix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doctor_fix)


@pytest.mark.parametrize(
    ("shape", "applied"),
    [
        ("parallel branches, plain list", ["unreduced-parallel-write"]),
        # the subgraphs hand `cleaned_logs` back whole: operator.add would double it (a run
        # with the reducer shows it), so no edit is offered
        ("parallel subgraphs without output schemas", []),
    ],
)
def test_a_corpus_graph_fixed_in_a_copy_is_proven_by_its_own_run(shape, applied):
    (case,) = [c for c in doctor_fix.fixable_cases() if c.shape == shape]
    record = doctor_fix.prove_case(case)
    assert record["applied"] == record["proven"] == applied, record["no_fix"]


def test_the_recorded_corpus_table_is_the_one_the_page_shows():
    data = json.loads(doctor_fix.RESULTS.read_text())
    page = doctor_fix.PAGE.read_text()
    # every corpus graph whose hazard has a fix is in the record (rerun the script when it grows)
    assert [r["shape"] for r in data["records"]] == [c.shape for c in doctor_fix.fixable_cases()]
    assert doctor_fix.render_page(data) in page
    assert data["table"] == doctor_fix.table(data["records"])
    for record in data["records"]:  # every fix written was proven by the graph's own run
        assert record["applied"] == record["proven"], record["shape"]
    assert sum(r["proven"] != [] for r in data["records"]) >= 4


# --- the command line --------------------------------------------------------------------

AGENTSTATE = Path(sys.executable).with_name("agentstate")


def _doctor(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AGENTSTATE), "doctor", "g.py:graph", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_command_line_diffs_fixes_and_then_finds_nothing(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    shown = _doctor(tmp_path, "--output-format", "concise")
    assert shown.returncode == 1
    assert shown.stdout.count("(fixable: --fix)") == 3
    assert shown.stdout.splitlines()[-1].endswith("; 3 fixable with --fix")
    diff = _doctor(tmp_path, "--diff")
    assert diff.returncode == 1 and diff.stdout.startswith("--- a/g.py\n+++ b/g.py\n")
    assert path.read_text() == FAN_OUT  # --diff writes nothing
    fixed = _doctor(tmp_path, "--fix")
    assert fixed.returncode == 0, fixed.stderr
    assert "fixed 3 finding(s) in" in fixed.stderr and "no findings" in fixed.stdout
    after = path.read_text()
    again = _doctor(tmp_path, "--fix")
    assert again.returncode == 0 and path.read_text() == after and "fixed" not in again.stderr
    assert _doctor(tmp_path, "--diff").returncode == 0  # nothing left to write


def test_fix_from_the_configuration_and_no_fix_over_it(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(FAN_OUT)
    (tmp_path / "pyproject.toml").write_text("[tool.agentstate.doctor]\nfix = true\n")
    held = _doctor(tmp_path, "--no-fix")
    assert held.returncode == 1 and path.read_text() == FAN_OUT
    only = _doctor(tmp_path, "--fix-only")
    assert only.returncode == 0 and only.stdout == "" and path.read_text() != FAN_OUT
    (tmp_path / "pyproject.toml").write_text("[tool.agentstate.doctor]\nfix = 'yes'\n")
    bad = _doctor(tmp_path)
    assert bad.returncode == 2 and "'fix' is 'yes', not true or false" in bad.stderr


def test_machine_formats_say_which_fix_a_finding_has(tmp_path):
    path = tmp_path / "g.py"
    path.write_text(
        FAN_OUT.replace(
            'return {"notes": ["left"], "facts": {"l": "1"}}',
            'return {"notes": ["left"], "facts": {**state["facts"], "l": "1"}}',
        )
    )
    report = json.loads(_doctor(tmp_path, "--output-format", "json").stdout)
    fixes = {f["subject"]: f["fix"] for g in report["graphs"] for f in g["findings"]}
    assert fixes == {"facts": "unsafe", "notes": "safe", "summary": "safe"}
    sarif = json.loads(_doctor(tmp_path, "--output-format", "sarif").stdout)
    kinds = {
        r["properties"]["subject"]: r["properties"].get("fix") for r in sarif["runs"][0]["results"]
    }
    assert kinds == fixes
    github = _doctor(tmp_path, "--output-format", "github").stdout
    assert "(fixable: --unsafe-fixes)" in github and "(fixable: --fix)" in github
    held = _doctor(tmp_path, "--fix")
    assert "1 unsafe fix(es) not applied (--unsafe-fixes applies them)" in held.stderr
    assert "operator.or_" not in path.read_text() and "operator.add" in path.read_text()
    _doctor(tmp_path, "--fix", "--unsafe-fixes")
    assert "operator.or_" in path.read_text()

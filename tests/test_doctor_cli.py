"""``agentstate doctor`` as a subprocess: clean, findings, langgraph.json, formats, bad input.

Project layouts and every kind of bad input: ``tests/test_doctor_loading.py``;
the formats in process: ``tests/test_doctor_formats.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentstate.doctor.checks.diagnosis import WITHOUT_DEEPAGENTS

ROOT = Path(__file__).resolve().parents[1]

AGENTS = textwrap.dedent(
    '''
    from typing import Annotated, NotRequired

    from langchain.agents import AgentState, create_agent
    from langchain.tools import ToolRuntime
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langgraph.types import Command

    from agentstate.core import merge_fields
    from agentstate.models import ScriptedChatModel, reply


    class Plain(AgentState):
        tags: NotRequired[dict[str, bool]]


    class Merged(AgentState):
        tags: Annotated[NotRequired[dict[str, bool]], merge_fields]


    @tool
    def save_tag(name: str, runtime: ToolRuntime) -> Command:
        """Save one tag."""
        return Command(update={
            "tags": {name: True},
            "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
        })


    def model():
        return ScriptedChatModel(script=[reply(text="ok")])


    clean = create_agent(model(), tools=[save_tag], state_schema=Merged)


    def build_broken():
        return create_agent(model(), tools=[save_tag], state_schema=Plain)


    not_a_graph = 42
    '''
)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("doctor-cli")
    (root / "agents.py").write_text(AGENTS)
    (root / "boom.py").write_text("raise RuntimeError('no model configured')\n")
    (root / "langgraph.json").write_text(
        json.dumps({"graphs": {"clean": "./agents.py:clean", "broken": "./agents.py:build_broken"}})
    )
    return root


def doctor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "doctor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_clean_graph_exits_0_with_no_findings(project):
    done = doctor("agents.py:clean", cwd=project)
    # without deepagents (`make ends`), the one check it skips is said on stderr
    skipped = importlib.util.find_spec("deepagents") is None
    notes = f"agentstate doctor: note: {WITHOUT_DEEPAGENTS}\n" if skipped else ""
    assert (done.returncode, done.stderr) == (0, notes)
    assert done.stdout.splitlines() == [
        "agents.py:clean: no findings",
        "",
        "0 errors, 0 warnings, 0 infos, 0 suppressed; 1 graph checked, 0 failed to load",
    ]


def test_a_function_returning_a_broken_graph_exits_1_and_names_the_hazard(project):
    done = doctor("agents:build_broken", cwd=project)  # the module:attr form
    assert done.returncode == 1
    assert "unreduced-parallel-write error `tags`" in done.stdout
    assert "InvalidUpdateError" in done.stdout


def test_json_and_github_formats(project):
    done = doctor("agents.py:build_broken", "--json", cwd=project)
    (report,) = json.loads(done.stdout)["graphs"]  # one shape for one graph or several
    assert done.returncode == 1
    assert report["codes"] == ["unreduced-parallel-write"]
    assert report["findings"][0]["notebook"] == "02"
    github = doctor("agents.py:build_broken", "--format", "github", cwd=project)
    (line,) = github.stdout.splitlines()
    assert line.startswith("::error file=agents.py,line=")
    assert ",title=doctor unreduced-parallel-write::agents.py:build_broken: tags: " in line
    assert github.returncode == 1


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_a_finding_lands_on_the_line_of_the_tool_it_is_about(project):
    """The annotation and the SARIF result sit on the writer tool's ``def`` line (not its
    ``@tool`` decorator's: a suppression comment goes on the ``def``), not on the graph's; a
    finding without a place of its own is covered in test_doctor_formats."""
    expected = line_of(AGENTS, "def save_tag")
    assert AGENTS.splitlines()[expected - 2] == "@tool"  # the line above is the decorator
    github = doctor("agents.py:build_broken", "--format", "github", cwd=project)
    assert f"::error file=agents.py,line={expected},title=" in github.stdout
    sarif = doctor(
        "agents:build_broken", "--format", "sarif", "--docs-url", "https://x.test/d/", cwd=project
    )
    assert sarif.returncode == 1
    # stderr holds at most the doctor's notes (a check skipped without an extra), never an error
    assert all(line.startswith("agentstate doctor: note: ") for line in sarif.stderr.splitlines())
    log = json.loads(sarif.stdout)
    (run,) = log["runs"]
    (result,) = run["results"]
    assert (result["ruleId"], result["level"]) == ("unreduced-parallel-write", "error")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "agents.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": expected}
    rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert rule["helpUri"] == "https://x.test/d/unreduced-parallel-write.md"


def test_a_langgraph_json_checks_every_graph_it_lists(project):
    done = doctor("langgraph.json", "--json", cwd=project)
    assert done.returncode == 1
    reports = {r["graph"]: r["codes"] for r in json.loads(done.stdout)["graphs"]}
    assert reports == {"clean": [], "broken": ["unreduced-parallel-write"]}


@pytest.mark.extras("lessons")  # the graphs it lists are the lessons'
def test_the_projects_own_langgraph_json_has_no_error():
    done = doctor("langgraph.json", "--json", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    names = [r["graph"] for r in json.loads(done.stdout)["graphs"]]
    assert names == list(json.loads((ROOT / "langgraph.json").read_text())["graphs"])


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing.py:agent", "no such file"),
        ("boom.py:agent", "importing"),
        ("no_such_module:agent", "importing no_such_module failed: ModuleNotFoundError"),
        ("agents.py:nothing", "has no attribute 'nothing'"),
        ("agents.py:not_a_graph", "expected a compiled LangGraph graph"),
        ("agents.py", "is not module:attr"),
        ("nowhere.json", "nowhere.json: no such file or directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(project, target, message):
    done = doctor(target, cwd=project)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("agentstate doctor: error: ") and message in line


def test_a_failure_of_the_doctor_itself_is_exit_2_in_one_line_never_1(project, monkeypatch, capsys):
    """Status 1 means an error finding: a crash inside the checks must not look like one."""
    import agentstate.doctor.checks.diagnosis
    from agentstate.doctor.report.cli import main

    def crash(facts):
        raise KeyError("a node the checks did not expect")

    monkeypatch.setattr(agentstate.doctor.checks.diagnosis, "diagnose_facts", crash)
    monkeypatch.chdir(project)
    assert main(["agents.py:clean"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "agentstate doctor: error: agents.py:clean: the doctor failed on it (a bug, please report "
        "it): KeyError: 'a node the checks did not expect'\n"
    )


def test_each_graph_s_facts_are_read_once_for_the_checks_the_comments_and_the_fixes(
    project, monkeypatch, capsys
):
    """Before: the CLI read every target's graph three times (diagnose, the suppression
    comments' places, the fixes); reading a deep agent's facts is the doctor's costliest step."""
    import agentstate.doctor.facts.graph_facts as module
    from agentstate.doctor.report.cli import main

    read = module.graph_facts
    top: list[str] = []

    def counted(graph, name=None, parent=None, kind="graph"):
        if parent is None:  # a subagent's or a nested graph's facts are part of their parent's
            top.append(name)
        return read(graph, name, parent, kind)

    monkeypatch.setattr(module, "graph_facts", counted)
    monkeypatch.chdir(project)
    assert main(["agents.py:clean", "agents.py:build_broken", "--diff"]) == 1
    assert "+    tags: Annotated[" in capsys.readouterr().out  # the fixes were planned from them
    assert top == ["agents.py:clean", "agents.py:build_broken"]  # once each


def test_json_with_another_format_is_refused_in_one_line(project):
    """Before: ``--json --format github`` printed JSON and said nothing."""
    done = doctor("agents.py:build_broken", "--json", "--format", "github", cwd=project)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "agentstate doctor: error: --json and --output-format github disagree: give one of them\n"
    )
    same = doctor("agents.py:build_broken", "--json", "--format", "json", cwd=project)
    assert same.returncode == 1 and json.loads(same.stdout)["graphs"][0]["graph"]

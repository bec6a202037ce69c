"""``action.yml``: the doctor as a composite GitHub Action, its steps run here as written.

The steps' ``run`` scripts are run by bash, in order, with what GitHub gives
them (``GITHUB_ACTION_PATH``: this checkout; each input as the environment
variable the step maps it to): the first installs the package from the
action's own checkout into a fresh virtual environment (its dependencies
taken from this one's, nothing downloaded), the second runs that
environment's ``agentstate doctor`` on a project with a broken graph and
prints GitHub annotations. ``docs/doctor/README.md`` shows the workflow that
uses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
README = ROOT / "docs" / "doctor" / "README.md"

AGENT = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    docs: list


b = StateGraph(State)
b.add_node("a", lambda s: {"docs": ["a"]})
b.add_node("b", lambda s: {"docs": ["b"]})
b.add_edge(START, "a")
b.add_edge(START, "b")
b.add_edge(["a", "b"], END)
graph = b.compile()
"""


def action() -> dict:
    return yaml.safe_load(ACTION.read_text())


def test_the_action_is_composite_and_passes_inputs_through_the_environment():
    found = action()
    assert found["runs"]["using"] == "composite"
    assert set(found["inputs"]) == {"targets", "args", "working-directory"}
    for step in found["runs"]["steps"]:
        assert step["shell"] == "bash"
        assert "${{" not in step["run"]  # an input pasted into a script could inject code


def test_the_readme_s_workflow_uses_this_action_with_its_inputs():
    page = README.read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```yaml\n")[1:]]
    (workflow,) = [yaml.safe_load(b) for b in blocks if "jobs" in b and "setup-python" in b]
    steps = workflow["jobs"]["doctor"]["steps"]
    (uses,) = [s for s in steps if "with" in s and "args" in s["with"]]
    assert set(uses["with"]) <= set(action()["inputs"])
    for name in action()["inputs"]:
        assert f"`{name}`" in page


def farm(into: Path) -> Path:
    """This environment's libraries, without agentstate itself, for a venv to see."""
    into.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.startswith(("agentstate", "_editable_impl_agentstate", "__editable__")):
            continue
        if entry.suffix == ".pth":
            continue
        (into / entry.name).symlink_to(entry)
    return into


def test_the_action_s_steps_install_the_doctor_and_annotate_a_broken_graph(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python*/site-packages")
    (site / "libraries.pth").write_text(f"{farm(tmp_path / 'libraries')}\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.py").write_text(textwrap.dedent(AGENT))
    (project / "langgraph.json").write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        GITHUB_ACTION_PATH=str(ROOT),
        GITHUB_WORKSPACE=str(project),
        PIP_NO_INDEX="1",  # every dependency is here already: nothing is downloaded
        PIP_NO_BUILD_ISOLATION="0",  # build with this environment's hatchling
    )
    install, check = action()["runs"]["steps"]
    done = subprocess.run(
        ["bash", "-c", install["run"]], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import agentstate; print(agentstate.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(site))  # the installed copy, not this checkout
    inputs = {"DOCTOR_TARGETS": "", "DOCTOR_ARGS": "--fail-on warning"}
    done = subprocess.run(
        ["bash", "-c", check["run"]],
        cwd=project / check["working-directory"].replace("${{ inputs.working-directory }}", "."),
        env={**env, **inputs},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(
        "::error file=agent.py,line=12,title=doctor unreduced-parallel-write::agent: docs: "
    )
    assert "no target given: checking langgraph.json" in done.stderr

    both = {"DOCTOR_TARGETS": "langgraph.json agent.py:graph", "DOCTOR_ARGS": "-q"}
    done = subprocess.run(
        ["bash", "-c", check["run"]],
        cwd=project,
        env={**env, **both},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and len(done.stdout.splitlines()) == 2  # split on the space

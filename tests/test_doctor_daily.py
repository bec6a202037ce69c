"""The doctor in a team's daily use (issue 41; issue 40 item 9; issue 43 item 7).

No target (the nearest ``langgraph.json`` or ``[tool.agentstate.doctor] graphs``),
``.env`` read always and per project, ``--output-format`` (concise, full, json,
github, sarif) with a summary line, names whole in machine formats,
``--show-settings``, ``check_project``, the CLI's closed pipe and usage line.
Each runs ``agentstate`` as a subprocess on this checkout's source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STATE = """
from typing import TypedDict


class State(TypedDict):
    question: str
    answer: str
"""

NEEDS = """
import os

from langgraph.graph import END, START, StateGraph

from my_state import State

WHO = os.environ["TEAM"]  # a factory or a module reading its key, as ChatOpenAI() does


def answer(state: State) -> dict:
    return {"answer": WHO}


b = StateGraph(State)
b.add_node("answer", answer)
b.add_edge(START, "answer")
b.add_edge("answer", END)
graph = b.compile()
print("TEAM at import:", WHO)
"""

BROKEN = '''
from typing import Annotated, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.models import ScriptedChatModel, reply


class Plain(AgentState):
    tags: NotRequired[dict[str, bool]]


@tool
def save_tag(name: str, runtime: ToolRuntime) -> Command:
    """Save one tag, and a note the state does not declare."""
    return Command(update={
        "tags": {name: True},
        "notes": [name],
        "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
    })


def make_graph():
    model = ScriptedChatModel(script=[reply(text="ok")])
    return create_agent(model, tools=[save_tag], state_schema=Plain)


def make_graph_with_a_name_longer_than_sixty_characters_on_purpose_typo():
    return make_graph()
'''


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("GITHUB_WORKSPACE", "TEAM")}
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", *args],
        cwd=cwd,
        env={**base, "PYTHONPATH": str(ROOT / "src"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def team(root: Path, name: str, env: object) -> Path:
    """A project whose graph reads TEAM at import, its langgraph.json's env giving it."""
    return write(
        root / name,
        {
            "my_state.py": STATE,
            f"agent_{name}.py": NEEDS,
            "langgraph.json": json.dumps(
                {"graphs": {name: f"./agent_{name}.py:graph"}, "env": env}
            ),
        },
    )


# --- issue 40 item 9: env per target ---


def test_two_projects_in_one_run_each_load_with_their_own_env(tmp_path):
    """Before: the first project's TEAM stayed set, so the second loaded with 'billing'."""
    team(tmp_path, "billing", {"TEAM": "billing"})
    write(tmp_path / "support", {".env": "TEAM=support\n"})
    team(tmp_path, "support", ".env")
    done = run("doctor", "billing/langgraph.json", "support/langgraph.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "TEAM at import: billing" in done.stderr
    assert "TEAM at import: support" in done.stderr
    assert "TEAM" not in {k for k in os.environ}  # nothing set in this process either


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"": "x"}, "'' is not a variable name"),
        ({"A=B": "x"}, "'A=B' is not a variable name"),
        ({"TEAM": "a\x00b"}, "the value of TEAM holds a NUL byte"),
    ],
)
def test_an_illegal_env_is_one_line_for_its_project_only(tmp_path, env, message):
    """Before: os.environ raised, "the doctor failed (a bug...)", and the other report was lost."""
    team(tmp_path, "billing", env)
    team(tmp_path, "support", {"TEAM": "support"})
    done = run("doctor", "billing/langgraph.json", "support/langgraph.json", cwd=tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], done.stderr
    assert "support: no findings" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_dotenv_line_it_cannot_parse_is_a_note_before_the_errors(tmp_path):
    write(tmp_path / "billing", {".env": "=orphan\n"})
    team(tmp_path, "billing", ".env")
    done = run("doctor", "billing/langgraph.json", cwd=tmp_path)
    lines = done.stderr.splitlines()
    note = next(i for i, line in enumerate(lines) if "could not parse" in line)
    error = next(i for i, line in enumerate(lines) if "error:" in line)
    assert note < error  # the reason (TEAM never set) comes before the KeyError it causes
    assert lines[note].startswith("agentstate doctor: note: billing/langgraph.json: env '.env'")


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_an_infinite_or_nan_timeout_is_refused_in_one_line(tmp_path, value):
    """Before: --timeout inf crashed in setitimer; nan was taken as no limit at all."""
    team(tmp_path, "billing", {"TEAM": "billing"})
    done = run("doctor", "billing/langgraph.json", "--timeout", value, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"agentstate doctor: error: --timeout {value}: give a finite number of seconds above 0"
    ]
    (tmp_path / "billing" / "pyproject.toml").write_text(
        f"[tool.agentstate.doctor]\ntimeout = {value}\n"
    )
    done = run("doctor", "billing/langgraph.json", cwd=tmp_path)
    assert done.returncode == 2
    assert "not a finite number of seconds above 0" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_closed_pipe_ends_any_subcommand_without_a_traceback(tmp_path):
    """Before: `agentstate hazards --json | head -c1` ended in a BrokenPipeError traceback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        f"{sys.executable} -m agentstate.cli hazards --json | head -c1",
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout == "{"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


def test_an_unknown_flag_shows_the_subcommand_s_usage(tmp_path):
    """Before: `usage: agentstate [-h] [--version] {doctor} ...`, the other subcommands hidden."""
    done = run("doctor", "--no-such-flag", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: agentstate doctor ")
    assert done.stderr.strip().endswith("error: unrecognized arguments: --no-such-flag")
    done = run("no-such-command", cwd=tmp_path)
    assert "{experts,engine,memory,doctor,hazards}" in done.stderr


# --- issue 41 item 1: no target ---


def broken_project(root: Path) -> Path:
    write(root, {"factories.py": BROKEN})
    (root / "langgraph.json").write_text(
        json.dumps({"graphs": {"agent": "./factories.py:make_graph"}})
    )
    return root


def test_no_target_reads_the_langgraph_json_of_this_folder_or_a_parent(tmp_path):
    """Before: `error: give a target` and exit 2."""
    broken_project(tmp_path)
    (tmp_path / "src" / "deep").mkdir(parents=True)
    here = run("doctor", "--output-format", "concise", cwd=tmp_path)
    below = run("doctor", "--output-format", "concise", cwd=tmp_path / "src" / "deep")
    assert (here.returncode, below.returncode) == (1, 1)
    assert "agentstate doctor: no target given: checking langgraph.json" in here.stderr
    assert "no target given: checking ../../langgraph.json" in below.stderr
    assert here.stdout.splitlines()[0].startswith("factories.py:18:1: undeclared-key error agent:")
    assert below.stdout.splitlines()[0].startswith("../../factories.py:18:1: undeclared-key ")


def test_no_target_stops_at_the_repository_s_root(tmp_path):
    broken_project(tmp_path)
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    done = run("doctor", cwd=tmp_path / "repo")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "agentstate doctor: error: no target given, and no langgraph.json or "
        "[tool.agentstate.doctor] 'graphs' in . or a folder above it up to the repository's "
        "root: give module:attr, path/to/file.py:attr or langgraph.json\n"
    )


def test_no_target_takes_the_configuration_s_graphs_relative_to_its_folder(tmp_path):
    broken_project(tmp_path)
    write(tmp_path, {"pkg/__init__.py": "", "pkg/agents.py": "from factories import make_graph\n"})
    (tmp_path / "pyproject.toml").write_text(
        "[tool.agentstate.doctor]\n"
        'graphs = ["factories.py:make_graph", "pkg.agents:make_graph"]\n'
        'ignore = ["undeclared-key"]\n'
    )
    (tmp_path / "sub").mkdir()
    done = run("doctor", "--output-format", "json", cwd=tmp_path / "sub")
    assert done.returncode == 1, done.stderr
    assert "no target given: checking ../pyproject.toml" in done.stderr
    graphs = json.loads(done.stdout)["graphs"]
    assert [g["target"] for g in graphs] == ["../factories.py:make_graph", "pkg.agents:make_graph"]
    assert [g["codes"] for g in graphs] == [["unreduced-parallel-write"]] * 2
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[tool.agentstate.doctor]\ngraphs = "factories.py:make_graph"\n')
    done = run("doctor", cwd=tmp_path)
    assert done.returncode == 2
    assert "'graphs' is not a list of targets" in done.stderr


# --- issue 41 item 8: --show-settings, check_project ---


def test_show_settings_prints_the_targets_the_rules_and_their_files(tmp_path):
    broken_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.agentstate.doctor]\nignore = ["same-batch-read"]\nfail-on = "warning"\n'
        "timeout = 30\n"
    )
    done = run("doctor", "--show-settings", "--ignore", "undeclared-key", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:2] == ["# targets, from langgraph.json", "langgraph.json > agent"]
    assert "# settings, from pyproject.toml [tool.agentstate.doctor] and the command line" in lines
    select = next(line for line in lines if line.startswith("select = "))
    assert '"unreduced-parallel-write"' in select
    assert '"same-batch-read"' not in select and '"undeclared-key"' not in select
    assert 'fail-on = "warning"' in lines and "timeout = 30" in lines
    isolated = run("doctor", "--show-settings", "--isolated", cwd=tmp_path).stdout
    assert "# settings, from no configuration file and the command line" in isolated
    assert "timeout = 120  # the default" in isolated


CHECKED = """
from agentstate.doctor import check_project, diagnose
from factories import make_graph

graph = make_graph()
print("diagnose:", diagnose(graph).codes())
print("check_project:", check_project(graph).codes())
"""


def test_check_project_applies_the_configuration_and_the_comments(tmp_path):
    """Before: agentstate.doctor had no check_project; diagnose ignores the project."""
    broken_project(tmp_path)
    write(tmp_path, {"check.py": CHECKED})
    (tmp_path / "pyproject.toml").write_text(
        '[tool.agentstate.doctor]\nignore = ["undeclared-key"]\n'
    )
    done = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.stdout.splitlines() == [
        "diagnose: ['undeclared-key', 'unreduced-parallel-write']",
        "check_project: ['unreduced-parallel-write']",
    ], done.stderr
    source = tmp_path / "factories.py"
    text = source.read_text().replace(
        "Command:\n", "Command:  # agentstate: ignore[unreduced-parallel-write]\n", 1
    )
    source.write_text(text)
    done = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.stdout.splitlines()[1] == "check_project: []", done.stderr


# --- issue 41 items 4 and 10: formats ---


def test_concise_is_one_line_per_finding_sorted_with_a_summary(tmp_path):
    broken_project(tmp_path)
    write(
        tmp_path,
        {
            "b_first.py": "from factories import make_graph\n",
            "a_second.py": "from factories import make_graph\n",
        },
    )
    done = run(
        "doctor", "b_first.py:make_graph", "langgraph.json", "--output-format", "concise",
        cwd=tmp_path,
    )  # fmt: skip
    *rows, summary = done.stdout.splitlines()
    assert len(rows) == 4
    assert rows == sorted(rows)
    assert all(row.startswith("factories.py:18:1: ") for row in rows)
    assert rows[0].split(" ", 3)[1:3] == ["undeclared-key", "error"]
    assert summary == (
        "4 errors, 0 warnings, 0 infos, 0 suppressed; 2 graphs checked, 0 failed to load; "
        "4 fixable with --fix"
    )


def test_the_full_text_fits_100_columns_and_never_cuts_a_word(tmp_path):
    """Before: table rows of 250-400 characters, wrapped mid-word by the terminal."""
    broken_project(tmp_path)
    done = run("doctor", cwd=tmp_path, env={"COLUMNS": "100"})
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    words = set(" ".join(lines).split())
    message = "InvalidUpdateError. Declare it with a"  # a message wrapped over lines
    assert all(w in words for w in message.split())
    assert lines[-1].startswith("2 errors, 0 warnings, 0 infos, 0 suppressed; 1 graph checked")
    assert "factories.py:18:1: unreduced-parallel-write error `tags` (fixable: --fix)" in lines


def test_format_and_text_stay_aliases(tmp_path):
    broken_project(tmp_path)
    full = run("doctor", "--output-format", "full", cwd=tmp_path).stdout
    assert "factories.py:18:1: unreduced-parallel-write error `tags`" in full
    assert run("doctor", "--format", "text", cwd=tmp_path).stdout == full
    assert run("doctor", cwd=tmp_path).stdout == full


def test_machine_formats_carry_every_name_whole(tmp_path):
    """Before: `"target": "factories.py:make_graph_with_a_name_longer_than_sixty_chara…"`."""
    broken_project(tmp_path)
    long = "factories.py:make_graph_with_a_name_longer_than_sixty_characters_on_purpose_typo"
    done = run("doctor", "factories.py:make_graph", long, "--output-format", "json", cwd=tmp_path)
    targets = [g["target"] for g in json.loads(done.stdout)["graphs"]]
    assert targets == ["factories.py:make_graph", long]
    github = run("doctor", long, "--output-format", "github", cwd=tmp_path).stdout
    assert f"::{long}: " in github
    sarif = json.loads(run("doctor", long, "--output-format", "sarif", cwd=tmp_path).stdout)
    assert {r["properties"]["graph"] for r in sarif["runs"][0]["results"]} == {long}
    assert f"{long}: 2 findings" in run("doctor", long, cwd=tmp_path).stdout


def test_an_import_error_line_names_the_file_whole(tmp_path):
    """Before: `importing ./deep_re… failed`: the file's name cut at 60 characters."""
    name = "deep_research_agent_with_a_long_descriptive_module_name_on_purpose.py"
    write(tmp_path, {name: "raise RuntimeError('no model configured')\n"})
    done = run("doctor", f"./{name}:graph", cwd=tmp_path)
    assert done.returncode == 2
    assert f"importing ./{name} failed: RuntimeError: no model configured" in done.stderr


def test_github_annotations_name_the_docs_page_not_the_notebook(tmp_path):
    broken_project(tmp_path)
    done = run("doctor", "--output-format", "github", cwd=tmp_path)
    assert "(notebook" not in done.stdout
    assert "(docs: docs/doctor/undeclared-key.md; agentstate doctor --explain" in done.stdout
    url = run("doctor", "--format", "github", "--docs-url", "https://x.test/d/", cwd=tmp_path)
    assert "(docs: https://x.test/d/undeclared-key.md; " in url.stdout


CONCIERGE = """
from langchain.agents import create_agent


def make_concierge(model):
    return create_agent(model.bind_tools([]), tools=[])
"""


def test_a_factory_given_the_config_for_another_parameter_is_explained(tmp_path):
    write(tmp_path, {"concierge.py": CONCIERGE})
    done = run("doctor", "concierge.py:make_concierge", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.splitlines() if "error:" in line]
    assert "AttributeError: 'dict' object has no attribute 'bind_tools'" in line
    assert (
        "(make_concierge's parameter 'model' was given the run's config, a RunnableConfig dict, "
        "as langgraph dev gives it to a one-parameter factory" in line
    )

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

"""``list-doubled-by-subagent`` on deepagents subagents follows ``task`` (issue 41 item 3).

deepagents' ``task`` drops a key a subagent hands back unchanged from 0.7.24 on
(``_is_unchanged``; the matrix: ``list-returned-unchanged``), so an ``operator.add``
list doubles only when the subagent writes it: a tool of its own, the general-purpose
subagent's copy of the parent's tools, or a node of a compiled subagent. Each verdict
is first shown by a run, then the doctor is asked; below 0.7.24 (the version lookup
patched) a subagent that only declares the list is reported with the release.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.doctor import diagnose
from agentstate.doctor.facts import releases
from agentstate.doctor.facts.releases import LIST_RETURNED_UNCHANGED
from agentstate.models import ScriptedChatModel, reply, tool_call

pytestmark = pytest.mark.extras("deepagents")


class Notes(AgentState):
    notes: Annotated[NotRequired[list[str]], operator.add]


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Append one note."""
    done = ToolMessage("noted", tool_call_id=runtime.tool_call_id)
    return Command(update={"notes": [text], "messages": [done]})


@tool
def word_count(text: str) -> str:
    """Count the words of a text (reads and writes no state)."""
    return str(len(text.split()))


def scripted(*replies: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script=list(replies))


def task(subagent: str) -> Any:
    return reply(tool_call("task", description="do it", subagent_type=subagent))


def deep(subagents: list[dict[str, Any]], parent_model: ScriptedChatModel, **kw: Any) -> Any:
    from deepagents import create_deep_agent

    return create_deep_agent(parent_model, state_schema=Notes, subagents=subagents, **kw)


def spec(name: str, tools: list[Any], model: ScriptedChatModel) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Works on the notes.",
        "system_prompt": "Work.",
        "tools": tools,
        "model": model,
    }


def run(agent: Any) -> list[str]:
    start: Any = {"messages": [{"role": "user", "content": "go"}], "notes": ["pre"]}
    notes: list[str] = agent.invoke(start)["notes"]
    return notes


def doubled(report: Any, subject: str) -> list[str]:
    return [
        f.severity
        for f in report.of("list-doubled-by-subagent")
        if f.subject == subject and f.severity == "error"
    ]


def test_a_declarative_subagent_without_a_writer_is_clean():
    sub = scripted(reply(tool_call("word_count", text="a b")), reply(text="two"))
    agent = deep(
        [spec("counter", [word_count], sub)], scripted(task("counter"), reply(text="done"))
    )
    assert run(agent) == ["pre"]  # the run: task dropped the list handed back unchanged
    report = diagnose(agent)
    assert report.of("list-doubled-by-subagent") == []
    assert report.errors == []


def test_a_declarative_subagent_with_a_writer_doubles_the_list():
    sub = scripted(reply(tool_call("add_note", text="new")), reply(text="added"))
    agent = deep([spec("noter", [add_note], sub)], scripted(task("noter"), reply(text="done")))
    assert run(agent) == ["pre", "pre", "new"]
    report = diagnose(agent)
    assert doubled(report, "noter:notes") == ["error"]
    (found,) = [f for f in report.errors if f.subject == "noter:notes"]
    assert "`add_note`" in found.message
    assert found.file == __file__  # the writer's line


def test_the_general_purpose_subagent_doubles_with_the_parents_writer():
    # the general-purpose subagent runs on the parent's model and copies the parent's tools
    parent = scripted(
        task("general-purpose"),
        reply(tool_call("add_note", text="new")),
        reply(text="added"),
        reply(text="done"),
    )
    sub = scripted(reply(text="unused"))
    agent = deep([spec("counter", [word_count], sub)], parent, tools=[add_note])
    assert run(agent) == ["pre", "pre", "new"]
    report = diagnose(agent)
    assert doubled(report, "general-purpose:notes") == ["error"]
    assert doubled(report, "counter:notes") == []  # its sibling never writes the list


def compiled(tools: list[Any], model: ScriptedChatModel) -> dict[str, Any]:
    graph = create_agent(model, tools, state_schema=Notes)
    return {"name": "worker", "description": "Works.", "runnable": graph}


def test_a_compiled_subagent_doubles_only_when_it_writes_the_list():
    quiet = scripted(reply(tool_call("word_count", text="a")), reply(text="one"))
    agent = deep([compiled([word_count], quiet)], scripted(task("worker"), reply(text="done")))
    assert run(agent) == ["pre"]
    assert diagnose(agent).of("list-doubled-by-subagent") == []

    busy = scripted(reply(tool_call("add_note", text="new")), reply(text="added"))
    agent = deep([compiled([add_note], busy)], scripted(task("worker"), reply(text="done")))
    assert run(agent) == ["pre", "pre", "new"]
    assert doubled(diagnose(agent), "worker:notes") == ["error"]


def test_below_the_release_that_drops_unchanged_keys_a_declaring_subagent_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(releases, "installed_version", lambda _: "0.7.23")
    sub = scripted(reply(text="nothing to do"))
    agent = deep([spec("counter", [word_count], sub)], scripted(reply(text="done")))
    (found,) = [f for f in diagnose(agent).errors if f.subject == "counter:notes"]
    assert "deepagents 0.7.23 (installed)" in found.message
    assert f"deepagents {LIST_RETURNED_UNCHANGED.first_changed} and later" in found.message
    assert "docs/hazards-by-version.md#list-returned-unchanged" in found.message
    assert found.file == __file__  # no writer: where the subagent is declared
    assert found.line is not None
    monkeypatch.setattr(releases, "installed_version", lambda _: "0.7.24")
    assert diagnose(agent).of("list-doubled-by-subagent") == []


def test_an_unknown_release_and_no_writer_is_info(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(releases, "installed_version", lambda _: None)
    sub = scripted(reply(text="nothing to do"))
    agent = deep([spec("counter", [word_count], sub)], scripted(reply(text="done")))
    found = [f for f in diagnose(agent) if f.subject == "counter:notes"]
    assert [f.severity for f in found] == ["info"]
    assert "cannot tell" in found[0].message


# --- the real releases each side of 0.7.24, where the matrix's venvs exist --------------------

ROOT = Path(__file__).resolve().parents[1]
VENVS = Path(os.environ.get("AGENTSTATE_HAZARD_VENVS") or ROOT / ".venv" / "hazards")
"""Where scripts/hazards_by_version.py built its venvs (``--venvs``); never in CI."""

PROBE = """
import json
from importlib import metadata
from agentstate.doctor import diagnose
from agentstate.hazards.subagents import SourcesState, count_sources, list_returned_unchanged
from agentstate.models import ScriptedChatModel, reply
from deepagents import create_deep_agent

model = ScriptedChatModel(script=[reply(text="ok")])
spec = {"name": "counter", "description": "Counts.", "system_prompt": "Count.",
        "tools": [count_sources], "model": model}
agent = create_deep_agent(model, state_schema=SourcesState, subagents=[spec])
result = list_returned_unchanged()
print(json.dumps({
    "deepagents": metadata.version("deepagents"),
    "run": [result.outcome, result.evidence],
    "doctor": [[f.code, f.severity, f.subject] for f in diagnose(agent) if f.severity == "error"],
}))
"""


@pytest.mark.parametrize(
    ("release_", "outcome", "errors"),
    [
        (
            LIST_RETURNED_UNCHANGED.last_reproduced,
            "reproduced",
            [["list-doubled-by-subagent", "error", "counter:sources"]],
        ),  # fmt: skip  # noqa: E501
        (LIST_RETURNED_UNCHANGED.first_changed, "fixed", []),
    ],
)
def test_a_real_release_each_side_doubles_or_drops_as_the_doctor_says(
    release_: str, outcome: str, errors: list[list[str]]
):
    python = VENVS / f"deepagents-{release_}" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{python.parent.parent} exists only where scripts/hazards_by_version.py ran")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [str(python), "-c", PROBE], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["deepagents"] == release_
    assert seen["run"][0] == outcome, seen["run"]
    assert [e for e in seen["doctor"] if e[2] == "counter:sources"] == errors

"""``file-read-modify-write`` where the read sits in a helper, and only where it comes first.

Two defects met while writing the lessons: a tool that reads deepagents' ``files``
(or a file on disk) through a helper it hands the files, the state or the path to,
and writes the same path back, got no finding (a run loses edits); a tool that
writes a file and then reads it back was reported, though it rewrites nothing it
read (a run loses nothing a one-call-per-reply run keeps). Each verdict is a run's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.doctor import diagnose
from agentstate.models import ScriptedChatModel, reply, tool_call

pytestmark = pytest.mark.extras("deepagents")

USER = {"messages": [{"role": "user", "content": "go"}]}
PATH = "/requirements.json"
FIELDS = {"engine": "postgres", "version": "16", "storage": "100", "region": "eu", "user": "az"}


def errors(report: Any) -> list[tuple[str, str]]:
    return [(f.code, f.subject) for f in report.errors]


# --- (a) the read in a helper the tool hands the files, the state or the path -----------------


def fields_in(files: dict[str, Any] | None) -> dict[str, Any]:
    """What /requirements.json holds (notebook 01's helper)."""
    from deepagents.backends.utils import file_data_to_string

    return json.loads(file_data_to_string(files[PATH])) if files and PATH in files else {}


def field_of(agent_state: dict[str, Any], path: str) -> dict[str, Any]:
    """A JSON file of deepagents' files, read from the state it is handed."""
    from deepagents.backends.utils import file_data_to_string

    files = agent_state.get("files") or {}
    return json.loads(file_data_to_string(files[path])) if path in files else {}


def saved(fields: dict[str, Any], runtime: ToolRuntime) -> Command:
    from deepagents.backends.utils import create_file_data

    done = ToolMessage("Stored.", tool_call_id=runtime.tool_call_id)
    return Command(
        update={"files": {PATH: create_file_data(json.dumps(fields))}, "messages": [done]}
    )


@tool
def store_requirement(field_name: str, value: str, runtime: ToolRuntime) -> Command:
    """Store one requirement in /requirements.json."""
    current = fields_in(runtime.state.get("files"))
    current[field_name] = value
    return saved(current, runtime)


@tool
def store_field(field_name: str, value: str, runtime: ToolRuntime) -> Command:
    """Store one requirement in /requirements.json."""
    current = field_of(runtime.state, PATH)
    current[field_name] = value
    return saved(current, runtime)


def kept_of_five(tool_: Any) -> int:
    """Five calls of one reply, each adding a field: how many fields the file keeps."""
    from deepagents import create_deep_agent

    calls = [tool_call(tool_.name, field_name=k, value=v) for k, v in FIELDS.items()]
    model = ScriptedChatModel(script=[reply(*calls), reply(text="done")])
    state = create_deep_agent(model, tools=[tool_]).invoke(USER)
    return len(fields_in(state["files"]))


@pytest.mark.parametrize("tool_", [store_requirement, store_field], ids=lambda t: t.name)
def test_a_read_in_a_helper_handed_the_files_the_state_or_the_path_is_found(tool_: Any):
    from deepagents import create_deep_agent

    assert kept_of_five(tool_) == 1  # the run: four of five fields lost
    model = ScriptedChatModel(script=[reply(text="ok")])
    report = diagnose(create_deep_agent(model, tools=[tool_]))
    assert ("file-read-modify-write", f"{tool_.name}:{PATH}") in errors(report)


def disk_tools(folder: Path) -> tuple[Any, Any]:
    def read_lines(path: Path) -> list[str]:
        with path.open() as file:
            return file.readlines()

    def write_lines(target: Path, lines: list[str]) -> None:
        with target.open("w") as file:
            file.writelines(lines)

    @tool
    def insert_line(file_name: str, text: str) -> str:
        """Insert a line at the top of a document."""
        lines = read_lines(folder / file_name)
        lines.insert(0, text + "\n")
        write_lines(folder / file_name, lines)
        return f"Inserted into {file_name}"

    @tool
    def save_section(file_name: str, text: str) -> str:
        """Save a section and say how long it is, as read back from disk."""
        path = folder / file_name
        path.write_text(text + "\n")
        return f"Saved {len(path.read_text())} characters to {file_name}"

    return insert_line, save_section


def lines_after(tool_: Any, folder: Path, *, parallel: bool) -> int:
    """Lines of doc.txt after five calls, in one reply or one reply each (20 tries at most to
    see a loss: threads switch often, as on a loaded machine)."""
    calls = [tool_call(tool_.name, file_name="doc.txt", text=f"line {i}") for i in range(5)]
    script = [reply(*calls)] if parallel else [reply(c) for c in calls]
    counts = []
    held = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20 if parallel else 1):
            (folder / "doc.txt").write_text("")
            model = ScriptedChatModel(script=[*script, reply(text="done")])
            create_agent(model, tools=[tool_]).invoke(USER)
            counts.append(len((folder / "doc.txt").read_text().splitlines()))
            if min(counts) < 5:
                break
    finally:
        sys.setswitchinterval(held)
    return min(counts)


def test_a_disk_read_in_a_helper_handed_the_path_is_found(tmp_path: Path):
    insert_line, _ = disk_tools(tmp_path)
    assert lines_after(insert_line, tmp_path, parallel=False) == 5
    assert lines_after(insert_line, tmp_path, parallel=True) < 5  # edits lost in one reply
    model = ScriptedChatModel(script=[reply(text="ok")])
    report = diagnose(create_agent(model, tools=[insert_line]))
    assert errors(report) == [
        ("file-read-modify-write", "insert_line:folder / file_name (one run-time path)")
    ]


# --- (b) a write read back afterwards is no read-modify-write ----------------------------------


def test_a_tool_that_writes_a_file_then_reads_it_back_is_not_reported(tmp_path: Path):
    _, save_section = disk_tools(tmp_path)
    one_each = lines_after(save_section, tmp_path, parallel=False)
    in_one_reply = lines_after(save_section, tmp_path, parallel=True)
    assert one_each == in_one_reply == 1  # each call replaces the file: nothing more to lose
    model = ScriptedChatModel(script=[reply(text="ok")])
    report = diagnose(create_agent(model, tools=[save_section]))
    assert report.findings == []

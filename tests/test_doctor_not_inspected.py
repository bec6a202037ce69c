"""A linter that cannot see says so (issue 41 item 7): a node, tool or router whose source
cannot be read (``python -c``, ``exec``, a package without sources) gives an ``info``
``not-inspected`` finding naming it and why; the same graph from a file is read and flagged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from agentstate.doctor import diagnose

AGENT = textwrap.dedent(
    """
    from langchain.agents import create_agent
    from langchain.tools import ToolRuntime
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langgraph.types import Command
    from agentstate.models import ScriptedChatModel, reply

    @tool
    def save_note(text: str, runtime: ToolRuntime) -> Command:
        \"\"\"Save a note.\"\"\"
        done = ToolMessage("saved", tool_call_id=runtime.tool_call_id)
        return Command(update={"note": text, "messages": [done]})

    agent = create_agent(ScriptedChatModel(script=[reply(text="ok")]), tools=[save_note])
    """
)
REPORT = (
    "import json\nfrom agentstate.doctor import diagnose\n"
    "print(json.dumps([[f.code, f.severity, f.subject, f.message, f.file, f.line] "
    "for f in diagnose(agent)]))\n"
)


def doctor(args: list[str], cwd: Path) -> list[list[Any]]:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: list[list[Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_tool_from_python_c_is_not_inspected_and_says_so(tmp_path: Path):
    from_c = doctor(["-c", AGENT + REPORT], tmp_path)
    assert [(c, s, subject) for c, s, subject, *_ in from_c] == [
        ("not-inspected", "info", "save_note")
    ]
    message = from_c[0][3]
    assert "`save_note` was not inspected" in message and "python -c" in message
    script = tmp_path / "agent.py"
    script.write_text(AGENT + REPORT)
    from_file = doctor([str(script)], tmp_path)
    assert [(c, s) for c, s, *_ in from_file] == [("undeclared-key", "error")]  # read: flagged


def test_a_node_and_a_router_built_with_exec_are_named():
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        topic: str

    made: dict[str, Any] = {}
    exec(  # noqa: S102 - the shape under test: code with no source to read
        "def plan(state):\n    return {'topic': 'x', 'extra': 1}\n"
        "def route(state):\n    return END\n",
        {"END": END},
        made,
    )
    builder = StateGraph(State)
    builder.add_node("plan", made["plan"])
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", made["route"], [END])
    graph = builder.compile()
    assert graph.invoke({"topic": "t"}) == {"topic": "x"}  # `extra` dropped: unseen by the doctor
    report = diagnose(graph)
    assert report.codes() == []
    found = {(f.subject, f.severity) for f in report.of("not-inspected")}
    assert found == {("plan", "info"), ("route", "info")}
    assert all("exec" in f.message for f in report.of("not-inspected"))


def test_everything_read_gives_no_not_inspected_finding():
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        topic: str

    builder = StateGraph(State)
    builder.add_node("plan", lambda s: {"topic": "x"})
    builder.add_edge(START, "plan")
    assert diagnose(builder.compile()).findings == []


def test_a_tool_from_a_package_shipped_without_sources_is_named(tmp_path: Path):
    package = tmp_path / "shipped_tools"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from langchain_core.tools import tool\n\n\n"
        "@tool\ndef lookup(name: str) -> str:\n"
        '    """Look a name up."""\n'
        "    return name\n"
    )
    code = (
        "import compileall, json, shutil, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        f"compileall.compile_dir({str(package)!r}, legacy=True, quiet=1)\n"
        f"(__import__('pathlib').Path({str(package)!r}) / '__init__.py').unlink()\n"
        "from shipped_tools import lookup\n"
        "from langchain.agents import create_agent\n"
        "from agentstate.doctor import diagnose\n"
        "from agentstate.models import ScriptedChatModel, reply\n"
        "agent = create_agent(ScriptedChatModel(script=[reply(text='ok')]), tools=[lookup])\n"
        "print(json.dumps([[f.code, f.severity, f.subject, f.message] for f in diagnose(agent)]))\n"
    )
    found = doctor(["-c", code], tmp_path)
    assert [(c, s, subject) for c, s, subject, _ in found] == [("not-inspected", "info", "lookup")]
    assert "shipped without its sources" in found[0][3]

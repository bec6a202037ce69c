"""Every finding lands on a line of the reader's project (issue 41 item 9): a tool from MCP (or
any package in site-packages) on the line of the graph that binds it, not in
``langchain_mcp_adapters/tools.py``; a subagent's finding where the subagent is declared.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import AgentState

from agentstate.doctor import diagnose
from agentstate.doctor.facts import releases
from agentstate.models import ScriptedChatModel, reply

AGENT = textwrap.dedent(
    """
    import asyncio, json, sys

    from langchain.agents import create_agent
    from langchain_mcp_adapters.client import MultiServerMCPClient

    from agentstate.doctor import diagnose
    from agentstate.models import ScriptedChatModel, reply

    DB = sys.argv[1]


    async def make_graph():
        client = MultiServerMCPClient({"memory": {
            "command": sys.executable,
            "args": ["-m", "agentstate.memory.service.server", "--db", DB],
            "transport": "stdio",
        }})
        tools = await client.get_tools()
        model = ScriptedChatModel(script=[reply(text="ok")])
        return create_agent(
            model,
            tools=tools,  # BINDS
        )


    graph = asyncio.run(make_graph())
    print(json.dumps([[f.code, f.subject, f.file, f.line] for f in diagnose(graph)]))
    """
)


def test_an_mcp_tool_is_placed_on_the_line_that_binds_it(tmp_path: Path):
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    done = subprocess.run(
        [sys.executable, str(agent), str(tmp_path / "memory.sqlite")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: list[list[Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    memory = [f for f in found if f[0] == "memory-in-react-loop"]
    assert memory, found  # add_entry, the server's memory tool, in the agent's loop
    binds = AGENT.splitlines().index("        tools=tools,  # BINDS") + 1
    for _, subject, file, line in memory:
        assert (file, line) == (str(agent), binds), subject
    assert not any("site-packages" in (f[2] or "") for f in found)


class Notes(AgentState):
    notes: Annotated[NotRequired[list[str]], operator.add]


def count(text: str) -> str:
    """Count words."""
    return str(len(text.split()))


@pytest.mark.extras("deepagents")
def test_a_subagent_finding_is_placed_where_the_subagent_is_declared(
    monkeypatch: pytest.MonkeyPatch,
):
    from deepagents import create_deep_agent

    model = ScriptedChatModel(script=[reply(text="ok")])
    spec = {
        "name": "counter",
        "description": "Counts.",
        "system_prompt": "Count.",
        "tools": [count],
        "model": model,
    }
    agent = create_deep_agent(model, state_schema=Notes, subagents=[spec])
    monkeypatch.setattr(releases, "installed_version", lambda _: "0.7.23")
    (found,) = [f for f in diagnose(agent).errors if f.subject == "counter:notes"]
    source = Path(__file__).read_text().splitlines()
    assert found.file == __file__
    assert found.line is not None and '"name": "counter"' in source[found.line - 1]

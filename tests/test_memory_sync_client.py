"""Issue 43 item 3: the memory client from sync code, beside the async one.

A sync script run as its own process stores and lists entries through
``SyncMemoryClient`` against a real ``agentstate memory serve`` process; the
client blocks of ``docs/memory-server.md`` run as written; a sync tool in
``create_agent`` (scripted model) writes through the client under ``invoke``
and ``stream``, and the server's MCP tools from ``SyncMemoryClient.tools()``
run in a sync agent and an async one; the async client still works beside it.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool

from agentstate.memory.client import MemoryClient, SyncMemoryClient
from agentstate.memory.service.process import ServerProcess, free_port
from agentstate.memory.service.stores import read_memory_rows
from agentstate.models import ScriptedChatModel, reply, tool_call

ROOT = Path(__file__).resolve().parents[1]
V = "sync"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    with ServerProcess(tmp_path / "m.sqlite") as proc:
        yield proc


def stored(db: Path, memory_id: str) -> list[str]:
    return [e["raw_entry"] for e in read_memory_rows(db, memory_id)["entries"]]


def test_a_sync_script_stores_and_lists_entries_against_agentstate_memory_serve(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "AGENTSTATE_MEMORY_TOKEN"}
    serve = subprocess.Popen(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", "--db",
         str(tmp_path / "m.sqlite"), "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert serve.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        script = tmp_path / "script.py"
        script.write_text(
            textwrap.dedent(f"""
            from agentstate.memory import SyncMemoryClient

            with SyncMemoryClient("http://127.0.0.1:{port}/mcp") as client:
                client.call("create_memory", vault_id="v", memory_id="m")
                for n in range(3):
                    client.call("add_entry", vault_id="v", memory_id="m",
                                raw_entry=f"entry {{n}}", summary="s")
                client.call("await_consistency", memory_id="m")
                page = client.call("list_entries", vault_id="v", memory_id="m")
                print([e["raw_entry"] for e in page["entries"]])
                print(sorted(t.name for t in client.tools())[:2])
            """)
        )
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines() == [
            "['entry 0', 'entry 1', 'entry 2']",
            "['add_entry', 'assign_position']",
        ]
    finally:
        serve.terminate()
        serve.wait(30)
    assert stored(tmp_path / "m.sqlite", "m") == ["entry 0", "entry 1", "entry 2"]


def client_blocks() -> list[str]:
    text = (ROOT / "docs" / "memory-server.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return [b for b in blocks if "ServerProcess(" in b and "MemoryClient" in b]


@pytest.mark.parametrize("block", client_blocks(), ids=["async", "sync"])
def test_the_documented_client_blocks_run_as_written(block, tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    (tmp_path / "block.py").write_text(block)
    done = subprocess.run(
        [sys.executable, "block.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "['hello']\n"


def test_the_client_blocks_are_there():
    assert len(client_blocks()) == 2


def remember_tool(client: SyncMemoryClient):
    @tool
    def remember(text: str) -> str:
        """Store a note in the memory."""
        return client.call("add_entry", vault_id=V, memory_id="m", raw_entry=text, summary="s")

    return remember


def agent_for(tools, *calls):
    model = ScriptedChatModel(script=[reply(*calls), reply(text="done")])
    return create_agent(model, tools=tools)


def test_a_sync_tool_in_create_agent_writes_through_it_under_invoke_and_stream(server):
    db = Path(server.db)
    with SyncMemoryClient(server.url) as client:
        client.call("create_memory", vault_id=V, memory_id="m")
        remember = remember_tool(client)
        state = agent_for([remember], tool_call("remember", text="by invoke")).invoke(
            {"messages": [{"role": "user", "content": "note it"}]}
        )
        assert state["messages"][-2].text == "enqueued"
        chunks = list(
            agent_for([remember], tool_call("remember", text="by stream")).stream(
                {"messages": [{"role": "user", "content": "note it"}]}, stream_mode="updates"
            )
        )
        assert any("tools" in chunk for chunk in chunks)
        client.call("await_consistency", memory_id="m")
    assert stored(db, "m") == ["by invoke", "by stream"]


@pytest.mark.anyio
async def test_its_mcp_tools_run_in_a_sync_agent_and_an_async_one_beside_the_async_client(
    server,
):
    db = Path(server.db)
    args = {"vault_id": V, "memory_id": "m", "summary": "s"}
    with SyncMemoryClient(server.url) as client:
        client.call("create_memory", vault_id=V, memory_id="m")
        tools = client.tools()
        sync_state = agent_for(tools, tool_call("add_entry", raw_entry="sync agent", **args))
        sync_state = sync_state.invoke({"messages": [{"role": "user", "content": "x"}]})
        async_agent = agent_for(tools, tool_call("add_entry", raw_entry="async agent", **args))
        async_state = await async_agent.ainvoke({"messages": [{"role": "user", "content": "x"}]})
        for state in (sync_state, async_state):
            assert state["messages"][-2].text == "enqueued", state["messages"][-2]
        async with MemoryClient(server.url) as async_client:  # the async client, unchanged
            assert await async_client.call("await_consistency", memory_id="m") == "consistent"
    assert stored(db, "m") == ["sync agent", "async agent"]


def test_a_sync_call_waits_for_a_restarted_server_and_its_write_lands_once(server):
    """The retry of the async core, from sync code: the server is SIGKILLed and started
    again on its port while a write waits; the write returns, stored once."""
    import threading

    db = Path(server.db)
    with SyncMemoryClient(server.url, retry_for=60, timeout=10) as client:
        client.call("create_memory", vault_id=V, memory_id="m")
        server.kill()
        restart = threading.Timer(1.0, server.start)
        restart.start()
        try:
            answer = client.call("add_entry", vault_id=V, memory_id="m", raw_entry="x",
                                 summary="s", idempotency_key="once")  # fmt: skip
        finally:
            restart.join()
        assert answer == "enqueued" and client.stats["retries"] >= 1
        assert client.call("add_entry", vault_id=V, memory_id="m", raw_entry="x", summary="s",
                           idempotency_key="once") == "already enqueued"  # fmt: skip
        client.call("await_consistency", memory_id="m")
    assert stored(db, "m") == ["x"]


def test_a_closed_client_says_so():
    client = SyncMemoryClient("http://127.0.0.1:9/mcp", retry_for=0)
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.call("create_memory", vault_id=V, memory_id="m")

"""The memory MCP server as a real process over stdio: tools, errors, queueing, FTS."""

import json
import sys

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from agentstate.memory.service.targets import is_postgres, split_password
from tests import memory_backends

pytestmark = pytest.mark.anyio

V, M = "vault-1", "chat-1"
postgres = memory_backends.postgres  # SQLite and a real Postgres (issue 35)
memory_db = memory_backends.memory_db


@pytest.fixture
def anyio_backend():
    return "asyncio"


def server_params(db, module="agentstate.memory.service.server"):
    """The server over stdio; a Postgres URL's password goes by environment, never argv."""
    shown, password = split_password(str(db)) if is_postgres(db) else (str(db), None)
    command = ["-m", module, "--db", shown] if module.endswith("server") else ["-m", module,
               "memory", "serve", "--db", shown]  # fmt: skip
    env = {"PGPASSWORD": password} if password else None
    return StdioServerParameters(command=sys.executable, args=command, env=env)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    text = "".join(c.text for c in result.content if hasattr(c, "text"))
    return result.isError, text


async def test_tools_over_stdio_round_trip(memory_db):
    async with stdio_client(server_params(memory_db)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {
                "add_entry",
                "list_entries",
                "get_entry",
                "put_context",
                "get_context",
                "await_consistency",
                "search_memories",
                "create_memory",
            } <= names
            assert await call(session, "create_memory", vault_id=V, memory_id=M) == (
                False,
                "created",
            )
            texts = ["héllo 👋 wörld", "```python\nprint('x')\n```", "", "second"]
            for i, text in enumerate(texts):
                ok = await call(
                    session,
                    "add_entry",
                    vault_id=V,
                    memory_id=M,
                    raw_entry=text,
                    summary=f"s{i}",
                    tags={"role": "user", "msg_idx": i},
                )
                assert ok == (False, "enqueued")
            assert await call(session, "await_consistency", memory_id=M) == (False, "consistent")
            _, listed = await call(session, "list_entries", vault_id=V, memory_id=M, limit=10)
            entries = json.loads(listed)["entries"]
            assert [e["raw_entry"] for e in entries] == texts  # verbatim, in order
            assert [e["tags"]["msg_idx"] for e in entries] == [0, 1, 2, 3]
            _, one = await call(
                session, "get_entry", vault_id=V, memory_id=M, entry_id=entries[0]["entry_id"]
            )
            assert json.loads(one)["raw_entry"] == texts[0]
            _, after = await call(
                session, "list_entries", vault_id=V, memory_id=M, after=entries[1]["created_at"]
            )
            assert [e["raw_entry"] for e in json.loads(after)["entries"]] == texts[2:]
            assert await call(session, "get_context", vault_id=V, memory_id=M) == (
                False,
                "context not found",
            )
            for content in ("first context", "second context"):
                await call(session, "put_context", vault_id=V, memory_id=M, content=content)
            await call(session, "await_consistency", memory_id=M)
            assert await call(session, "get_context", vault_id=V, memory_id=M) == (
                False,
                "second context",
            )
            _, found = await call(
                session, "search_memories", memory_id=M, query="wörld", top_ke=5, top_kc=2
            )
            found = json.loads(found)
            assert [e["raw_entry"] for e in found["entries"]] == [texts[0]]
            assert [c["content"] for c in found["contexts"]] == ["second context", "first context"]


BAD_INPUT = [
    (
        "add_entry",
        {"vault_id": V, "memory_id": "nope", "raw_entry": "x", "summary": "s"},
        "unknown memory 'nope'",
    ),
    (
        "add_entry",
        {"vault_id": "", "memory_id": M, "raw_entry": "x", "summary": "s"},
        "vault_id is required",
    ),
    ("list_entries", {"vault_id": V, "memory_id": M, "limit": 0}, "limit must be an integer"),
    ("list_entries", {"vault_id": V, "memory_id": M, "limit": 51}, "limit must be an integer"),
    (
        "list_entries",
        {
            "vault_id": V,
            "memory_id": M,
            "before": "2026-01-01T00:00:00Z",
            "after": "2026-01-01T00:00:00Z",
        },
        "not both",
    ),
    ("list_entries", {"vault_id": V, "memory_id": M, "before": "yesterday"}, "RFC3339"),
    ("search_memories", {"memory_id": M, "query": "x", "top_kc": 0}, "top_kc must be"),
    ("get_entry", {"vault_id": V, "memory_id": M, "entry_id": "missing"}, "no entry"),
    ("await_consistency", {"memory_id": "nope"}, "unknown memory"),
]


async def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path):
    async with stdio_client(server_params(tmp_path / "m.sqlite")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await call(session, "create_memory", vault_id=V, memory_id=M)
            for tool, args, message in BAD_INPUT:
                is_error, text = await call(session, tool, **args)
                assert is_error and message in text, (tool, args, text)
            await call(session, "await_consistency", memory_id=M)
            _, listed = await call(session, "list_entries", vault_id=V, memory_id=M)
            assert json.loads(listed)["entries"] == []
            assert await call(session, "get_context", vault_id=V, memory_id=M) == (
                False,
                "context not found",
            )


async def test_writes_survive_a_server_restart(memory_db):
    db = memory_db
    async with stdio_client(server_params(db)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await call(session, "create_memory", vault_id=V, memory_id=M)
            for i in range(20):
                await call(
                    session,
                    "add_entry",
                    vault_id=V,
                    memory_id=M,
                    raw_entry=f"m{i}",
                    summary="s",
                    tags={"msg_idx": i},
                )
            assert (await call(session, "await_consistency", memory_id=M))[1] == "consistent"
    async with stdio_client(server_params(db)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            _, listed = await call(session, "list_entries", vault_id=V, memory_id=M, limit=50)
            assert [e["raw_entry"] for e in json.loads(listed)["entries"]] == [
                f"m{i}" for i in range(20)
            ]


async def test_langchain_mcp_adapters_load_the_tools(tmp_path):
    from langchain_mcp_adapters.tools import load_mcp_tools

    async with stdio_client(server_params(tmp_path / "m.sqlite")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in await load_mcp_tools(session)}
            assert await tools["create_memory"].ainvoke({"vault_id": V, "memory_id": M})
            out = await tools["add_entry"].ainvoke(
                {
                    "vault_id": V,
                    "memory_id": M,
                    "raw_entry": "hi",
                    "summary": "greeting",
                    "tags": {"role": "user", "msg_idx": 0},
                }
            )
            assert "enqueued" in str(out)
            assert "consistent" in str(await tools["await_consistency"].ainvoke({"memory_id": M}))


async def test_agentstate_memory_serve_is_the_same_server(memory_db):
    """The command a user runs (`agentstate memory serve --db PATH|URL`) speaks MCP over stdio."""
    params = server_params(memory_db, "agentstate.cli")
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            assert await call(session, "create_memory", vault_id=V, memory_id=M) == (
                False,
                "created",
            )
            _, found = await call(session, "search_memories", memory_id=M, query="nothing")
            assert json.loads(found) == {"entries": [], "contexts": []}
    if not is_postgres(memory_db):
        assert memory_db.exists()

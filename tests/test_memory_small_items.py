"""Issue 16's smaller memory-server items, each against a real server process: the token never
on the command line (an empty one refused), quiet client disconnects, unencodable text refused
with a clear error."""

import json
import os
import subprocess
import sys

import httpx
import pytest
from langchain_core.messages import ChatMessage

from agentstate.memory.capture.baselines.auditor import read_memory
from agentstate.memory.capture.graph import InvalidTurn, check_turn
from agentstate.memory.client import MemoryClient, MemoryToolError
from agentstate.memory.service.process import ServerProcess, free_port
from agentstate.memory.service.store import MemoryInputError, check_text

pytestmark = pytest.mark.anyio
TOKEN = "t0ken-from-a-file"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def serve(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


# --- the token: from the environment or a file, never an argument, never empty ----------


def test_a_token_on_the_command_line_or_an_empty_token_is_refused_in_one_line(tmp_path):
    db = str(tmp_path / "m.sqlite")
    http = ["--db", db, "--transport", "http", "--port", str(free_port())]
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    clean = {k: v for k, v in os.environ.items() if k != "AGENTSTATE_MEMORY_TOKEN"}
    cases = [
        ([*http, "--token", "s3cret-on-argv"], clean, "--token is refused"),
        ([*http, "--token", ""], clean, "--token is refused"),
        ([*http, "--token-file", str(empty)], clean, "the file is empty"),
        ([*http, "--token-file", str(tmp_path / "missing")], clean, "cannot read it"),
        (http, {**clean, "AGENTSTATE_MEMORY_TOKEN": ""}, "is set but empty"),
        (http, {**clean, "AGENTSTATE_MEMORY_TOKEN": "two words"}, "one word"),
    ]
    for args, env, message in cases:
        done = serve(*args, env=env)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.stderr[-500:])
        assert lines[0].startswith("agentstate memory serve: error:") and message in lines[0]
        assert "s3cret-on-argv" not in done.stderr and "two words" not in done.stderr
    assert not (tmp_path / "m.sqlite").exists()  # nothing was started or created


class TokenFileServer(ServerProcess):
    """The memory server with ``--token-file``, the way a user keeps the token off argv."""

    def __init__(self, db, token_file):
        super().__init__(db)
        self.token_file = token_file

    def command(self):
        return [*super().command(), "--token-file", str(self.token_file)]


async def test_the_token_from_a_file_is_required_and_not_in_the_process_arguments(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with TokenFileServer(tmp_path / "memory.sqlite", token_file) as proc:
        argv = open(f"/proc/{proc.process.pid}/cmdline", "rb").read()
        assert TOKEN.encode() not in argv and b"--token-file" in argv
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"accept": "application/json, text/event-stream"}
        assert httpx.post(proc.url, json=body, headers=headers, timeout=10).status_code == 401
        async with MemoryClient(proc.url, token=TOKEN) as client:
            assert await client.call("create_memory", vault_id="v", memory_id="m") == "created"
    log = (tmp_path / "memory.sqlite.log").read_text()
    assert "(bearer token required)" in log and TOKEN not in log


# --- a clean client disconnect is not an error ------------------------------------------


async def test_clean_client_disconnects_leave_no_traceback_in_the_server_log(tmp_path):
    with ServerProcess(tmp_path / "memory.sqlite") as proc:
        for n in range(4):  # open a session, use it, close it cleanly
            async with MemoryClient(proc.url) as client:
                await client.call("create_memory", vault_id="v", memory_id=f"m{n}")
                await client.call("get_context", vault_id="v", memory_id=f"m{n}")
        async with MemoryClient(proc.url) as client:  # the server still answers
            assert await client.call("get_context", vault_id="v", memory_id="m0")
    log = (tmp_path / "memory.sqlite.log").read_text()
    assert "Traceback" not in log and "ClosedResourceError" not in log, log[-2000:]
    assert "memory server on" in log


# --- text that UTF-8 cannot carry: a clear error, nothing written -------------------------


def test_a_lone_surrogate_is_refused_by_name_at_every_boundary():
    with pytest.raises(MemoryInputError, match=r"raw_entry contains a lone surrogate '\\ud800'"):
        check_text("ok \ud800", "raw_entry")
    turn = ChatMessage(role="user", content="ok \udfff", additional_kwargs={"msg_idx": 1})
    with pytest.raises(InvalidTurn, match="msg 1: the memory server cannot store it: .*surrogate"):
        check_turn(turn)


async def test_a_lone_surrogate_is_refused_by_the_client_and_by_the_server(tmp_path):
    with ServerProcess(tmp_path / "memory.sqlite") as proc:
        async with MemoryClient(proc.url, retry_for=5) as client:
            await client.call("create_memory", vault_id="v", memory_id="m")
            args = {"vault_id": "v", "memory_id": "m", "summary": "s"}
            with pytest.raises(MemoryToolError, match=r"add_entry: raw_entry contains a lone"):
                await client.call("add_entry", raw_entry="caf\udce9", **args)
            with pytest.raises(MemoryToolError, match=r"tags\.note contains a lone surrogate"):
                await client.call("add_entry", raw_entry="x", tags={"note": "\ud83d"}, **args)
            assert client.stats["retries"] == 0  # refused before sending: the session is fine
            assert await client.call("add_entry", raw_entry="fine", **args) == "enqueued"
            # another client sends it escaped, as JSON allows: the server refuses it by name
            reply = raw_tool_call(proc.url, "add_entry", {**args, "raw_entry": "caf\udce9"})
            assert reply["result"]["isError"] is True
            assert "raw_entry contains a lone surrogate" in reply["result"]["content"][0]["text"]
            await client.call("await_consistency", memory_id="m")
    assert [e["raw_entry"] for e in read_memory(proc.db, "m")["entries"]] == ["fine"]


def raw_tool_call(url, name, arguments):
    """One tools/call over plain HTTP, the JSON escaped (``\\udce9``) as any JSON encoder may."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with httpx.Client(timeout=10) as http:

        def post(message, session=None):
            extra = {"mcp-session-id": session} if session else {}
            body = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=True)
            return http.post(url, content=body, headers={**headers, **extra})

        init = {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
        opened = post({"id": 1, "method": "initialize", "params": init})
        session = opened.headers["mcp-session-id"]
        post({"method": "notifications/initialized"}, session)
        call = {"id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        return post(call, session).json()

"""Issue 8 item 4: every graph of ``langgraph.json`` served by the real ``langgraph dev``.

One server per module, started the way a reader starts it (``--no-browser``,
``--no-reload``) on a free loopback port, with analytics, version checks and
tracing off and no model key in its environment, in a throwaway working
directory (``langgraph dev`` keeps its ``.langgraph_api/`` there). The
capture graph talks to a real memory server. Every graph is run through
``langgraph-sdk``; the last test stops the server and proves that no process
of its group is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client

from agentstate.fixtures import POSTGRES_FIELDS
from agentstate.memory.auditor import audit, read_memory
from agentstate.memory.client import MemoryClient
from agentstate.memory.conversations import parse
from agentstate.memory.process import ServerProcess, free_port, port_open
from agentstate.served import MEMORY_URL_VAR

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
GRAPHS = {"reducer", "turn_cache", "subagents", "experts", "memory_capture"}
PASSWORD = "hunter2-plain"
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "PYTHONUNBUFFERED": "1",
}


def served_config(workdir: Path) -> Path:
    """The repository's langgraph.json with its paths made absolute (the server resolves
    paths against its working directory, which here is a throwaway one)."""
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["graphs"] = {
        name: str(ROOT / spec[2:]) if spec.startswith("./") else spec
        for name, spec in config["graphs"].items()
    }
    config["dependencies"] = [str(ROOT)]
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process of the group exists."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class DevServer:
    """``langgraph dev`` as its own process group; ``stop()`` ends the whole group."""

    def __init__(self, workdir: Path, memory_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "langgraph-dev.log"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "AGENTSTATE_LLM_"))
        }
        env.update(OFFLINE_ENV, **{MEMORY_URL_VAR: memory_url})
        args = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
        args += ["--port", str(self.port), "--config", str(served_config(workdir))]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                args,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pgid = self.proc.pid

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        pytest.fail(f"langgraph dev did not come up on {self.url}:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None or group_alive(self.pgid):
            try:
                os.killpg(self.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.pgid, signal.SIGKILL)
                self.proc.wait()
            deadline = time.monotonic() + 10
            while group_alive(self.pgid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if group_alive(self.pgid):
                os.killpg(self.pgid, signal.SIGKILL)


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    db = tmp_path_factory.mktemp("memory") / "memory.sqlite"
    with ServerProcess(db) as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory, memory):
    server = DevServer(tmp_path_factory.mktemp("langgraph-dev"), memory.url)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(served):
    return get_sync_client(url=served.url)


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def run(client, graph: str, payload: dict, thread_id: str | None = None) -> dict:
    thread_id = thread_id or client.threads.create()["thread_id"]
    return client.runs.wait(thread_id, graph, input=payload)


def last_text(values: dict) -> str:
    return values["messages"][-1]["content"]


def tool_replies(values: dict, name: str) -> list[dict]:
    return [m for m in values["messages"] if m["type"] == "tool" and m.get("name") == name]


def test_every_graph_is_served_with_non_null_schemas(client):
    assistants = {a["graph_id"]: a["assistant_id"] for a in client.assistants.search(limit=50)}
    assert set(assistants) == GRAPHS
    for graph, assistant_id in assistants.items():
        schemas = client.assistants.get_schemas(assistant_id)
        assert schemas["input_schema"] is not None, graph
        assert schemas["input_schema"].get("properties"), graph


def test_stage02_keeps_every_field_of_a_parallel_batch_and_redacts_the_password(client):
    fields = {**POSTGRES_FIELDS, "password": PASSWORD}
    thread = client.threads.create()["thread_id"]
    values = run(client, "reducer", user(json.dumps(fields)), thread)
    assert values["requirements"] == {**POSTGRES_FIELDS, "password": "$secret:rds-master-password"}
    stored = tool_replies(values, "store_requirement")
    assert [m["status"] for m in stored] == ["success"] * len(fields)
    # stage 02's lesson, served: the reader in the writers' batch sees the state from before
    assert json.loads(tool_replies(values, "get_collected_requirements")[-1]["content"]) == {}
    assert last_text(values) == "Stored 6 field(s); the reader in the same batch saw 0."
    synced = values["files"]["/requirements.json"]["content"]
    assert json.loads(synced if isinstance(synced, str) else "\n".join(synced))["engine"] == (
        "postgres"
    )
    # the user typed it; after that, no checkpoint holds it (the model's call was rewritten)
    history = client.threads.get_history(thread, limit=100)
    assert len(history) > 3
    for snapshot in history:
        kept = {k: v for k, v in snapshot["values"].items() if k != "messages"}
        kept["messages"] = [
            m for m in snapshot["values"].get("messages", []) if m["type"] != "human"
        ]
        assert PASSWORD not in json.dumps(kept)


def test_stage03_reader_in_the_batch_sees_every_field_and_nothing_leaks(client):
    thread = client.threads.create()["thread_id"]
    first = run(client, "turn_cache", user(json.dumps(POSTGRES_FIELDS)), thread)
    assert first["requirements"] == POSTGRES_FIELDS
    assert json.loads(tool_replies(first, "get_collected_requirements")[-1]["content"]) == (
        POSTGRES_FIELDS
    )
    assert last_text(first) == "Stored 5 field(s); the reader in the same batch saw 5."
    # a second turn on the same thread: the reader sees the earlier turn's state plus its batch
    more = {"name": "orders-db", "port": 5432}
    second = run(client, "turn_cache", user(json.dumps(more)), thread)
    assert second["requirements"] == {**POSTGRES_FIELDS, **more}
    assert last_text(second) == "Stored 2 field(s); the reader in the same batch saw 7."
    # another thread sees only its own batch
    other = run(client, "turn_cache", user(json.dumps({"engine": "mysql"})))
    assert other["requirements"] == {"engine": "mysql"}
    assert last_text(other) == "Stored 1 field(s); the reader in the same batch saw 1."


def test_stage03_streams_through_the_async_sdk(served):
    async def go() -> tuple[list[str], dict]:
        client = get_client(url=served.url)
        thread = (await client.threads.create())["thread_id"]
        events, values = [], {}
        async for part in client.runs.stream(
            thread, "turn_cache", input=user(json.dumps(POSTGRES_FIELDS)), stream_mode="values"
        ):
            events.append(part.event)
            if part.event == "values":
                values = part.data
        return events, values

    events, values = asyncio.run(go())
    assert events.count("values") >= 3 and "error" not in events
    assert values["requirements"] == POSTGRES_FIELDS
    assert last_text(values) == "Stored 5 field(s); the reader in the same batch saw 5."


def test_stage04_the_collectors_fields_reach_the_parent(client):
    values = run(client, "subagents", user(json.dumps(POSTGRES_FIELDS)))
    assert values["requirements"] == POSTGRES_FIELDS
    (task,) = tool_replies(values, "task")
    assert task["content"] == "Stored 5 field(s)."
    assert json.loads(tool_replies(values, "get_collected_requirements")[-1]["content"]) == (
        POSTGRES_FIELDS
    )
    assert last_text(values) == "The collector's fields reached me: I see 5."


def test_experts_answer(client):
    values = run(client, "experts", user("Which sanctions lists do we screen?"))
    assert values["route"]["experts"] == ["compliance_auditor"]
    assert values["response"] and last_text(values) == values["response"]
    assert set(values["expert_outputs"]) == {"compliance_auditor"}


CHAT = [
    {"role": "user", "content": "Plan a trip to Lisbon in May."},
    {"role": "assistant", "content": "Sure: three days, trams and pastéis."},
    {"role": "user", "content": "Add a day trip to Sintra."},
    {"role": "assistant", "content": "Day 2 is Sintra by train."},
    {"role": "user", "content": "SESSION_END"},  # a user who types a control word
    {"role": "assistant", "content": "Noted ✓"},
    {"role": "user", "content": "Budget under 800 EUR."},
]


def test_memory_capture_stores_exactly_one_entry_per_message(client, memory):
    thread = client.threads.create()["thread_id"]
    events = [{"control": "SESSION_START"}, *CHAT, {"control": "SESSION_END"}]
    results = [run(client, "memory_capture", event, thread) for event in events]
    assert [r["tool_calls"] for r in results] == [
        ["get_context", "list_entries"],
        *[["add_entry"]] * 5,
        ["add_entry", "await_consistency", "put_context"],  # msg_idx 6: periodic flush
        ["add_entry"],
        ["await_consistency", "put_context"],
    ]
    assert {r["memory_id"] for r in results} == {thread}
    # the observer resends message 3: nothing is stored twice
    again = run(client, "memory_capture", {**CHAT[2], "msg_idx": 3}, thread)
    assert again["tool_calls"] == []
    assert "msg 3: already persisted, add_entry skipped" in again["corrections"]

    async def consistent() -> None:
        async with MemoryClient(memory.url) as mc:
            await mc.call("await_consistency", memory_id=thread)

    asyncio.run(consistent())
    conversation = parse(
        {
            "events": [
                {"thread": "t", "system": e["control"]} if "control" in e else {"thread": "t", **e}
                for e in events
            ]
        }
    )
    assert audit(memory.db, conversation, {"t": thread}) == []
    entries = read_memory(memory.db, thread)["entries"]
    assert [(e["tags"]["role"], e["raw_entry"]) for e in entries] == [
        (m["role"], m["content"]) for m in CHAT
    ]


def test_memory_capture_rejects_a_bad_event_and_stores_nothing(client, memory):
    thread = client.threads.create()["thread_id"]
    with pytest.raises(Exception, match="a message event needs role 'user' or 'assistant'"):
        run(client, "memory_capture", {"role": "robot", "content": "beep"}, thread)
    assert read_memory(memory.db, thread)["entries"] == []


def test_stopping_the_server_leaves_no_process_behind(served):
    assert group_alive(served.pgid)
    served.stop()
    assert served.proc.poll() is not None
    assert not group_alive(served.pgid)
    assert not port_open(served.port)

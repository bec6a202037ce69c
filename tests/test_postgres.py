"""Issue 8 item 6: the stage 02-05 graphs on a real PostgreSQL server, sync and async.

One throwaway server (Debian's ``postgres``, started by
:mod:`agentstate.servers.postgres`) serves the whole module; every test gets its
own database. Each turn opens a new checkpointer and builds a new agent
object, and the server is restarted on the same data directory between
turns, so what a later turn sees came back from Postgres. The plain master
password is then searched for in every column of every row of every table.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agentstate.experts import EXPERTS, ExpertsConfig, build_experts_graph, load_manual
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    collector_model,
    delegate,
    file_fields,
    store_calls,
)
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.persistence import (
    SETUP_LOCK,
    PostgresUnavailableError,
    async_postgres_checkpointer,
    postgres_checkpointer,
    postgres_target,
)
from agentstate.rds import build_reducer_agent, build_shared_schema_agent, build_turn_cache_agent
from agentstate.servers.postgres import PostgresServer, free_port, still_alive
from tests.secret_refs import RDS_PASSWORD

PLAIN = "correct-horse-battery-staple-42"
REF = RDS_PASSWORD  # equals any reference labelled rds-master-password
WITH_PASSWORD = {**POSTGRES_FIELDS, "password": PLAIN}
STORED = {**POSTGRES_FIELDS, "password": REF}
READ = tool_call("get_collected_requirements")
MANUAL = load_manual(sections=4)
APIS = ["sync", "async"]
_names = itertools.count(1)


@pytest.fixture(scope="module")
def server():
    """One real server for the module; afterwards none of its processes may be alive."""
    srv = PostgresServer()
    with srv:
        yield srv
    assert srv.leftover_processes() == [], "postgres processes outlived the server"
    assert not srv.root.exists()


@pytest.fixture
def url(server):
    """A fresh, empty database for one test."""
    return server.create_database(f"t{next(_names)}")


# --- running one turn: a new checkpointer and a new agent object every time ---


def run_turn(api: str, how: str, url: str, build: Callable[[Any], Any], text: str, thread: str):
    """One user turn through ``invoke``/``ainvoke`` (how="invoke") or ``stream``/``astream``."""
    config = {"configurable": {"thread_id": thread}}
    turn = {"messages": [HumanMessage(text)]}
    if api == "sync":
        with postgres_checkpointer(url) as saver:
            agent = build(saver)
            if how == "invoke":
                return agent.invoke(turn, config)
            return list(agent.stream(turn, config, stream_mode="values"))[-1]

    async def go():
        async with async_postgres_checkpointer(url) as saver:
            agent = build(saver)
            if how == "invoke":
                return await agent.ainvoke(turn, config)
            return [c async for c in agent.astream(turn, config, stream_mode="values")][-1]

    return asyncio.run(go())


async def _open_async(url: str, **kwargs: Any) -> None:
    async with async_postgres_checkpointer(url, **kwargs):
        pass


def three_turns(server, api, url, builds, texts, thread="t") -> list[dict[str, Any]]:
    """Turn 1 invokes, turn 2 streams (a new agent), the server restarts, turn 3 invokes."""
    first = run_turn(api, "invoke", url, builds[0], texts[0], thread)
    second = run_turn(api, "stream", url, builds[1], texts[1], thread)
    server.restart()
    third = run_turn(api, "invoke", url, builds[2], texts[2], thread)
    return [first, second, third]


def last_read(state) -> dict[str, Any]:
    """What the turn's last ``get_collected_requirements`` call returned."""
    reads = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == READ["name"]]
    assert reads and reads[-1].status != "error", reads[-1:] or "no reader call in this turn"
    return json.loads(reads[-1].content)


def humans(state) -> list[str]:
    return [m.content for m in state["messages"] if isinstance(m, HumanMessage)]


# --- the row scan ---


def server_password(url: str) -> str:
    return psycopg.conninfo.conninfo_to_dict(url)["password"]


def tables(url: str) -> list[str]:
    """Every table outside Postgres's own schemas, as ``schema.table``."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema"
            " NOT IN ('pg_catalog', 'information_schema') ORDER BY table_schema, table_name"
        ).fetchall()
    return [f"{schema}.{table}" for schema, table in rows]


def columns_containing(url: str, needle: str) -> set[str]:
    """``table.column`` of every value holding ``needle``: text, JSON, and the bytes of blobs."""
    found = set()
    with psycopg.connect(url) as conn:
        for name in tables(url):
            table = psycopg.sql.Identifier(*name.split("."))
            cursor = conn.execute(psycopg.sql.SQL("SELECT * FROM {}").format(table))
            columns = [c.name for c in cursor.description]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, bytes | memoryview):
                        hit = needle.encode() in bytes(value)
                    elif isinstance(value, str):
                        hit = needle in value
                    else:
                        hit = needle in json.dumps(value, default=str, ensure_ascii=False)
                    if hit:
                        found.add(f"{name.split('.')[1]}.{column}")
    return found


CHECKPOINT_TABLES = [
    f"public.{t}"
    for t in ("checkpoint_blobs", "checkpoint_migrations", "checkpoint_writes", "checkpoints")
]


def assert_no_plain_password(url: str) -> None:
    assert tables(url) == CHECKPOINT_TABLES
    assert columns_containing(url, REF), "the scan found not even the reference: it reads nothing"
    assert columns_containing(url, PLAIN) == set()


# --- stages 02 and 03: the fixed RDS agents ---

RDS_AGENTS = {
    "02 reducer": lambda model, saver: build_reducer_agent(model, checkpointer=saver),
    "03 turn cache": lambda model, saver: build_turn_cache_agent(model, checkpointer=saver),
}
# A reader in the writers' batch: stage 02 shows the state from before the
# batch (nothing), stage 03's turn cache shows every write of the batch.
SAME_BATCH_READ = {"02 reducer": {}, "03 turn cache": STORED}


def scripted(turn: int, *steps: AIMessage) -> ScriptedChatModel:
    return ScriptedChatModel(script=[*steps, reply(text="Done.")], model_name=f"turn-{turn}")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stage", list(RDS_AGENTS))
def test_rds_threads_survive_a_new_agent_and_a_server_restart(server, url, stage, api):
    build = RDS_AGENTS[stage]
    models = [
        scripted(1, reply(*store_calls(WITH_PASSWORD), READ)),
        scripted(2, reply(READ)),
        scripted(
            3, reply(READ), reply(tool_call("store_requirement", field_name="port", value=5432))
        ),
    ]
    builds = [lambda saver, m=m: build(m, saver) for m in models]
    first, second, third = three_turns(server, api, url, builds, ["collect", "again", "and now"])

    assert last_read(first) == SAME_BATCH_READ[stage]
    assert first["requirements"] == STORED
    assert last_read(second) == STORED  # a new agent object reads turn 1 back from Postgres
    assert last_read(third) == STORED  # ...and again after the server restarted
    assert third["requirements"] == {**STORED, "port": 5432}
    assert file_fields(third) == {**STORED, "port": 5432}
    assert humans(third) == ["collect", "again", "and now"]
    assert_no_plain_password(url)


# --- stage 04: the shared schema across the task boundary ---


# The password either stored by the parent itself, or delegated in the task
# description with the other fields (then the parent's task call, the
# collector's input and its own checkpoints must all hold the reference only).
FIRST_REPLY = {
    "parent stores it": reply(
        *delegate(POSTGRES_FIELDS).tool_calls,
        tool_call("store_requirement", field_name="password", value=PLAIN),
    ),
    "delegated": delegate(WITH_PASSWORD),
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("password", list(FIRST_REPLY))
def test_subagent_writes_survive_a_new_agent_and_a_server_restart(server, url, password, api):
    turns = itertools.count(1)

    def build(*steps):
        parent = scripted(next(turns), *steps)
        return lambda saver: build_shared_schema_agent(
            parent, collector_model(), checkpointer=saver
        )

    builds = [build(FIRST_REPLY[password], reply(READ)), build(reply(READ)), build(reply(READ))]
    first, second, third = three_turns(server, api, url, builds, ["collect", "again", "and now"])

    assert last_read(first) == STORED  # the collector's five fields crossed the boundary
    assert last_read(second) == STORED
    assert last_read(third) == STORED
    assert third["requirements"] == STORED and file_fields(third) == STORED
    assert humans(third) == ["collect", "again", "and now"]
    with psycopg.connect(url) as conn:
        sql = "SELECT DISTINCT checkpoint_ns FROM checkpoint_writes"
        spaces = {row[0] for row in conn.execute(sql)}
    assert "" in spaces and any(s.startswith("tools:") for s in spaces)  # the collector's steps
    assert_no_plain_password(url)


# --- stage 05: the experts threads ---


def persona_echo(messages):
    """A scripted expert reply naming the persona it was given (system message 2)."""
    names = [n for n, p in EXPERTS.items() if p.system_text() == messages[1].content]
    return AIMessage(f"{names[0] if names else 'synthesis'} answer")


@pytest.mark.parametrize("api", APIS)
def test_experts_threads_survive_a_new_graph_and_a_server_restart(server, url, api):
    models = [ScriptedChatModel(script=[persona_echo] * 5, model_name=f"e{i}") for i in range(3)]
    builds = [
        lambda saver, m=m: build_experts_graph(
            ExpertsConfig(manual=MANUAL, mode="llm", expert_model=m, synthesis="combine"),
            checkpointer=saver,
        )
        for m in models
    ]
    texts = [
        "How do we restart a failed batch job?",
        "Which sanctions lists do we screen?",
        "And who approves skipping the batch?",
    ]
    states = three_turns(server, api, url, builds, texts, thread="desk-1")

    assert [m.type for m in states[2]["messages"]] == ["human", "ai"] * 3
    assert humans(states[2]) == texts
    after_restart = models[2].seen[-1]  # the history reached the model from Postgres
    assert [m.content for m in after_restart if m.type == "human"] == texts
    assert states[2]["manual_sha256"] == MANUAL.sha256
    assert columns_containing(url, MANUAL.sha256)  # the manual's hash is stored...
    assert columns_containing(url, MANUAL.text[2000:2200]) == set()  # ...its text is not
    assert columns_containing(url, texts[0])  # and the scan does read the thread


# --- one checkpointer for the life of a server process ---


def test_a_long_lived_checkpointer_survives_a_server_restart(server, url):
    config = {"configurable": {"thread_id": "long"}}
    with postgres_checkpointer(url) as saver:
        agent = build_reducer_agent(
            scripted(1, reply(*store_calls(POSTGRES_FIELDS))), checkpointer=saver
        )
        agent.invoke({"messages": [HumanMessage("collect")]}, config)
        server.restart()  # the pool's connection is dead now; the pool replaces it
        assert agent.get_state(config).values["requirements"] == POSTGRES_FIELDS
        reader = build_reducer_agent(scripted(2, reply(READ)), checkpointer=saver)
        state = reader.invoke({"messages": [HumanMessage("again")]}, config)
    assert last_read(state) == POSTGRES_FIELDS
    assert humans(state) == ["collect", "again"]


def test_a_long_lived_async_checkpointer_survives_a_server_restart(server, url):
    config = {"configurable": {"thread_id": "long"}}

    async def go():
        async with async_postgres_checkpointer(url) as saver:
            graph = build_experts_graph(ExpertsConfig(manual=MANUAL), checkpointer=saver)
            await graph.ainvoke({"messages": [HumanMessage("Which sanctions lists?")]}, config)
            server.restart()
            state = await graph.aget_state(config)
            second = await graph.ainvoke({"messages": [HumanMessage("And then?")]}, config)
            return state, second

    state, second = asyncio.run(go())
    assert humans(state.values) == ["Which sanctions lists?"]
    assert humans(second) == ["Which sanctions lists?", "And then?"]


# --- several processes on one database ---

REPLICA = """
import asyncio, sys
from agentstate.persistence import async_postgres_checkpointer, postgres_checkpointer
print("ready", flush=True)
sys.stdin.readline()  # start together
if sys.argv[2] == "sync":
    with postgres_checkpointer(sys.argv[1]):
        pass
else:
    async def main():
        async with async_postgres_checkpointer(sys.argv[1]):
            pass
    asyncio.run(main())
"""


def test_replicas_starting_together_on_a_fresh_database_all_set_up(server):
    # PostgresSaver.setup() alone races on checkpoint_migrations (UniqueViolation)
    # when several processes create the tables at once.
    for trial in range(2):
        url = server.create_database(f"replicas_{trial}")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", REPLICA, url, api],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for api in APIS * 2
        ]
        assert all(p.stdout.readline() == "ready\n" for p in procs)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [e.splitlines()[-1:] for e in errors]
        assert tables(url) == CHECKPOINT_TABLES


@pytest.mark.parametrize("api", APIS)
def test_a_setup_lock_held_too_long_is_a_clear_error_not_a_hang(url, api):
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
        with pytest.raises(PostgresUnavailableError, match="checkpoint-setup lock") as caught:
            if api == "sync":
                with postgres_checkpointer(url, timeout=0.3):
                    pass
            else:
                asyncio.run(_open_async(url, timeout=0.3))
    assert server_password(url) not in str(caught.value)
    with postgres_checkpointer(url):  # released with the holder's connection
        pass


def test_a_thread_started_in_one_process_continues_in_another(url):
    script = """
import json, sys
from langchain_core.messages import HumanMessage, ToolMessage
from agentstate.lessons.fixtures import store_calls
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.persistence import postgres_checkpointer
from agentstate.rds import build_reducer_agent
READ = "get_collected_requirements"
fields = json.loads(sys.argv[2])
steps = [reply(*store_calls(fields))] if fields else [reply(tool_call(READ))]
model = ScriptedChatModel(script=[*steps, reply(text="ok")])
with postgres_checkpointer(sys.argv[1]) as saver:
    agent = build_reducer_agent(model, checkpointer=saver)
    turn = {"messages": [HumanMessage("turn")]}
    state = agent.invoke(turn, {"configurable": {"thread_id": "handoff"}})
reads = [m.content for m in state["messages"] if isinstance(m, ToolMessage) and m.name == READ]
print(json.dumps({"requirements": state["requirements"], "read": reads[-1:]}))
"""

    def process(fields):
        done = subprocess.run([sys.executable, "-c", script, url, json.dumps(fields)],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    first = process(WITH_PASSWORD)
    second = process({})
    assert first["requirements"] == STORED and first["read"] == []
    assert json.loads(second["read"][0]) == STORED  # read back in another process
    assert_no_plain_password(url)


# --- the row scan itself, and the errors ---


def test_the_row_scan_finds_a_password_that_did_reach_state(url):
    # A user who types the password: the redaction only rewrites tool calls, so it is stored.
    with postgres_checkpointer(url) as saver:
        agent = build_reducer_agent(scripted(1), checkpointer=saver)
        agent.invoke({"messages": [HumanMessage(f"my password is {PLAIN}")]},
                     {"configurable": {"thread_id": "leak"}})  # fmt: skip
    assert columns_containing(url, PLAIN) >= {"checkpoint_blobs.blob"}


@pytest.mark.parametrize("api", APIS)
def test_no_server_at_the_url_says_how_to_start_one_and_hides_the_password(api):
    url = f"postgresql://agentstate:{PLAIN}@127.0.0.1:{free_port()}/postgres"

    with pytest.raises(PostgresUnavailableError) as caught:
        if api == "sync":
            with postgres_checkpointer(url, timeout=2):
                pass
        else:
            asyncio.run(_open_async(url, timeout=2))
    message = str(caught.value)
    assert "agentstate@127.0.0.1:" in message and "Connection refused" in message
    assert "python -m agentstate.servers.postgres" in message
    assert PLAIN not in message


@pytest.mark.parametrize("wrong", ["password", "database"])
def test_a_wrong_password_or_database_says_so_and_hides_the_password(server, wrong):
    url = server.url_for("postgres" if wrong == "password" else "no_such_db")
    if wrong == "password":
        url = url.replace(server.password, PLAIN)
    with pytest.raises(PostgresUnavailableError, match="check the user, password and database"):
        with postgres_checkpointer(url, timeout=2):
            pass
    with pytest.raises(PostgresUnavailableError) as caught:
        asyncio.run(_open_async(url))
    assert ("authentication failed" if wrong == "password" else "does not exist") in str(
        caught.value
    )
    assert PLAIN not in str(caught.value) and server.password not in str(caught.value)


@pytest.mark.parametrize(("kwargs", "error"), [({"max_connections": 0}, "max_connections"),
                                                ({"timeout": 0}, "timeout")])  # fmt: skip
def test_pool_settings_are_checked_before_connecting(kwargs, error):
    url = f"postgresql://u:{PLAIN}@127.0.0.1:{free_port()}/x"  # nothing listens: not reached
    with pytest.raises(ValueError, match=error):
        with postgres_checkpointer(url, **kwargs):
            pass
    with pytest.raises(ValueError, match=error):
        asyncio.run(_open_async(url, **kwargs))


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("", "empty Postgres URL"),
        (f"mysql://root:{PLAIN}@db/x", "not a Postgres URL"),
        (f"postgresql://u:{PLAIN}@127.0.0.1/x?colour=blue", "invalid URI query parameter"),
    ],
)
def test_a_malformed_url_is_refused_without_echoing_it(url, error):
    with pytest.raises(ValueError, match=error) as caught:
        with postgres_checkpointer(url):
            pass
    assert PLAIN not in str(caught.value)
    assert postgres_target(f"postgresql://u:{PLAIN}@h:6000/db") == "u@h:6000/db"


# --- the throwaway server and its command line ---


def test_the_server_stops_without_leaving_a_process_or_its_data():
    server = PostgresServer()
    with server:
        running = server.leftover_processes()
        assert len(running) >= 2  # the postmaster and its background workers
    assert server.leftover_processes() == []
    assert all(not Path(f"/proc/{pid}").exists() for pid in running)
    assert not server.root.exists()
    with pytest.raises(PostgresUnavailableError):
        with postgres_checkpointer(server.url, timeout=2):
            pass


def test_a_picked_port_taken_before_the_start_is_replaced_by_another():
    server = PostgresServer()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        with server:
            assert server.port != taken.getsockname()[1]
            with postgres_checkpointer(server.url) as saver:
                assert saver.get_tuple({"configurable": {"thread_id": "none"}}) is None
    assert server.leftover_processes() == []


def test_an_interpreter_that_never_calls_close_leaves_nothing_behind():
    script = (
        "import json; from agentstate.servers.postgres import PostgresServer, process_tree\n"
        "s = PostgresServer().start()\n"
        "print(json.dumps([str(s.root), sorted(process_tree(s.process.pid))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    root, tree = json.loads(done.stdout)
    assert done.returncode == 0 and len(tree) >= 2, done.stderr
    assert still_alive({(pid, start) for pid, start in tree}) == []
    assert not Path(root).exists()


def test_the_command_line_serves_until_interrupted():
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentstate.servers.postgres"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url_file = Path(line.split("URL in ")[1].split(";")[0])
        assert oct(os.stat(url_file).st_mode & 0o777) == "0o600"
        url = url_file.read_text().strip()
        assert url.split(":")[2].split("@")[0] not in line  # the password is in the file only
        with postgres_checkpointer(url) as saver:
            assert saver.get_tuple({"configurable": {"thread_id": "none"}}) is None
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()  # and its server: the data directory names it
            subprocess.run(["pkill", "-INT", "-f", str(url_file.parent)], check=False)
            raise AssertionError("Ctrl-C did not stop the command within 60 s") from None
        assert code == 0, proc.stderr.read()
    assert not url_file.parent.exists()


@pytest.mark.parametrize("port", ["99999", "taken"])
def test_the_command_line_fails_in_one_line(port):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if port == "taken":
            port = str(taken.getsockname()[1])
        done = subprocess.run(
            [sys.executable, "-m", "agentstate.servers.postgres", "--port", port],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("api", APIS)
def test_the_secret_backstop_masks_values_not_bookkeeping_on_postgres(url, api):
    """The checkpoint backstop on Postgres (it was proven on SQLite): a pin ``1234`` inside a
    message id's uuid is chance and is left, so the checkpoint loads; in a message's text, and
    as a whole uuid, it is masked. Postgres keeps the id, timestamp and channel versions in
    JSON columns the serializer never sees, so they come back as they went in."""
    from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415

    from agentstate.core import SecretStore  # noqa: PLC0415
    from agentstate.core.redaction_backstop import guard_checkpointer  # noqa: PLC0415

    token = "0b9c1234-5d6e-4f70-8a9b-0c1d2e3f4a5b"
    store = SecretStore()
    store.put("pin", "1234", thread="t")
    store.put("token", token, thread="t")
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "1f1eb327-85a9-6d18-8002-9123413d341e"
    version = f"{3:032}.{0.8812345678901234:016}"
    checkpoint["channel_versions"] = {"messages": version}
    checkpoint["channel_values"] = {
        "messages": [
            HumanMessage("pin 1234", id="7c2f9a10-1234-4e5f-9a8b-123412341234"),
            AIMessage("token " + token, id=token),
        ]
    }
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    metadata = {"source": "loop", "step": 1}
    if api == "sync":
        with postgres_checkpointer(url) as saver:
            guard_checkpointer(saver, store)
            saver.put(config, checkpoint, metadata, {"messages": version})
    else:

        async def put() -> None:
            async with async_postgres_checkpointer(url) as saver:
                guard_checkpointer(saver, store)
                await saver.aput(config, checkpoint, metadata, {"messages": version})

        asyncio.run(put())
    with postgres_checkpointer(url) as saver:  # a fresh, unguarded checkpointer reads it back
        back = saver.get_tuple(config).checkpoint
    assert back["id"] == checkpoint["id"] and back["ts"] == checkpoint["ts"]
    assert back["channel_versions"] == {"messages": version}
    human, ai = back["channel_values"]["messages"]
    assert (human.content, human.id) == ("pin ****", "7c2f9a10-1234-4e5f-9a8b-123412341234")
    assert (ai.content, ai.id) == ("token " + "*" * len(token), "*" * len(token))

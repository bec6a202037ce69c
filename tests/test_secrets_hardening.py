"""The plain password reaches no stored or streamed artefact, however the model offers it."""

import asyncio
import json
import sqlite3

import pytest
from langchain_core.messages import AIMessage

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    collector_model,
    delegate,
    one_reply_model,
    parent_model,
    reader_batch_model,
    store_calls,
    user_turn,
)
from agentstate.models import tool_call
from agentstate.persistence import sqlite_checkpointer
from agentstate.rds import (
    build_cache_fix_agent,
    build_reducer_agent,
    build_shared_schema_agent,
    build_turn_cache_agent,
    rds_redaction,
)
from agentstate.tracing import tool_replies
from tests.secret_refs import RDS_PASSWORD, AnyRef

PLAIN = "Plain-Pa55word-never-stored"
WITH_PASSWORD = {**POSTGRES_FIELDS, "password": PLAIN}


def stage_agents():
    return {
        "02": lambda: build_reducer_agent(one_reply_model(*store_calls(WITH_PASSWORD))),
        "03": lambda: build_turn_cache_agent(reader_batch_model(WITH_PASSWORD, 1)),
        "04 shared": lambda: build_shared_schema_agent(
            parent_model(WITH_PASSWORD), collector_model()
        ),
        "04 cache fix": lambda: build_cache_fix_agent(
            parent_model(WITH_PASSWORD), collector_model()
        ),
    }


CONFIG = {"configurable": {"thread_id": "secret"}}


@pytest.mark.parametrize("stage", list(stage_agents()))
def test_the_messages_stream_never_carries_the_plain_password(stage):
    agent = stage_agents()[stage]()
    chunks = list(agent.stream(user_turn(), CONFIG, stream_mode="messages", subgraphs=True))
    assert chunks and not [c for c in chunks if PLAIN in repr(c)]
    streamed_calls = [
        call
        for _, (message, _) in chunks
        for call in getattr(message, "tool_calls", [])
        if call["name"] in ("store_requirement", "task")
    ]
    assert streamed_calls, "the redacted reply is still streamed, whole"


def test_the_async_messages_stream_is_clean_too():
    async def collect():
        agent = stage_agents()["03"]()
        return [c async for c in agent.astream(user_turn(), CONFIG, stream_mode="messages")]

    chunks = asyncio.run(collect())
    assert chunks and not [c for c in chunks if PLAIN in repr(c)]


def test_a_password_delegated_to_the_collector_is_in_no_checkpoint_row(tmp_path):
    secrets = SecretStore()
    db = tmp_path / "threads.sqlite"
    with sqlite_checkpointer(db) as saver:
        agent = build_shared_schema_agent(
            parent_model(WITH_PASSWORD), collector_model(), secrets=secrets, checkpointer=saver
        )
        state = agent.invoke(user_turn(), CONFIG)
    ref = state["requirements"]["password"]
    assert ref == RDS_PASSWORD and secrets.resolve(ref) == PLAIN
    task = [c for m in state["messages"] if isinstance(m, AIMessage) for c in m.tool_calls][0]
    assert json.loads(task["args"]["description"])["password"] == ref
    raw = sqlite3.connect(db)
    namespaces = {ns for (ns,) in raw.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}
    assert any(ns for ns in namespaces), "the subagent's namespace was not checkpointed"
    cells = [
        col if isinstance(col, bytes) else str(col).encode()
        for table in ("checkpoints", "writes")
        for row in raw.execute(f"SELECT * FROM {table}")
        for col in row
    ]
    assert cells and not [c for c in cells if PLAIN.encode() in c]


def test_the_collector_reports_only_the_fields_it_stored():
    fields = {"engine": "postgres", "port": 70000}  # the port is out of range
    agent = build_shared_schema_agent(parent_model(fields), collector_model())
    report = tool_replies(agent.invoke(user_turn()), "task")[0].content
    assert report == "Stored 1 field(s)."


@pytest.mark.parametrize(
    "call",
    [
        tool_call("store_requirement", field_name="master_password", value=PLAIN),
        tool_call("store_requirement", field_name="db_password", value=PLAIN),
        tool_call("store_requirement", field_name="password", value=12345678),
        tool_call("store_requirement", password=PLAIN),  # malformed: no field_name, no value
    ],
    ids=["master_password", "db_password", "non-string", "malformed"],
)
def test_secret_looking_fields_values_and_malformed_calls_are_redacted(call, tmp_path):
    plain = str(call["args"].get("value", PLAIN))
    with sqlite_checkpointer(tmp_path / "t.sqlite") as saver:
        agent = build_reducer_agent(one_reply_model(call), checkpointer=saver)
        state = agent.invoke(user_turn(), CONFIG)
    stored = tool_replies(state)[0].status == "success"
    # a secret-looking unknown field and a malformed call are refused; a number is kept as a ref
    assert stored == (call["args"].get("field_name") == "password")
    assert plain not in repr(state["messages"]) and plain not in repr(state.get("requirements"))
    assert plain.encode() not in (tmp_path / "t.sqlite").read_bytes()


def test_free_text_and_unparsed_calls_are_scrubbed():
    store = SecretStore()
    middleware = SecretRedactionMiddleware(store, text_args={"task": ["description"]})
    message = AIMessage(
        content="",
        tool_calls=[
            {
                "name": "task",
                "id": "1",
                "type": "tool_call",
                "args": {"description": f"db_password={PLAIN}; engine: postgres"},
            }
        ],
        invalid_tool_calls=[
            {
                "name": "task",
                "id": "2",
                "type": "invalid_tool_call",
                "error": "bad json",
                "args": f'{{"description": "x", "password": "{PLAIN}"',
            }
        ],
    )
    clean = middleware.rewrite(message)
    assert PLAIN not in repr(clean)
    assert clean.tool_calls[0]["args"]["description"].endswith("; engine: postgres")
    ref = clean.tool_calls[0]["args"]["description"].removeprefix("db_password=").split(";")[0]
    assert ref == AnyRef("db_password") and store.resolve(ref) == PLAIN


def test_the_rds_redaction_covers_the_task_description():
    store = SecretStore()
    message = delegate({"engine": "postgres", "password": PLAIN})
    clean = rds_redaction(store).rewrite(message)
    assert PLAIN not in repr(clean)
    assert json.loads(clean.tool_calls[0]["args"]["description"]) == {
        "engine": "postgres",
        "password": RDS_PASSWORD,
    }

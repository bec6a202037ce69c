"""The plain password appears nowhere: state, files, manifest, messages, SQLite checkpoint."""

import sqlite3

from langgraph.checkpoint.sqlite import SqliteSaver

from agentstate.core import SecretStore, is_secret_ref, redact
from agentstate.lessons.fixtures import VALID_REQUIREMENTS as VALID
from agentstate.lessons.fixtures import store_calls
from agentstate.lessons.fixtures import user_turn as user
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import build_reducer_agent
from tests.secret_refs import RDS_PASSWORD

PLAIN = "correct-horse-battery-staple-42"


def test_plain_password_is_moved_out_of_state_before_any_checkpoint(tmp_path):
    fields = {**VALID, "password": PLAIN}
    model = ScriptedChatModel(
        script=[reply(*store_calls(fields)), reply(tool_call("generate_rds_manifest")), reply()]
    )
    secrets = SecretStore()
    db = tmp_path / "checkpoints.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        agent = build_reducer_agent(model, secrets=secrets, checkpointer=saver)
        state = agent.invoke(user(), {"configurable": {"thread_id": "t1"}})
    ref = state["requirements"]["password"]
    assert ref == RDS_PASSWORD and len(secrets) == 1
    assert secrets.resolve(ref) == PLAIN
    assert PLAIN not in repr(secrets)
    raw = sqlite3.connect(db)
    tables = ("checkpoints", "writes")
    blobs = [row for table in tables for row in raw.execute(f"SELECT * FROM {table}")]
    assert blobs, "the checkpointer wrote nothing"
    assert not any(
        PLAIN.encode() in bytes(col)
        for row in blobs
        for col in row
        if isinstance(col, bytes | memoryview)
    )
    assert PLAIN not in repr(state)
    files_text = "".join(f["content"] for f in state["files"].values())
    assert ref in files_text and PLAIN not in files_text


def test_without_the_middleware_the_tool_refuses_plain_text_without_echoing_it():
    from deepagents import create_deep_agent
    from langchain_core.messages import ToolMessage

    from agentstate.rds import RdsAgentState, StateStorage, make_rds_tools

    model = ScriptedChatModel(
        script=[reply(tool_call("store_requirement", field_name="password", value=PLAIN)), reply()]
    )
    agent = create_deep_agent(model, make_rds_tools(StateStorage()), state_schema=RdsAgentState)
    state = agent.invoke(user())
    (message,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error" and "secret reference" in message.content
    assert PLAIN not in message.content
    assert state.get("requirements", {}) == {}


def test_redact_masks_plain_secret_values_only():
    assert redact({"password": PLAIN, "engine": "x"}, ["password"]) == {
        "password": "***redacted***",
        "engine": "x",
    }
    assert redact({"password": "$secret:a"}, ["password"]) == {"password": "$secret:a"}
    assert is_secret_ref("$secret:a/b.c") and not is_secret_ref("$secret:") and not is_secret_ref(3)


def test_model_store_of_plain_password_never_reaches_tool_messages():
    model = ScriptedChatModel(
        script=[reply(tool_call("store_requirement", field_name="password", value=PLAIN)), reply()]
    )
    state = build_reducer_agent(model).invoke(user())
    assert PLAIN not in repr(state["messages"])
    assert state["requirements"] == {"password": RDS_PASSWORD}

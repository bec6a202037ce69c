"""Every bad-input path of the six tools returns an error to the model and changes no state."""

import json

import pytest
import yaml
from deepagents.backends.utils import file_data_to_string
from langchain_core.messages import ToolMessage

from agentstate.lessons.fixtures import VALID_REQUIREMENTS as VALID
from agentstate.lessons.fixtures import one_reply_model as one_batch_model
from agentstate.lessons.fixtures import store_calls
from agentstate.lessons.fixtures import user_turn as user
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import (
    MANIFEST_PATH,
    REQUIREMENTS_PATH,
    TOOL_NAMES,
    StateStorage,
    build_reducer_agent,
    make_rds_tools,
    read_json_file,
)


def run(*calls, agent_builder=build_reducer_agent, start=None):
    """Run one batch of calls (after optionally storing ``start``) and return the final state."""
    seed = store_calls(start or {})
    script_calls = [*seed, *calls] if seed else list(calls)
    agent = agent_builder(one_batch_model(*script_calls))
    return agent.invoke(user())


def tool_messages(state):
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_the_six_tools_are_built_with_their_names():
    assert tuple(t.name for t in make_rds_tools(StateStorage())) == TOOL_NAMES


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("colour", "blue", "colour: unknown field"),
        ("allocated_storage_gb", "twenty", "allocated_storage_gb: expected a whole number"),
        ("allocated_storage_gb", 0, "allocated_storage_gb: must be greater than 0 [gt]"),
        ("instance_class", "m5.large", "instance_class: must match ^db\\."),
        ("port", 70000, "port: must be at most 65535 [lte]"),
        ("multi_az", "yes", "multi_az: expected true or false"),
        ("engine", "", "engine: must have at least 1 item(s) [min_len]"),
    ],
)
def test_bad_store_returns_a_specific_error_and_changes_nothing(field, value, expected):
    state = run(tool_call("store_requirement", field_name=field, value=value))
    (message,) = tool_messages(state)
    assert message.status == "error"
    assert message.content.startswith("Error: ") and expected in message.content
    assert state.get("requirements", {}) == {}
    assert REQUIREMENTS_PATH not in state.get("files", {})


def test_a_bad_call_next_to_good_ones_leaves_the_good_ones_alone():
    state = run(*store_calls({"engine": "postgres", "port": "5432", "username": "dbadmin"}))
    assert state["requirements"] == {"engine": "postgres", "username": "dbadmin"}
    statuses = [m.status for m in tool_messages(state)]
    assert statuses == ["success", "error", "success"]


def test_get_collected_requirements_and_validate_report_state():
    state = run(
        tool_call("get_collected_requirements"),
        tool_call("validate_manifest"),
        start={"engine": "postgres"},
    )
    # The readers ran in the same batch as the store: they saw the state before it.
    collected, verdict = (m.content for m in tool_messages(state)[1:])
    assert json.loads(collected) == {}
    assert "engine: missing required field" in verdict


def test_generate_refuses_invalid_requirements_and_writes_no_file():
    state = run(tool_call("generate_rds_manifest"))
    (message,) = tool_messages(state)
    assert message.status == "error" and "cannot generate the manifest" in message.content
    assert MANIFEST_PATH not in state.get("files", {})


def test_generate_writes_the_manifest_once_requirements_are_valid():
    model = ScriptedChatModel(
        script=[reply(*store_calls(VALID)), reply(tool_call("generate_rds_manifest")), reply()]
    )
    agent = build_reducer_agent(model)
    state = agent.invoke(user())
    manifest = yaml.safe_load(read_manifest(state))
    assert manifest["spec"]["engine"] == "postgres"
    assert read_json_file(state["files"], REQUIREMENTS_PATH) == VALID


def read_manifest(state):
    return file_data_to_string(state["files"][MANIFEST_PATH])


def test_field_info_and_required_fields():
    state = run(
        tool_call("get_rds_field_info", field="instance_class"),
        tool_call("get_rds_field_info", field="colour"),
        tool_call("list_required_fields"),
    )
    info, unknown, required = (m.content for m in tool_messages(state))
    assert json.loads(info)["manifest_key"] == "spec.instanceClass"
    assert "pattern ^db\\." in json.loads(info)["rules"]
    assert unknown.startswith("Error: unknown field 'colour'")
    assert "- engine" in required and "db_subnet_group_name" in required

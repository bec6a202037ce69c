"""Bad values driven through the real ``store_requirement`` tool inside a real agent.

Each value here used to be accepted (issue 11). The model must get an error
ToolMessage naming the field and the rule, and state must keep what it held,
while a valid field stored in the same batch still lands.
"""

import pytest
from langchain_core.messages import ToolMessage

from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import REQUIREMENTS_PATH, build_reducer_agent, read_json_file

BEFORE = {"engine": "postgres"}
GOOD = ("port", 5432)


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("name", "orders-db\n", "pattern"),
        ("labels.team\n", "payments", "key_pattern"),
        ("engine_version", "   ", "blank"),
        ("engine_version", "15\x005", "control_chars"),
        ("username", "a" * 129, "max_len"),
        ("security_group_ids", [], "min_items"),
        ("subnet_ids", ["subnet-a", "subnet-a"], "unique"),
        ("subnet_ids", ["subnet-a", 7], "type"),
    ],
)
def test_a_bad_value_reaches_the_model_as_an_error_and_changes_no_state(field, value, rule):
    model = ScriptedChatModel(
        script=[
            reply(
                tool_call("store_requirement", field_name=field, value=value),
                tool_call("store_requirement", field_name=GOOD[0], value=GOOD[1]),
            ),
            reply(text="done"),
        ]
    )
    agent = build_reducer_agent(model)
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "Postgres, please"}], "requirements": BEFORE}
    )

    # The model's second call was shown the error, in tool-call order.
    shown = [m for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert [m.status for m in shown] == ["error", "success"]
    assert shown[0].content.startswith(f"Error: {field}: ")
    assert f"[{rule}]" in shown[0].content

    expected = {**BEFORE, GOOD[0]: GOOD[1]}
    assert state["requirements"] == expected
    assert read_json_file(state["files"], REQUIREMENTS_PATH) == expected

"""Stage 05: the compiled experts graph publishes its input and output schemas.

``langgraph dev`` and the Agent Server describe a graph by its JSON schemas;
with ``typing.TypedDict`` state on Python 3.11 pydantic cannot build them and
the server shows null input and output schemas.
"""

from agentstate.experts import build_experts_graph


def test_the_input_schema_lists_the_state_fields():
    graph = build_experts_graph()
    schema = graph.get_input_jsonschema()
    assert schema["type"] == "object"
    assert {"messages", "route", "response", "expert_outputs"} <= set(schema["properties"])
    assert schema["properties"]["messages"]["type"] == "array"


def test_the_output_schema_lists_the_answer_and_the_hashes():
    schema = build_experts_graph().get_output_jsonschema()
    assert {"messages", "response", "manual_sha256", "prefix_sha256"} <= set(schema["properties"])

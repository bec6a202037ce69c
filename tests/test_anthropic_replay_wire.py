"""The Anthropic replay server of notebook 02's secrets tests refuses a malformed tool_use.

A ``tool_use`` block without a string ``id`` or ``name`` (or a ``tool_result`` without a
string ``tool_use_id``) is a bad request: the server answers 400 ``invalid_request_error``
naming the block, records the body, and never calls the model (it used to drop the
connection with no reply: pydantic refused the LangChain message outside the 400 path).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from agentstate.models import ScriptedChatModel, reply
from agentstate.models.anthropic_replay import AnthropicReplayServer, WireFormatError, to_messages


def _post(url: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


TOOL_USE_WITHOUT_ID = {"type": "tool_use", "name": "lookup", "input": {}}
TOOL_USE_WITHOUT_NAME = {"type": "tool_use", "id": "toolu_1", "input": {}}


@pytest.mark.parametrize("block", [TOOL_USE_WITHOUT_ID, TOOL_USE_WITHOUT_NAME])
def test_a_tool_use_without_a_string_id_or_name_is_a_400(block):
    model = ScriptedChatModel(script=[reply(text="never sent")])
    body = {
        "model": "replay",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [block]},
        ],
    }
    with AnthropicReplayServer(model) as server:
        status, answer = _post(server.base_url + "/v1/messages", body)
        assert status == 400
        error = answer["error"]
        assert isinstance(error, dict)
        assert error["type"] == "invalid_request_error"
        assert "tool_use needs a string id and name" in error["message"]
        assert server.requests == [body]
    assert model.position == 0  # refused before the model was asked


def test_a_tool_result_without_a_string_call_id_is_refused():
    body = {
        "messages": [
            {"role": "assistant", "content": [{**TOOL_USE_WITHOUT_NAME, "name": "lookup"}]},
            {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]},
        ]
    }
    with pytest.raises(WireFormatError, match="tool result for unknown call None"):
        to_messages(body)

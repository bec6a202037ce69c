"""Issue 19: a reader's type checker sees agentstate's types, and the bugs mypy found.

mypy over ``src/agentstate`` flagged the others as type errors; each was a
real defect a reader could hit, not only a wrong annotation.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agentstate.models import ScriptedChatModel, reply
from agentstate.models.openai_replay import ReplayServer


def test_a_readers_mypy_checks_calls_into_agentstate(tmp_path):
    """Before ``py.typed``: "module is installed, but missing library stubs or py.typed
    marker" and every agentstate name was Any, so this wrong annotation passed."""
    user = tmp_path / "reader.py"
    user.write_text(
        "from agentstate.servers.loopback import free_port\n\nport: str = free_port()\n"
    )
    mypy = Path(sys.executable).with_name("mypy")
    result = subprocess.run(
        [str(mypy), "--no-incremental", "--python-executable", sys.executable, user.name],
        cwd=tmp_path,  # not the repository: the reader's own mypy settings (none)
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "import-untyped" not in result.stdout and "py.typed" not in result.stdout
    assert 'expression has type "int", variable has type "str"' in result.stdout, result.stdout
    assert result.returncode == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"id": "c1", "type": "function", "function": {"arguments": "{}"}},
         "a tool call needs a string 'id' and 'function.name'"),
        ({"type": "function", "function": {"name": "f", "arguments": "{}"}},
         "a tool call needs a string 'id' and 'function.name'"),
        ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1]"}},
         "tool call 'c1' has arguments that are not an object"),
    ],
)  # fmt: skip
def test_the_openai_replay_server_answers_400_to_a_malformed_tool_call(call, message):
    """Before: an unnamed call or list arguments crashed the handler (no response at all)."""
    model = ScriptedChatModel(script=[reply(text="unused")])
    body = {
        "model": "replay",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
        ],
    }
    with ReplayServer(model) as server:
        response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]
    assert model.position == 0  # refused before the model was asked


def test_lesson_helpers_read_a_tool_reply_given_as_content_blocks():
    """Before: ``json.loads(message.content)`` raised TypeError on list content (providers'
    content blocks); the helpers now read the message's text, whatever its form."""
    from langchain_core.messages import ToolMessage

    from agentstate.lessons.fixtures import fields_seen_by_reader, notes_read, reader_replies

    def tool_reply(name: str, text: str) -> ToolMessage:
        return ToolMessage(content=[{"type": "text", "text": text}], name=name, tool_call_id="c1")

    state = {"messages": [tool_reply("get_collected_requirements", '{"engine": "postgres"}')]}
    assert fields_seen_by_reader(state) == 1
    assert reader_replies(state) == {"get_collected_requirements": '{"engine": "postgres"}'}
    assert notes_read({"messages": [tool_reply("read_notes", '["milk", "eggs"]')]}) == [
        "milk",
        "eggs",
    ]

"""Issue 25, secrets: docs/secrets.md's table, where the value sits x provider format.

Every row is a place a model puts a secret; every column a provider format:
the scripted model in process, ``ChatOpenAI`` over chat completions and over
the Responses API (``use_responses_api=True``), and ``ChatAnthropic``, the
real clients against the loopback replay servers. Each cell runs one plain
``create_agent`` with the generic middleware and a real SQLite checkpointer,
in one of ``invoke``/``ainvoke``/``stream``/``astream`` (the mode turns with
the row, so each provider runs every mode), and checks that the plain value
is in no state, streamed chunk, checkpoint byte or later request, and that
the reference left in its place resolves to it. Before the fix these rows
leaked: the Responses API (``function_call`` blocks, matched by ``call_id``),
arguments cut off inside the value (``finish_reason="length"``), a
``\\u0070assword`` key, a ``ProviderStrategy`` schema named in
``secret_args``, a markdown key, an echo in a later turn or an unwatched
tool, a JSON-escaped echo of a value with a quote, an encoded echo.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage

from agentstate.core import SecretStore
from agentstate.models import reply, tool_call
from agentstate.persistence import file_contains
from tests.secret_providers import (
    MODES,
    PROVIDERS,
    Creds,
    agent_side,
    build,
    forms,
    provider,
    run,
)

PLAIN = "Vex-5512-Hollow"
CUT = "Vex-5512-Hol"  # what is left of PLAIN when the reply is cut off inside it
QUOTED = 'Vex-"55"-Hollow'
SPACED = "Vex 55/Hollow+x"  # changes when URL-encoded
DONE = reply(text="Done.")


def cut_off(name: str, arguments: str) -> AIMessage:
    """A reply cut off by the token limit inside its one tool call's arguments."""
    call = {"type": "invalid_tool_call", "name": name, "args": arguments, "id": "call_cut"}
    return AIMessage(
        content="",
        invalid_tool_calls=[{**call, "error": None}],
        response_metadata={"finish_reason": "length"},
    )


def connects(password: str) -> AIMessage:
    return reply(tool_call("connect", host="db1", password=password))


@dataclass
class Row:
    replies: list[AIMessage]
    plain: str
    turns: int = 1
    response_format: Any = None
    also: list[str] = field(default_factory=list)  # encoded forms that must be gone too


ROWS = {
    "secret argument": Row([connects(PLAIN), DONE], PLAIN),
    "field/value pair": Row(
        [reply(tool_call("store", field_name="password", value=PLAIN)), DONE], PLAIN
    ),
    "secret key in JSON text": Row(
        [
            reply(
                tool_call(
                    "store",
                    field_name="labels",
                    value=json.dumps({"user": "admin", "password": PLAIN}),
                )
            ),
            DONE,
        ],
        PLAIN,
    ),
    "free text, markdown key": Row(
        [reply(tool_call("note", text=f"Created the user. **Password**: {PLAIN}")), DONE], PLAIN
    ),
    "arguments cut off in the value": Row(
        [cut_off("connect", f'{{"host": "db1", "password": "{CUT}'), DONE], CUT
    ),
    "field/value pair cut off": Row(
        [cut_off("store", f'{{"field_name": "password", "value": "{CUT}'), DONE], CUT
    ),
    "escaped key in cut-off JSON": Row(
        [cut_off("connect", f'{{"host": "db1", "\\u0070assword": "{PLAIN}", "port": 54'), DONE],
        PLAIN,
    ),
    "structured response, ToolStrategy": Row(
        [reply(tool_call("Creds", user="admin", pin=PLAIN))], PLAIN, 1, ToolStrategy(Creds)
    ),
    "structured response, ProviderStrategy": Row(
        [reply(text=json.dumps({"user": "admin", "pin": PLAIN}))], PLAIN, 1, ProviderStrategy(Creds)
    ),
    "echo in the same reply's text": Row(
        [
            reply(tool_call("connect", host="db1", password=PLAIN), text=f"Using {PLAIN} now."),
            DONE,
        ],
        PLAIN,
    ),
    "echo in a later turn's text": Row(
        [connects(PLAIN), DONE, reply(text=f"You connected with {PLAIN}.")], PLAIN, 2
    ),
    "an unwatched tool's argument, later turn": Row(
        [connects(PLAIN), DONE, reply(tool_call("lookup", query=f"logins by {PLAIN}")), DONE],
        PLAIN,
        2,
    ),
    "JSON-escaped echo of a value with a quote": Row(
        [connects(QUOTED), DONE, reply(text=f'Sent {{"q": {json.dumps(QUOTED)}, "n": ')],
        QUOTED,
        2,
    ),
    "URL-encoded and base64 echo": Row(
        [
            connects(SPACED),
            DONE,
            reply(
                text=f"Try https://db1/?pw={quote(SPACED, safe='')} or "
                f"{base64.b64encode(SPACED.encode()).decode()}."
            ),
        ],
        SPACED,
        2,
        also=[quote(SPACED, safe=""), base64.b64encode(SPACED.encode()).decode()],
    ),
}


def refs_in(text: str) -> list[str]:
    return re.findall(r"\$secret:[\w./-]+-[0-9a-f]{24}", text)


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("where", list(ROWS))
def test_the_plain_value_is_nowhere_and_its_reference_resolves(where, kind, tmp_path):
    row = ROWS[where]
    mode = MODES[(list(ROWS).index(where) + PROVIDERS.index(kind)) % len(MODES)]
    secrets, db = SecretStore(), tmp_path / "cell.sqlite"
    turns = ["connect to db1", "and now?"][: row.turns]
    with provider(kind, row.replies) as (model, server):
        state, chunks = run(
            lambda saver: build(model, secrets, saver, row.response_format), mode, db, turns
        )
    gone = [*forms(row.plain), *row.also]
    kept = agent_side(state)
    assert not [f for f in gone if f in kept], f"{mode}: in state"
    assert not [f for f in gone if f in repr(chunks)], f"{mode}: in a streamed chunk"
    assert not [f for f in gone if file_contains(db, f.encode())], f"{mode}: in the checkpoint"
    if server is not None:  # what the client sent back after the first reply
        sent = json.dumps(server.requests[1:])
        assert not [f for f in [*gone, *forms(json.dumps(row.plain)[1:-1])] if f in sent], mode
    assert row.plain in [secrets.resolve(r) for r in refs_in(kept.replace("\\", ""))], mode

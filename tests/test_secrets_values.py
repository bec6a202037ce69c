"""Issue 16, secrets: values inside values, structured responses, and free text in any phrasing.

Before the fix a password inside a value (JSON text, a dict, a list), in a
``ToolStrategy`` structured response, or in task text phrased other than
``password: oneword`` (a multi-word password leaked its last words; a JSON
``field_name``/``value`` pair was not scrubbed) reached state,
``/requirements.json``, messages and the checkpoint.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelResponse
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.lessons.fixtures import file_fields, one_reply_model, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.persistence import file_contains, sqlite_checkpointer
from agentstate.rds import COLLECTOR, build_reducer_agent, rds_redaction
from tests.secret_refs import AnyRef

PLAIN = "Nested-Pa55word-kept-nowhere"
APIS = ["invoke", "ainvoke"]


def run(agent, payload, api, config=None):
    if api == "invoke":
        return agent.invoke(payload, config)
    return asyncio.run(agent.ainvoke(payload, config))


def refs_in(text: str) -> list[str]:
    return re.findall(r"\$secret:[\w./-]+", text)


def agent_side(state: dict) -> str:
    kept = {k: v for k, v in state.items() if k != "messages"}
    return repr(kept) + repr([m for m in state["messages"] if not isinstance(m, HumanMessage)])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("labels.owner", json.dumps({"user": "admin", "password": PLAIN})),
        ("labels.owner", json.dumps({"field_name": "db_password", "value": PLAIN})),
        ("engine", {"name": "postgres", "credentials": {"user": "admin", "password": PLAIN}}),
        ("subnet_ids", ["subnet-a", {"api_key": PLAIN}]),
        ("subnet_ids", ["subnet-a", f"token: {PLAIN}"]),
    ],
    ids=["json-text", "json-field-value", "dict", "list-of-dicts", "list-of-text"],
)
@pytest.mark.parametrize("api", APIS)
def test_a_secret_inside_a_value_reaches_no_state_file_or_checkpoint(field, value, api, tmp_path):
    store, db = SecretStore(), tmp_path / "nested.sqlite"
    with sqlite_checkpointer(db) as saver:
        agent = build_reducer_agent(
            one_reply_model(tool_call("store_requirement", field_name=field, value=value)),
            secrets=store,
            checkpointer=saver,
        )
        if api == "invoke":
            state = agent.invoke(user_turn(), {"configurable": {"thread_id": "n"}})
    if api == "ainvoke":  # the async twin, on an in-memory checkpointer
        agent = build_reducer_agent(
            one_reply_model(tool_call("store_requirement", field_name=field, value=value)),
            secrets=store,
        )
        state = run(agent, user_turn(), api)
    assert PLAIN not in agent_side(state)
    assert PLAIN not in json.dumps(file_fields(state))
    assert not file_contains(db, PLAIN.encode())
    (ref,) = refs_in(agent_side(state).replace("\\\\", ""))[:1]
    assert PLAIN in store.resolve(ref) and len(store) == 1  # a secret-named key: its whole value


class DbLogin(BaseModel):
    host: str
    password: str


def structured_agent(store: SecretStore, **config):
    model = ScriptedChatModel(
        script=[reply(tool_call("DbLogin", host="db.internal", password=PLAIN))]
    )
    redaction = SecretRedactionMiddleware(store, **config)
    return create_agent(
        model, tools=[], response_format=ToolStrategy(DbLogin), middleware=[redaction]
    )


@pytest.mark.parametrize(
    "config",
    [{"secret_args": {"DbLogin": ["password"]}}, {"tool_name": "store_requirement"}],
    ids=["configured", "secret-looking-key"],
)
@pytest.mark.parametrize("api", APIS)
def test_a_toolstrategy_structured_response_holds_the_reference(config, api):
    store = SecretStore()
    state = run(structured_agent(store, **config), {"messages": [("user", "login")]}, api)
    login = state["structured_response"]
    assert isinstance(login, DbLogin) and login.host == "db.internal"
    assert login.password == AnyRef("password") and store.resolve(login.password) == PLAIN
    assert PLAIN not in repr(state)
    (answer,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert login.password in answer.content  # "Returning structured response: ..."
    (ai,) = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert ai.tool_calls[0]["args"]["password"] == login.password  # one value, one reference


@dataclasses.dataclass
class DbLoginRecord:
    host: str
    password: str


@pytest.mark.parametrize(
    "structured",
    [DbLoginRecord("db.internal", PLAIN), {"host": "db.internal", "password": PLAIN}],
    ids=["dataclass", "dict"],
)
def test_a_dataclass_or_dict_structured_response_holds_the_reference(structured):
    """The other two shapes ``structured()`` rewrites (the pydantic one is above)."""
    store = SecretStore()
    redaction = SecretRedactionMiddleware(store, secret_args={"DbLogin": ["password"]})
    response = ModelResponse(
        result=[AIMessage(content=f"Logged in with {PLAIN}.")], structured_response=structured
    )
    clean = redaction.rewrite_response(response)
    login = clean.structured_response
    assert type(login) is type(structured)
    password = login["password"] if isinstance(login, dict) else login.password
    assert password == AnyRef("password") and store.resolve(password) == PLAIN
    assert PLAIN not in repr(login) and PLAIN not in repr(clean.result)
    assert password in clean.result[0].content  # the echo in the reply's text, replaced


WORDS = "correct horse battery staple"
PHRASINGS = {
    "colon": f"Create the database. password: {WORDS}",
    "equals": f"master_password = {WORDS}",
    "is": f"The master password is {WORDS}",
    "quoted": f"db_password: '{WORDS}'; engine: postgres",
    "then-a-pair": f"password: {WORDS} engine: postgres",
    "next-line": f"password: {WORDS}\nengine: postgres",
    "json-pair-in-prose": f'Store {{"field_name": "password", "value": "{WORDS}"}} and postgres',
    "json-pair": json.dumps({"field_name": "password", "value": WORDS, "engine": "postgres"}),
    "escaped-json": json.dumps({"note": json.dumps({"password": WORDS})})[1:-1],
}


@pytest.mark.parametrize("text", list(PHRASINGS.values()), ids=list(PHRASINGS))
def test_every_phrasing_of_a_password_in_a_task_description_is_hidden_whole(text):
    store = SecretStore()
    message = reply(tool_call("task", description=text, subagent_type=COLLECTOR))
    clean = rds_redaction(store).rewrite(message).tool_calls[0]["args"]["description"]
    assert not [w for w in WORDS.split() if w in clean], clean
    (ref,) = refs_in(clean.replace("\\", ""))
    assert store.resolve(ref) == WORDS
    if "engine" in text:
        assert "postgres" in clean  # the other fields are left as they were


def test_an_echo_of_a_hidden_value_in_the_replys_text_is_replaced():
    store = SecretStore()
    message = AIMessage(
        content=f"Storing your password {PLAIN} now.",
        tool_calls=[
            tool_call("store_requirement", field_name="password", value=PLAIN) | {"id": "1"}
        ],
    )
    clean = rds_redaction(store).rewrite(message)
    ref = clean.tool_calls[0]["args"]["value"]
    assert clean.content == f"Storing your password {ref} now." and len(store) == 1


@pytest.mark.parametrize("api", APIS)
def test_a_reviewers_edit_is_not_redacted_but_an_edited_in_reference_is_kept(api):
    """docs/secrets.md, "Not redacted": a human-in-the-loop edit with a plain password."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return f"connected to {host}"

    def edited(password: str) -> dict:
        store = SecretStore()
        model = ScriptedChatModel(
            script=[reply(tool_call("connect", host="db", password="model-pw")), reply(text="ok")]
        )
        agent = create_agent(
            model,
            tools=[connect],
            middleware=[
                SecretRedactionMiddleware(store, secret_args={"connect": ["password"]}),
                HumanInTheLoopMiddleware(interrupt_on={"connect": True}),
            ],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "review"}}
        run(agent, {"messages": [("user", "connect")]}, api, config)
        value = password if password != "ref" else store.put("password", PLAIN)
        action = {"name": "connect", "args": {"host": "db", "password": value}}
        decision = {"decisions": [{"type": "edit", "edited_action": action}]}
        return run(agent, Command(resume=decision), api, config)

    assert PLAIN in repr(edited(PLAIN)["messages"])  # the edit notice repeats it: not redacted
    assert PLAIN not in repr(edited("ref")["messages"])  # a reference edited in stays one

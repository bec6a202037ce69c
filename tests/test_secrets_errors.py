"""Issue 33 items 1 and 3: errors are artefacts too, over every provider format.

A structured reply that fails its schema raised ``StructuredOutputValidationError``
quoting the secret (``input_value=...``), kept the raw reply in its
``ai_message``, and LangGraph wrote its ``repr`` into the checkpoint as the
task's error. Under ``ToolStrategy``'s default ``handle_errors`` the retry
message quoted pydantic's *cut* input (``'sk-live-Q7x9Lm2Pz8Rw4Tn6...0KgAbCdEf'``),
which no value pass can find. Each case runs a plain ``create_agent`` with a
real SQLite checkpointer, over the scripted model and the real ``ChatOpenAI``
(chat completions, Responses API) and ``ChatAnthropic`` clients against the
loopback replay servers; the mode (``invoke``/``ainvoke``/``stream``/``astream``)
turns with the case. No 10-character piece of the secret may be in the
exception (its text, chain, attributes), the state, a streamed chunk, a
checkpoint byte or a later request.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.structured_output import (
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import ToolException, tool
from pydantic import BaseModel, Field

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import reply, tool_call
from agentstate.persistence import async_sqlite_checkpointer, file_contains, sqlite_checkpointer
from tests.secret_providers import MODES, PROVIDERS, STREAM_MODES, provider

# 58 characters: pydantic cuts it in its error text (``'sk-live-...OpQrSt'``)
PLAIN = "sk-live-Q7x9Lm2Pz8Rw4Tn6Yb3Vc5Xd1Ze0KgAbCdEfGhIjKlMnOpQrSt"
SHORT = "Vex-5512-Hollow"  # the issue's own repro value


class Pin(BaseModel):
    """A structured response whose ``pin`` is secret and at most 8 characters."""

    user: str
    pin: str = Field(max_length=8)


def pieces(plain: str, size: int = 10) -> list[str]:
    """Every ``size``-character piece of ``plain``: what a cut quote would keep."""
    return [plain[i : i + size] for i in range(len(plain) - size + 1)]


def exception_text(exc: BaseException | None) -> str:
    """All an exception shows: its traceback text with the chain, and every attribute."""
    if exc is None:
        return ""
    seen: list[str] = ["".join(traceback.format_exception(exc))]
    todo, done = [exc], set()
    while todo:
        item = todo.pop()
        if id(item) in done:
            continue
        done.add(id(item))
        seen += [repr(item), repr(item.args), repr(vars(item))]
        todo += [
            e
            for e in (item.__cause__, item.__context__, *vars(item).values())
            if isinstance(e, BaseException)
        ]
    return "\n".join(seen)


@dataclass
class Case:
    response_format: Any
    replies: list[AIMessage]
    raises: bool


def provider_reply(pin: str) -> AIMessage:
    return reply(text=json.dumps({"user": "ops", "pin": pin}))


def tool_reply(pin: str) -> AIMessage:
    return reply(tool_call("Pin", user="ops", pin=pin))


RECEIVED: list[BaseException] = []  # what a callable handle_errors was given


def retry_text(exc: Exception) -> str:
    RECEIVED.append(exc)
    return f"Fix it: {exc}"


def cases(plain: str) -> dict[str, Case]:
    retried = [tool_reply(plain), tool_reply("1234")]
    return {
        "ProviderStrategy": Case(ProviderStrategy(Pin), [provider_reply(plain)], True),
        "ToolStrategy, handle_errors=False": Case(
            ToolStrategy(Pin, handle_errors=False), [tool_reply(plain)], True
        ),
        "ToolStrategy, handle_errors=True (default)": Case(ToolStrategy(Pin), retried, False),
        "ToolStrategy, a message": Case(
            ToolStrategy(Pin, handle_errors="Fix the pin."), retried, False
        ),
        "ToolStrategy, the error's type": Case(
            ToolStrategy(Pin, handle_errors=StructuredOutputValidationError), retried, False
        ),
        "ToolStrategy, other types": Case(
            ToolStrategy(Pin, handle_errors=(KeyError, OSError)), [tool_reply(plain)], True
        ),
        "ToolStrategy, a callable": Case(
            ToolStrategy(Pin, handle_errors=retry_text), retried, False
        ),
    }


CASES = list(cases(PLAIN))


def run(agent_for, mode: str, db, thread: str = "t") -> tuple[dict, list, BaseException | None]:
    """One turn, one way: final state, streamed chunks and the exception raised (or None)."""
    config = {"configurable": {"thread_id": thread}}
    payload = {"messages": [HumanMessage("give me the pin")]}
    chunks: list = []
    if mode in ("invoke", "stream"):
        with sqlite_checkpointer(db) as saver:
            agent, error = agent_for(saver), None
            try:
                if mode == "invoke":
                    agent.invoke(payload, config)
                else:
                    for chunk in agent.stream(payload, config, stream_mode=STREAM_MODES):
                        chunks.append(chunk)
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                error = exc
            return agent.get_state(config).values, chunks, error

    async def arun():
        async with async_sqlite_checkpointer(db) as saver:
            agent, error = agent_for(saver), None
            try:
                if mode == "ainvoke":
                    await agent.ainvoke(payload, config)
                else:
                    async for chunk in agent.astream(payload, config, stream_mode=STREAM_MODES):
                        chunks.append(chunk)
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                error = exc
            return (await agent.aget_state(config)).values, chunks, error

    return asyncio.run(arun())


def leaks(plain: str, *, state, chunks, error, db, server) -> list[str]:
    """Where a piece of ``plain`` is found: the names of the artefacts that hold one."""
    found = []
    places = {
        "exception": exception_text(error),
        "state": repr(state.get("messages", [])[1:]) + repr(state.get("structured_response")),
        "stream": repr(chunks),
        "requests": json.dumps(server.requests[1:]) if server is not None else "",
    }
    for where, text in places.items():
        if any(p in text for p in pieces(plain)):
            found.append(where)
    if any(file_contains(db, p.encode()) for p in pieces(plain)):
        found.append("checkpoint")
    return found


def redaction(store: SecretStore) -> SecretRedactionMiddleware:
    return SecretRedactionMiddleware(store, secret_args={"Pin": ["pin"]})


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("case", CASES)
def test_a_structured_reply_failing_its_schema_leaves_no_piece_of_the_secret(case, kind, tmp_path):
    spec = cases(PLAIN)[case]
    mode = MODES[(CASES.index(case) + PROVIDERS.index(kind)) % len(MODES)]
    store, db = SecretStore(), tmp_path / "errors.sqlite"
    RECEIVED.clear()
    with provider(kind, spec.replies) as (model, server):

        def agent_for(saver):
            return create_agent(
                model,
                tools=[],
                response_format=spec.response_format,
                middleware=[redaction(store)],
                checkpointer=saver,
            )

        state, chunks, error = run(agent_for, mode, db)
    assert (error is not None) == spec.raises, (mode, error)
    if spec.raises:  # the caller still gets the error it would get, with the type it has
        assert isinstance(error, StructuredOutputValidationError), repr(error)
        assert "pin" in str(error) and "$secret:" in str(error)
    else:  # the model's second reply answered; its pin is a reference too
        assert store.resolve(state["structured_response"].pin) == "1234"
    assert not leaks(PLAIN, state=state, chunks=chunks, error=error, db=db, server=server), mode
    assert not [e for e in RECEIVED if any(p in exception_text(e) for p in pieces(PLAIN))]
    assert PLAIN in store.known("t")  # the value was taken into the store, not dropped


def test_the_issue_repro_provider_strategy_with_a_short_value(tmp_path):
    """The issue's repro: ProviderStrategy(Pin) and {"user": "ops", "pin": "Vex-5512-Hollow"}."""
    store, db = SecretStore(), tmp_path / "repro.sqlite"
    with provider("scripted", [provider_reply(SHORT)]) as (model, _):
        state, _, error = run(
            lambda saver: create_agent(
                model,
                tools=[],
                response_format=ProviderStrategy(Pin),
                middleware=[redaction(store)],
                checkpointer=saver,
            ),
            "invoke",
            db,
        )
    assert isinstance(error, StructuredOutputValidationError)
    assert SHORT not in exception_text(error)
    assert not file_contains(db, SHORT.encode())
    assert store.resolve(error.ai_message.text.split('"pin": "')[1].split('"')[0]) == SHORT


def test_a_raw_schema_resolved_to_tool_strategy_retries_with_the_redacted_error(tmp_path):
    """``response_format=Pin`` (LangChain picks ToolStrategy, default ``handle_errors``)."""
    store, db = SecretStore(), tmp_path / "auto.sqlite"
    with provider("scripted", [tool_reply(PLAIN), tool_reply("1234")]) as (model, _):
        state, chunks, error = run(
            lambda saver: create_agent(
                model,
                tools=[],
                response_format=Pin,
                middleware=[redaction(store)],
                checkpointer=saver,
            ),
            "stream",
            db,
        )
    assert error is None and store.resolve(state["structured_response"].pin) == "1234"
    retry = state["messages"][2]
    assert "at most 8 characters" in retry.content and "$secret:pin-" in retry.content
    assert not leaks(PLAIN, state=state, chunks=chunks, error=None, db=db, server=None)


def test_a_reply_valid_as_written_is_still_valid():
    """Pydantic validates the plain value: an 8-character pin passes, its reference is kept."""
    store = SecretStore()
    with provider("scripted", [tool_reply("Ab3$xY9!")]) as (model, _):
        agent = create_agent(
            model, tools=[], response_format=ToolStrategy(Pin), middleware=[redaction(store)]
        )
        out = agent.invoke({"messages": [HumanMessage("pin?")]})
    assert store.resolve(out["structured_response"].pin) == "Ab3$xY9!"


# --- tool errors and middleware errors ---


def connect_tool(store: SecretStore, *, handled: bool):
    """A tool that resolves the reference and fails quoting the value, as a driver's error does."""

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        plain = store.resolve(password)
        raise (ToolException if handled else ConnectionError)(
            f"FATAL: password authentication failed (dsn postgres://admin:{plain}@{host}/app)"
        )

    connect.handle_tool_error = handled  # True: the error becomes a ToolMessage, status "error"
    return connect


@pytest.mark.parametrize("handled", [False, True], ids=["raised", "error ToolMessage"])
@pytest.mark.parametrize("mode", MODES)
def test_a_tool_error_that_quotes_a_known_value_is_redacted(handled, mode, tmp_path):
    store, db = SecretStore(), tmp_path / "tool.sqlite"
    replies = [reply(tool_call("connect", host="db1", password=SHORT)), reply(text="Sorry.")]
    with provider("scripted", replies) as (model, _):
        state, chunks, error = run(
            lambda saver: create_agent(
                model,
                tools=[connect_tool(store, handled=handled)],
                middleware=[
                    SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})
                ],
                checkpointer=saver,
            ),
            mode,
            db,
        )
    assert (error is not None) != handled
    if error is not None:
        assert isinstance(error, ConnectionError) and "password authentication" in str(error)
    else:
        assert state["messages"][2].status == "error"
        assert "password authentication failed" in state["messages"][2].content
    assert not leaks(SHORT, state=state, chunks=chunks, error=error, db=db, server=None), mode


class RefuseEcho(AgentMiddleware):
    """A middleware inside the redaction that fails quoting the reply (an audit, a guard)."""

    @staticmethod
    def check(response):
        text = response.result[0].text
        if "again" in text:
            raise ValueError(f"reply refused by policy: {text!r}")
        return response

    def wrap_model_call(self, request, handler):
        return self.check(handler(request))

    async def awrap_model_call(self, request, handler):
        return self.check(await handler(request))


@pytest.mark.parametrize("mode", MODES)
def test_a_middleware_error_quoting_a_known_value_is_redacted(mode, tmp_path):
    store, db = SecretStore(), tmp_path / "mw.sqlite"
    replies = [
        reply(tool_call("connect", host="db1", password=SHORT)),
        reply(text="Connected."),
        reply(text=f"Use {SHORT} again next time."),
    ]

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return "connected"

    with provider("scripted", replies) as (model, _):

        def agent_for(saver):
            return create_agent(
                model,
                tools=[connect],
                middleware=[
                    SecretRedactionMiddleware(store, secret_args={"connect": ["password"]}),
                    RefuseEcho(),
                ],
                checkpointer=saver,
            )

        first, _, error = run(agent_for, mode, db)
        assert error is None
        state, chunks, error = run(agent_for, mode, db)
    assert isinstance(error, ValueError) and "refused by policy" in str(error)
    assert "$secret:password-" in str(error)
    assert not leaks(SHORT, state=state, chunks=chunks, error=error, db=db, server=None)

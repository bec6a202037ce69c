"""Test helper for notebook 02's secrets: one agent, four provider formats, four ways to run it.

A provider format is how the reply reaches the agent: the scripted model in
process, or the real ``ChatOpenAI`` (chat completions, or the Responses API)
and ``ChatAnthropic`` clients over the loopback replay servers. The agent is a
plain ``create_agent`` with the generic middleware watching four kinds of
tools; every run uses a real SQLite checkpointer whose file a test searches
byte by byte, and the replay server records what the client sent back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import ScriptedChatModel
from agentstate.models.anthropic_replay import AnthropicReplayServer
from agentstate.models.openai_replay import ReplayServer
from agentstate.persistence import async_sqlite_checkpointer, sqlite_checkpointer

PROVIDERS = ["scripted", "chat-completions", "responses-api", "anthropic-messages"]
MODES = ["invoke", "ainvoke", "stream", "astream"]
STREAM_MODES = ["messages", "values", "updates", "debug", "tasks", "checkpoints"]


class RawReplies(ScriptedChatModel):
    """A scripted model that keeps what :func:`reply` cannot say: invalid calls, finish reason."""

    def reply_to(self, messages: Sequence[BaseMessage]) -> AIMessage:
        stamped = super().reply_to(messages)
        raw = self.script[self.position - 1]
        return raw.model_copy(update={"id": stamped.id, "tool_calls": stamped.tool_calls})


@contextmanager
def provider(kind: str, replies: list[AIMessage]) -> Iterator[tuple[BaseChatModel, Any]]:
    """The agent's model for ``kind`` playing ``replies``, and its replay server (or None)."""
    script = RawReplies(script=replies)
    if kind == "scripted":
        yield script, None
        return
    if kind == "anthropic-messages":
        with AnthropicReplayServer(script) as server:
            yield (
                ChatAnthropic(
                    model="replay", base_url=server.base_url, api_key="not-needed", max_retries=0
                ),
                server,
            )
        return
    with ReplayServer(script) as server:
        yield (
            ChatOpenAI(
                base_url=server.base_url,
                api_key="not-needed",
                model="replay",
                max_retries=0,
                use_responses_api=kind == "responses-api",
            ),
            server,
        )


@tool
def connect(host: str, password: str) -> str:
    """Connect to a database."""
    return f"connected to {host}"


@tool
def store(field_name: str, value: str) -> str:
    """Store one requirement field."""
    return f"stored {field_name}"


@tool
def note(text: str) -> str:
    """Keep a free-text note."""
    return "noted"


@tool
def lookup(query: str) -> str:
    """Search the inventory (a tool the redaction does not watch)."""
    return "nothing found"


class Creds(BaseModel):
    """A structured response whose ``pin`` is secret (``secret_args``)."""

    user: str
    pin: str


def redaction(secrets: SecretStore) -> SecretRedactionMiddleware:
    """The middleware as a reader configures it: one tool of each kind, ``lookup`` unwatched."""
    return SecretRedactionMiddleware(
        secrets,
        tool_name="store",
        secret_args={"connect": ["password"], "Creds": ["pin"]},
        text_args={"note": ["text"]},
    )


def build(model: BaseChatModel, secrets: SecretStore, saver: Any, response_format: Any = None):
    return create_agent(
        model,
        tools=[connect, store, note, lookup],
        middleware=[redaction(secrets)],
        checkpointer=saver,
        response_format=response_format,
    )


def run(
    make: Callable[[Any], Any], mode: str, db: Any, turns: Sequence[str], thread: str = "t"
) -> tuple[dict, list]:
    """Run ``turns`` (user messages) on one thread of ``make(checkpointer)``, one way.

    Returns the final state and every streamed chunk.
    """
    config = {"configurable": {"thread_id": thread}}
    payloads = [{"messages": [HumanMessage(t)]} for t in turns]
    if mode in ("invoke", "stream"):
        with sqlite_checkpointer(db) as saver:
            agent, chunks = make(saver), []
            for payload in payloads:
                if mode == "invoke":
                    agent.invoke(payload, config)
                else:
                    chunks += list(agent.stream(payload, config, stream_mode=STREAM_MODES))
            return agent.get_state(config).values, chunks

    async def arun() -> tuple[dict, list]:
        async with async_sqlite_checkpointer(db) as saver:
            agent, chunks = make(saver), []
            for payload in payloads:
                if mode == "ainvoke":
                    await agent.ainvoke(payload, config)
                else:
                    stream = agent.astream(payload, config, stream_mode=STREAM_MODES)
                    chunks += [c async for c in stream]
            return (await agent.aget_state(config)).values, chunks

    return asyncio.run(arun())


def agent_side(state: dict) -> str:
    """Everything the agent kept, without the user's own messages (which hold what they typed)."""
    kept = {k: v for k, v in state.items() if k != "messages"}
    return repr(kept) + repr([m for m in state["messages"] if not isinstance(m, HumanMessage)])


def forms(plain: str) -> list[str]:
    """``plain`` as ``repr`` and JSON show it (a quote escaped), for searching stored text."""
    return sorted({plain, json.dumps(plain)[1:-1], repr(plain)[1:-1]})

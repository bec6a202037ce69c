"""The memory-agent template as it is published, in a module of its own.

No ``from __future__ import annotations`` here, as in the original's ``tools.py``:
``bind_tools`` reads ``upsert_memory``'s ``InjectedToolArg`` annotations at run time,
and string annotations would hide them. Written for this corpus (no code copied).
"""

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, cast

from langchain.chat_models import init_chat_model
from langchain_core.messages import AnyMessage
from langchain_core.tools import InjectedToolArg
from langgraph.graph import END, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agentstate.models import reply, tool_call
from agentstate.models.openai_replay import ReplayServer
from tests.doctor_corpus._kit import USER, case, scripted, shown
from tests.doctor_corpus.memory import SAME_FACT

# --- the memory-agent template as it is: model named in runtime.context, gathered upserts -----
# Follows langchain-ai/memory-agent src/memory_agent/graph.py, tools.py, utils.py and
# context.py: call_model loads the model named in `runtime.context.model`
# (utils.load_chat_model -> init_chat_model(model, model_provider=provider)), binds the plain
# async function upsert_memory and answers; store_memory reads the reply's tool calls with
# getattr(..., "tool_calls", []) and asyncio.gathers upsert_memory(**tc["args"],
# user_id=runtime.context.user_id, store=runtime.store); route_message reads them the same
# way. State is a dataclass. Run here over real HTTP: init_chat_model builds ChatOpenAI and
# the loopback replay server answers for the provider.


@dataclass(kw_only=True)
class TemplateContext:
    user_id: str = "default"
    model: str = "openai/gpt-4o-mini"
    system_prompt: str = "You are a helpful assistant. {user_info}"


@dataclass(kw_only=True)
class TemplateState:
    messages: Annotated[list[AnyMessage], add_messages]


async def upsert_memory_template(
    content: str,
    context: str,
    *,
    memory_id: uuid.UUID | None = None,
    user_id: Annotated[str, InjectedToolArg],
    store: Annotated[BaseStore, InjectedToolArg],
) -> str:
    """Upsert a memory in the database (update it by passing memory_id)."""
    mem_id = memory_id or uuid.uuid4()
    await store.aput(
        ("memories", user_id), key=str(mem_id), value={"content": content, "context": context}
    )
    return f"Stored memory {mem_id}"


def load_chat_model(fully_specified_name: str) -> Any:
    provider, model = fully_specified_name.split("/", maxsplit=1)
    return init_chat_model(model, model_provider=provider)


async def call_model_template(state: TemplateState, runtime: Runtime[TemplateContext]) -> dict:
    memories = await cast(BaseStore, runtime.store).asearch(("memories", runtime.context.user_id))
    system = runtime.context.system_prompt.format(user_info=[m.value for m in memories])
    llm = load_chat_model(runtime.context.model)
    msg = await llm.bind_tools([upsert_memory_template]).ainvoke(
        [{"role": "system", "content": system}, *state.messages]
    )
    return {"messages": [msg]}


async def store_memory_template(state: TemplateState, runtime: Runtime[TemplateContext]) -> dict:
    tool_calls = getattr(state.messages[-1], "tool_calls", [])
    saved_memories = await asyncio.gather(
        *(
            upsert_memory_template(
                **tc["args"], user_id=runtime.context.user_id, store=cast(BaseStore, runtime.store)
            )
            for tc in tool_calls
        )
    )
    results = [
        {"role": "tool", "content": mem, "tool_call_id": tc["id"]}
        for tc, mem in zip(tool_calls, saved_memories, strict=True)
    ]
    return {"messages": results}


def route_message_template(state: TemplateState) -> str:
    msg = state.messages[-1]
    if getattr(msg, "tool_calls", None):
        return "store_memory"
    return END


def memory_agent_template(store: BaseStore | None = None) -> Any:
    builder = StateGraph(TemplateState, context_schema=TemplateContext)
    builder.add_node("call_model", call_model_template)
    builder.add_edge("__start__", "call_model")
    builder.add_node("store_memory", store_memory_template)
    builder.add_conditional_edges("call_model", route_message_template, ["store_memory", END])
    builder.add_edge("store_memory", "call_model")
    graph = builder.compile(store=store)
    graph.name = "MemoryAgent"
    return graph


def prove_memory_template() -> Any:
    store = InMemoryStore()
    script = scripted(
        reply(
            tool_call("upsert_memory_template", **SAME_FACT),
            tool_call("upsert_memory_template", **SAME_FACT),
        ),
        reply(text="noted"),
    )
    with ReplayServer(script) as server, provider_env(server.base_url):
        asyncio.run(
            memory_agent_template(store).ainvoke(USER, context=TemplateContext(user_id="u1"))
        )
    stored = [item.value["content"] for item in store.search(("memories", "u1"))]
    return shown(
        "memory-in-react-loop",
        stored.count(SAME_FACT["content"]) > 1,
        f"over HTTP, the model stored one fact {stored.count(SAME_FACT['content'])} times",
    )


@contextlib.contextmanager
def provider_env(base_url: str) -> Iterator[None]:
    """OpenAI's client reads its endpoint and key from the environment (restored after)."""
    names = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY")
    held = {n: os.environ.get(n) for n in names}
    os.environ.update(OPENAI_BASE_URL=base_url, OPENAI_API_BASE=base_url, OPENAI_API_KEY="x")
    try:
        yield
    finally:
        for name, value in held.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


CASES = [
    case(
        "memory-agent template as published: context model, gathered upsert_memory calls",
        "langchain-ai/memory-agent src/memory_agent/graph.py",
        {"memory-in-react-loop"},
        memory_agent_template,
        prove_memory_template,
    ),
]

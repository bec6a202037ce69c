"""Memory agents: the model decides what goes into the long-term store (notebook 06's hazard).

A run shows the hazard when the model stores one fact twice and nothing stops it.
Written for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import USER, case, scripted, shown

SAME_FACT = {"content": "The user likes green tea.", "context": "said while ordering"}

# --- the memory-agent template: a node runs the model's upsert_memory calls ------------------
# Follows langchain-ai/memory-agent: call_model binds upsert_memory to a module-level model;
# route_message sends tool calls to store_memory, which writes each to the store and returns
# to call_model. No ToolNode.


def upsert_memory(content: str, context: str, *, store: BaseStore) -> str:
    """Store one memory (a new id each time, as the template does without memory_id)."""
    key = str(uuid.uuid4())
    store.put(("memories", "user-1"), key, {"content": content, "context": context})
    return f"Stored memory {key}"


llm = scripted(reply(text="hello"))


def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [llm.bind_tools([upsert_memory]).invoke(state["messages"])]}


def store_memory(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
    calls = state["messages"][-1].tool_calls
    saved = [upsert_memory(**call["args"], store=store) for call in calls]
    return {
        "messages": [
            ToolMessage(text, tool_call_id=call["id"])
            for call, text in zip(calls, saved, strict=True)
        ]
    }


def route_message(state: MessagesState) -> str:
    if state["messages"][-1].tool_calls:
        return "store_memory"
    return END


def memory_agent_graph(store: BaseStore | None = None) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node(call_model)
    builder.add_edge("__start__", "call_model")
    builder.add_node(store_memory)
    builder.add_conditional_edges("call_model", route_message, ["store_memory", END])
    builder.add_edge("store_memory", "call_model")
    return builder.compile(store=store)


def prove_memory_agent() -> Any:
    global llm
    held, store = llm, InMemoryStore()
    llm = scripted(
        reply(tool_call("upsert_memory", **SAME_FACT), tool_call("upsert_memory", **SAME_FACT)),
        reply(text="noted"),
    )
    try:
        memory_agent_graph(store).invoke(USER)
    finally:
        llm = held
    stored = [item.value["content"] for item in store.search(("memories", "user-1"))]
    return shown(
        "memory-in-react-loop",
        stored.count(SAME_FACT["content"]) > 1,
        f"the model stored one fact {stored.count(SAME_FACT['content'])} times",
    )


# --- a prebuilt agent with a memory tool that writes the store -------------------------------
# Follows langchain-ai/langmem's quickstart: a ReAct agent given a manage_memory tool that
# writes LangGraph's store.


@tool
def manage_memory(content: str, runtime: ToolRuntime) -> str:
    """Create a memory."""
    runtime.store.put(("memories",), str(uuid.uuid4()), {"content": content})
    return "created"


def langmem_agent(model: Any = None, store: BaseStore | None = None) -> Any:
    return create_agent(
        model or scripted(reply(text="ok")), tools=[manage_memory], store=store or InMemoryStore()
    )


def prove_langmem() -> Any:
    store = InMemoryStore()
    model = scripted(
        reply(
            tool_call("manage_memory", content=SAME_FACT["content"]),
            tool_call("manage_memory", content=SAME_FACT["content"]),
        ),
        reply(text="noted"),
    )
    langmem_agent(model, store).invoke(USER)
    stored = [item.value["content"] for item in store.search(("memories",))]
    return shown(
        "memory-in-react-loop",
        stored.count(SAME_FACT["content"]) > 1,
        f"the model stored one fact {stored.count(SAME_FACT['content'])} times",
    )


CASES = [
    case(
        "memory agent, a node runs the tool calls and writes the store (no ToolNode)",
        "langchain-ai/memory-agent",
        {"memory-in-react-loop"},
        memory_agent_graph,
        prove_memory_agent,
    ),
    case(
        "memory agent, ToolNode with a store-writing tool",
        "langchain-ai/langmem quickstart (manage_memory in a ReAct agent)",
        {"memory-in-react-loop"},
        langmem_agent,
        prove_langmem,
    ),
]

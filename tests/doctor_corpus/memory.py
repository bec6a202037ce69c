"""Memory agents: the model decides what goes into the long-term store (notebook 06's hazard).

A run shows the hazard when the model stores one fact twice and nothing stops it.
Written for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, Literal

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pydantic import BaseModel
from typing_extensions import TypedDict

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


# --- a MemGPT-style loop: the model names an action, the next node performs it ---------------
# Follows FareedKhan-dev/all-agentic-architectures src/agentic_architectures/architectures/
# memgpt.py: MemGPT's decide node asks a structured-output model for one action
# (write_to_archival, search_archival, answer) with a payload and writes it to
# `last_action`; execute performs it; a router loops back to decide until an answer. Nodes
# are bound methods. The original's archival tier is its own vector memory; here it is
# LangGraph's store, given to execute as its `store` parameter.


class MemAction(BaseModel):
    action: Literal["write_to_archival", "search_archival", "answer"]
    payload: str = ""


class MemGPTState(TypedDict, total=False):
    task: str
    iteration: int
    max_iterations: int
    actions_taken: Annotated[list[dict[str, Any]], operator.add]
    last_action: dict[str, Any]
    final_answer: str


class MemGPT:
    def __init__(self, llm: Any, max_iterations: int = 5) -> None:
        self.max_iterations = max_iterations
        self.context_tier: list[str] = []
        self._decider = llm.with_structured_output(MemAction)

    def _decide(self, state: MemGPTState) -> dict[str, Any]:
        iteration = state.get("iteration", 0) + 1
        decision = self._decider.invoke(f"{state['task']} (context: {self.context_tier})")
        return {
            "iteration": iteration,
            "last_action": decision.model_dump(),
            "actions_taken": [decision.model_dump()],
        }

    def _execute_action(self, state: MemGPTState, *, store: BaseStore) -> dict[str, Any]:
        action = state["last_action"]
        kind, payload = action["action"], action["payload"]
        if kind == "write_to_archival":
            store.put(("archival",), str(uuid.uuid4()), {"text": payload})
            self.context_tier.append(payload)
            return {}
        if kind == "search_archival":
            self.context_tier += [i.value["text"] for i in store.search(("archival",))][:3]
            return {}
        return {"final_answer": payload}

    def _route(self, state: MemGPTState) -> str:
        if state.get("last_action", {}).get("action") == "answer":
            return "end"
        if state.get("iteration", 0) >= state.get("max_iterations", self.max_iterations):
            return "end"
        return "decide"

    def build(self, store: BaseStore | None = None) -> Any:
        g = StateGraph(MemGPTState)
        g.add_node("decide", self._decide)
        g.add_node("execute", self._execute_action)
        g.add_edge(START, "decide")
        g.add_edge("decide", "execute")
        g.add_conditional_edges("execute", self._route, {"decide": "decide", "end": END})
        return g.compile(store=store)


def memgpt_graph(store: BaseStore | None = None, llm: Any = None) -> Any:
    return MemGPT(llm or scripted(reply(text="ok"))).build(store or InMemoryStore())


def prove_memgpt() -> Any:
    store = InMemoryStore()
    fact = "the user's cat is called Ada"
    llm = scripted(
        reply(tool_call("MemAction", action="write_to_archival", payload=fact)),
        reply(tool_call("MemAction", action="write_to_archival", payload=fact)),
        reply(tool_call("MemAction", action="answer", payload="noted")),
    )
    memgpt_graph(store, llm).invoke({"task": "remember my cat", "max_iterations": 5})
    stored = [i.value["text"] for i in store.search(("archival",))]
    return shown(
        "memory-in-react-loop",
        stored.count(fact) > 1,
        f"the archival tier holds the fact {stored.count(fact)} times",
    )


# --- a tool named `remember` that keeps facts in the thread's state ---------------------------
# Follows the LangGraph how-to "update graph state from tools" as readers adapt it: a
# create_agent tool returns Command(update={"facts": [...]}) into an operator.add list; no
# store. Its name is a memory tool's, its code writes only short-term state.


class RememberState(AgentState):
    facts: Annotated[list[str], operator.add]


@tool
def remember(fact: str, runtime: ToolRuntime) -> Command:
    """Remember a fact for the rest of this conversation."""
    return Command(
        update={"facts": [fact], "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)]}
    )


def remember_agent(model: Any = None, store: BaseStore | None = None) -> Any:
    return create_agent(
        model or scripted(reply(text="ok")),
        tools=[remember],
        state_schema=RememberState,
        store=store,
    )


def prove_remember() -> Any:
    store = InMemoryStore()
    model = scripted(reply(tool_call("remember", fact="tea")), reply(text="ok"))
    out = remember_agent(model, store).invoke(USER)
    return shown(
        "memory-in-react-loop",
        bool(store.search(())),
        f"the fact stayed in the thread ({out['facts']}); the store is empty",
    )


CASES += [
    case(
        "MemGPT-style loop: the model names an action, the next node puts it in the store",
        "FareedKhan-dev/all-agentic-architectures architectures/memgpt.py",
        {"memory-in-react-loop"},
        memgpt_graph,
        prove_memgpt,
    ),
    case(
        "a tool named `remember` that writes only the thread's state",
        "LangGraph how-to update state from tools (a `remember` tool, no store)",
        set(),
        remember_agent,
        prove_remember,
    ),
]

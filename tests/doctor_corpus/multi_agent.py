"""Several agents: a supervisor, a swarm with handoffs, a prebuilt agent used as a node.

Written for this corpus after the public shapes named per graph; every model is
scripted, so each run is the same.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import USER, case, raises_invalid_update, scripted, shown

# --- a supervisor routing to one worker at a time --------------------------------------------
# Follows the LangGraph tutorial "multi-agent supervisor": the supervisor returns
# Command(goto=worker, update={"next": worker}); each worker is a prebuilt agent run by a node
# that reports back with Command(goto="supervisor").


class SupervisorState(MessagesState):
    next: str


def supervisor_graph() -> Any:
    decider = scripted(reply(text="researcher"), reply(text="coder"), reply(text="FINISH"))
    researcher = create_agent(scripted(reply(text="found it")), tools=[])
    coder = create_agent(scripted(reply(text="coded it")), tools=[])

    def supervisor(state: SupervisorState) -> Command[Literal["researcher", "coder", "__end__"]]:
        choice = str(decider.invoke(state["messages"]).content)
        goto = END if choice == "FINISH" else choice
        return Command(goto=goto, update={"next": goto})

    def research_node(state: SupervisorState) -> Command[Literal["supervisor"]]:
        result = researcher.invoke(state)
        text = result["messages"][-1].content
        return Command(
            update={"messages": [HumanMessage(text, name="researcher")]}, goto="supervisor"
        )

    def code_node(state: SupervisorState) -> Command[Literal["supervisor"]]:
        result = coder.invoke(state)
        text = result["messages"][-1].content
        return Command(update={"messages": [HumanMessage(text, name="coder")]}, goto="supervisor")

    graph = StateGraph(SupervisorState)
    graph.add_node("supervisor", supervisor)
    graph.add_node("researcher", research_node)
    graph.add_node("coder", code_node)
    graph.add_edge(START, "supervisor")
    return graph.compile()


def prove_supervisor() -> Any:
    out = supervisor_graph().invoke(USER)
    said = [m.content for m in out["messages"] if getattr(m, "name", None)]
    return shown(
        "unreduced-parallel-write",
        said != ["found it", "coded it"] or out["next"] != END,
        "researcher, then coder, then done; `next` written by one node per step",
    )


# --- a swarm: agents hand the conversation to each other -------------------------------------
# Follows langchain-ai/langgraph-swarm-py: each agent has a handoff tool that returns
# Command(goto=<agent>, graph=Command.PARENT) and sets `active_agent`; the start routes to the
# active agent.


class SwarmState(MessagesState):
    active_agent: str


def handoff(to: str) -> Any:
    @tool(f"transfer_to_{to}")
    def transfer(runtime: ToolRuntime) -> Command:
        """Hand the conversation over."""
        done = ToolMessage(f"Transferred to {to}", tool_call_id=runtime.tool_call_id)
        return Command(
            goto=to,
            graph=Command.PARENT,
            update={"messages": [*runtime.state["messages"], done], "active_agent": to},
        )

    return transfer


def swarm_graph() -> Any:
    alice = create_agent(
        scripted(reply(tool_call("transfer_to_bob")), reply(text="bye")),
        tools=[handoff("bob")],
        name="alice",
    )
    bob = create_agent(scripted(reply(text="bob here")), tools=[handoff("alice")], name="bob")
    graph = StateGraph(SwarmState)
    graph.add_node("alice", alice, destinations=("bob",))
    graph.add_node("bob", bob, destinations=("alice",))
    graph.add_conditional_edges(START, lambda s: s.get("active_agent") or "alice", ["alice", "bob"])
    return graph.compile()


def prove_swarm() -> Any:
    out = swarm_graph().invoke(USER)
    ok = out["active_agent"] == "bob" and out["messages"][-1].content == "bob here"
    return shown(
        "unreduced-parallel-write", not ok, "alice handed off, bob answered, one agent a step"
    )


# --- a prebuilt agent used as a node of a larger graph ----------------------------------------
# Follows the LangGraph docs "multi-agent network": a prebuilt ReAct agent added as a node.
# Its tool records a finding in a plain key through Command.


class FindingState(AgentState):
    finding: str


@tool
def record_finding(text: str, runtime: ToolRuntime) -> Command:
    """Record the finding."""
    return Command(
        update={
            "finding": text,
            "messages": [ToolMessage("recorded", tool_call_id=runtime.tool_call_id)],
        }
    )


class ProjectState(MessagesState):
    finding: str


def project_graph(model: Any = None) -> Any:
    researcher = create_agent(
        model or scripted(reply(text="nothing")),
        tools=[record_finding],
        state_schema=FindingState,
        name="researcher",
    )
    graph = StateGraph(ProjectState)
    graph.add_node("researcher", researcher)
    graph.add_edge(START, "researcher")
    graph.add_edge("researcher", END)
    return graph.compile()


def prove_project() -> Any:
    model = scripted(
        reply(tool_call("record_finding", text="a"), tool_call("record_finding", text="b")),
        reply(text="done"),
    )
    raised = raises_invalid_update(lambda: project_graph(model).invoke(USER), "finding")
    return shown(
        "unreduced-parallel-write", raised, "two calls of one reply inside the node raised"
    )


CASES = [
    case(
        "supervisor: Command(goto=) to one worker",
        "LangGraph tutorial multi-agent supervisor",
        set(),
        supervisor_graph,
        prove_supervisor,
    ),
    case(
        "swarm: handoff tools with Command.PARENT",
        "langchain-ai/langgraph-swarm-py",
        set(),
        swarm_graph,
        prove_swarm,
    ),
    case(
        "prebuilt agent as a node, tool writes a plain key",
        "LangGraph docs multi-agent network (prebuilt agents as nodes)",
        {"unreduced-parallel-write"},
        project_graph,
        prove_project,
    ),
]

"""Hand-built ReAct loops, the model held three ways, and a reflection loop.

In a ReAct loop the model's reply decides which tools run, several at once. Written
for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from agentstate.models import reply, tool_call
from agentstate.models.openai_replay import ReplayServer
from tests.doctor_corpus._kit import USER, case, raises_invalid_update, scripted, shown

# --- the quickstart chatbot: a module-global model, ToolNode and tools_condition -------------
# Follows the LangGraph quickstart ("add tools", then "customize state": a human_assistance
# tool that updates `name` and `birthday` through Command), as a reader writes it without
# the tutorial's `assert len(message.tool_calls) <= 1` (the graph after this one keeps it).


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]
    name: str
    birthday: str


@tool
def human_assistance(
    name: str, birthday: str, tool_call_id: Annotated[str, InjectedToolCallId]
) -> Command:
    """Ask a human to verify a name and a birthday."""
    return Command(
        update={
            "name": name,
            "birthday": birthday,
            "messages": [ToolMessage("verified", tool_call_id=tool_call_id)],
        }
    )


chat_model = scripted(reply(text="hello"))
llm_with_tools = chat_model.bind_tools([human_assistance])


def chatbot(state: ChatState) -> dict[str, Any]:
    return {"messages": [llm_with_tools.invoke(state["messages"])]}


def quickstart_graph() -> Any:
    graph = StateGraph(ChatState)
    graph.add_node("chatbot", chatbot)
    graph.add_node("tools", ToolNode(tools=[human_assistance]))
    graph.add_conditional_edges("chatbot", tools_condition)
    graph.add_edge("tools", "chatbot")
    graph.add_edge(START, "chatbot")
    return graph.compile()


def prove_quickstart() -> Any:
    global llm_with_tools
    held = llm_with_tools
    llm_with_tools = scripted(
        reply(
            tool_call("human_assistance", name="Ada", birthday="1815-12-10"),
            tool_call("human_assistance", name="Ada L.", birthday="1815-12-10"),
        ),
        reply(text="done"),
    )
    try:
        raised = raises_invalid_update(lambda: quickstart_graph().invoke(USER), "name", "birthday")
    finally:
        llm_with_tools = held
    return shown(
        "unreduced-parallel-write", raised, "two human_assistance calls of one reply raised"
    )


# --- the same chatbot as the tutorial has it: the model node asserts one call per reply --------
# Follows the LangGraph quickstart "customize state": chatbot invokes the module-global
# llm_with_tools and asserts len(message.tool_calls) <= 1 before returning (it interrupts
# inside a tool, so a resume must not repeat a parallel call).


def guarded_chatbot(state: ChatState) -> dict[str, Any]:
    message = llm_with_tools.invoke(state["messages"])
    assert len(message.tool_calls) <= 1
    return {"messages": [message]}


def guarded_quickstart_graph() -> Any:
    graph = StateGraph(ChatState)
    graph.add_node("chatbot", guarded_chatbot)
    graph.add_node("tools", ToolNode(tools=[human_assistance]))
    graph.add_conditional_edges("chatbot", tools_condition)
    graph.add_edge("tools", "chatbot")
    graph.add_edge(START, "chatbot")
    return graph.compile()


def prove_guarded_quickstart() -> Any:
    global llm_with_tools
    held = llm_with_tools
    two = reply(
        tool_call("human_assistance", name="Ada", birthday="1815-12-10"),
        tool_call("human_assistance", name="Ada L.", birthday="1815-12-10"),
    )
    llm_with_tools = scripted(two, reply(text="done"))
    try:
        try:
            guarded_quickstart_graph().invoke(USER)
            refused = False
        except AssertionError:
            refused = True
        llm_with_tools = scripted(
            reply(tool_call("human_assistance", name="Ada", birthday="1815-12-10")),
            reply(text="done"),
        )
        out = guarded_quickstart_graph().invoke(USER)
    finally:
        llm_with_tools = held
    return shown(
        "unreduced-parallel-write",
        not refused or out["name"] != "Ada",
        "a reply with two calls is refused before any tool runs; one call per reply is kept",
    )


# --- a CopilotKit-style food discovery agent: one tool call per reply by configuration -------
# Follows a CopilotKit demo's src/food_discovery/agent.py, state.py and tools.py (public
# code; found by code search): create_agent over ChatOpenAI(model="gpt-4.1",
# model_kwargs={"parallel_tool_calls": False}), its state a plain `foodDiscovery` key that
# every tool replaces through Command(update={"foodDiscovery": ...}) so the front end
# re-renders. (The original's CopilotKitMiddleware is left out: not installed here.)


class FoodDiscoveryAgentState(AgentState):
    foodDiscovery: dict[str, Any] | None


@tool
def show_ai_interpretation(intent: str, runtime: ToolRuntime) -> Command:
    """Show the AI interpretation screen for an intent."""
    return Command(
        update={
            "foodDiscovery": {"screen": "aiInterpretation", "intent": intent, "results": []},
            "messages": [ToolMessage(f"Showing {intent}", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def show_food_results(intent: str, sub_option: str, runtime: ToolRuntime) -> Command:
    """Show the food results screen for a picked sub-option."""
    return Command(
        update={
            "foodDiscovery": {"screen": "results", "intent": intent, "results": [sub_option]},
            "messages": [ToolMessage("Showing results", tool_call_id=runtime.tool_call_id)],
        }
    )


def food_discovery_agent(base_url: str = "http://127.0.0.1:9/v1") -> Any:
    model = ChatOpenAI(
        model="gpt-4.1",
        model_kwargs={"parallel_tool_calls": False},
        base_url=base_url,
        api_key="not-needed",
    )
    return create_agent(
        model=model,
        tools=[show_ai_interpretation, show_food_results],
        state_schema=FoodDiscoveryAgentState,
        system_prompt="Help the user find food.",
    )


def prove_food_discovery() -> Any:
    script = scripted(
        reply(
            tool_call("show_ai_interpretation", intent="healthy"),
            tool_call("show_food_results", intent="healthy", sub_option="Post-workout"),
        ),
        reply(tool_call("show_food_results", intent="healthy", sub_option="Post-workout")),
        reply(text="Here you go."),
    )
    with ReplayServer(script) as server:
        try:
            out = food_discovery_agent(server.base_url).invoke(USER)
            state = out["foodDiscovery"]
        except InvalidUpdateError:
            state = None
        one_call = all(r.get("parallel_tool_calls") is False for r in server.requests)
    return shown(
        "unreduced-parallel-write",
        state is None or not one_call,
        "every request asked for one call per reply; the provider sent one, nothing collided "
        f"(final screen {state and state['screen']})",
    )


# --- an arithmetic agent built by a function that closes over the model ----------------------
# Follows LangChain Academy module 1 "agent" (multiply/add/divide tools in a MessagesState
# loop), with the graph built by a function that is given the model.


@tool
def multiply(a: int, b: int) -> int:
    """Multiply a and b."""
    return a * b


@tool
def add(a: int, b: int) -> int:
    """Add a and b."""
    return a + b


def build_arithmetic(model: Any) -> Any:
    llm = model.bind_tools([multiply, add])

    def assistant(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("assistant", assistant)
    graph.add_node("tools", ToolNode([multiply, add]))
    graph.add_edge(START, "assistant")
    graph.add_conditional_edges("assistant", tools_condition)
    graph.add_edge("tools", "assistant")
    return graph.compile()


def prove_arithmetic() -> Any:
    model = scripted(
        reply(tool_call("multiply", a=3, b=4), tool_call("add", a=1, b=2)), reply(text="12 and 3")
    )
    out = build_arithmetic(model).invoke(USER)
    results = sorted(m.content for m in out["messages"] if isinstance(m, ToolMessage))
    return shown(
        "unreduced-parallel-write", results != ["12", "3"], "two parallel calls, both kept"
    )


# --- the react-agent template: the model comes from the runtime context ----------------------
# Follows langchain-ai/react-agent (call_model loads the model named in runtime.context and
# binds its tools; route_model_output is annotated Literal["__end__", "tools"]) with the
# LangGraph how-to "update state from tools" lookup_user_info tool (a plain `user_info`).


@dataclass
class Context:
    model: Any


class TemplateState(MessagesState):
    user_info: dict[str, str]


@tool
def lookup_user_info(user_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Look up the user's information."""
    return Command(
        update={
            "user_info": {"id": user_id},
            "messages": [ToolMessage("found", tool_call_id=tool_call_id)],
        }
    )


def call_model(state: TemplateState, runtime: Runtime[Context]) -> dict[str, Any]:
    model = runtime.context.model.bind_tools([lookup_user_info])
    return {"messages": [model.invoke(state["messages"])]}


def route_model_output(state: TemplateState) -> Literal["__end__", "tools"]:
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or not last.tool_calls:
        return "__end__"
    return "tools"


def template_graph() -> Any:
    graph = StateGraph(TemplateState, context_schema=Context)
    graph.add_node(call_model)
    graph.add_node("tools", ToolNode([lookup_user_info]))
    graph.add_edge("__start__", "call_model")
    graph.add_conditional_edges("call_model", route_model_output)
    graph.add_edge("tools", "call_model")
    return graph.compile()


def prove_template() -> Any:
    model = scripted(
        reply(
            tool_call("lookup_user_info", user_id="1"), tool_call("lookup_user_info", user_id="2")
        ),
        reply(text="done"),
    )
    raised = raises_invalid_update(
        lambda: template_graph().invoke(USER, context=Context(model)), "user_info"
    )
    return shown("unreduced-parallel-write", raised, "two lookups of one reply raised")


# --- a reflection loop: generate, reflect, generate ------------------------------------------
# Follows the LangGraph tutorial "reflection" (a generator and a reflector alternate on one
# add_messages list until a fixed number of rounds).


def reflection_graph() -> Any:
    writer = scripted(*[reply(text=f"draft {i}") for i in range(3)])
    critic = scripted(*[reply(text=f"critique {i}") for i in range(2)])

    def generate(state: MessagesState) -> dict[str, Any]:
        return {"messages": [writer.invoke(state["messages"])]}

    def reflect(state: MessagesState) -> dict[str, Any]:
        critique = critic.invoke(state["messages"])
        return {"messages": [HumanMessage(str(critique.content))]}

    def should_continue(state: MessagesState) -> Literal["reflect", "__end__"]:
        return "reflect" if len(state["messages"]) < 6 else END

    graph = StateGraph(MessagesState)
    graph.add_node("generate", generate)
    graph.add_node("reflect", reflect)
    graph.add_edge(START, "generate")
    graph.add_conditional_edges("generate", should_continue)
    graph.add_edge("reflect", "generate")
    return graph.compile()


def prove_reflection() -> Any:
    texts = [m.content for m in reflection_graph().invoke(USER)["messages"]]
    expected = ["go", "draft 0", "critique 0", "draft 1", "critique 1", "draft 2"]
    return shown(
        "unreduced-parallel-write", texts != expected, "three drafts, two critiques, in order"
    )


CASES = [
    case(
        "ReAct loop, module-global model, Command to plain keys",
        "LangGraph quickstart: add tools + customize state, without the tutorial's assert",
        {"unreduced-parallel-write"},
        quickstart_graph,
        prove_quickstart,
    ),
    case(
        "ReAct loop, model in a closure, plain tools",
        "LangChain Academy module 1 agent",
        set(),
        lambda: build_arithmetic(scripted(reply(text="ok"))),
        prove_arithmetic,
    ),
    case(
        "ReAct loop, model from the runtime context, Command to a plain key",
        "langchain-ai/react-agent + LangGraph how-to update state from tools",
        {"unreduced-parallel-write"},
        template_graph,
        prove_template,
    ),
    case(
        "reflection loop",
        "LangGraph tutorial reflection",
        set(),
        reflection_graph,
        prove_reflection,
    ),
    case(
        "quickstart chatbot that asserts one tool call per reply, Command to plain keys",
        "LangGraph quickstart: customize state (chatbot asserts len(tool_calls) <= 1)",
        set(),
        guarded_quickstart_graph,
        prove_guarded_quickstart,
    ),
    case(
        "create_agent on ChatOpenAI with parallel_tool_calls=False, tools Command a plain key",
        "CopilotKit food-discovery demo src/food_discovery/agent.py + tools.py",
        set(),
        food_discovery_agent,
        prove_food_discovery,
    ),
]

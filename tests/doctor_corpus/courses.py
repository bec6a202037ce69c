"""Graphs from third-party courses and tutorial collections.

Written for this corpus after the public shapes named per graph (no code copied):
nodes that mutate and return the whole state, a plain ``messages`` list, a
prebuilt agent with a memory tool used as a node, and ``StateGraph(dict)``.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import Proof, case, scripted, shown

# --- an essay grader: each node sets one score on the state and returns all of it -------------
# Follows NirDiamant/GenAI_Agents all_agents_tutorials/essay_grading_system_langgraph.ipynb:
# check_relevance, check_grammar, analyze_structure and evaluate_depth each write
# `state["<x>_score"] = ...` and `return state`; lambdas without a path map route on the
# score just set; calculate_final_score weighs them.


class EssayState(TypedDict):
    essay: str
    relevance_score: float
    grammar_score: float
    structure_score: float
    depth_score: float
    final_score: float


grader = scripted(reply(text="Score: 0.5"))


def extract_score(content: str) -> float:
    match = re.search(r"Score:\s*(\d+(\.\d+)?)", content)
    if match is None:
        raise ValueError(f"no score in {content!r}")
    return float(match.group(1))


def check_relevance(state: EssayState) -> EssayState:
    state["relevance_score"] = extract_score(grader.invoke(f"relevance: {state['essay']}").content)
    return state


def check_grammar(state: EssayState) -> EssayState:
    state["grammar_score"] = extract_score(grader.invoke(f"grammar: {state['essay']}").content)
    return state


def analyze_structure(state: EssayState) -> EssayState:
    state["structure_score"] = extract_score(grader.invoke(f"structure: {state['essay']}").content)
    return state


def evaluate_depth(state: EssayState) -> EssayState:
    state["depth_score"] = extract_score(grader.invoke(f"depth: {state['essay']}").content)
    return state


def calculate_final_score(state: EssayState) -> EssayState:
    state["final_score"] = (
        state["relevance_score"] * 0.3
        + state["grammar_score"] * 0.2
        + state["structure_score"] * 0.2
        + state["depth_score"] * 0.3
    )
    return state


def essay_grader() -> Any:
    workflow = StateGraph(EssayState)
    workflow.add_node("check_relevance", check_relevance)
    workflow.add_node("check_grammar", check_grammar)
    workflow.add_node("analyze_structure", analyze_structure)
    workflow.add_node("evaluate_depth", evaluate_depth)
    workflow.add_node("calculate_final_score", calculate_final_score)
    workflow.add_conditional_edges(
        "check_relevance",
        lambda x: "check_grammar" if x["relevance_score"] > 0.5 else "calculate_final_score",
    )
    workflow.add_conditional_edges(
        "check_grammar",
        lambda x: "analyze_structure" if x["grammar_score"] > 0.6 else "calculate_final_score",
    )
    workflow.add_conditional_edges(
        "analyze_structure",
        lambda x: "evaluate_depth" if x["structure_score"] > 0.7 else "calculate_final_score",
    )
    workflow.add_conditional_edges("evaluate_depth", lambda x: "calculate_final_score")
    workflow.set_entry_point("check_relevance")
    workflow.add_edge("calculate_final_score", END)
    return workflow.compile()


def prove_essay() -> Proof:
    global grader
    held = grader
    grader = scripted(*[reply(text=f"Score: {s}") for s in (0.9, 0.8, 0.75, 0.6)])
    try:
        out = essay_grader().invoke(
            {
                "essay": "Tides.",
                **dict.fromkeys(
                    (
                        "relevance_score",
                        "grammar_score",
                        "structure_score",
                        "depth_score",
                        "final_score",
                    ),
                    0.0,
                ),
            }  # fmt: skip
        )
    finally:
        grader = held
    expected = 0.9 * 0.3 + 0.8 * 0.2 + 0.75 * 0.2 + 0.6 * 0.3
    return shown(
        "unreduced-parallel-write",
        abs(out["final_score"] - expected) > 1e-9,
        f"four scores kept in turn, final {out['final_score']:.3f}",
    )


# --- an email assistant: a triage node, then a prebuilt agent with a memory tool --------------
# Follows NirDiamant/GenAI_Agents all_agents_tutorials/memory-agent-tutorial.ipynb: triage
# reads few-shot examples from the store (a lambda node passing the store on), routes to a
# create_react_agent response agent compiled with the same store whose tools include
# LangMem's manage_memory (here a tool of ours that writes the store the same way).


class EmailState(TypedDict):
    email_input: dict
    messages: Annotated[list, add_messages]
    triage_result: str


router_model = scripted(reply(text="respond"))


def triage_email(state: EmailState, config: dict, store: Any) -> dict[str, Any]:
    user_id = config["configurable"]["langgraph_user_id"]
    examples = store.search(("email_assistant", user_id, "examples"))
    result = router_model.invoke(f"{state['email_input']} {len(examples)} examples")
    return {"triage_result": result.content}


@tool
def write_email(to: str, subject: str, content: str) -> str:
    """Write and send an email."""
    return f"Email sent to {to} with subject '{subject}'"


@tool
def manage_memory(content: str, runtime: ToolRuntime) -> str:
    """Create a memory about the user."""
    user_id = runtime.config["configurable"]["langgraph_user_id"]
    runtime.store.put(
        ("email_assistant", user_id, "collection"), str(uuid.uuid4()), {"content": content}
    )
    return "created"


def route_based_on_triage(state: EmailState) -> str:
    return "response_agent" if state["triage_result"] == "respond" else END


def email_assistant(model: Any = None, store: Any = None) -> Any:
    store = store if store is not None else InMemoryStore()
    response_agent = create_agent(
        model or scripted(reply(text="ok")), tools=[write_email, manage_memory], store=store
    )
    workflow = StateGraph(EmailState)
    workflow.add_node("triage", lambda state, config: triage_email(state, config, store))
    workflow.add_node("response_agent", response_agent)
    workflow.add_edge(START, "triage")
    workflow.add_conditional_edges(
        "triage", route_based_on_triage, {"response_agent": "response_agent", END: END}
    )
    return workflow.compile(store=store)


def prove_email() -> Proof:
    store = InMemoryStore()
    fact = "John prefers calls in the morning"
    model = scripted(
        reply(tool_call("manage_memory", content=fact), tool_call("manage_memory", content=fact)),
        reply(text="drafted"),
    )
    email_assistant(model, store).invoke(
        {"email_input": {"subject": "call?"}, "messages": [HumanMessage("reply to John")]},
        {"configurable": {"langgraph_user_id": "u1"}},
    )
    stored = [i.value["content"] for i in store.search(("email_assistant", "u1", "collection"))]
    return shown(
        "memory-in-react-loop",
        stored.count(fact) > 1,
        f"the model stored one fact {stored.count(fact)} times",
    )


# --- StateGraph(dict): two lambdas from START both return `res` ------------------------------
# Follows hereandnowai/ai-agent-mastery plan-b-gcloud-with-vs-code/03-langgraph-tiny-projects/
# 07_parallel_execution.py: StateGraph(dict), nodes "a" and "b" as lambdas returning
# {"res": ...}, both from START, joined into END.


def dict_parallel() -> Any:
    builder = StateGraph(dict)
    builder.add_node("a", lambda s: {"res": "a"})
    builder.add_node("b", lambda s: {"res": "b"})
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], END)
    return builder.compile()


def prove_dict_parallel() -> Proof:
    try:
        dict_parallel().invoke({})
        raised = False
    except InvalidUpdateError as err:
        raised = "__root__" in str(err)
    return shown("unreduced-parallel-write", raised, "InvalidUpdateError at '__root__'")


# --- Alfred's mail sorting: classify, route, draft; a plain `messages` list -------------------
# Follows huggingface/agents-course units/en/unit2/langgraph/first_graph.mdx: EmailState with
# a plain `messages: List[Dict]` that classify_email and draft_response extend by returning
# state.get("messages", []) + [...]; route_email returns "spam" or "legitimate" through a
# path map; the model is a module-level ChatOpenAI (scripted here).


class MailState(TypedDict):
    email: dict[str, Any]
    email_category: str | None
    spam_reason: str | None
    is_spam: bool | None
    email_draft: str | None
    messages: list[dict[str, Any]]


model = scripted(reply(text="legitimate inquiry"))


def read_email(state: MailState) -> dict[str, Any]:
    return {}


def classify_email(state: MailState) -> dict[str, Any]:
    email = state["email"]
    prompt = f"Is this spam? From {email['sender']}: {email['body']}"
    response = model.invoke([HumanMessage(content=prompt)])
    text = response.content.lower()
    is_spam = "spam" in text and "not spam" not in text
    category = None if is_spam else next((c for c in ("inquiry", "complaint") if c in text), None)
    new_messages = state.get("messages", []) + [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": response.content},
    ]
    return {
        "is_spam": is_spam,
        "spam_reason": None,
        "email_category": category,
        "messages": new_messages,
    }


def handle_spam(state: MailState) -> dict[str, Any]:
    return {}


def draft_response(state: MailState) -> dict[str, Any]:
    prompt = f"Draft a reply to this {state['email_category'] or 'general'} email"
    response = model.invoke([HumanMessage(content=prompt)])
    new_messages = state.get("messages", []) + [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": response.content},
    ]
    return {"email_draft": response.content, "messages": new_messages}


def notify_mr_hugg(state: MailState) -> dict[str, Any]:
    return {}


def route_email(state: MailState) -> str:
    return "spam" if state["is_spam"] else "legitimate"


def mail_sorting() -> Any:
    graph = StateGraph(MailState)
    graph.add_node("read_email", read_email)
    graph.add_node("classify_email", classify_email)
    graph.add_node("handle_spam", handle_spam)
    graph.add_node("draft_response", draft_response)
    graph.add_node("notify_mr_hugg", notify_mr_hugg)
    graph.add_edge(START, "read_email")
    graph.add_edge("read_email", "classify_email")
    graph.add_conditional_edges(
        "classify_email", route_email, {"spam": "handle_spam", "legitimate": "draft_response"}
    )
    graph.add_edge("handle_spam", END)
    graph.add_edge("draft_response", "notify_mr_hugg")
    graph.add_edge("notify_mr_hugg", END)
    return graph.compile()


def prove_mail() -> Proof:
    global model
    held = model
    model = scripted(reply(text="Legitimate inquiry"), reply(text="Dear John, gladly."))
    try:
        out = mail_sorting().invoke(
            {
                "email": {"sender": "john@example.com", "subject": "services", "body": "A call?"},
                "messages": [],
            }
        )
    finally:
        model = held
    kept = len(out["messages"]) == 4 and out["email_draft"] == "Dear John, gladly."
    return shown(
        "unreduced-parallel-write", not kept, "both exchanges kept, the draft written once"
    )


# --- a day-trip planner: each node returns {**state, ...} with a plain messages list ----------
# Follows NirDiamant/GenAI_Agents all_agents_tutorials/simple_travel_planner_langgraph.ipynb:
# PlannerState's `messages` is Annotated with a description only (no reducer); input_city
# and input_interests ask the user (input() there, a module-level `ask` here: nothing here
# prompts) and return {**state, ...} with the message appended; create_itinerary calls the
# module-level model.


class PlannerState(TypedDict):
    messages: Annotated[list[HumanMessage | AIMessage], "The messages in the conversation"]
    city: str
    interests: list[str]
    itinerary: str


answers: list[str] = []


def ask(question: str) -> str:
    return answers.pop(0) if answers else ""


planner_llm = scripted(reply(text="Morning: museum."))


def input_city(state: PlannerState) -> PlannerState:
    user_message = ask("Please enter the city you want to visit for your day trip:")
    return {
        **state,
        "city": user_message,
        "messages": state["messages"] + [HumanMessage(content=user_message)],
    }


def input_interests(state: PlannerState) -> PlannerState:
    user_message = ask(f"Your interests for the trip to {state['city']} (comma-separated):")
    return {
        **state,
        "interests": [interest.strip() for interest in user_message.split(",")],
        "messages": state["messages"] + [HumanMessage(content=user_message)],
    }


def create_itinerary(state: PlannerState) -> PlannerState:
    response = planner_llm.invoke(f"Plan {state['city']} for {', '.join(state['interests'])}")
    return {
        **state,
        "messages": state["messages"] + [AIMessage(content=response.content)],
        "itinerary": response.content,
    }


def travel_planner() -> Any:
    workflow = StateGraph(PlannerState)
    workflow.add_node("input_city", input_city)
    workflow.add_node("input_interests", input_interests)
    workflow.add_node("create_itinerary", create_itinerary)
    workflow.set_entry_point("input_city")
    workflow.add_edge("input_city", "input_interests")
    workflow.add_edge("input_interests", "create_itinerary")
    workflow.add_edge("create_itinerary", END)
    return workflow.compile()


def prove_travel() -> Proof:
    global planner_llm
    held = planner_llm
    answers[:] = ["Lisbon", "tiles, food"]
    planner_llm = scripted(reply(text="Morning: tile museum. Lunch: bacalhau."))
    try:
        out = travel_planner().invoke(
            {"messages": [HumanMessage("a day trip")], "city": "", "interests": [], "itinerary": ""}
        )
    finally:
        planner_llm = held
    kept = [m.content for m in out["messages"]] == [
        "a day trip", "Lisbon", "tiles, food", "Morning: tile museum. Lunch: bacalhau."
    ] and out["interests"] == ["tiles", "food"]  # fmt: skip
    return shown("unreduced-parallel-write", not kept, "four messages, city and interests kept")


CASES = [
    case(
        "essay grader: nodes set one score and return the whole state",
        "NirDiamant/GenAI_Agents essay_grading_system_langgraph",
        set(),
        essay_grader,
        prove_essay,
    ),
    case(
        "email assistant: triage node, then a prebuilt agent with a store-writing memory tool",
        "NirDiamant/GenAI_Agents memory-agent-tutorial",
        {"memory-in-react-loop"},
        email_assistant,
        prove_email,
    ),
    case(
        "StateGraph(dict): two lambdas from START both return `res`",
        "hereandnowai/ai-agent-mastery 03-langgraph-tiny-projects/07_parallel_execution.py",
        {"unreduced-parallel-write"},
        dict_parallel,
        prove_dict_parallel,
    ),
    case(
        "mail sorting: classify, route by path map, draft; a plain messages list",
        "huggingface/agents-course units/en/unit2/langgraph/first_graph.mdx",
        set(),
        mail_sorting,
        prove_mail,
    ),
    case(
        "day-trip planner: nodes return {**state, ...} with a plain messages list",
        "NirDiamant/GenAI_Agents simple_travel_planner_langgraph",
        set(),
        travel_planner,
        prove_travel,
    ),
]

"""``diagnose``: a positive and a negative case per code, on small agents written here."""

from __future__ import annotations

import json
import operator
import tempfile
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pytest
from deepagents import DeepAgentState, create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents.backends.utils import create_file_data, file_data_to_string
from langchain.agents import AgentState, create_agent
from langchain.chat_models import init_chat_model
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.config import get_store
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import (
    InjectedState,
    InjectedStore,
    ToolNode,
    create_react_agent,
    tools_condition,
)
from langgraph.prebuilt.chat_agent_executor import AgentState as AgentStatePrebuilt
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command, Send

from agentstate.core import TurnCacheMiddleware, append_unique, merge_fields
from agentstate.doctor import NotAGraphError, Report, diagnose
from agentstate.models import ScriptedChatModel, reply, tool_call


def model() -> ScriptedChatModel:
    return ScriptedChatModel(script=[reply(text="ok")])


# --- tools of the small agents ---


@tool
def save_tag(name: str, runtime: ToolRuntime) -> Command:
    """Save one tag."""
    return Command(
        update={
            "tags": {name: True},
            "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def list_tags(runtime: ToolRuntime) -> str:
    """List the tags."""
    return ", ".join(sorted(runtime.state.get("tags", {})))


@tool
def add_item(text: str, runtime: ToolRuntime) -> Command:
    """Append one item."""
    update: dict[str, Any] = {"items": [text]}
    update["messages"] = [ToolMessage("ok", tool_call_id=runtime.tool_call_id)]
    return Command(update=update)


@tool
def append_line(line: str, runtime: ToolRuntime) -> Command:
    """Append a line to /notes.md: read the file, add the line, write it back."""
    files = runtime.state.get("files") or {}
    old = file_data_to_string(files["/notes.md"]) if "/notes.md" in files else ""
    return Command(
        update={
            "files": {"/notes.md": create_file_data(old + line + "\n")},
            "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def save_line(name: str, line: str, runtime: ToolRuntime) -> Command:
    """One file per line: never reads, never shares a path."""
    return Command(
        update={
            "files": {f"/notes/{name}.md": create_file_data(line)},
            "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
        }
    )


COUNTS = FilesystemBackend(root_dir=tempfile.mkdtemp(prefix="doctor-"), virtual_mode=True)


@tool
def bump_counter() -> str:
    """Read /count.json through a deepagents backend, add one, write it back."""
    text = COUNTS.read("/count.json")
    count = int(text) if text.strip().isdigit() else 0
    COUNTS.write("/count.json", str(count + 1))
    return "ok"


@tool
def count_visit(page: str) -> str:
    """One file per page through the backend: never reads what it writes."""
    COUNTS.write(f"/visits/{page}.txt", "1")
    return "ok"


@tool
def write_anywhere(key: str, runtime: ToolRuntime) -> Command:
    """A key chosen at run time: the doctor cannot tell which."""
    return Command(
        update={key: 1, "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)]}
    )


@tool
def hand_off(runtime: ToolRuntime) -> Command:
    """Hand off to the parent graph: its update is the parent's, not this graph's."""
    return Command(graph=Command.PARENT, goto="reviewer", update={"handed_off": True})


@tool
def read_anywhere(key: str, runtime: ToolRuntime) -> str:
    """Reads a key chosen at run time."""
    return str(runtime.state.get(key))


@tool
def add_entry(text: str) -> str:
    """Store one memory entry (a stand-in for the MCP memory server's tool)."""
    return f"stored {len(text)}"


# --- state schemas ---


class PlainTags(AgentState):
    tags: NotRequired[dict[str, bool]]


class MergedTags(AgentState):
    tags: Annotated[NotRequired[dict[str, bool]], merge_fields]


class AddItems(DeepAgentState):
    items: Annotated[NotRequired[list[str]], operator.add]


class UniqueItems(DeepAgentState):
    items: Annotated[NotRequired[list[str]], append_unique]


class DeepTags(DeepAgentState):
    tags: Annotated[NotRequired[dict[str, bool]], merge_fields]


def tags_agent(schema: type, *, cache: bool = False, tools: list | None = None) -> Any:
    middleware = (
        [TurnCacheMiddleware(writers=["save_tag"], readers=["list_tags"], key="tags")]
        if cache
        else []
    )
    return create_agent(
        model(), tools=tools or [save_tag, list_tags], state_schema=schema, middleware=middleware
    )


def subagent_spec(tools: list, **extra: Any) -> dict[str, Any]:
    return {
        "name": "helper",
        "description": "Helps.",
        "system_prompt": "Help.",
        "tools": tools,
        "model": model(),
        **extra,
    }


# --- unreduced-parallel-write ---


def test_a_plain_key_written_by_parallel_tools_is_an_error():
    report = diagnose(tags_agent(PlainTags, tools=[save_tag]))
    assert report.codes() == ["unreduced-parallel-write"]
    (found,) = report.errors
    assert (found.subject, found.notebook) == ("tags", "02")
    assert "`save_tag`" in found.message and "merge_fields" in found.message


def test_a_reduced_key_written_by_parallel_tools_is_fine():
    assert diagnose(tags_agent(MergedTags, tools=[save_tag])).findings == []


class FanOut(TypedDict, total=False):
    names: list[str]
    plain: dict[str, str]
    merged: Annotated[dict[str, str], merge_fields]


def fan_out_graph(key: str) -> Any:
    def start(state: FanOut) -> list[Send]:
        return [Send("worker", {"name": n}) for n in state["names"]]

    def worker(task: dict[str, str]) -> dict[str, Any]:
        return {key: {task["name"]: "done"}}

    graph = StateGraph(FanOut)
    graph.add_node("worker", worker)
    graph.add_conditional_edges(START, start, ["worker"])
    return graph.compile()


def test_a_send_fan_out_to_a_plain_key_is_an_error_and_to_a_reduced_key_is_not():
    broken, fixed = diagnose(fan_out_graph("plain")), diagnose(fan_out_graph("merged"))
    assert [(f.code, f.subject) for f in broken.errors] == [("unreduced-parallel-write", "plain")]
    assert fixed.findings == []


def sibling_graph(key: str) -> Any:
    def left(state: FanOut) -> dict[str, Any]:
        return {key: {"left": "x"}}

    def right(state: FanOut) -> dict[str, Any]:
        return {key: {"right": "y"}}

    graph = StateGraph(FanOut)
    graph.add_node("left", left)
    graph.add_node("right", right)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    return graph.compile()


def test_two_nodes_of_one_step_writing_a_plain_key_is_an_error():
    assert diagnose(sibling_graph("plain")).codes() == ["unreduced-parallel-write"]
    assert diagnose(sibling_graph("merged")).findings == []


def test_lambda_nodes_are_read_too():
    graph = StateGraph(FanOut)
    graph.add_node("left", lambda state: {"plain": {"left": "x"}})
    graph.add_node("right", lambda state: {"plain": {"right": "y"}})
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    report = diagnose(graph.compile())
    assert [(f.code, f.subject) for f in report.errors] == [("unreduced-parallel-write", "plain")]


# --- undeclared-key ---


def test_a_command_to_an_undeclared_key_is_an_error():
    report = diagnose(create_agent(model(), tools=[save_tag]))
    assert report.codes() == ["undeclared-key"]
    assert report.errors[0].subject == "tags"
    assert "drops the write silently" in report.errors[0].message


def test_a_declared_key_is_fine_and_a_run_time_key_is_only_info():
    assert diagnose(tags_agent(MergedTags, tools=[save_tag])).codes() == []
    report = diagnose(create_agent(model(), tools=[write_anywhere]))
    assert report.codes() == []
    assert [(f.code, f.severity, f.subject) for f in report] == [
        ("undeclared-key", "info", "write_anywhere")
    ]


def test_a_command_to_the_parent_graph_is_not_this_graphs_write():
    assert diagnose(create_agent(model(), tools=[hand_off])).findings == []


# --- file-read-modify-write ---


def test_a_custom_tool_that_rewrites_a_file_it_read_is_an_error():
    report = diagnose(create_deep_agent(model(), tools=[append_line]))
    assert {f.code for f in report.errors} == {"file-read-modify-write"}
    assert "append_line:/notes.md" in {f.subject for f in report.errors}
    assert all(f.notebook == "01" for f in report.errors)


def test_one_file_per_item_and_deepagents_own_file_tools_are_fine():
    assert diagnose(create_deep_agent(model(), tools=[save_line])).codes() == []
    assert diagnose(create_deep_agent(model())).codes() == []


def test_a_read_modify_write_through_a_backend_is_an_error():
    report = diagnose(create_agent(model(), tools=[bump_counter]))
    assert [(f.code, f.subject) for f in report.errors] == [
        ("file-read-modify-write", "bump_counter:/count.json")
    ]
    assert diagnose(create_agent(model(), tools=[count_visit])).findings == []


# --- same-batch-read ---


def test_a_reader_beside_writers_without_turn_cache_is_a_warning():
    report = diagnose(tags_agent(MergedTags))
    assert report.codes() == ["same-batch-read"]
    assert report.errors == []
    (found,) = report.warnings
    assert found.subject == "tags" and "`list_tags`" in found.message


def test_the_turn_cache_covering_the_pair_silences_it():
    assert diagnose(tags_agent(MergedTags, cache=True)).findings == []


def test_a_reader_of_a_run_time_key_is_only_info():
    report = diagnose(tags_agent(MergedTags, tools=[save_tag, read_anywhere]))
    assert report.codes() == []
    assert [(f.code, f.severity, f.subject) for f in report] == [
        ("same-batch-read", "info", "read_anywhere")
    ]


# --- subagent-drops-key ---


def test_a_subagent_writing_a_key_its_schema_lacks_is_an_error():
    agent = create_deep_agent(
        model(),
        middleware=[],
        subagents=[subagent_spec([save_tag])],
    )
    report = diagnose(agent)
    assert "subagent-drops-key" in report.codes()
    assert "helper:tags" in {f.subject for f in report.of("subagent-drops-key")}


def test_one_schema_for_parent_and_subagent_is_fine():
    agent = create_deep_agent(
        model(), tools=[save_tag], state_schema=DeepTags, subagents=[subagent_spec([save_tag])]
    )
    assert diagnose(agent).codes() == []


# --- list-doubled-by-subagent ---


def test_an_operator_add_list_a_subagent_declares_is_an_error():
    agent = create_deep_agent(
        model(), tools=[add_item], state_schema=AddItems, subagents=[subagent_spec([add_item])]
    )
    report = diagnose(agent)
    assert report.codes() == ["list-doubled-by-subagent"]
    assert "helper:items" in {f.subject for f in report.errors}
    assert "append_unique" in report.errors[0].message


def test_append_unique_is_fine():
    agent = create_deep_agent(
        model(), tools=[add_item], state_schema=UniqueItems, subagents=[subagent_spec([add_item])]
    )
    assert diagnose(agent).codes() == []


# --- memory-in-react-loop ---


def test_a_memory_tool_in_a_react_loop_is_a_warning():
    report = diagnose(create_agent(model(), tools=[add_entry]))
    assert report.codes() == ["memory-in-react-loop"]
    assert report.warnings[0].subject == "add_entry" and report.warnings[0].notebook == "06"


class Msgs(TypedDict):
    messages: Annotated[list, operator.add]


def test_a_memory_tool_that_code_dispatches_is_only_info():
    graph = StateGraph(Msgs)
    graph.add_node("tools", ToolNode([add_entry]))
    graph.add_edge(START, "tools")
    report = diagnose(graph.compile())
    assert report.codes() == []
    assert [(f.code, f.severity) for f in report] == [("memory-in-react-loop", "info")]


# --- the report itself ---


def test_the_report_is_a_table_with_codes_errors_and_json():
    report = diagnose(tags_agent(PlainTags), name="tags")
    assert isinstance(report, Report) and report.graph == "tags"
    assert report.codes() == ["same-batch-read", "unreduced-parallel-write"]
    assert report.findings[0].severity == "error"  # errors first
    text = str(report)
    assert text.splitlines()[1].split() == ["code", "severity", "subject", "where", "message"]
    assert "| `unreduced-parallel-write` | error | tags |" in report._repr_markdown_()
    data = json.loads(report.to_json())
    assert data["codes"] == report.codes() and len(data["findings"]) == len(report)


def test_something_that_is_not_a_graph_is_refused():
    with pytest.raises(NotAGraphError, match="expected a compiled LangGraph graph"):
        diagnose(save_tag)
    with pytest.raises(NotAGraphError):
        diagnose(StateGraph(Msgs))  # not compiled


def test_a_report_reads_as_its_table_in_plain_text_too():
    """A console, nbval's text/plain and GitHub's notebook view show the findings, not a repr."""
    from agentstate.doctor.report.findings import Report, info

    report = Report("notes", [info("undeclared-key", "notes", "built at run time")])
    assert repr(report) == str(report)
    assert repr(report).splitlines()[0] == "notes: 1 finding(s)"
    assert "Finding(" not in repr(report)


# --- issue 22: graphs the doctor never saw (each repro failed on the doctor before it) ---


class RouterState(TypedDict):
    q: str
    docs: list


def router_graph(route: Any, path_map: Any = None) -> Any:
    graph = StateGraph(RouterState)
    graph.add_node("a", lambda s: {"docs": ["a"]})
    graph.add_node("b", lambda s: {"docs": ["b"]})
    if path_map is None:
        graph.add_conditional_edges(START, route)
    else:
        graph.add_conditional_edges(START, route, path_map)
    return graph.compile()


def pick(state: RouterState) -> Literal["a", "b"]:
    """A router with a ``Literal`` return annotation and no path map."""
    return "a" if state["q"] == "x" else "b"


ROUTERS = {
    "an if expression and a list of ends": (lambda s: "a" if s["q"] == "x" else "b", ["a", "b"]),
    "a Literal annotation, no path map": (pick, None),
    "a path map with bool keys": (lambda s: s["q"] == "x", {True: "a", False: "b"}),
}


@pytest.mark.parametrize("shape", list(ROUTERS))
def test_the_ends_of_a_router_are_alternatives_not_a_fan_out(shape):
    route, path_map = ROUTERS[shape]
    graph = router_graph(route, path_map)
    assert diagnose(graph).findings == []
    # and no run raises: each route writes `docs` alone
    assert graph.invoke({"q": "x", "docs": []})["docs"] == ["a"]
    assert graph.invoke({"q": "y", "docs": []})["docs"] == ["b"]


def test_two_nodes_of_one_step_writing_a_list_get_a_list_reducer_and_a_place():
    graph = StateGraph(RouterState)
    graph.add_node("a", lambda s: {"docs": ["a"]})
    graph.add_node("b", lambda s: {"docs": ["b"]})
    graph.add_edge(START, "a")
    graph.add_edge(START, "b")
    (found,) = diagnose(graph.compile()).errors
    assert (
        "`Annotated[list, operator.add]`" in found.message and "merge_fields" not in found.message
    )
    assert found.file == __file__ and found.line is not None


class PlanState(TypedDict, total=False):
    plan: list[str]
    items: Annotated[list[str], operator.add]


def plan_route(state: PlanState) -> Any:
    """A node's name until a plan exists, then one Send per step of the plan."""
    if not state.get("plan"):
        return "plan"
    return [Send("work", {"step": step}) for step in state["plan"]]


def plan_graph() -> Any:
    graph = StateGraph(PlanState)
    graph.add_node("plan", lambda s: {"plan": ["x", "y"]})
    graph.add_node("work", lambda s: {"items": [s["step"]]})
    graph.add_conditional_edges(START, plan_route, ["plan", "work"])
    graph.add_conditional_edges("plan", plan_route, ["plan", "work"])
    return graph.compile()


def test_an_edge_returning_a_name_or_sends_marks_only_the_send_targets():
    graph = plan_graph()
    assert diagnose(graph).findings == []
    assert graph.invoke({})["items"] == ["x", "y"]


class NameState(MessagesState):
    name: str


@tool
def set_name(name: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Remember the user's name."""
    return Command(
        update={"name": name, "messages": [ToolMessage("ok", tool_call_id=tool_call_id)]}
    )


GLOBAL_MODEL = ScriptedChatModel(
    script=[reply(tool_call("set_name", name="Ada"), tool_call("set_name", name="Bo"))]
)
llm_with_tools = GLOBAL_MODEL.bind_tools([set_name])


def chatbot(state: NameState) -> dict[str, Any]:
    """The tutorial style: the model is a module global."""
    return {"messages": [llm_with_tools.invoke(state["messages"])]}


def tool_loop(call_model: Any, *, with_tools_condition: bool = True) -> Any:
    graph = StateGraph(NameState)
    graph.add_node("chatbot", call_model)
    graph.add_node("tools", ToolNode([set_name]))
    graph.add_edge(START, "chatbot")
    if with_tools_condition:
        graph.add_conditional_edges("chatbot", tools_condition)
    else:
        graph.add_conditional_edges(
            "chatbot", lambda s: "tools" if s["messages"][-1].tool_calls else END
        )
    graph.add_edge("tools", "chatbot")
    return graph.compile()


def test_a_react_loop_with_a_module_global_model_makes_a_command_write_an_error():
    report = diagnose(tool_loop(chatbot))
    (found,) = report.errors
    assert (found.code, found.subject, found.severity) == (
        "unreduced-parallel-write",
        "name",
        "error",
    )
    assert "A string has no merge" in found.message and "merge_fields" not in found.message
    # on the tool's `def` line, one below its `@tool` decorator (where its code object starts)
    assert found.file == __file__ and found.line == set_name.func.__code__.co_firstlineno + 1
    # what a run shows: two calls of one reply raise
    with pytest.raises(InvalidUpdateError, match="At key 'name'"):
        tool_loop(chatbot).invoke({"messages": [{"role": "user", "content": "hi"}]})


class Assistant:
    """A model held by an object: its bound method is the node."""

    def __init__(self) -> None:
        self.llm = model().bind_tools([set_name])

    def __call__(self, state: NameState) -> dict[str, Any]:
        return {"messages": [self.llm.invoke(state["messages"])]}

    def respond(self, state: NameState) -> dict[str, Any]:
        return {"messages": [self.llm.invoke(state["messages"])]}


def closure_node() -> Any:
    held = model()

    def call(state: NameState) -> dict[str, Any]:
        return {"messages": [held.invoke(state["messages"])]}

    return call


def runtime_model_node(state: NameState, runtime: Runtime[Any]) -> dict[str, Any]:
    """The template style: the model comes from the runtime context and binds its tools."""
    llm = runtime.context.model.bind_tools([set_name])
    return {"messages": [llm.invoke(state["messages"])]}


def binding_node() -> Any:
    held = model().bind(stop=["x"])  # a RunnableBinding

    def call(state: NameState) -> dict[str, Any]:
        return {"messages": [held.invoke(state["messages"])]}

    return call


def configurable_node() -> Any:
    held = init_chat_model()  # no model yet: a configurable model

    def call(state: NameState) -> dict[str, Any]:
        return {"messages": [held.invoke(state["messages"])]}

    return call


HELD = {
    "a closure": closure_node,
    "a bound method": lambda: Assistant().respond,
    "a RunnableBinding": binding_node,
    "init_chat_model": configurable_node,
    "the runtime context": lambda: runtime_model_node,
}


@pytest.mark.parametrize("held", list(HELD))
def test_a_react_loop_is_seen_however_the_model_is_held(held):
    from agentstate.doctor.facts.react import holds_model  # here: the module is new (issue 22)

    node = tool_loop(HELD[held]()).builder.nodes["chatbot"].runnable
    assert holds_model(node)  # the model itself is found, not only the routing
    for routed in (True, False):
        report = diagnose(tool_loop(HELD[held](), with_tools_condition=routed))
        assert [(f.code, f.severity, f.subject) for f in report.errors] == [
            ("unreduced-parallel-write", "error", "name")
        ]


def test_a_node_without_a_model_is_not_a_model_node():
    from agentstate.doctor.facts.react import holds_model

    assert not holds_model(tool_loop(lambda s: {"messages": []}).builder.nodes["chatbot"].runnable)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_create_react_agent_is_a_react_loop_too():
    agent = create_react_agent(model(), [set_name], state_schema=ReactNameState)
    assert [f.code for f in diagnose(agent).errors] == ["unreduced-parallel-write"]


class ReactNameState(AgentStatePrebuilt):
    name: str


class TodoState(AgentState):
    todos: NotRequired[list[str]]


@tool
def write_todos(todos: list[str], tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """A course's own todo writer (not deepagents')."""
    return Command(
        update={"todos": todos, "messages": [ToolMessage("ok", tool_call_id=tool_call_id)]}
    )


@tool
def read_todos(state: Annotated[dict, InjectedState]) -> str:
    """A course's own todo reader."""
    todos = state.get("todos") or []
    return "\n".join(todos) or "No todos currently in the list."


def test_a_users_own_todo_tools_are_checked_and_deepagents_own_are_not():
    report = diagnose(create_agent(model(), [write_todos, read_todos], state_schema=TodoState))
    assert report.codes() == ["same-batch-read", "unreduced-parallel-write"]
    assert {f.subject for f in report.warnings} == {"todos"}
    assert diagnose(create_deep_agent(model())).findings == []


class TopicState(TypedDict, total=False):
    topic: Annotated[str, operator.add]
    notes: Annotated[list[str], operator.add]


class InnerTopic(TypedDict, total=False):
    topic: str
    notes: list[str]


def podcast_graph(*, input_schema: type | None = None) -> Any:
    inner = StateGraph(InnerTopic, input_schema=input_schema, output_schema=NotesOnly)
    inner.add_node("write", lambda s: {"notes": [f"about {s['topic']}"]})
    inner.add_edge(START, "write")
    sub = inner.compile()
    graph = StateGraph(TopicState)
    graph.add_node("plan", sub if input_schema else plain_subgraph())
    graph.add_node("interview", sub if input_schema else plain_subgraph())
    graph.add_edge(START, "plan")
    graph.add_conditional_edges(
        "plan",
        lambda s: [Send("interview", {"topic": s["topic"]}) for _ in range(2)],
        ["interview"],
    )
    return graph.compile()


def plain_subgraph() -> Any:
    inner = StateGraph(InnerTopic)
    inner.add_node("write", lambda s: {"notes": [f"about {s['topic']}"]})
    inner.add_edge(START, "write")
    return inner.compile()


class NotesOnly(TypedDict, total=False):
    notes: list[str]


class TopicOnly(TypedDict, total=False):
    topic: str


def test_a_subgraph_node_plain_or_sent_that_returns_a_concatenated_key_is_named():
    graph = podcast_graph()
    ran = graph.invoke({"topic": "T", "notes": ["n"]})  # what a run shows
    # `topic` comes back from each subgraph and is appended again; `notes` is overwritten
    # inside the subgraph (a plain key there), so the parent's part is not handed back
    assert ran["topic"] == "TTTTTT" and ran["notes"].count("n") == 1
    report = diagnose(graph)
    assert {(f.code, f.subject) for f in report.errors} == {
        ("list-doubled-by-subagent", "plan > topic"),
        ("list-doubled-by-subagent", "interview > topic"),
    }
    assert "('TT')" in report.of("list-doubled-by-subagent")[-1].message
    fixed = podcast_graph(input_schema=TopicOnly)  # in: the topic; out: the notes
    ran = fixed.invoke({"topic": "T", "notes": ["n"]})
    assert ran["topic"] == "T" and ran["notes"].count("n") == 1
    assert diagnose(fixed).findings == []


class ErrorState(TypedDict, total=False):
    q: str
    answer: str


def answer_or_error(state: ErrorState) -> dict[str, Any]:
    try:
        return {"answer": str(1 / len(state["q"]))}
    except ZeroDivisionError as err:
        return {"error": str(err)}


def test_a_node_returning_an_undeclared_key_in_its_except_branch_is_an_error():
    graph = StateGraph(ErrorState)
    graph.add_node("answer", answer_or_error)
    graph.add_edge(START, "answer")
    compiled = graph.compile()
    assert "error" not in compiled.invoke({"q": ""})  # LangGraph dropped it
    (found,) = diagnose(compiled).errors
    assert (found.code, found.subject) == ("undeclared-key", "error")
    assert found.file == __file__ and found.line == answer_or_error.__code__.co_firstlineno


class Outer(MessagesState):
    summary: str


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_a_prebuilt_agent_used_as_a_node_is_diagnosed_inside_with_its_path():
    inner = create_react_agent(model(), [add_entry, set_name], state_schema=ReactNameState)
    graph = StateGraph(Outer)
    graph.add_node("researcher", inner)
    graph.add_edge(START, "researcher")
    report = diagnose(graph.compile())
    assert {(f.code, f.subject) for f in report if f.severity != "info"} == {
        ("memory-in-react-loop", "researcher > add_entry"),
        ("unreduced-parallel-write", "researcher > name"),
    }


class MemoryState(MessagesState):
    pass


def store_memory(state: MemoryState, *, store: BaseStore) -> dict[str, Any]:
    """Runs the model's tool calls itself and writes each to the store (no ToolNode)."""
    results = []
    for call in state["messages"][-1].tool_calls:
        store.put(("memories",), call["id"], call["args"])
        results.append(ToolMessage("stored", tool_call_id=call["id"]))
    return {"messages": results}


def test_a_memory_agent_without_a_tool_node_is_a_react_loop_writing_memory():
    def call_model(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model().bind_tools([add_entry]).invoke(state["messages"])]}

    def route(state: MemoryState) -> str:
        return "store_memory" if state["messages"][-1].tool_calls else END

    graph = StateGraph(MemoryState)
    graph.add_node("call_model", call_model)
    graph.add_node("store_memory", store_memory)
    graph.add_edge(START, "call_model")
    graph.add_conditional_edges("call_model", route, ["store_memory", END])
    graph.add_edge("store_memory", "call_model")
    report = diagnose(graph.compile())
    assert [(f.code, f.severity, f.subject) for f in report] == [
        ("memory-in-react-loop", "warning", "store_memory")
    ]


@tool
def jot_down(fact: str) -> str:
    """Keep a fact (through LangGraph's get_store())."""
    get_store().put(("facts",), fact, {"fact": fact})
    return "kept"


@tool
def note_preference(text: str, memories: Annotated[BaseStore, InjectedStore()]) -> str:
    """Keep a preference (through an injected store with its own name)."""
    memories.put(("prefs",), text, {"text": text})
    return "kept"


@pytest.mark.parametrize("memory_tool", [jot_down, note_preference])
def test_a_store_write_is_seen_however_the_store_is_reached(memory_tool):
    report = diagnose(create_agent(model(), [memory_tool]))
    assert [(f.code, f.severity, f.subject) for f in report] == [
        ("memory-in-react-loop", "warning", memory_tool.name)
    ]


def summarize(state: ErrorState) -> dict[str, Any]:
    """A helper defined inside the node returns rows, not state updates."""

    def row(text: str) -> dict[str, str]:
        return {"line": text}

    rows = [row(part) for part in state["q"].split()]
    return {"answer": ", ".join(r["line"] for r in rows)}


def test_a_helper_defined_inside_a_node_is_not_the_nodes_return():
    graph = StateGraph(ErrorState)
    graph.add_node("summarize", summarize)
    graph.add_edge(START, "summarize")
    assert diagnose(graph.compile()).findings == []

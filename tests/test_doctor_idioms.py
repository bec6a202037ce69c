"""The doctor on idioms met in third-party agents (issue 32): each repro checked by a run.

Every test builds the smallest graph with the idiom, shows what a run does with it
(a raise, a lost or doubled value, or nothing lost), and checks that ``diagnose``
(and ``Watch`` where it applies) says the same: no false error, no missed hazard.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError, InvalidUpdateError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from agentstate.doctor import Watch, diagnose
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.models.openai_replay import ReplayServer

USER = {"messages": [{"role": "user", "content": "go"}]}


def errors(report: Any) -> list[tuple[str, str]]:
    return [(f.code, f.subject) for f in report.errors]


# --- StateGraph(dict): one root value ---------------------------------------------------------


def dict_graph() -> Any:
    graph = StateGraph(dict)

    def left(state: dict) -> dict:
        return {"res": "left"}

    def right(state: dict) -> dict:
        return {"res": "right"}

    graph.add_node("left", left)
    graph.add_node("right", right)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    return graph.compile()


def test_state_graph_dict_two_writers_from_start_is_the_root_parallel_write():
    with pytest.raises(InvalidUpdateError, match="__root__"):
        dict_graph().invoke({"q": 1})
    report = diagnose(dict_graph())
    assert errors(report) == [("unreduced-parallel-write", "__root__")]
    assert "StateGraph(dict)" in report.errors[0].message


def test_state_graph_dict_under_watch_names_the_root_and_no_undeclared_key():
    graph = dict_graph()
    watch = Watch(graph)
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"q": 1}, {"callbacks": [watch]})
    assert errors(watch.report()) == [("unreduced-parallel-write", "__root__")]


def test_state_graph_dict_with_one_writer_per_step_is_clean():
    graph = StateGraph(dict)

    def first(state: dict) -> dict:
        return {**state, "res": 1}

    graph.add_node("first", first)
    graph.add_edge(START, "first")
    compiled = graph.compile()
    assert compiled.invoke({"q": 1}) == {"q": 1, "res": 1}
    assert diagnose(compiled).findings == []


# --- a declared key with ':' in its name -------------------------------------------------------

Colon = TypedDict("Colon", {"user:profile": int, "user:name": str})


def colon_graph() -> Any:
    graph = StateGraph(Colon)

    def one(state: Colon) -> dict[str, Any]:
        return {"user:profile": 1}

    def two(state: Colon) -> dict[str, Any]:
        return {"user:profile": 2}

    def named(state: Colon) -> dict[str, Any]:
        return {"user:name": "Ada"}

    graph.add_node("one", one)
    graph.add_node("two", two)
    graph.add_node("named", named)
    graph.add_edge(START, "one")
    graph.add_edge(START, "two")
    graph.add_edge("one", "named")
    return graph.compile()


def test_a_declared_key_with_a_colon_is_declared_and_its_parallel_write_found():
    with pytest.raises(InvalidUpdateError, match="user:profile"):
        colon_graph().invoke({})
    assert errors(diagnose(colon_graph())) == [("unreduced-parallel-write", "user:profile")]


# --- nodes renamed by a factory, and callable objects ------------------------------------------


class Plain(TypedDict):
    summary: str


def renamed(label: str) -> Any:
    def node(state: Plain) -> dict[str, Any]:
        return {"summary": label}

    node.__name__ = node.__qualname__ = f"summarise_{label}"
    return node


class Summariser:
    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, state: Plain) -> dict[str, Any]:
        return {"summary": self.label}


@pytest.mark.parametrize(
    "make", [renamed, Summariser], ids=["renamed-by-a-factory", "callable-object"]
)
def test_parallel_writers_renamed_or_callable_objects_are_found(make: Any):
    def build() -> Any:
        graph = StateGraph(Plain)
        graph.add_node("a", make("a"))
        graph.add_node("b", make("b"))
        graph.add_edge(START, "a")
        graph.add_edge(START, "b")
        return graph.compile()

    with pytest.raises(InvalidUpdateError, match="summary"):
        build().invoke({})
    report = diagnose(build())
    assert errors(report) == [("unreduced-parallel-write", "summary")]
    assert report.errors[0].file == __file__


# --- one tool call per reply, by configuration or by a guard in the model node ----------------


class NotesState(AgentState):
    notes: list[str]


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Add a note."""
    notes = [*runtime.state.get("notes", []), text]
    return Command(
        update={"notes": notes, "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)]}
    )


@tool
def read_notes(runtime: ToolRuntime) -> str:
    """Read the notes."""
    return ", ".join(runtime.state.get("notes", []))


def two_notes() -> ScriptedChatModel:
    """A model that asks for two notes at once, then for the second again, then stops."""
    return ScriptedChatModel(
        script=[
            reply(tool_call("add_note", text="a"), tool_call("add_note", text="b")),
            reply(tool_call("add_note", text="b")),
            reply(text="done"),
        ]
    )


def openai_agent(base_url: str, **model_kwargs: Any) -> Any:
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=base_url, api_key="not-needed", model_kwargs=model_kwargs
    )
    return create_agent(model, tools=[add_note, read_notes], state_schema=NotesState)


def test_parallel_tool_calls_false_in_model_kwargs_turns_the_error_into_info():
    with ReplayServer(two_notes()) as server:
        out = openai_agent(server.base_url, parallel_tool_calls=False).invoke(USER)
        assert server.requests[0]["parallel_tool_calls"] is False
    assert out["notes"] == ["a", "b"]  # one call per reply: nothing collides, nothing lost
    with ReplayServer(two_notes()) as server, pytest.raises(InvalidUpdateError, match="notes"):
        openai_agent(server.base_url).invoke(USER)

    report = diagnose(openai_agent("http://127.0.0.1:9/v1", parallel_tool_calls=False))
    assert report.codes() == []
    (note,) = [f for f in report.of("unreduced-parallel-write")]
    assert note.severity == "info"
    assert "parallel_tool_calls" in note.message
    reader = report.of("same-batch-read")
    assert [f.severity for f in reader] == ["info"]
    assert "one tool call per reply" in reader[0].message

    plain = diagnose(openai_agent("http://127.0.0.1:9/v1"))
    assert plain.codes() == ["same-batch-read", "unreduced-parallel-write"]


class LoopState(MessagesState):
    notes: list[str]


@tool
def note_down(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Note one thing down."""
    return Command(
        update={"notes": [text], "messages": [ToolMessage("ok", tool_call_id=tool_call_id)]}
    )


def hand_built_loop(model: Any) -> Any:
    def assistant(state: LoopState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(LoopState)
    graph.add_node("assistant", assistant)
    graph.add_node("tools", ToolNode([note_down]))
    graph.add_edge(START, "assistant")
    graph.add_conditional_edges("assistant", tools_condition)
    graph.add_edge("tools", "assistant")
    return graph.compile()


def openai(base_url: str = "http://127.0.0.1:9/v1", **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key="not-needed", **kwargs)


def test_bind_tools_parallel_tool_calls_false_is_read_from_the_binding():
    script = ScriptedChatModel(
        script=[
            reply(tool_call("note_down", text="a"), tool_call("note_down", text="b")),
            reply(text="done"),
        ]
    )
    with ReplayServer(script) as server:
        bound = openai(server.base_url).bind_tools([note_down], parallel_tool_calls=False)
        out = hand_built_loop(bound).invoke(USER)
    assert out["notes"] == ["a"]  # the provider answered with the first call only

    bound = openai().bind_tools([note_down], parallel_tool_calls=False)
    report = diagnose(hand_built_loop(bound))
    assert report.codes() == []
    assert "`parallel_tool_calls=False` bound to the model" in report.findings[0].message
    anthropic = ChatAnthropic(model="claude-sonnet-4-5", api_key="not-needed")
    bound_anthropic = anthropic.bind_tools([note_down], parallel_tool_calls=False)
    assert diagnose(hand_built_loop(bound_anthropic)).codes() == []
    assert diagnose(hand_built_loop(openai().bind_tools([note_down]))).codes() == [
        "unreduced-parallel-write"
    ]


class OneCallModel(ScriptedChatModel):
    """A model class with a ``parallel_tool_calls`` field of its own."""

    parallel_tool_calls: bool = False


def test_a_parallel_tool_calls_field_on_the_model_object_counts():
    report = diagnose(hand_built_loop(OneCallModel(script=[])))
    assert report.codes() == []
    assert "`parallel_tool_calls=False` on the model" in report.findings[0].message
    assert diagnose(hand_built_loop(OneCallModel(script=[], parallel_tool_calls=True))).codes() == [
        "unreduced-parallel-write"
    ]


def guarded_loop(model: Any, *, guard: str) -> Any:
    def assert_guard(state: LoopState) -> dict[str, Any]:
        message = model.invoke(state["messages"])
        assert len(message.tool_calls) <= 1
        return {"messages": [message]}

    def raise_guard(state: LoopState) -> dict[str, Any]:
        message = model.invoke(state["messages"])
        if len(message.tool_calls) > 1:
            raise ValueError("one tool call at a time")
        return {"messages": [message]}

    graph = StateGraph(LoopState)
    graph.add_node("chatbot", assert_guard if guard == "assert" else raise_guard)
    graph.add_node("tools", ToolNode([note_down]))
    graph.add_edge(START, "chatbot")
    graph.add_conditional_edges("chatbot", tools_condition)
    graph.add_edge("tools", "chatbot")
    return graph.compile()


@pytest.mark.parametrize("guard", ["assert", "raise"])
def test_a_model_node_that_refuses_several_tool_calls_is_one_call_per_reply(guard: str):
    model = ScriptedChatModel(
        script=[reply(tool_call("note_down", text="a"), tool_call("note_down", text="b"))]
    )
    with pytest.raises((AssertionError, ValueError)):  # refused before any tool ran
        guarded_loop(model, guard=guard).invoke(USER)
    report = diagnose(guarded_loop(model, guard=guard))
    assert report.codes() == []
    assert "refuses a reply with more than one tool call" in report.findings[0].message


# --- a plain tool that reads a file from disk and writes the same path back -------------------


def disk_tools(folder: Path) -> list[Any]:
    @tool
    def edit_file(file_name: str, line: str) -> str:
        """Append a line to a document (read it, add the line, write it back)."""
        with (folder / file_name).open("r") as handle:
            lines = handle.readlines()
        lines.append(line + "\n")
        with (folder / file_name).open("w") as handle:
            handle.writelines(lines)
        return "edited"

    @tool
    def add_line(file_name: str, line: str) -> str:
        """Append a line without reading the file."""
        with open(folder / file_name, "a") as handle:
            handle.write(line + "\n")
        return "added"

    @tool
    def copy_file(source: str, target: str) -> str:
        """Copy one document to another name."""
        text = (folder / source).read_text()
        (folder / target).write_text(text)
        return "copied"

    return [edit_file, add_line, copy_file]


def test_a_tool_that_reads_a_file_and_writes_the_same_path_back_is_found(tmp_path: Path):
    edit_file, add_line, copy_file = disk_tools(tmp_path)
    (tmp_path / "doc.txt").write_text("")
    calls = [tool_call("edit_file", file_name="doc.txt", line=f"edit {i}") for i in range(5)]
    lost = 0
    held = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as a loaded machine does
    try:
        for _ in range(20):
            (tmp_path / "doc.txt").write_text("")
            model = ScriptedChatModel(script=[reply(*calls), reply(text="done")])
            create_agent(model, tools=[edit_file]).invoke(USER)
            lost += 5 - len((tmp_path / "doc.txt").read_text().splitlines())
            if lost:
                break
    finally:
        sys.setswitchinterval(held)
    assert lost > 0  # parallel calls of one reply each wrote back the file they read

    report = diagnose(create_agent(model, tools=[edit_file, add_line, copy_file]))
    assert errors(report) == [
        ("file-read-modify-write", "edit_file:folder / file_name (one run-time path)")
    ]
    assert "from the disk" in report.errors[0].message


# --- a tool named like memory that only writes state, and a store write the model does not choose


class FactsState(AgentState):
    facts: Annotated[list[str], operator.add]


@tool
def remember(fact: str, runtime: ToolRuntime) -> Command:
    """Remember a fact for this conversation."""
    return Command(
        update={"facts": [fact], "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)]}
    )


def test_a_tool_named_remember_that_only_writes_state_is_not_long_term_memory():
    store = InMemoryStore()
    model = ScriptedChatModel(
        script=[
            reply(tool_call("remember", fact="tea"), tool_call("remember", fact="tea")),
            reply(text="ok"),
        ]
    )
    out = create_agent(model, tools=[remember], state_schema=FactsState, store=store).invoke(USER)
    assert out["facts"] == ["tea", "tea"] and store.search(()) == []  # the thread's, not memory
    report = diagnose(create_agent(model, tools=[remember], state_schema=FactsState))
    assert report.of("memory-in-react-loop") == []


@tool
async def search_with_token(query: str, runtime: ToolRuntime) -> str:
    """Search with the user's cached access token."""
    token = await cached_token(runtime.store, "user-1")
    return f"{query} searched with {token[:4]}"


async def cached_token(store: Any, user_id: str) -> str:
    found = await store.aget((user_id, "tokens"), "data")
    if found is not None:
        return str(found.value["token"])
    token = "tok-" + user_id
    await store.aput((user_id, "tokens"), "data", {"token": token})
    return token


@tool
async def save_fact(fact: str, runtime: ToolRuntime) -> str:
    """Save a fact about the user."""
    await runtime.store.aput(("facts",), fact, {"fact": fact})
    return "saved"


def test_a_store_write_the_model_does_not_choose_is_not_memory_and_one_it_does_is():
    store = InMemoryStore()
    model = ScriptedChatModel(
        script=[
            reply(
                tool_call("search_with_token", query="a"), tool_call("search_with_token", query="b")
            ),
            reply(text="ok"),
        ]
    )
    asyncio.run(create_agent(model, tools=[search_with_token], store=store).ainvoke(USER))
    assert [i.value for i in store.search(())] == [
        {"token": "tok-user-1"}
    ]  # code's, not the model's
    assert diagnose(create_agent(model, tools=[search_with_token])).of("memory-in-react-loop") == []
    both = diagnose(create_agent(model, tools=[search_with_token, save_fact]))
    assert [(f.code, f.subject) for f in both.warnings] == [("memory-in-react-loop", "save_fact")]


# --- a Send worker that hands its item back into the list it came from ------------------------


class Research(TypedDict):
    queries: Annotated[list[str], operator.add]
    results: Annotated[list[str], operator.add]


class Query(TypedDict):
    queries: str


def plan(state: Research) -> dict[str, Any]:
    return {"queries": ["q1", "q2"]}


def fan_out(state: Research) -> list[Send]:
    return [Send("search", {"queries": q}) for q in state["queries"]]


def search_echo(state: Query) -> dict[str, Any]:
    return {"queries": [state["queries"]], "results": [f"found {state['queries']}"]}


def search_clean(state: Query) -> dict[str, Any]:
    return {"results": [f"found {state['queries']}"]}


def research_graph(search: Any) -> Any:
    graph = StateGraph(Research)
    graph.add_node("plan", plan)
    graph.add_node("search", search)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan_out, ["search"])
    return graph.compile()


def test_a_send_worker_returning_its_item_into_the_list_doubles_it():
    assert research_graph(search_echo).invoke({})["queries"] == ["q1", "q2", "q1", "q2"]
    assert errors(diagnose(research_graph(search_echo))) == [
        ("list-doubled-by-subagent", "search > queries")
    ]
    assert research_graph(search_clean).invoke({})["queries"] == ["q1", "q2"]
    assert diagnose(research_graph(search_clean)).errors == []


# --- a router that reads what nothing writes, or what its own schema leaves out ----------------


class Loop(TypedDict):
    draft: str
    plan_revision_count: int
    max_loops: int


class Counted(TypedDict):
    plan_revision_count: int


def revise(state: Loop) -> dict[str, Any]:
    count = state.get("plan_revision_count", 0) + 1
    return {"draft": f"v{count}", "plan_revision_count": count}


def wrong_key(s: Loop) -> str:
    return "revise" if s.get("revisions_count", 0) < 2 else END


def narrow(state: Counted) -> str:
    return "revise" if state["plan_revision_count"] < state.get("max_loops", 5) else END


def right(state: Loop) -> str:
    return "revise" if state["plan_revision_count"] < state.get("max_loops", 5) else END


def loop_graph(router: Any) -> Any:
    graph = StateGraph(Loop)
    graph.add_node("revise", revise)
    graph.add_edge(START, "revise")
    graph.add_conditional_edges("revise", router, ["revise", END])
    return graph.compile()


def test_a_router_reading_a_key_nothing_writes_loops_to_the_recursion_limit():
    with pytest.raises(GraphRecursionError):
        loop_graph(wrong_key).invoke({}, {"recursion_limit": 15})
    assert errors(diagnose(loop_graph(wrong_key))) == [("unseen-key-read", "revisions_count")]


def test_a_router_typed_with_a_narrower_schema_never_sees_the_inputs_setting():
    assert loop_graph(narrow).invoke({"max_loops": 2})["plan_revision_count"] == 5  # ignored
    assert loop_graph(right).invoke({"max_loops": 2})["plan_revision_count"] == 2
    assert errors(diagnose(loop_graph(narrow))) == [("unseen-key-read", "max_loops")]
    assert diagnose(loop_graph(right)).findings == []

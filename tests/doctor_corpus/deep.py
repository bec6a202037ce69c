"""Deep agents: subagents behind ``task``, a list a subagent shares, a course's own todo tools.

Written for this corpus after the public shapes named per graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired

from deepagents import DeepAgentState, create_deep_agent
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from typing_extensions import TypedDict

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import USER, Proof, case, raises_invalid_update, scripted

# --- a deep research agent with a research and a critique subagent ---------------------------
# Follows langchain-ai/deepagents examples/deep_research (a research-agent and a
# critique-agent subagent behind `task`, an internet_search tool).


@tool
def internet_search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


def research_agent(parent: Any = None) -> Any:
    parent = parent or scripted(reply(text="ok"))
    spec = {"description": "Researches.", "system_prompt": "Research.", "tools": [internet_search]}
    return create_deep_agent(
        parent,
        tools=[internet_search],
        subagents=[
            {"name": "research-agent", "model": scripted(reply(text="findings")), **spec},
            {"name": "critique-agent", "model": scripted(reply(text="critique")), **spec},
        ],
    )


def prove_research() -> Any:
    parent = scripted(
        reply(
            tool_call("task", description="research agents", subagent_type="research-agent"),
            tool_call("task", description="critique the draft", subagent_type="critique-agent"),
        ),
        reply(text="report"),
    )
    out = research_agent(parent).invoke(USER)
    answers = sorted(m.content for m in out["messages"] if isinstance(m, ToolMessage))
    ok = answers == ["critique", "findings"] and out["messages"][-1].content == "report"
    return Proof(frozenset() if ok else frozenset({"unreduced-parallel-write"}),
                 "two subagents in one step, both answers kept")  # fmt: skip


# --- a deep agent whose subagent shares a `sources` list reduced by operator.add ------------
# Follows langchain-ai/deepagents (a subagent given the parent's state_schema), with the
# deep_research example keeping its sources in a shared list.


class SourcesState(DeepAgentState):
    sources: Annotated[NotRequired[list[str]], operator.add]


@tool
def cite(url: str, runtime: ToolRuntime) -> Command:
    """Keep a source."""
    return Command(
        update={
            "sources": [url],
            "messages": [ToolMessage("kept", tool_call_id=runtime.tool_call_id)],
        }
    )


def sources_agent(parent: Any = None, helper: Any = None) -> Any:
    return create_deep_agent(
        parent or scripted(reply(text="ok")),
        tools=[cite],
        state_schema=SourcesState,
        subagents=[
            {
                "name": "research-agent",
                "description": "Finds sources.",
                "system_prompt": "Cite what you find.",
                "tools": [cite],
                "model": helper or scripted(reply(text="ok")),
            }
        ],
    )


def prove_sources() -> Any:
    parent = scripted(
        reply(tool_call("task", description="find one", subagent_type="research-agent")),
        reply(text="done"),
    )
    helper = scripted(reply(tool_call("cite", url="b")), reply(text="cited"))
    out = sources_agent(parent, helper).invoke({**USER, "sources": ["a"]})
    return Proof(
        frozenset({"list-doubled-by-subagent"}) if out["sources"].count("a") > 1 else frozenset(),
        f"`sources` ended as {out['sources']}",
    )


# --- a course's full agent with its own todo and file tools ----------------------------------
# Follows langchain-ai/deep-agents-from-scratch, 4_full_agent: its own write_todos/read_todos
# (todos a plain list), ls/read_file/write_file over a `files` dict with a merging reducer.


class Todo(TypedDict):
    content: str
    status: Literal["pending", "in_progress", "completed"]


def file_reducer(left: dict[str, str] | None, right: dict[str, str] | None) -> dict[str, str]:
    return {**(left or {}), **(right or {})}


class CourseState(AgentState):
    todos: NotRequired[list[Todo]]
    files: Annotated[NotRequired[dict[str, str]], file_reducer]


@tool
def write_todos(todos: list[Todo], tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Create or update the todo list."""
    return Command(
        update={
            "todos": todos,
            "messages": [ToolMessage(f"Updated todo list to {todos}", tool_call_id=tool_call_id)],
        }
    )


@tool
def read_todos(state: Annotated[CourseState, InjectedState]) -> str:
    """Read the todo list."""
    todos = state.get("todos", [])
    if not todos:
        return "No todos currently in the list."
    return "\n".join(f"{t['status']}: {t['content']}" for t in todos)


@tool
def ls(state: Annotated[CourseState, InjectedState]) -> list[str]:
    """List the files."""
    return list(state.get("files", {}).keys())


@tool
def read_file(file_path: str, state: Annotated[CourseState, InjectedState]) -> str:
    """Read a file."""
    files = state.get("files", {})
    return files.get(file_path, f"Error: File '{file_path}' not found")


@tool
def write_file(
    file_path: str, content: str, tool_call_id: Annotated[str, InjectedToolCallId]
) -> Command:
    """Write a file."""
    return Command(
        update={
            "files": {file_path: content},
            "messages": [ToolMessage(f"Updated file {file_path}", tool_call_id=tool_call_id)],
        }
    )


COURSE_TOOLS = [write_todos, read_todos, ls, read_file, write_file]
PLAN: list[Todo] = [{"content": "research", "status": "in_progress"}]


def course_agent(model: Any = None) -> Any:
    return create_agent(
        model or scripted(reply(text="ok")), tools=COURSE_TOOLS, state_schema=CourseState
    )


def prove_course() -> Any:
    reader = scripted(
        reply(tool_call("write_todos", todos=PLAN), tool_call("read_todos")), reply(text="ok")
    )
    out = course_agent(reader).invoke(USER)
    seen = [m.content for m in out["messages"] if getattr(m, "name", "") == "read_todos"]
    blind = seen == ["No todos currently in the list."]
    writers = scripted(
        reply(tool_call("write_todos", todos=PLAN), tool_call("write_todos", todos=[])),
        reply(text="ok"),
    )
    raised = raises_invalid_update(lambda: course_agent(writers).invoke(USER), "todos")
    hazards = {"same-batch-read"} if blind else set()
    hazards |= {"unreduced-parallel-write"} if raised else set()
    return Proof(
        frozenset(hazards),
        "read_todos beside write_todos saw no todos; two write_todos of one reply raised",
    )


CASES = [
    case(
        "deep agent with research and critique subagents",
        "langchain-ai/deepagents examples/deep_research",
        set(),
        research_agent,
        prove_research,
    ),
    case(
        "deep agent, subagent shares an operator.add list",
        "langchain-ai/deepagents (subagent given the parent's state_schema)",
        {"list-doubled-by-subagent"},
        sources_agent,
        prove_sources,
    ),
    case(
        "a course's full agent with its own todo and file tools",
        "langchain-ai/deep-agents-from-scratch 4_full_agent",
        {"same-batch-read", "unreduced-parallel-write"},
        course_agent,
        prove_course,
    ),
]

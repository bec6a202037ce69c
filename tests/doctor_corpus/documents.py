"""Agents that keep their work in files on disk.

A tool that reads a file, edits it in memory and writes the whole file back
loses the edits of the other calls of the same reply (notebook 01's hazard).
Written for this corpus after the public shape named per graph (no code copied).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import USER, Proof, case, scripted

# --- the document-writing team of LangGraph's hierarchical agent teams -----------------------
# Follows the LangGraph tutorial "Hierarchical Agent Teams" (langchain-ai/langgraph docs):
# module-level WORKING_DIRECTORY; plain @tool functions create_outline, read_document,
# write_document and edit_document, which opens WORKING_DIRECTORY / file_name, reads its
# lines, inserts at the given line numbers and writes the same path back; a prebuilt ReAct
# agent (create_agent here) is the doc writer, called from a node of the team's graph that
# hands back to its supervisor.

WORKING_DIRECTORY = Path(tempfile.mkdtemp(prefix="doctor-teams-"))


@tool
def create_outline(
    points: Annotated[list[str], "List of main points or sections."],
    file_name: Annotated[str, "File path to save the outline."],
) -> str:
    """Create and save an outline."""
    with (WORKING_DIRECTORY / file_name).open("w") as file:
        for i, point in enumerate(points):
            file.write(f"{i + 1}. {point}\n")
    return f"Outline saved to {file_name}"


@tool
def read_document(
    file_name: Annotated[str, "File path to read the document from."],
    start: Annotated[int | None, "The start line. Default is 0"] = None,
    end: Annotated[int | None, "The end line. Default is None"] = None,
) -> str:
    """Read the specified document."""
    with (WORKING_DIRECTORY / file_name).open("r") as file:
        lines = file.readlines()
    return "\n".join(lines[start or 0 : end])


@tool
def write_document(
    content: Annotated[str, "Text content to be written into the document."],
    file_name: Annotated[str, "File path to save the document."],
) -> str:
    """Create and save a text document."""
    with (WORKING_DIRECTORY / file_name).open("w") as file:
        file.write(content)
    return f"Document saved to {file_name}"


@tool
def edit_document(
    file_name: Annotated[str, "Path of the document to be edited."],
    inserts: Annotated[dict[int, str], "Line numbers (1-indexed) and the text to insert."],
) -> str:
    """Edit a document by inserting text at specific line numbers."""
    with (WORKING_DIRECTORY / file_name).open("r") as file:
        lines = file.readlines()
    for line_number, text in sorted(inserts.items()):
        if 1 <= line_number <= len(lines) + 1:
            lines.insert(line_number - 1, text + "\n")
        else:
            return f"Error: Line number {line_number} is out of range."
    with (WORKING_DIRECTORY / file_name).open("w") as file:
        file.writelines(lines)
    return f"Document edited and saved to {file_name}"


writer_model: Any = scripted(reply(text="done"))


def doc_writing_graph(model: Any = None) -> Any:
    doc_writer_agent = create_agent(
        model or writer_model,
        tools=[write_document, edit_document, read_document],
        system_prompt="You can read, write and edit documents based on note-taker's outlines.",
    )

    def doc_writing_node(state: MessagesState) -> Command:
        result = doc_writer_agent.invoke(state)
        return Command(
            update={"messages": [HumanMessage(result["messages"][-1].content, name="doc_writer")]},
            goto="supervisor",
        )

    def supervisor_node(state: MessagesState) -> Command:
        done = any(getattr(m, "name", None) == "doc_writer" for m in state["messages"])
        return Command(goto=END if done else "doc_writer")

    builder = StateGraph(MessagesState)
    builder.add_node("supervisor", supervisor_node, destinations=("doc_writer", END))
    builder.add_node("doc_writer", doc_writing_node, destinations=("supervisor",))
    builder.add_edge(START, "supervisor")
    return builder.compile()


def prove_doc_writing() -> Proof:
    """Five inserts into one document in one reply, 20 runs at most: count what survived."""
    path = WORKING_DIRECTORY / "report.txt"
    lost = runs = 0
    held = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as a loaded machine does
    try:
        while runs < 20 and not lost:
            runs += 1
            path.write_text("title\n")
            calls = [
                tool_call("edit_document", file_name="report.txt", inserts={2: f"edit {i}"})
                for i in range(5)
            ]
            doc_writing_graph(scripted(reply(*calls), reply(text="edited"))).invoke(USER)
            lost = 5 - (len(path.read_text().splitlines()) - 1)
    finally:
        sys.setswitchinterval(held)
    return Proof(
        frozenset({"file-read-modify-write"} if lost else set()),
        f"five edits of one document in one reply: {lost} lost (run {runs})",
    )


CASES = [
    case(
        "document team: edit_document reads a file and writes the same path back",
        "LangGraph tutorial hierarchical agent teams (langchain-ai/langgraph docs)",
        {"file-read-modify-write"},
        doc_writing_graph,
        prove_doc_writing,
    )
]

"""Stage 04: what crosses the ``task`` boundary between a deep agent and its subagent.

The main agent delegates collection to a ``requirements-collector`` subagent,
then validates and generates. deepagents sends the subagent the parent's
state (minus excluded keys, minus keys the subagent does not declare) with
the task description as its only message, and returns every changed,
declared, non-excluded key plus one ToolMessage. So:

- :func:`build_split_schema_agent` (the original failure): the parent declares
  ``requirements`` through a middleware, the subagent does not; the
  subagent's writes are dropped silently and the parent sees nothing.
- :func:`build_shared_schema_agent` (the fix): ``state_schema=RdsAgentState``
  is forwarded to declarative subagents, so both declare the key and its
  reducer; requirements cross the boundary and persist with a checkpointer.
- :func:`build_cache_fix_agent` (the original write-up's fix, for comparison):
  the split schema plus the turn cache; the parent sees the subagent's
  fields during the turn only, because they never reach state.

Offline, the collector is a small policy model: it stores the fields given
as JSON in its task description, then reports. Taught in notebook 04.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired

from deepagents import create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds.agents import RDS_SYSTEM_PROMPT, assemble_fixed_agent
from agentstate.rds.scenarios import file_fields, store_calls
from agentstate.rds.state import RdsAgentState
from agentstate.rds.storage import StateStorage
from agentstate.rds.sync import RequirementsSyncMiddleware
from agentstate.rds.tools import make_rds_tools
from agentstate.rds.turn_cache import (
    BatchBarrierMiddleware,
    CachedStateStorage,
    TurnCachedAgent,
)

COLLECTOR = "requirements-collector"
COLLECTOR_PROMPT = (
    "You collect RDS requirements. Store every field named in the task with "
    "store_requirement, in parallel, then say which fields you stored."
)


class RequirementsKeyMiddleware(AgentMiddleware):
    """Declares ``requirements`` (with its reducer) on the one agent it is attached to."""

    state_schema = RdsAgentState


def collector_model(tasks: int = 1) -> ScriptedChatModel:
    """The offline collector: for each task, store the JSON fields, then report.

    Steps are functions of the incoming messages, so parallel tasks sharing
    the model each get the right reply whatever order they run in.
    """

    def step(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return reply(*store_calls(json.loads(last.content)))
        stored = [m for m in messages if getattr(m, "name", None) == "store_requirement"]
        return reply(text=f"Stored {len(stored)} field(s).")

    return ScriptedChatModel(script=[step] * (2 * tasks), model_name=COLLECTOR)


def delegate(*field_sets: Mapping[str, Any]) -> AIMessage:
    """A parent reply with one ``task`` call per field set (parallel when several)."""
    return reply(
        *(
            tool_call("task", description=json.dumps(dict(f)), subagent_type=COLLECTOR)
            for f in field_sets
        )
    )


def parent_model(
    *field_sets: Mapping[str, Any], then: Sequence[AIMessage] = ()
) -> ScriptedChatModel:
    """Delegate the field sets, then check with ``validate_manifest``, then answer."""
    script = [delegate(*field_sets), reply(tool_call("validate_manifest")), *then]
    return ScriptedChatModel(script=[*script, reply(text="Done.")], model_name="main-agent")


def collector_spec(model: BaseChatModel, storage: Any) -> dict[str, Any]:
    return {
        "name": COLLECTOR,
        "description": "Collects RDS requirements and stores them with store_requirement.",
        "system_prompt": COLLECTOR_PROMPT,
        "tools": make_rds_tools(storage),
        "model": model,
    }


def _split_schema_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    storage: Any,
    *,
    parent_middleware: Sequence[AgentMiddleware],
    collector_middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
):
    """Only the parent declares ``requirements`` (through a middleware's schema)."""
    spec = collector_spec(collector, storage)
    if collector_middleware:
        spec["middleware"] = list(collector_middleware)
    return create_deep_agent(
        model,
        tools=make_rds_tools(storage),
        system_prompt=RDS_SYSTEM_PROMPT,
        middleware=[RequirementsKeyMiddleware(), *parent_middleware],
        subagents=[spec],
        checkpointer=checkpointer,
    )


def build_split_schema_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    *,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
):
    """The original failure: only the parent declares ``requirements``."""
    return _split_schema_agent(
        model,
        collector,
        StateStorage(),
        parent_middleware=[RequirementsSyncMiddleware(), *middleware],
        checkpointer=checkpointer,
    )


def build_shared_schema_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    *,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
    state_schema: type = RdsAgentState,
):
    """The fix: one state schema (and reducer) for parent and subagent.

    ``state_schema=PlainRequirementsState`` shares the key without a reducer,
    which parallel subagents turn into ``InvalidUpdateError``.
    """
    return assemble_fixed_agent(
        model,
        StateStorage(),
        middleware=middleware,
        subagents=[collector_spec(collector, StateStorage())],
        checkpointer=checkpointer,
        state_schema=state_schema,
    )


def build_cache_fix_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    *,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
) -> TurnCachedAgent:
    """The original write-up's fix: split schema, plus a turn cache shared with the subagent.

    As in the write-up, ``/requirements.json`` mirrors state merged with the
    cache. ``middleware`` is added to the parent and to the collector.
    """
    storage = CachedStateStorage()
    shared = [BatchBarrierMiddleware(), *middleware]
    graph = _split_schema_agent(
        model,
        collector,
        storage,
        parent_middleware=[RequirementsSyncMiddleware(read=storage.read), *shared],
        collector_middleware=shared,
        checkpointer=checkpointer,
    )
    return TurnCachedAgent(graph)


# --- The list hazard: ``operator.add`` and a subagent that returns the whole list ---


def append_unique(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Append only items not already present: safe when a subagent returns the whole list."""
    out = list(left or [])
    out.extend(item for item in right or [] if item not in out)
    return out


class AddNotesState(RdsAgentState):
    """``notes`` with ``operator.add``: a returning subagent duplicates the parent's items."""

    notes: Annotated[NotRequired[list[str]], operator.add]


class UniqueNotesState(RdsAgentState):
    """``notes`` with :func:`append_unique`: the same run keeps one copy of each item."""

    notes: Annotated[NotRequired[list[str]], append_unique]


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Append a note about the requirements."""
    return Command(
        update={
            "notes": [text],
            "messages": [ToolMessage("Noted.", tool_call_id=runtime.tool_call_id)],
        }
    )


def build_notes_agent(state_schema: type) -> Any:
    """A parent that delegates one ``add_note`` to a subagent sharing ``state_schema``."""
    note_taker = ScriptedChatModel(
        script=[reply(tool_call("add_note", text="new")), reply(text="Noted.")], model_name="notes"
    )
    parent = ScriptedChatModel(
        script=[
            reply(tool_call("task", description="Add the note 'new'.", subagent_type="note-taker")),
            reply(text="Done."),
        ],
        model_name="main-agent",
    )
    return create_deep_agent(
        parent,
        tools=[add_note],
        state_schema=state_schema,
        subagents=[
            {
                "name": "note-taker",
                "description": "Adds notes.",
                "system_prompt": "Add the note you are given.",
                "tools": [add_note],
                "model": note_taker,
            }
        ],
    )


# --- Who sees the subagent's fields, and when ---


def who_sees_what(builder: Any, fields: Mapping[str, Any], db_path: str) -> dict[str, int]:
    """Fields visible to the parent: in the same turn, the next turn, after a restart.

    Turn 1 delegates ``fields`` to the collector, then reads them back; turn 2
    reads again; then a brand-new agent over the same SQLite file reads again.
    The last column is what the user sees then: the fields in ``/requirements.json``.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    read = reply(tool_call("get_collected_requirements"))
    config = {"configurable": {"thread_id": "who-sees-what"}}
    row: dict[str, int] = {}
    with SqliteSaver.from_conn_string(db_path) as saver:
        parent = ScriptedChatModel(
            script=[delegate(fields), read, reply(text="ok"), read, reply(text="ok")]
        )
        agent = builder(parent, collector_model(), checkpointer=saver)
        row["same turn"] = _read_count(agent.invoke({"messages": [("user", "collect")]}, config))
        row["next turn"] = _read_count(agent.invoke({"messages": [("user", "again")]}, config))
    with SqliteSaver.from_conn_string(db_path) as saver:
        parent = ScriptedChatModel(script=[read, reply(text="ok")])
        agent = builder(parent, collector_model(), checkpointer=saver)
        state = agent.invoke({"messages": [("user", "and now")]}, config)
        row["after restart"] = _read_count(state)
        row["file after restart"] = len(file_fields(state))
    return row


def _read_count(state: Mapping[str, Any]) -> int:
    for message in reversed(state["messages"]):
        if isinstance(message, ToolMessage) and message.name == "get_collected_requirements":
            return len(json.loads(message.content))
    raise ValueError("no get_collected_requirements reply in this turn")

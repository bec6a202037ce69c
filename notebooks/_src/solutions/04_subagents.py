# %% [markdown]
# # 04 · Subagents: exercise solutions
#
# Each exercise of notebook 04, answered with the lesson's own builders
# (copied below as the lesson left them: `collector_agent` and
# `parent_agent`; the state, the tools and both scripted models come from
# the package, as in the lesson) and code that runs offline and asserts its
# answer.

# %%
import json
import operator
from typing import Annotated, NotRequired

from deepagents import create_deep_agent
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    RequirementsState,
    collector_model,
    store_requirement,
    user_turn,
)
from agentstate.lessons.subagents import get_collected_requirements, parent_script
from agentstate.models import PolicyChatModel, ScriptedChatModel, reply, tool_call


def collector_agent(schema=AgentState, model=None):
    return create_agent(model or collector_model(), [store_requirement], state_schema=schema)


def parent_agent(collector, schema=RequirementsState, model=None, **options):
    subagent = {"name": "requirements-collector", "description": "Collects RDS requirements."}
    model, tools = model or parent_script(), [get_collected_requirements]
    subagents = [{**subagent, "runnable": collector}]
    return create_deep_agent(model, tools, subagents=subagents, state_schema=schema, **options)


# %% [markdown]
# ## Exercise 1
# The collector gets `PlainRequirementsState` (the key without the reducer),
# the parent keeps `RequirementsState`. Two parent scripts: two `task` calls
# of one field each (in one reply, so they run in parallel), or one `task`
# of two fields.

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.rds import PlainRequirementsState

scripts = {
    "two tasks, one field each": parent_script({"engine": "postgres"}, {"username": "dbadmin"}),
    "one task, two fields": parent_script({"engine": "postgres", "username": "dbadmin"}),
}
outcome = {}
for name, script in scripts.items():
    collector = collector_agent(PlainRequirementsState, collector_model(tasks=2))
    agent = parent_agent(collector, model=script)
    try:
        outcome[name] = sorted(agent.invoke(user_turn())["requirements"])
    except InvalidUpdateError:
        outcome[name] = "InvalidUpdateError"
assert outcome == {
    "two tasks, one field each": ["engine", "username"],
    "one task, two fields": "InvalidUpdateError",
}
Table({"parent script": name, "requirements": result} for name, result in outcome.items())

# %% [markdown]
# Parallel *subagents* are fine: each collector writes its plain key once,
# and the parent's reducer merges what the two return. What fails is
# parallel writes *inside* one collector: two `store_requirement` calls in
# one of its replies write its plain key twice in one step. Each graph
# needs the reducer where its own parallel writes land.

# %% [markdown]
# ## Exercise 2
# A collector that also plans: its model calls a `plan` tool that writes
# `todos` (the key of deepagents' to-do list) beside the stores, and its
# schema declares `todos`. Its model, `collect`, is the package's
# collector written out, plus the `plan` call.


# %%
class PlanningRequirementsState(RequirementsState):
    todos: NotRequired[list]


@tool
def plan(step: str, runtime: ToolRuntime) -> Command:
    """Add a step to the todo list."""
    done = ToolMessage("Planned.", tool_call_id=runtime.tool_call_id)
    return Command(update={"todos": [{"content": step, "status": "pending"}], "messages": [done]})


def collect(messages):
    """The collector's reply: store each field of the task, then report."""
    if isinstance(messages[-1], HumanMessage):
        fields = json.loads(messages[-1].text)
        return reply(
            *(tool_call("store_requirement", field_name=k, value=v) for k, v in fields.items())
        )
    stored = [m for m in messages if isinstance(m, ToolMessage) and m.status != "error"]
    return reply(text=f"Stored {len(stored)} field(s).")


def plan_and_collect(messages):
    """The collector's replies, with a `plan` call in the same reply as the stores."""
    answer = collect(messages)
    if answer.tool_calls:
        answer.tool_calls.insert(0, tool_call("plan", step="collect the fields"))
    return answer


planner = create_agent(
    PolicyChatModel(policy=plan_and_collect),
    [store_requirement, plan],
    state_schema=PlanningRequirementsState,
)
alone = planner.invoke({"messages": [HumanMessage(json.dumps(POSTGRES_FIELDS))]})
state = parent_agent(planner, PlanningRequirementsState).invoke(user_turn())
assert len(alone["todos"]) == 1 and state.get("todos") is None
assert state["requirements"] == POSTGRES_FIELDS
Table(
    [
        {
            "key": "todos",
            "in the planner's own state": alone["todos"],
            "parent": state.get("todos"),
        },
        {
            "key": "requirements",
            "in the planner's own state": len(alone["requirements"]),
            "parent": len(state["requirements"]),
        },
    ]
)

# %% [markdown]
# The todos stay in the subagent although its schema declares them, while
# `requirements` comes up. `task` leaves a few keys out of what it returns,
# `todos` and `messages` among them (deepagents keeps the parent's own todo
# list apart from its subagents'). Declaring a key on both sides is
# necessary, not always sufficient.

# %% [markdown]
# ## Exercise 3
# Notes become dicts with an `id`. A reducer merges by id: a later item
# replaces an earlier one with the same id, a new id is appended.


# %%
def merge_by_id(left, right):
    """Items of ``right`` replace items of ``left`` with the same id; new ids are appended."""
    merged = {item["id"]: item for item in left or []}
    merged.update({item["id"]: item for item in right or []})
    return list(merged.values())


class ItemNotesState(RequirementsState):
    notes: Annotated[NotRequired[list], merge_by_id]


@tool
def add_item(item_id: str, text: str, runtime: ToolRuntime) -> Command:
    """Add or replace a note with an id."""
    done = ToolMessage("Noted.", tool_call_id=runtime.tool_call_id)
    return Command(update={"notes": [{"id": item_id, "text": text}], "messages": [done]})


def notes_after(schema, *calls):
    """The lesson's note-taker and parent over ``schema``; the parent starts with note ``pre``."""
    note_taker = create_agent(
        ScriptedChatModel(script=[reply(*calls), reply(text="Noted.")]),
        [add_item],
        state_schema=schema,
    )
    delegate = tool_call("task", subagent_type="note-taker", description="Take notes")
    script = [reply(delegate), reply(text="Done.")]
    notes_parent = create_deep_agent(
        ScriptedChatModel(script=script),
        subagents=[{"name": "note-taker", "description": "Adds notes.", "runnable": note_taker}],
        state_schema=schema,
    )
    pre = {"id": "pre", "text": "for orders"}
    return notes_parent.invoke({**user_turn(), "notes": [pre]})["notes"]


class AddItemsState(RequirementsState):
    notes: Annotated[NotRequired[list], operator.add]


new = tool_call("add_item", item_id="new", text="v2")
update = tool_call("add_item", item_id="pre", text="for orders and invoices")
runs = {
    "operator.add, add new": notes_after(AddItemsState, new),
    "merge_by_id, add new": notes_after(ItemNotesState, new),
    "merge_by_id, update pre": notes_after(ItemNotesState, update),
}
assert [n["id"] for n in runs["operator.add, add new"]] == ["pre", "pre", "new"]
assert [n["id"] for n in runs["merge_by_id, add new"]] == ["pre", "new"]
assert runs["merge_by_id, update pre"] == [{"id": "pre", "text": "for orders and invoices"}]
Table(
    {"run": name, "parent's notes": [f"{n['id']}: {n['text']}" for n in notes]}
    for name, notes in runs.items()
)

# %% [markdown]
# The note-taker returned its whole list, `pre` included. `operator.add`
# appends it to the parent's `pre` again; merging by id keeps one `pre`, and
# unlike a reducer that only skips items it has seen, it lets a subagent
# update a note in place by its id.

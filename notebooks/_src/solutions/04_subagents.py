# %% [markdown]
# # 04 · Subagents: exercise solutions
#
# Each exercise of notebook 04, answered with code that runs offline and
# asserts its answer.

# %% [markdown]
# ## Exercise 1
# Give the collector its own schema that declares `requirements` *without*
# the reducer, and the parent the one with it. Which parallel runs fail?
#
# A subagent whose graph you compile yourself (a `CompiledSubAgent`: name,
# description, runnable) does not inherit the parent's schema, so it can
# have its own:

# %%
from deepagents.middleware.subagents import create_sub_agent
from langgraph.errors import InvalidUpdateError

from agentstate.fixtures import collector_model, parent_model, user_turn
from agentstate.rds import (
    PlainRequirementsState,
    RdsAgentState,
    StateStorage,
    assemble_rds_agent,
    collector_spec,
)


# %%
def run(*field_sets):
    """Parent with the reducer, collector with the plain key; the fields kept, or the error."""
    spec = collector_spec(collector_model(len(field_sets)), StateStorage())
    plain = create_sub_agent(spec, state_schema=PlainRequirementsState)
    compiled = {"name": spec["name"], "description": spec["description"], "runnable": plain}
    agent = assemble_rds_agent(
        parent_model(*field_sets), StateStorage(), state_schema=RdsAgentState, subagents=[compiled]
    )
    try:
        return sorted(agent.invoke(user_turn())["requirements"])
    except InvalidUpdateError:
        return "InvalidUpdateError"


# %%
runs = {
    "two tasks, one field each": run({"engine": "postgres"}, {"username": "dbadmin"}),
    "one task, two fields": run({"engine": "postgres", "username": "dbadmin"}),
}
assert runs == {
    "two tasks, one field each": ["engine", "username"],
    "one task, two fields": "InvalidUpdateError",
}
runs

# %% [markdown]
# Parallel *subagents* are fine: their results are merged by the parent's
# reducer. What fails is parallel writes *inside* the collector: two
# `store_requirement` calls in one of its replies write its plain key twice in
# one step. Each graph needs the reducer where its own parallel writes land.

# %% [markdown]
# ## Exercise 2
# Give the collector a tool that writes `todos` (the key of the todo list),
# and declare `todos` on it with `share_state`. Do its todos reach the
# parent's state? Compare with `requirements`.
#
# The collector gets a `plan` tool that writes `todos`, and `share_state`
# declares `todos` on it (with langchain's `PlanningState`, the schema of the
# todo list), so the write is not simply dropped as undeclared:

# %%
from langchain.agents.middleware.todo import PlanningState
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.core import share_state, undeclared_keys


@tool
def plan(step: str, runtime: ToolRuntime) -> Command:
    """Add a step to the todo list."""
    return Command(
        update={
            "todos": [{"content": step, "status": "pending"}],
            "messages": [ToolMessage("Planned.", tool_call_id=runtime.tool_call_id)],
        }
    )


# %%
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import COLLECTOR


def planner_step(messages):
    if isinstance(messages[-1], HumanMessage):
        return reply(
            tool_call("plan", step="collect the engine"),
            tool_call("store_requirement", field_name="engine", value="postgres"),
        )
    return reply(text="Planned and stored.")


spec = collector_spec(
    ScriptedChatModel(script=[planner_step] * 2, model_name=COLLECTOR), StateStorage()
)
planner = share_state([{**spec, "tools": [*spec["tools"], plan]}], PlanningState)[0]
assert (
    undeclared_keys(
        create_sub_agent(planner, state_schema=RdsAgentState), ["todos", "requirements"]
    )
    == []
)

# %%
from agentstate.rds import fixed_middleware
from agentstate.tracing import CommandRecorder

recorder = CommandRecorder(["task"])
state = assemble_rds_agent(
    parent_model({"engine": "postgres"}),
    StateStorage(),
    state_schema=RdsAgentState,
    middleware=[*fixed_middleware(), recorder],
    subagents=[planner],
).invoke(user_turn())
assert state.get("todos") is None and state["requirements"] == {"engine": "postgres"}
assert recorder.updates == [{"tool": "task", "update keys": ["messages", "requirements"]}]
{"parent's todos": state.get("todos"), "task update keys": recorder.updates[0]["update keys"]}

# %% [markdown]
# The todos do not reach the parent although the collector declares them:
# the `task` tool leaves a few keys out of what it returns (`todos` and
# `messages` among them), while a key of our own, `requirements`, comes back.
# Sharing the schema is necessary, not always sufficient.

# %% [markdown]
# ## Exercise 3
# Write a reducer for a list of dicts with an `id` field that merges by id
# (a later item with the same id replaces the earlier one), and show that a
# returning subagent does not double the parent's items.


# %%
def merge_by_id(left, right):
    """Items of ``right`` replace items of ``left`` with the same id; new ids are appended."""
    merged = {item["id"]: item for item in left or []}
    merged.update({item["id"]: item for item in right or []})
    return list(merged.values())


pre = {"id": "pre", "text": "for orders"}
assert merge_by_id([pre], [pre, {"id": "new", "text": "v2"}]) == [pre, {"id": "new", "text": "v2"}]
assert merge_by_id([pre], [{"id": "pre", "text": "changed"}]) == [{"id": "pre", "text": "changed"}]

# %% [markdown]
# Now through a real parent and subagent: the parent starts with one note,
# the subagent adds one and returns its whole list.

# %%
from typing import Annotated, NotRequired

from deepagents import create_deep_agent


class ItemNotesState(RdsAgentState):
    notes: Annotated[NotRequired[list[dict]], merge_by_id]


@tool
def add_item(item_id: str, text: str, runtime: ToolRuntime) -> Command:
    """Add a note with an id."""
    return Command(
        update={
            "notes": [{"id": item_id, "text": text}],
            "messages": [ToolMessage("Noted.", tool_call_id=runtime.tool_call_id)],
        }
    )


# %%
def run_notes(schema):
    """The parent starts with ``pre``, delegates one ``add_item``; the parent's notes after."""
    note_taker = ScriptedChatModel(
        script=[reply(tool_call("add_item", item_id="new", text="v2")), reply(text="Noted.")]
    )
    parent = ScriptedChatModel(
        script=[
            reply(tool_call("task", description="Add note new.", subagent_type="note-taker")),
            reply(text="Done."),
        ]
    )
    agent = create_deep_agent(
        parent,
        tools=[add_item],
        state_schema=schema,
        subagents=[
            {
                "name": "note-taker",
                "description": "Adds notes.",
                "system_prompt": "Add the note.",
                "tools": [add_item],
                "model": note_taker,
            }
        ],
    )
    return agent.invoke({"messages": [("user", "note it")], "notes": [pre]})["notes"]


# %%
import operator


class AddItemsState(RdsAgentState):
    notes: Annotated[NotRequired[list[dict]], operator.add]


notes = {"merge_by_id": run_notes(ItemNotesState), "operator.add": run_notes(AddItemsState)}
assert notes["merge_by_id"] == [pre, {"id": "new", "text": "v2"}]
assert notes["operator.add"] == [pre, pre, {"id": "new", "text": "v2"}]
{name: [item["id"] for item in items] for name, items in notes.items()}

# %% [markdown]
# The subagent returned its whole list `[pre, new]` (`operator.add` shows it:
# `pre` twice); merging by id keeps one `pre`. Unlike
# `append_unique`, it also lets an item be updated in place by its id.

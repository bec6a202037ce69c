# %% [markdown]
# # 02 · The reducer: exercise solutions
#
# Each exercise of notebook 02, answered with the lesson's own code:
# `store_requirement`, `merge_fields` and `RequirementsState` as the lesson
# has them, `one_reply` (the lesson's `one_batch_model`, written out) and
# `agent_with`. Everything runs offline and asserts its answer.

# %%
import copy
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.lessons.fixtures import POSTGRES_FIELDS
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import ToolTimeline, draw_superstep

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one collected requirement."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


def merge_fields(current: dict | None, write: dict | None) -> dict:
    """Field-level merge: the write's fields win, nothing else is lost."""
    return {**(current or {}), **(write or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


def one_reply(fields: dict) -> ScriptedChatModel:
    calls = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    return ScriptedChatModel(script=[reply(*calls), reply(text="Stored.")])


def agent_with(schema: type, fields: dict = POSTGRES_FIELDS, **options):
    return create_agent(
        one_reply(fields), tools=[store_requirement], state_schema=schema, **options
    )


# %% [markdown]
# ## Exercise 1
# `merge_fields` with one change: a field whose written value is `None` is
# left out of the new dict.


# %%
def merge_or_delete(current: dict | None, write: dict | None) -> dict:
    merged = {**(current or {}), **(write or {})}
    return {field: value for field, value in merged.items() if value is not None}


current, write = {"engine": "postgres", "username": "dbadmin"}, {"username": None}
before = copy.deepcopy((current, write))
result = merge_or_delete(current, write)
assert result == {"engine": "postgres"} and (current, write) == before
{"result": result, "current after the call": current, "write after the call": write}

# %% [markdown]
# Called by hand it deletes `username` and leaves both inputs as they were:
# it builds a new dict instead of popping from `current`. The same reducer on
# the key, with a second reply that stores `username=None`:


# %%
class DeletingState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_or_delete]


model = ScriptedChatModel(
    script=[
        reply(*(tool_call("store_requirement", field_name=f, value=v) for f, v in current.items())),
        reply(tool_call("store_requirement", field_name="username", value=None)),
        reply(text="Done."),
    ]
)
out = create_agent(model, tools=[store_requirement], state_schema=DeletingState).invoke(TURN)
assert out["requirements"] == {"engine": "postgres"}
out["requirements"]

# %% [markdown]
# ## Exercise 2
# One reply with two `store_requirement` calls for `engine`, drawn:

# %%
timeline = ToolTimeline()
twice = ScriptedChatModel(
    script=[
        reply(
            tool_call("store_requirement", field_name="engine", value="postgres"),
            tool_call("store_requirement", field_name="engine", value="mysql"),
        ),
        reply(text="Stored."),
    ]
)
state = create_agent(
    twice, tools=[store_requirement], state_schema=RequirementsState, middleware=[timeline]
).invoke(TURN)
assert state["requirements"] == {"engine": "mysql"}
draw_superstep(timeline, key="requirements", reducer=merge_fields, title="engine stored twice")

# %% [markdown]
# `merge_fields` keeps `mysql`, the value of the **later call in the
# reply**, on every run: LangGraph folds the step's writes in call order,
# and in `{**current, **write}` the later write's field wins. Both writes
# were "kept" in the sense that neither raised, but the first is overwritten.

# %% [markdown]
# ## Exercise 3
# The fixed state as a deep agent's state: the same key and reducer on
# `deepagents.DeepAgentState`.

# %%
from deepagents import DeepAgentState, create_deep_agent


class DeepRequirementsState(DeepAgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


timeline = ToolTimeline()
deep = create_deep_agent(
    one_reply(POSTGRES_FIELDS),
    tools=[store_requirement],
    state_schema=DeepRequirementsState,
    middleware=[timeline],
)
deep_state = deep.invoke(TURN)
plain_timeline = ToolTimeline()
agent_with(RequirementsState, middleware=[plain_timeline]).invoke(TURN)
steps = {
    "create_agent": sorted({e.step for e in plain_timeline.events}),
    "create_deep_agent": sorted({e.step for e in timeline.events}),
}
assert deep_state["requirements"] == POSTGRES_FIELDS and steps["create_deep_agent"] == [3]
steps

# %% [markdown]
# The five fields still merge. The tools now run in super-step 3, not 2:
# deepagents puts a node of its own (a middleware's `before_agent` hook)
# before the model, which takes a step of its own. The reducer does not
# care which step it is: it folds that step's writes in call order.

# %% [markdown]
# ## Exercise 4
# The lesson's plain key, with `engine` stored in the first reply and
# `username` in the next. `timeline` records the super-step of each call:


# %%
class PlainState(AgentState):
    requirements: NotRequired[dict[str, Any]]


two_replies = ScriptedChatModel(
    script=[
        reply(tool_call("store_requirement", field_name="engine", value="postgres")),
        reply(tool_call("store_requirement", field_name="username", value="dbadmin")),
        reply(text="Stored."),
    ]
)
timeline = ToolTimeline()
plain = create_agent(
    two_replies, tools=[store_requirement], state_schema=PlainState, middleware=[timeline]
).invoke(TURN)
assert plain["requirements"] == {"username": "dbadmin"}
{"requirements": plain["requirements"], "super-steps": sorted({e.step for e in timeline.events})}

# %% [markdown]
# Only `username` is left. Each call ran in a super-step of its own, so the
# `LastValue` channel took one value per step without an error, and the
# second value replaced the whole dict. A plain key loses writes across
# replies too, silently; `merge_fields` would keep both.

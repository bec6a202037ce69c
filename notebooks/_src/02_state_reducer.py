# %% [markdown]
# # 02 · The reducer: requirements that merge field by field
#
# Stage 01 ended on a measured loss: five parallel `store_requirement` calls,
# one field left in `/requirements.json`. The obvious next move is to keep the
# requirements in agent state instead of a file. Done naively, with a plain
# `dict` key, the whole turn fails loudly. Done with a **reducer**, a small
# function that tells LangGraph how to combine several writes to one key,
# every field is kept, five or five hundred at once. This notebook writes
# that fix whole, in a plain `create_agent` agent, and proves it.

# %% [markdown]
# ## Recap
# In [stage 01](01_file_based_storage.ipynb) the five calls of one reply ran
# in one super-step; each read the file from before the step, and the `files`
# reducer kept the write of the last call in the message. One file per field
# kept every field. The state tables below read as explained
# [there](01_file_based_storage.ipynb#super-step-table).
#
# ## Goals
# - See a plain `requirements: dict` key raise `InvalidUpdateError` when five
#   tools write it in one step, and silently replace itself across steps.
# - Look inside: the channel LangGraph builds for a plain key and for an
#   `Annotated` one.
# - Write the fix whole: a field-merge reducer on the key; see why it must be
#   pure.
# - Compare it with the package's stage 02 agent and prove it: 500 of 500.

# %% [markdown]
# ## 1. Reproduce: a plain dict key
# The tool writes one field to the `requirements` key with a `Command`; the
# state schema declares that key as a plain dict. Both written whole:

# %%
from typing import Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one collected requirement."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


class PlainState(AgentState):
    requirements: NotRequired[dict[str, Any]]


# %% [markdown]
# The scripted model answers with one message holding five
# `store_requirement` calls, as in stage 01:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.fixtures import POSTGRES_FIELDS, one_batch_model, user_turn
from agentstate.tracing import ToolTimeline

timeline = ToolTimeline()  # records each tool call (stage 01)
broken_agent = create_agent(
    one_batch_model(POSTGRES_FIELDS),
    tools=[store_requirement],
    state_schema=PlainState,
    middleware=[timeline],
)
try:
    broken_agent.invoke(user_turn())
except InvalidUpdateError as err:
    error = err
str(error).splitlines()[0]

# %% [markdown]
# The error comes **after** all five tools ran, when LangGraph applies the
# step's writes (`apply_writes` is in the traceback). So it never reaches the
# model as a tool reply: the whole invoke fails.

# %%
import traceback

from agentstate.display import Table

frames = [f.name for f in traceback.extract_tb(error.__traceback__)]
assert "apply_writes" in frames and len(timeline.events) == 5
Table([{"tools that ran": len(timeline.events), "raised in": "apply_writes"}])

# %% [markdown]
# Across two steps it is worse: no error at all, and the second write
# replaces the whole dict.

# %%
from agentstate.fixtures import one_call_per_step_model

two_steps = create_agent(
    one_call_per_step_model({"engine": "postgres", "username": "dbadmin"}),
    tools=[store_requirement],
    state_schema=PlainState,
).invoke(user_turn())
assert two_steps["requirements"] == {"username": "dbadmin"}
two_steps["requirements"]

# %% [markdown]
# And with no `requirements` key in the schema at all (the default
# `AgentState`)? No error either, and nothing kept: a write to a key the graph
# does not declare is dropped silently, while every tool says "Stored".

# %%
from agentstate.tracing import tool_replies

undeclared = create_agent(one_batch_model(POSTGRES_FIELDS), tools=[store_requirement]).invoke(
    user_turn()
)
assert "requirements" not in undeclared
kept = len(undeclared.get("requirements", {}))
Table([{"tools that said Stored": len(tool_replies(undeclared)), "requirements in state": kept}])

# %% [markdown]
# ## 2. Look inside: one value per step
# LangGraph keeps each state key in a **channel**. A plain key gets a
# `LastValue` channel, which accepts one value per super-step; a key declared
# `Annotated[type, reducer]` gets a `BinaryOperatorAggregate`, which folds
# every write of the step through the reducer, in call order:

# %%
from typing import Annotated


def replace_whole(left: dict | None, right: dict | None) -> dict:
    return right


class ReplaceState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], replace_whole]


def channel_of(schema: type) -> str:
    graph = create_agent(one_batch_model({}), tools=[store_requirement], state_schema=schema)
    return type(graph.channels["requirements"]).__name__


channels = Table(
    {"schema": s.__name__, "channel": channel_of(s)} for s in (PlainState, ReplaceState)
)
assert channels.column("channel") == ["LastValue", "BinaryOperatorAggregate"]
channels

# %% [markdown]
# An `Annotated` key alone is not enough: `replace_whole` keeps the newest
# write, so the five writes fold to the last call's field, the loss of stage
# 01 again, now without an error:

# %%
replaced = create_agent(
    one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], state_schema=ReplaceState
).invoke(user_turn())
assert replaced["requirements"] == {"username": "dbadmin"}
replaced["requirements"]

# %% [markdown]
# ## 3. The fix: a reducer that merges
# The reducer gets the key's current value and one write, and returns a
# **new** dict with the write's fields on top. The state class puts it on the
# key. That is the whole fix; the tool does not change.


# %%
def merge_fields(left: dict | None, right: dict | None) -> dict:
    """Field-level merge: keys of ``right`` win, nothing else is lost."""
    return {**(left or {}), **(right or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


fixed_agent = create_agent(
    one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], state_schema=RequirementsState
)
fixed = fixed_agent.invoke(user_turn())
assert fixed["requirements"] == POSTGRES_FIELDS
fixed["requirements"]

# %% [markdown]
# Why "new dict" matters: LangGraph **may call a reducer more than once per
# write**. Each tool task, once finished, decides where the graph goes next,
# and that edge reads state with the task's own write applied on a throwaway
# copy of the channels; the real state is updated once the step ends. A
# counting wrapper shows it on this run:

# %%
from agentstate.fixtures import ReducerProbe

probe = ReducerProbe(merge_fields)  # calls merge_fields and records where each call came from


class ProbedState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], probe]


create_agent(
    one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], state_schema=ProbedState
).invoke(user_turn())
calls = Table({"called from": site, "calls": n} for site, n in probe.sites().items())
assert sorted(calls.column("calls")) == [5, 5]
calls

# %% [markdown]
# Ten calls for five writes. Since LangGraph may call it on copies that
# share the current value with the live state, a reducer must be **pure**:
# return a new value and never change `left` or `right`. A reducer that
# updates `left` in place leaks writes into the live state before the step
# ends (the going-further notebook shows a reader seeing them).
#
# ## 4. The fix in the package
# The package's stage 02 agent, `build_reducer_agent`, uses the same reducer
# (`agentstate.core.merge_fields`) under the six RDS tools; what it adds is a
# check of every value against the `AwsRdsInstance` spec, secret redaction and
# `/requirements.json` rendered from state after each turn (going further).
# On the same reply both keep the same requirements:

# %%
from agentstate.rds import build_reducer_agent

package = build_reducer_agent(one_batch_model(POSTGRES_FIELDS)).invoke(user_turn())
assert package["requirements"] == fixed["requirements"] == POSTGRES_FIELDS
Table(
    [
        {"agent": "teaching", "fields": len(fixed["requirements"])},
        {"agent": "package", "fields": len(package["requirements"])},
    ]
)

# %% [markdown]
# ## 5. Look inside: the state after each super-step
# The teaching agent with a checkpointer, read as in
# [stage 01](01_file_based_storage.ipynb#super-step-table); the last column
# counts the fields in state.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.fixtures import graph_steps
from agentstate.tracing import state_by_step

agent = create_agent(
    one_batch_model(POSTGRES_FIELDS),
    tools=[store_requirement],
    state_schema=RequirementsState,
    checkpointer=InMemorySaver(),
)
config = {"configurable": {"thread_id": "stage-02"}}
agent.invoke(user_turn(), config)
history = Table(
    state_by_step(agent, config, lambda v: {"requirements": len(v.get("requirements", {}))})
)
steps = graph_steps(history.rows)
assert steps[1]["next"] == "tools x5" and steps[2]["requirements"] == 5
history

# %% [markdown]
# The five fields land together when the tools' step (2) is applied, and the
# model's next step can read them all. (Without deepagents' hooks this graph
# has fewer steps than stage 01's.)
#
# ## 6. Prove: no loss at scale, and across turns
# 500 `store_requirement` calls in one message (distinct metadata labels,
# `labels.k000` ... `labels.k499`), one super-step:

# %%
from agentstate.fixtures import label_fields

big = create_agent(
    one_batch_model(label_fields(500)), tools=[store_requirement], state_schema=RequirementsState
).invoke(user_turn())
assert big["requirements"] == label_fields(500)
Table([{"calls in one reply": 500, "fields in state": len(big["requirements"])}])

# %% [markdown]
# With a checkpointer the requirements live on the thread: a second turn adds
# to the first, through the same reducer.

# %%
from agentstate.fixtures import store_calls
from agentstate.models import ScriptedChatModel, reply

two_turns = ScriptedChatModel(
    script=[
        reply(*store_calls({"engine": "postgres", "engine_version": "15.5"})),
        reply(text="Noted."),
        reply(*store_calls({"instance_class": "db.t3.micro"})),
        reply(text="Noted."),
    ]
)
agent = create_agent(
    two_turns,
    tools=[store_requirement],
    state_schema=RequirementsState,
    checkpointer=InMemorySaver(),
)
config = {"configurable": {"thread_id": "customer-42"}}
agent.invoke(user_turn("Postgres 15.5 please"), config)
turn2 = agent.invoke(user_turn("Make it a db.t3.micro"), config)
assert turn2["requirements"] == {
    "engine": "postgres",
    "engine_version": "15.5",
    "instance_class": "db.t3.micro",
}
sorted(turn2["requirements"])

# %% [markdown]
# The doctor reads an agent's tools and state schema without running it. It
# names the broken agent's hazard and passes the fixed one:

# %%
from agentstate.doctor import diagnose

broken, fixed_report = diagnose(broken_agent), diagnose(fixed_agent)
assert broken.codes() == ["unreduced-parallel-write"] and fixed_report.errors == []
broken

# %% [markdown]
# ## A knob: parallel calls and the reducer
# Run the cells above first. Choose how many `store_requirement` calls one
# reply makes and which schema the key has; the table shows what is kept.

# %%
SCHEMAS = {
    "plain dict": PlainState,
    "replace_whole": ReplaceState,
    "merge_fields": RequirementsState,
}


def kept_with(parallel_calls: int, reducer: str) -> Table:
    agent = create_agent(
        one_batch_model(label_fields(parallel_calls)),
        tools=[store_requirement],
        state_schema=SCHEMAS[reducer],
    )
    try:
        kept = len(agent.invoke(user_turn())["requirements"])
    except InvalidUpdateError:
        kept = "InvalidUpdateError"
    return Table([{"reducer": reducer, "parallel calls": parallel_calls, "fields kept": kept}])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

WIDE = {"description_width": "initial"}
knob_widget = widgets.interact(
    kept_with,
    parallel_calls=widgets.IntSlider(
        value=5, min=1, max=50, description="parallel calls", style=WIDE
    ),
    reducer=widgets.Dropdown(
        options=list(SCHEMAS), value="merge_fields", description="reducer", style=WIDE
    ),
)

# %% [markdown]
# For fixed settings: a plain key survives one call and raises from two on;
# `replace_whole` keeps one field; `merge_fields` keeps them all.

# %%
knob = Table(kept_with(n, r).rows[0] for r in SCHEMAS for n in (1, 2, 50))
expected = [1, "InvalidUpdateError", "InvalidUpdateError", 1, 1, 1, 1, 2, 50]
assert knob.column("fields kept") == expected
knob

# %% [markdown]
# ## Summary
# - A plain dict key takes one write per super-step: five parallel writes
#   raise `InvalidUpdateError` after the tools ran, in `apply_writes`, so the
#   whole invoke fails; across steps the last write silently replaces the dict;
#   with no key declared, the writes are dropped silently.
# - The fix is the key's reducer: `Annotated[NotRequired[dict], merge_fields]`
#   folds every write of the step, in call order. A reducer that only replaces
#   keeps one field.
# - LangGraph may call a reducer more than once per write (here 10 calls for
#   5 writes, 5 of them on throwaway copies), so a reducer must be pure.
# - The teaching agent and the package's `build_reducer_agent` keep the same
#   five fields; 500 parallel calls keep 500; a second turn adds to the first.
# - Going further:
#   [reducer purity, file sync and secrets](going_further/02_file_sync_and_secrets.ipynb)
#   shows an impure reducer leaking writes, bad input refused, the file
#   rendered from state, and the password kept out of state, checkpoints and
#   streams.
#
# ## Exercises
# 1. Write a reducer that deletes a field when the write's value is `None`,
#    and check that it leaves its inputs unchanged.
# 2. Store the same field twice in one reply with different values. Which
#    value wins, and why is that deterministic?
# 3. Give `RequirementsState` to a `create_deep_agent` (subclass
#    `deepagents.DeepAgentState` instead of `AgentState`). Do the five fields
#    still merge? Which extra steps appear in the state table?

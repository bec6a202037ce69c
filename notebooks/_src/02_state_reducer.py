# %% [markdown]
# # 02 · The reducer: requirements that merge field by field
#
# The agent's developers answered lesson 01's loss by moving the
# requirements out of the file into a state key with a reducer. Their
# design says that with it "All 5 field updates are preserved and merged
# correctly" ([where this comes from](../README.md#where-this-comes-from)).
# This lesson tests that claim with a plain agent written here.

# %% [markdown]
# Which releases this happens in:
# [plain-key-parallel-write](../docs/hazards-by-version.md#plain-key-parallel-write),
# [replace-reducer](../docs/hazards-by-version.md#replace-reducer),
# [undeclared-key](../docs/hazards-by-version.md#undeclared-key).

# %% [markdown]
# ## Recap
# In [lesson 01](01_file_based_storage.ipynb) the five calls of one reply
# ran in one [super-step](../docs/glossary.md#super-step). Each read the
# state from before the step; the `files` reducer kept the last call's write.

# %% [markdown]
# ## Goals
# - See a plain `requirements: dict` key fail when five tools write it in one
#   step, and an undeclared key lose the writes silently.
# - See a reducer that replaces and one that merges, drawn one above the other.
# - Write the fix, a field-merge reducer, and see why it must be pure.

# %% [markdown]
# ## 1. Reproduce: a plain dict key
# The tool writes one field to the `requirements` key with a `Command`; it
# reads nothing. The **state schema** is the class that declares the
# agent's state keys. Here `requirements` is a plain dict:

# %%
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.messages import ToolMessage
from langchain.tools import ToolRuntime, tool
from langgraph.types import Command


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one collected requirement."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


class PlainState(AgentState):
    requirements: NotRequired[dict[str, Any]]


# %% [markdown]
# The scripted model (it replays fixed replies, offline) stores every field
# in one reply, as in lesson 01:

# %%
from agentstate.lessons.fixtures import POSTGRES_FIELDS, label_fields, one_batch_model

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


def agent_with(schema: type, fields: dict = POSTGRES_FIELDS, **options):
    model = one_batch_model(fields)  # first reply: one store_requirement call per field
    return create_agent(model, tools=[store_requirement], state_schema=schema, **options)


# %% [markdown]
# With the plain key, the whole invoke fails. The error comes **after** the
# five tools ran, when LangGraph applies the step's writes, so the model
# never sees it:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.tracing import ToolTimeline, draw_superstep

timeline = ToolTimeline()
try:
    agent_with(PlainState, middleware=[timeline]).invoke(TURN)
except InvalidUpdateError as error:
    print(str(error).splitlines()[0])
print("tools that ran first:", len(timeline.events))

# %% [markdown]
# With no `requirements` key declared at all (the default `AgentState`),
# there is no error: LangGraph drops the writes while every tool says
# "Stored".

# %%
undeclared = agent_with(AgentState).invoke(TURN)
print("the tools replied:", [m.text for m in undeclared["messages"] if m.type == "tool"])
print("state keys after the turn:", sorted(undeclared))

# %% [markdown]
# ## 2. Look inside: one value per step
# The graph `create_agent` builds (`agent.get_graph().draw_mermaid()` prints
# it; here with words on its edges). Unlike lesson 01's deep agent, no node
# runs before the model, so the tools run in super-step 2:
#
# ```mermaid
# flowchart LR
#     start([user message]) --> model["model<br/>steps 1 and 3"]
#     model -- "a reply with 5 tool calls" --> tools["tools: step 2<br/>5 tasks, one super-step"]
#     tools -- "their writes, applied when the step ends" --> model
#     model -- "a reply without tool calls" --> done([answer])
# ```

# %% [markdown]
# LangGraph keeps each state key in a **channel**. The channel a key gets
# decides what five writes in one step do:
#
# ```mermaid
# flowchart LR
#     w["5 writes<br/>in one step"]
#     plain["requirements: dict<br/>LastValue channel:<br/>one value a step"]
#     red["Annotated[dict, reducer]<br/>BinaryOperatorAggregate"]
#     fold["reducer(current, write)<br/>per write, in call order"]
#     w --> plain --> err["InvalidUpdateError"]
#     w --> red --> fold --> kept["one folded value"]
# ```


# %%
def replace_whole(current: dict | None, write: dict | None) -> dict | None:
    return write


class ReplaceState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], replace_whole]


for schema in (PlainState, ReplaceState):
    print(schema.__name__, type(agent_with(schema).channels["requirements"]).__name__)

# %% [markdown]
# ## 3. The fix: a reducer that merges
# The reducer gets the key's current value and one write, and returns a
# **new** dict with the write's fields on top. The state class puts it on
# the key. That is the whole fix: the tool does not change.


# %%
def merge_fields(current: dict | None, write: dict | None) -> dict:
    return {**(current or {}), **(write or {})}  # a new dict: the write's fields on top


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


merge_timeline = ToolTimeline()
fixed_agent = agent_with(RequirementsState, middleware=[merge_timeline])
fixed_agent.invoke(TURN)["requirements"]

# %% [markdown]
# An `Annotated` key alone is not enough. Both reducers on the same reply,
# drawn as state flow. `replace_whole` folds the five writes to the last
# call's field: lesson 01's loss again, without an error.

# %%
replace_timeline = ToolTimeline()
agent_with(ReplaceState, middleware=[replace_timeline]).invoke(TURN)
runs = {"replace_whole": replace_timeline, "merge_fields": merge_timeline}
reducers = {"replace_whole": replace_whole, "merge_fields": merge_fields}
draw_superstep(runs, key="requirements", reducer=reducers)

# %% [markdown]
# Why a **new** dict? While the step still runs, LangGraph also calls the
# reducer once per finished write, to choose the next node. Those early
# calls get the same `current` dict the other tools are reading.

# %% [markdown]
# So a reducer that changes `current` in place shows a write to a tool that
# should not see it yet. `reader_saw(reducer)` builds the agent above
# again (`create_agent`, `store_requirement`, that reducer on
# `requirements`): one reply stores the five fields and, in the same step,
# calls a reader tool, `count_requirements`, held until the five early
# calls happened. It returns the reader's count:

# %%
from agentstate.lessons.purity import reader_saw


def merge_in_place(current: dict, write: dict) -> dict:  # IMPURE: changes current
    current.update(write)
    return current


{r.__name__: reader_saw(r) for r in (merge_fields, merge_in_place)}

# %% [markdown]
# The in-place merge leaked all five writes to a reader that should have
# seen none. A reducer must be **pure**: return a new value, never change
# `current` or `write`.

# %% [markdown]
# ## 4. Prove: no loss at scale, and the package agrees
# The package's `build_reducer_agent` uses the same reducer under the full
# agent's six tools, and adds value checks, secret redaction and the file
# rendered from state (going further). 500 calls in one reply, through both:

# %%
from agentstate.rds import build_reducer_agent

labels = label_fields(500)
teaching = agent_with(RequirementsState, labels).invoke(TURN)["requirements"]
package = build_reducer_agent(one_batch_model(labels)).invoke(TURN)["requirements"]
print("both kept all 500 fields, the same values:", teaching == package == labels)

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) reads an agent's code without
# running it. Below: what `agentstate doctor --fix` would write
# (`preview_fix`), that fix run once, and the findings on both agents.
# Its fix, `operator.or_`, merges dicts as `merge_fields` does. Its code
# `unreduced-parallel-write` is the hazard the opening links as
# `plain-key-parallel-write`.

# %%
from agentstate.doctor import diagnose, preview_fix
from agentstate.lessons.display import compare_findings

fix = preview_fix(agent_with(PlainState))  # what --fix writes (a safe fix)
print(fix.diff)
namespace = {}
exec(fix.fixed("PlainState"), namespace)  # the fixed class, in a fresh namespace
kept = agent_with(namespace["PlainState"]).invoke(TURN)["requirements"]
print(f"--fix keeps {len(kept)} of 5:", kept == POSTGRES_FIELDS)
compare_findings({"plain key": diagnose(agent_with(PlainState)), "merge": diagnose(fixed_agent)})

# %% [markdown]
# ## A knob: parallel calls and the reducer
# Run the cells above first. A plain key survives one call and raises from
# two on. `replace_whole` keeps one field. `merge_fields` keeps them all.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets


def kept_with(parallel_calls: int = 5, reducer: type = RequirementsState) -> int | str:
    try:  # reducer: the state class whose `requirements` carries it
        return len(agent_with(reducer, label_fields(parallel_calls)).invoke(TURN)["requirements"])
    except InvalidUpdateError:
        return "InvalidUpdateError"


SCHEMAS = {"plain": PlainState, "replace_whole": ReplaceState, "merge_fields": RequirementsState}
knob_widget = widgets.interact(kept_with, parallel_calls=(1, 50), reducer=SCHEMAS)

# %% [markdown]
# ## Summary
# - A plain dict key takes one write a super-step: five parallel writes
#   raise `InvalidUpdateError` after the tools ran. An undeclared key drops
#   them silently.
# - The fix is the key's reducer, `Annotated[NotRequired[dict], merge_fields]`,
#   folding every write of the step in call order. One that replaces keeps
#   one field.
# - LangGraph also calls a reducer before the step ends, so it must be pure.
# - Going further:
#   [reducer purity, file sync and secrets](going_further/02_file_sync_and_secrets.ipynb):
#   bad input refused, the file rendered from state, the password kept out.

# %% [markdown]
# ## Exercises
# 1. Change `merge_fields` so that a write whose value is `None` deletes the
#    field. Call it by hand on a dict and check its inputs are unchanged.
# 2. Give the model's reply two `store_requirement` calls for `engine`, with
#    different values. Which value does `merge_fields` keep? Draw the step.
# 3. Build the fixed agent with `create_deep_agent` instead (subclass
#    `deepagents.DeepAgentState` instead of `AgentState`). Do the five fields
#    still merge? In which super-step do the tools run now?
# 4. With `PlainState`, store `engine` in one reply and `username` in the
#    next. What does `requirements` hold after the turn?

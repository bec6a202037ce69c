# %% [markdown]
# # 02 · The reducer: requirements that merge field by field
#
# The agent's developers answered lesson 01's loss by moving the
# requirements out of the file into a state key with a reducer. Their
# design says that with it "All 5 field updates are preserved and merged
# correctly" ([where this comes from](../README.md#where-this-comes-from)).
# This lesson tests that claim with a plain agent written here. It shows
# what a key without a reducer does, what a reducer that only replaces does,
# and why the merging reducer must be pure. Which releases this happens in:
# [plain-key-parallel-write](../docs/hazards-by-version.md#plain-key-parallel-write),
# [replace-reducer](../docs/hazards-by-version.md#replace-reducer),
# [undeclared-key](../docs/hazards-by-version.md#undeclared-key).

# %% [markdown]
# ## Recap
# In [lesson 01](01_file_based_storage.ipynb) the five calls of one reply
# ran in one [super-step](../docs/glossary.md#super-step). Each read the
# state from before the step. The `files` reducer kept the write of the last
# call in the reply.
#
# ## Goals
# - See a plain `requirements: dict` key fail when five tools write it in one
#   step, and an undeclared key lose the writes silently.
# - See a reducer that replaces and one that merges, drawn side by side.
# - Write the fix, a field-merge reducer, and see why it must be pure.

# %% [markdown]
# ## 1. Reproduce: a plain dict key
# The tool writes one field to the `requirements` key with a `Command`. It
# reads nothing, so it prints nothing. The **state schema** is the class
# that declares the agent's state keys. Here `requirements` is a plain dict:

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
# The scripted model (it replays fixed replies, offline) stores every field
# in one reply, as in lesson 01:

# %%
from agentstate.lessons.fixtures import POSTGRES_FIELDS
from agentstate.models import ScriptedChatModel, reply, tool_call

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


def one_reply(fields: dict) -> ScriptedChatModel:
    """A model whose first reply stores every field at once, then answers."""
    calls = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    return ScriptedChatModel(script=[reply(*calls), reply(text="Stored.")])


def agent_with(schema: type, fields: dict = POSTGRES_FIELDS, **options):
    return create_agent(
        one_reply(fields), tools=[store_requirement], state_schema=schema, **options
    )


# %% [markdown]
# With the plain key, the whole invoke fails. The error comes **after** the
# five tools ran, when LangGraph applies the step's writes, so the model
# never sees it:

# %%
import traceback

from langgraph.errors import InvalidUpdateError

from agentstate.lessons.display import Table
from agentstate.tracing import ToolTimeline

timeline = ToolTimeline()
try:
    agent_with(PlainState, middleware=[timeline]).invoke(TURN)
except InvalidUpdateError as err:
    error = err
frames = {f.name for f in traceback.extract_tb(error.__traceback__)}
Table(
    [
        {
            "tools that ran": len(timeline.events),
            "raised in apply_writes": "apply_writes" in frames,
            "error": str(error).splitlines()[0],
        }
    ]
)

# %% [markdown]
# With no `requirements` key declared at all (the default `AgentState`),
# there is no error: LangGraph drops the writes while every tool says
# "Stored".

# %%
undeclared = agent_with(AgentState).invoke(TURN)
replies = [m.text for m in undeclared["messages"] if m.type == "tool"]
print("the tools replied:", replies)
print("state keys after the turn:", sorted(undeclared))

# %% [markdown]
# ## 2. Look inside: one value per step
# The graph `create_agent` builds (`agent.get_graph().draw_mermaid()` prints
# it; here with words on its edges). The `tools` node runs each tool call of
# a reply as a task of one super-step.
#
# ```mermaid
# flowchart LR
#     start([user message]) --> model
#     model -- "a reply with 5 tool calls" --> tools["tools: 5 tasks in one super-step"]
#     tools -- "their writes, applied when the step ends" --> model
#     model -- "a reply without tool calls" --> done([answer])
# ```
#
# LangGraph keeps each state key in a **channel**. A plain key gets a
# `LastValue` channel: one value per super-step. A key declared
# `Annotated[type, reducer]` gets a `BinaryOperatorAggregate`, which folds
# every write of the step through the **reducer**, a function
# `reducer(current, write) -> new value`, in call order:

# %%
from typing import Annotated


def replace_whole(current: dict | None, write: dict | None) -> dict | None:
    return write


class ReplaceState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], replace_whole]


channels = Table(
    {"schema": s.__name__, "channel": type(agent_with(s).channels["requirements"]).__name__}
    for s in (PlainState, ReplaceState)
)
channels

# %% [markdown]
# ## 3. The fix: a reducer that merges
# The reducer gets the key's current value and one write. It returns a
# **new** dict with the write's fields on top. The state class puts it on
# the key. That is the whole fix: the tool does not change.


# %%
def merge_fields(current: dict | None, write: dict | None) -> dict:
    """Field-level merge: the write's fields win, nothing else is lost."""
    return {**(current or {}), **(write or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


merge_timeline = ToolTimeline()
fixed_agent = agent_with(RequirementsState, middleware=[merge_timeline])
fixed = fixed_agent.invoke(TURN)
assert fixed["requirements"] == POSTGRES_FIELDS
fixed["requirements"]

# %% [markdown]
# An `Annotated` key alone is not enough. Both reducers on the same reply,
# drawn as state flow: the state before, what each call read and wrote, the
# reducer, the state after. `replace_whole` folds the five writes to the
# last call's field: lesson 01's loss again, without an error.

# %%
from agentstate.tracing import draw_superstep

replace_timeline = ToolTimeline()
agent_with(ReplaceState, middleware=[replace_timeline]).invoke(TURN)
draw_superstep(
    {"replace_whole": replace_timeline, "merge_fields": merge_timeline},
    key="requirements",
    reducer={"replace_whole": replace_whole, "merge_fields": merge_fields},
)

# %% [markdown]
# Why a **new** dict? LangGraph **may call a reducer more than once per
# write**. Each tool task, once done, decides where the graph goes next, on
# a throwaway copy of the state with its own write applied. The real state
# is updated once, when the step ends. A reducer that counts its calls:

# %%
import threading

calls: list[str] = []  # the thread of each call


def counting_merge(current: dict | None, write: dict | None) -> dict:
    calls.append(threading.current_thread().name)
    return merge_fields(current, write)


class CountedState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], counting_merge]


agent_with(CountedState).invoke(TURN)
on_main = calls.count("MainThread")
Table(
    [
        {"called on": "a tool's thread (a throwaway copy)", "calls": len(calls) - on_main},
        {"called on": "the main thread (the real state)", "calls": on_main},
    ]
)

# %% [markdown]
# Ten calls for five writes: one per write on a throwaway copy, and five
# into the real state when the step ends. The copies share the current
# value with the live state, so a reducer must be **pure**: it returns a new
# value and never changes `current` or `write` in place. (Going further
# shows an in-place merge leaking writes to a reader.)
#
# ## 4. Prove: no loss at scale, and the package agrees
# The package's `build_reducer_agent` uses the same reducer under the full
# agent's six tools. It adds checks of every value, secret redaction and
# the file rendered from state (going further). 500 calls in one reply,
# through both:

# %%
from agentstate.rds import build_reducer_agent

labels = {f"labels.k{i:03d}": str(i) for i in range(500)}
teaching = agent_with(RequirementsState, labels).invoke(TURN)["requirements"]
package = build_reducer_agent(one_reply(labels)).invoke(TURN)["requirements"]
print(f"teaching agent kept {len(teaching)} of 500, the package kept {len(package)}")
print("the same fields and values:", teaching == package == labels)

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) (`agentstate.doctor.diagnose`)
# reads an agent's code without running it. On the broken and the fixed
# agent:

# %%
from agentstate.doctor import diagnose
from agentstate.lessons.display import compare_findings

compare_findings(
    {"plain key": diagnose(agent_with(PlainState)), "merge_fields": diagnose(fixed_agent)}
)

# %% [markdown]
# ## A knob: parallel calls and the reducer
# Run the cells above first. A plain key survives one call and raises from
# two on. `replace_whole` keeps one field. `merge_fields` keeps them all.

# %%
SCHEMAS = {
    "plain dict": PlainState,
    "replace_whole": ReplaceState,
    "merge_fields": RequirementsState,
}


def kept_with(parallel_calls: int, reducer: str) -> int | str:  # fields kept, or the error
    fields = {f"labels.k{i:03d}": str(i) for i in range(parallel_calls)}
    try:
        return len(agent_with(SCHEMAS[reducer], fields).invoke(TURN)["requirements"])
    except InvalidUpdateError:
        return "InvalidUpdateError"


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
# ## Summary
# - A plain dict key takes one write per super-step. Five parallel writes
#   raise `InvalidUpdateError` after the tools ran, and the whole invoke
#   fails. An undeclared key drops the writes without an error.
# - The fix is the key's reducer, `Annotated[NotRequired[dict], merge_fields]`.
#   It folds every write of the step in call order. A reducer that only
#   replaces keeps one field.
# - LangGraph may call a reducer more than once per write, so a reducer must
#   be pure.
# - Going further:
#   [reducer purity, file sync and secrets](going_further/02_file_sync_and_secrets.ipynb)
#   shows an impure reducer leaking writes, bad input refused, and the
#   password kept out of state.
#
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

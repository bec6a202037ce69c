# %% [markdown]
# # 02 · The reducer: requirements that merge field by field
#
# The RDS agent's storage design (introduced in
# [01](01_file_based_storage.ipynb)) answered the loss of stage 01 by moving
# the requirements out of the file into a state key with a **reducer**, and
# claimed that with it "All 5 field updates are preserved and merged
# correctly". This notebook tests that claim with a plain `create_agent`
# agent written here: what a key without a reducer does, what a reducer that
# only replaces does, and why the merging reducer must be pure, since
# LangGraph may call it more than once per write.

# %% [markdown]
# ## Recap
# In [stage 01](01_file_based_storage.ipynb) the five calls of one reply ran
# in one **super-step**: each read the state from before the step, and the
# `files` reducer kept the write of the last call in the reply. One file per
# field kept every field. Terms: [glossary](../docs/glossary.md).
#
# ## Goals
# - See a plain `requirements: dict` key raise `InvalidUpdateError` when five
#   tools write it in one step, and lose writes silently in other ways.
# - Look inside: the channel LangGraph builds for a plain key and for an
#   `Annotated` one, and a reducer that only replaces, drawn.
# - Write the fix whole: a field-merge reducer; see why it must be pure.
# - Check it against the package's stage 02 agent and prove it: 500 of 500.

# %% [markdown]
# ## 1. Reproduce: a plain dict key
# The tool writes one field to the `requirements` key with a `Command`; the
# state schema (the class that declares the agent's state keys) declares
# that key as a plain dict. Both written whole:

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
# The scripted model (the series' offline model) answers with one reply
# holding a `store_requirement` call per field, as in stage 01:

# %%
from agentstate.fixtures import POSTGRES_FIELDS
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
# five tools ran, when LangGraph applies the step's writes (`apply_writes`
# in the traceback), so the model never gets it as a tool reply:

# %%
import traceback

from langgraph.errors import InvalidUpdateError

from agentstate.display import Table
from agentstate.tracing import ToolTimeline

timeline = ToolTimeline()
try:
    agent_with(PlainState, middleware=[timeline]).invoke(TURN)
except InvalidUpdateError as err:
    error = err
frames = {f.name for f in traceback.extract_tb(error.__traceback__)}
assert len(timeline.events) == 5 and "apply_writes" in frames
Table([{"tools that ran": len(timeline.events), "error": str(error).splitlines()[0]}])

# %% [markdown]
# Two other ways a plain key loses writes, without any error: over two
# replies the second write replaces the whole dict, and with no
# `requirements` key declared at all (the default `AgentState`) LangGraph
# drops the writes while every tool says "Stored".


# %%
def two_replies(schema: type) -> dict:
    first, *_, last = (
        tool_call("store_requirement", field_name=f, value=v) for f, v in POSTGRES_FIELDS.items()
    )
    model = ScriptedChatModel(script=[reply(first), reply(last), reply(text="Stored.")])
    return create_agent(model, tools=[store_requirement], state_schema=schema).invoke(TURN)


plain_two = two_replies(PlainState)["requirements"]
undeclared = agent_with(AgentState).invoke(TURN)
silent = Table(
    [
        {"case": "plain key, two replies", "fields kept": len(plain_two)},
        {"case": "no key declared", "fields kept": len(undeclared.get("requirements", {}))},
    ]
)
assert silent.column("fields kept") == [1, 0]
silent

# %% [markdown]
# ## 2. Look inside: one value per step
# The graph `create_agent` builds (`agent.get_graph().draw_mermaid()` prints
# it as Mermaid; here with words on its edges): the `model` node, and the
# `tools` node that runs each tool call of a reply as a task of one super-step.
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
# `LastValue` channel, which accepts one value per super-step; a key declared
# `Annotated[type, reducer]` gets a `BinaryOperatorAggregate`, which folds
# every write of the step through the reducer, in call order:

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
assert channels.column("channel") == ["LastValue", "BinaryOperatorAggregate"]
channels

# %% [markdown]
# An `Annotated` key alone is not enough: `replace_whole` keeps the newest
# write, so the five writes fold to the last call's field, the loss of stage
# 01 again, now without an error. The run, drawn (green: a write still in
# the final `requirements`; red: lost):

# %%
from agentstate.tracing import draw_run

timeline = ToolTimeline()
replaced = agent_with(ReplaceState, middleware=[timeline]).invoke(TURN)
draw_run(timeline, replaced, key="requirements", title="a reducer that replaces")

# %% [markdown]
# ## 3. The fix: a reducer that merges
# The reducer gets the key's current value and one write, and returns a
# **new** dict with the write's fields on top. The state class puts it on the
# key. That is the whole fix; the tool does not change.


# %%
def merge_fields(current: dict | None, write: dict | None) -> dict:
    """Field-level merge: the write's fields win, nothing else is lost."""
    return {**(current or {}), **(write or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


timeline = ToolTimeline()
fixed_agent = agent_with(RequirementsState, middleware=[timeline])
fixed = fixed_agent.invoke(TURN)
assert fixed["requirements"] == POSTGRES_FIELDS
fixed["requirements"]

# %% [markdown]
# The same run, drawn: all five writes kept.

# %%
draw_run(timeline, fixed, key="requirements", title="a reducer that merges")

# %% [markdown]
# Why a **new** dict: LangGraph **may call a reducer more than once per
# write**. Each tool task, once done, decides where the graph goes next, and
# that decision reads the state with the task's own write applied on a
# throwaway copy; the real state is updated once, when the step ends. A
# reducer that counts its calls shows it:

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
assert (len(calls), on_main) == (10, 5)
Table(
    [
        {"called on": "a tool's thread (a throwaway copy)", "calls": len(calls) - on_main},
        {"called on": "the main thread (the real state)", "calls": on_main},
    ]
)

# %% [markdown]
# Ten calls for five writes: each tool's thread folds its own write into a
# throwaway copy, and the main thread folds all five into the real state when
# the step ends. The copies share the current value with the live state, so a
# reducer must be **pure**: return a new value, never change `current` or
# `write` in place (the going-further notebook shows an in-place merge
# leaking writes to a reader).
#
# ## 4. Prove: no loss at scale, and the package agrees
# The package's stage 02 agent, `build_reducer_agent`, uses the same
# reducer (`agentstate.core.merge_fields`) under the six RDS tools; it adds a
# check of every value against the `AwsRdsInstance` spec, secret redaction
# and `/requirements.json` rendered from state after each turn (going
# further). 500 `store_requirement` calls in one reply (metadata labels
# `labels.k000` ... `labels.k499`), through both:

# %%
from agentstate.rds import build_reducer_agent

labels = {f"labels.k{i:03d}": str(i) for i in range(500)}
teaching = agent_with(RequirementsState, labels).invoke(TURN)["requirements"]
package = build_reducer_agent(one_reply(labels)).invoke(TURN)["requirements"]
assert teaching == package == labels
Table(
    [
        {
            "calls in one reply": 500,
            "teaching agent kept": len(teaching),
            "package kept": len(package),
        }
    ]
)

# %% [markdown]
# With a **checkpointer** (it saves the state after every step under a
# conversation's `thread_id`) the requirements live on the thread: a second
# turn adds to the first, through the same reducer.

# %%
from langgraph.checkpoint.memory import InMemorySaver

two_turns = ScriptedChatModel(
    script=[
        reply(tool_call("store_requirement", field_name="engine", value="postgres")),
        reply(text="Noted."),
        reply(tool_call("store_requirement", field_name="instance_class", value="db.t3.micro")),
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
agent.invoke(TURN, config)
turn2 = agent.invoke({"messages": [{"role": "user", "content": "Make it a db.t3.micro"}]}, config)
assert turn2["requirements"] == {"engine": "postgres", "instance_class": "db.t3.micro"}
turn2["requirements"]

# %% [markdown]
# The **doctor** (`agentstate.doctor.diagnose`) reads an agent's tools and
# state schema without running it. On the broken and the fixed agent:

# %%
from agentstate.display import compare_findings
from agentstate.doctor import diagnose

broken, fixed_report = diagnose(agent_with(PlainState)), diagnose(fixed_agent)
assert broken.codes() == ["unreduced-parallel-write"] and fixed_report.codes() == []
compare_findings({"plain key": broken, "merge_fields": fixed_report})

# %% [markdown]
# ## A knob: parallel calls and the reducer
# Run the cells above first. Across the whole range: a plain key survives
# one call and raises from two on; `replace_whole` keeps one field;
# `merge_fields` keeps them all.

# %%
SCHEMAS = {
    "plain dict": PlainState,
    "replace_whole": ReplaceState,
    "merge_fields": RequirementsState,
}


def kept_with(parallel_calls: int, reducer: str) -> Table:
    fields = {f"labels.k{i:03d}": str(i) for i in range(parallel_calls)}
    try:
        kept = len(agent_with(SCHEMAS[reducer], fields).invoke(TURN)["requirements"])
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
# ## Summary
# - A plain dict key takes one write per super-step: five parallel writes
#   raise `InvalidUpdateError` after the tools ran, so the whole invoke
#   fails; across replies the last write replaces the dict; an undeclared
#   key drops the writes. The write-up's claim holds only with a reducer.
# - The fix is the key's reducer, `Annotated[NotRequired[dict], merge_fields]`,
#   which folds every write of the step in call order. A reducer that only
#   replaces keeps one field.
# - LangGraph may call a reducer more than once per write (10 calls for 5
#   writes here), so a reducer must be pure.
# - The teaching agent and the package's `build_reducer_agent` keep the same
#   500 of 500 fields; with a checkpointer a second turn adds to the first.
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
#    still merge? Draw the run: in which super-step do the tools run now?

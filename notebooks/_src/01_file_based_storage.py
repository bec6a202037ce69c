# %% [markdown]
# # 01 · The loss: five parallel writes to one file keep one field
#
# An agent keeps a user's database requirements in one file,
# `/requirements.json`. When the model stored five fields in one reply, its
# developers saw that "Only the last field survived"
# ([where this comes from](../README.md#where-this-comes-from)). This lesson
# reproduces that loss, draws it, and fixes it.

# %% [markdown]
# At the tutorial's pins (deepagents 0.7.32), a tool like this lesson's
# keeps 1 field of 5, as in every release
# [tested](../docs/hazards-by-version.md#file-read-modify-write); deepagents'
# own `edit_file` refuses 4 of 5 parallel edits to one file
# ([builtin-parallel-edit](../docs/hazards-by-version.md#builtin-parallel-edit)),
# so the loss is in custom tools.

# %% [markdown]
# ## Before you start
# The first lesson: you need Python and one call to an LLM API behind you.
# Terms are defined where they first appear, and in the
# [glossary](../docs/glossary.md).
#
# ## Goals
# - Reproduce the loss in a toy graph, then in a real agent.
# - Draw one super-step: what each call read and wrote, what the reducer kept.
# - Fix it with one file per field.

# %% [markdown]
# ## 1. Reproduce: a toy first
# [LangGraph](../docs/glossary.md#langgraph) runs a graph of functions,
# **nodes**, over a shared dict, the **state**. Nodes scheduled together
# form one **super-step**. A **reducer** combines the step's writes to one
# key:
#
# ```mermaid
# flowchart LR
#     before["state before the step<br/>files: {}"] --> e["store_engine<br/>reads files: {}"]
#     before --> u["store_username<br/>reads files: {}"]
#     e -- "writes the whole file" --> r["reducer of files<br/>folds the writes"]
#     u -- "writes the whole file" --> r
#     r --> after["state after the step"]
# ```

# %% [markdown]
# The toy state has two keys. In `Annotated[type, reducer]`, the second
# argument is the reducer LangGraph calls to combine the writes to that key:
# - `files` maps a path to its contents; `replace_path` replaces a written
#   path whole.
# - `log` is a list; `operator.add` appends each write.

# %%
import operator
from typing import Annotated, Any, TypedDict

PATH = "/requirements.json"


def replace_path(files: dict, write: dict) -> dict:  # write: one node's {path: contents}
    return {**files, **write}


class ToyState(TypedDict):
    files: Annotated[dict[str, dict], replace_path]
    log: Annotated[list[str], operator.add]


# %% [markdown]
# The package's `two_writers` builds the two nodes drawn above on a state
# class. Each reads the file, adds its field, writes the whole file back, and
# logs what it read:

# %%
from agentstate.lessons.toy import two_writers  # the toy's graph, from this series' package

result = two_writers(ToyState).invoke({"files": {}, "log": []})
print("\n".join(result["log"]))
print("the file after the step:", result["files"][PATH])

# %% [markdown]
# Both writers read an empty file, so each wrote only its own field.
# LangGraph hands a step's writes to the reducers sorted by task, here by
# node name (the `log` order): `store_username`'s write came second and replaced the file.

# %% [markdown]
# ## 2. Reproduce: five fields in one reply
# [`create_deep_agent`](../docs/glossary.md#create-deep-agent) builds an
# agent whose state has a `files` key like the toy's. A **tool** is a
# function the model asks to run.

# %% [markdown]
# This tool reads the file from the state (`runtime.state`: LangChain passes
# `runtime` in, the model never sees it), adds one field, and writes the whole
# file back. Two package helpers hide deepagents' file format:
# - `fields_in(files, path)`: the JSON object a file holds.
# - `write_file(runtime, path, fields, reply)`: the `Command` (a state
#   update) that writes the file and replies to the model.

# %%
from langchain.tools import ToolRuntime, tool

from agentstate.lessons.filestate import fields_in, write_file


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime):
    """Store one requirement in /requirements.json."""
    current = fields_in(runtime.state.get("files"), PATH)  # read
    print(f"store_requirement({field_name}) read {current}")  # live, before the summary
    current[field_name] = value  # modify
    return write_file(runtime, PATH, current, f"Stored {field_name}.")  # write it back whole


# %% [markdown]
# The model is **scripted**: it replays fixed replies, offline, with no API
# key. `one_batch_model`'s first reply holds five **tool calls**, one per
# field of the dict `POSTGRES_FIELDS` (engine, version, instance class,
# storage, user).

# %% [markdown]
# Two **middleware**, objects that hook into the agent's loop:
# - `ToolTimeline` records what each call read and wrote, its super-step
#   and its thread.
# - `FinishOrder` holds each call until all five are running (so they run
#   at once, on five threads), then lets them finish **last** call **first**.
#
# `run_by_step` runs the agent and prints each super-step's nodes and calls
# (`#k`: a call's place in the reply).

# %%
from deepagents import create_deep_agent

from agentstate.lessons.fixtures import POSTGRES_FIELDS, one_batch_model
from agentstate.lessons.simulation import FinishOrder
from agentstate.tracing import ToolTimeline, draw_superstep, run_by_step  # drawing: section 3

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
timeline = ToolTimeline()
last_first = FinishOrder(timeline, order=list(POSTGRES_FIELDS)[::-1])
broken_agent = create_deep_agent(
    one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], middleware=[timeline, last_first]
)
state = run_by_step(broken_agent, TURN, timeline)
fields_in(state["files"], PATH)  # what the file holds after the run

# %% [markdown]
# Every call replied "Stored"; the file holds one field. `engine` read last
# (its line is printed last), yet read `{}`: each call reads the state from
# before the step. Why super-step 3? deepagents adds a node before the model:
#
# ```mermaid
# flowchart LR
#     s([user message]) --> p["step 1<br/>PatchToolCalls<br/>(deepagents)"]
#     p --> m["step 2<br/>model: one reply,<br/>5 tool calls"]
#     m --> t["step 3<br/>tools: 5 calls<br/>on 5 threads"]
#     t --> m2["step 4<br/>model"]
#     m2 --> n["step 5<br/>ParentNotifier<br/>(deepagents)"]
# ```
#
# A plain `create_agent` has no such node: its tools run in step 2 (lesson 02).

# %% [markdown]
# ## 3. Look inside: one super-step, drawn
# `draw_superstep` draws the step the timeline recorded: the state before,
# what each call read and wrote, the reducer, the state after. The legend
# marks each write kept or lost.

# %%
# show: what a box prints for a files value (fields_in's path defaults to /requirements.json)
draw_superstep(timeline, key="files", show=lambda f: str(fields_in(f)), reducer="the files reducer")

# %% [markdown]
# The five calls are five tasks of one node, `tools`, sorted by their place
# in the reply: the reducer folds the writes #1 first, #5 last, whatever
# order the calls ran in (`username` read first above). Each write replaces
# the whole file, so #5's is kept.

# %% [markdown]
# ## 4. The fix: one file per field
# Each field gets its own path, so parallel calls write different paths and
# the reducer keeps every one. A reader merges the files back:
#
# ```mermaid
# flowchart LR
#     c1["#1 store engine"] --> f1["/requirements/engine.json"]
#     c2["#2 store engine_version"] --> f2["/requirements/engine_version.json"]
#     c5["#5 store username"] --> f5["/requirements/username.json"]
#     f1 & f2 & f5 --> g["get_collected_requirements<br/>merges them, sorted by path"]
# ```


# %%
@tool("store_requirement")  # the name the model calls
def store_in_own_file(field_name: str, value: Any, runtime: ToolRuntime):
    """Store one requirement in its own file, /requirements/<field>.json."""
    path = f"/requirements/{field_name}.json"  # one path per field
    return write_file(runtime, path, {field_name: value}, f"Stored {field_name}.")


# %% [markdown]
# The scripted `store_then_read_model` stores the five fields in one reply;
# its next reply reads them back with the package's
# `get_collected_requirements`, which merges the files:

# %%
from agentstate.lessons.fixtures import get_collected_requirements, store_then_read_model

fixed_agent = create_deep_agent(
    store_then_read_model(POSTGRES_FIELDS), tools=[store_in_own_file, get_collected_requirements]
)
fixed_state = fixed_agent.invoke(TURN)
print(fixed_state["messages"][-2].text)  # [-2]: the reader tool's reply

# %% [markdown]
# ## 5. Prove: any number of parallel calls
# `fields_kept(layout, parallel_calls)` runs one reply of `parallel_calls`
# stores with the package's copy of either tool and counts the fields the
# files hold. With 20 calls:

# %%
from agentstate.lessons.fixtures import fields_kept

LAYOUTS = ["one file", "one file per field"]
{layout: fields_kept(layout, 20) for layout in LAYOUTS}

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) reads a compiled agent's state
# schema and its tools' code, without running it, and names the hazards these
# lessons teach. `diagnose` runs it; it finds the hazard in the deep agent's
# `general-purpose` **subagent** (a helper agent with the same tools) too:

# %%
from agentstate.doctor import diagnose
from agentstate.lessons.display import compare_findings  # findings side by side

compare_findings({"broken agent": diagnose(broken_agent), "fixed agent": diagnose(fixed_agent)})

# %% [markdown]
# ## A knob: how many parallel calls?
# Run the cells above first.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(fields_kept, layout=LAYOUTS, parallel_calls=(1, 20))

# %% [markdown]
# ## Summary
# - Five parallel read-modify-write calls kept **one** field; every tool
#   said "Stored".
# - Each call read the state from before the super-step. The `files`
#   reducer took the whole-file writes in call order: the **last call of
#   the reply** survived.
# - One file per field keeps all five. [Lesson 02](02_state_reducer.ipynb)
#   uses a reducer instead.
# - Going further: [inside a super-step](going_further/01_inside_a_super_step.ipynb):
#   the state after every step, the calls in time, deepagents' own guard.

# %% [markdown]
# ## Exercises
# 1. In the toy, make `replace_path` merge a write's fields into the file
#    instead of replacing it. What does the file hold after the step?
# 2. With `store_in_own_file`, store the same field twice in one reply with
#    different values. Which value is kept, and on every run?
# 3. Run the shared-file agent with one call per reply: give
#    `create_deep_agent` the scripted model
#    `one_call_per_step_model(POSTGRES_FIELDS)` (from
#    `agentstate.lessons.fixtures`) and a `ToolTimeline`. Draw its second tool
#    step with `draw_superstep(..., step=...)`. What did that call read?

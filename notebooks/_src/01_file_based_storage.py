# %% [markdown]
# # 01 · The loss: five parallel writes to one file keep one field
#
# An agent keeps a user's database requirements in one file,
# `/requirements.json`. When the model stored five fields in one reply, its
# developers saw that "Only the last field survived"
# ([where this comes from](../README.md#where-this-comes-from)). This lesson
# reproduces that loss, draws it, and fixes it.

# %% [markdown]
# Which releases this happens in:
# [file-read-modify-write](../docs/hazards-by-version.md#file-read-modify-write),
# and for deepagents' own file tools
# [builtin-parallel-edit](../docs/hazards-by-version.md#builtin-parallel-edit).

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
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph

PATH = "/requirements.json"


def replace_path(files: dict, write: dict) -> dict:  # write: one node's {path: contents}
    return {**files, **write}


class ToyState(TypedDict):
    files: Annotated[dict[str, dict], replace_path]
    log: Annotated[list[str], operator.add]


# %% [markdown]
# Two writer nodes, both after `START`, so one super-step. Each reads the
# file, adds its field, writes the whole file back, and logs what it read:


# %%
def writer(field: str, value: str):  # makes a node that stores one field
    def store(state: ToyState) -> dict:  # returns only the keys it writes
        current = state["files"].get(PATH, {})
        new = {**current, field: value}
        return {"files": {PATH: new}, "log": [f"store {field}: read {current}, wrote {new}"]}

    return store


toy = StateGraph(ToyState)
toy.add_node("store_engine", writer("engine", "postgres"))
toy.add_node("store_username", writer("username", "dbadmin"))
toy.add_edge(START, "store_engine")
toy.add_edge(START, "store_username")
result = toy.compile().invoke({"files": {}, "log": []})
print("\n".join(result["log"]))
print("the file after the step:", result["files"][PATH])

# %% [markdown]
# Both writers read an empty file, so each wrote only its own field. The
# `files` reducer kept the second write whole; `log` kept both.

# %% [markdown]
# ## 2. Reproduce: five fields in one reply
# [`create_deep_agent`](../docs/glossary.md#create-deep-agent) builds an
# agent whose state has a `files` key like the toy's. A **tool** is a
# function the model asks to run.

# %% [markdown]
# This tool reads the file from the state (`runtime.state`), prints what it
# read, adds one field, and returns the whole file and its reply to the model
# (a `ToolMessage`) in a `Command`, the object that updates the state.
# LangChain passes `runtime` in when the tool runs; the model never sees or
# sends that argument.

# %%
import json
from typing import Any

from deepagents.backends.utils import create_file_data, file_data_to_string
from langchain.messages import ToolMessage
from langchain.tools import ToolRuntime, tool
from langgraph.types import Command


def fields_in(files: dict | None) -> dict:  # what /requirements.json holds
    return json.loads(file_data_to_string(files[PATH])) if files and PATH in files else {}


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in /requirements.json."""
    current = fields_in(runtime.state.get("files"))
    print(f"store_requirement({field_name}) read {current}")
    current[field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps(current))  # a file as deepagents stores it
    return Command(update={"files": {PATH: data}, "messages": [done]})


# %% [markdown]
# The model is **scripted**: it replays fixed replies, offline, with no API
# key. `one_batch_model`'s first reply holds five **tool calls**, one per field.

# %% [markdown]
# Two **middleware**, objects that hook into the agent's loop:
# - `ToolTimeline` records what each call read and wrote, its super-step
#   and its thread.
# - `FinishOrder` holds each call until all five are running (so they run
#   at once, on five threads), then runs them **last** call **first**.

# %%
from deepagents import create_deep_agent

from agentstate.lessons.fixtures import POSTGRES_FIELDS, one_batch_model
from agentstate.lessons.simulation import FinishOrder
from agentstate.tracing import ToolTimeline, draw_superstep

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
timeline = ToolTimeline()
last_first = FinishOrder(timeline, order=list(POSTGRES_FIELDS)[::-1])
broken_agent = create_deep_agent(
    one_batch_model(POSTGRES_FIELDS),
    tools=[store_requirement],
    middleware=[timeline, last_first],
)
state = broken_agent.invoke(TURN)
print("the tools replied:", [m.text for m in state["messages"] if m.type == "tool"])
print("model calls ran in super-steps:", [m.step for m in timeline.model_calls])
print("the tool calls ran in super-step:", sorted({e.step for e in timeline.events}))
print("threads used:", timeline.thread_count())
fields_in(state["files"])  # what the file holds

# %% [markdown]
# Every tool said "Stored", and the file holds one field. `engine` read
# last (printed above), yet read `{}`: each call reads the state from before
# the step. Why super-step 3? deepagents adds a node before the model:
#
# ```mermaid
# flowchart LR
#     s([user message]) --> p["step 1<br/>PatchToolCalls<br/>(deepagents)"]
#     p --> m["step 2<br/>model: one reply,<br/>5 tool calls"]
#     m --> t["step 3<br/>tools: 5 calls<br/>on 5 threads"]
#     t --> m2["step 4<br/>model"]
# ```
#
# A plain `create_agent` has no such node: its tools run in step 2 (lesson 02).

# %% [markdown]
# ## 3. Look inside: one super-step, drawn
# `draw_superstep` draws the step the timeline recorded: the state before,
# what each call read and wrote, the reducer, the state after. Green writes
# survived, red ones were lost.

# %%
# show: what a box prints for a files value
draw_superstep(timeline, key="files", show=lambda f: str(fields_in(f)), reducer="the files reducer")

# %% [markdown]
# The `files` reducer takes the writes in the order of the calls in the
# reply, not the order they ran: call 5 read first (printed above), yet its
# write came last. A later write to a path replaces the whole file.

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
FOLDER = "/requirements/"


@tool("store_requirement")  # the name the model calls
def store_in_own_file(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in its own file, /requirements/<field>.json."""
    path = f"{FOLDER}{field_name}.json"
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps({field_name: value}))
    return Command(update={"files": {path: data}, "messages": [done]})


# %% [markdown]
# Five calls in one reply; the model's next reply reads them back with the
# package's `get_collected_requirements`, which merges the files:

# %%
from agentstate.lessons.fixtures import get_collected_requirements, store_then_read_model

fixed_agent = create_deep_agent(
    store_then_read_model(POSTGRES_FIELDS),
    tools=[store_in_own_file, get_collected_requirements],
)
fixed_state = fixed_agent.invoke(TURN)
json.loads(fixed_state["messages"][-2].content)  # [-2]: the reader's reply; [-1] is "Done."

# %% [markdown]
# ## 5. Prove: any number of parallel calls
# The package holds both layouts (its tests check they keep what this page's
# tools keep). `fields_kept` runs one reply of `parallel_calls` stores with
# either and counts the fields the files hold. With 20 calls:

# %%
from agentstate.lessons.fixtures import fields_kept

LAYOUTS = ["one file", "one file per field"]
{layout: fields_kept(layout, 20) for layout in LAYOUTS}

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) (`agentstate.doctor.diagnose`)
# reads an agent's code without running it and names this series' hazards.
# It finds the hazard in the deep agent's `general-purpose` **subagent**
# (a helper agent with the same tools) too; `preview_fix` shows what
# `--fix --unsafe-fixes` would write:

# %%
from agentstate.doctor import diagnose, preview_fix
from agentstate.lessons.display import compare_findings

fix = preview_fix(broken_agent, unsafe=True)  # unsafe=True: --fix --unsafe-fixes
print("--fix --unsafe-fixes would write:", fix.diff or "nothing")
print(*sorted({f"{n.code}: {n.reason}" for n in fix.no_fix}), sep="\n")
compare_findings({"broken agent": diagnose(broken_agent), "fixed agent": diagnose(fixed_agent)})

# %% [markdown]
# ## A knob: how many parallel calls?
# Run the cells above first. The shared file keeps one field, and one file
# per field keeps them all.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    fields_kept,
    layout=widgets.Dropdown(options=LAYOUTS, description="layout"),
    parallel_calls=widgets.IntSlider(value=5, min=1, max=20, description="parallel calls"),
)

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
# 3. Run the shared-file agent with one call per reply and a `ToolTimeline`.
#    Draw its second tool step with `draw_superstep(..., step=...)`. What did
#    that call read?

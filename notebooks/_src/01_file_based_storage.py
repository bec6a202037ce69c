# %% [markdown]
# # 01 · The loss: five parallel writes to one file keep one field
#
# An agent writes AWS database manifests. It keeps the user's requirements in
# a file, `/requirements.json`. Its tool reads the file, adds one field and
# writes the file back. When the model stored five fields in one reply, its
# developers saw that "Only the last field survived"
# ([where this comes from](../README.md#where-this-comes-from)). This lesson
# reproduces that loss, draws where it comes from, and fixes it. Which
# releases this happens in:
# [file-read-modify-write](../docs/hazards-by-version.md#file-read-modify-write),
# and for deepagents' own file tools
# [builtin-parallel-edit](../docs/hazards-by-version.md#builtin-parallel-edit).

# %% [markdown]
# ## Recap
# This is the first lesson. You need Python and to have called an LLM API
# once. Terms are defined where they first appear, and in the
# [glossary](../docs/glossary.md).
#
# ## Goals
# - Reproduce the loss in a toy graph, then in a real agent.
# - See one super-step drawn: what each call read and wrote, what the reducer kept.
# - Fix it with one file per field.

# %% [markdown]
# ## 1. Reproduce: a toy first
# [LangGraph](../docs/glossary.md#langgraph) runs a graph of functions,
# called **nodes**, over a shared dict, the **state**. Nodes that run at the
# same time form one **super-step**: each reads the state as it was when the
# step began. Their writes are applied when the step ends. A **reducer** is
# the function that combines several writes to one key.
#
# The toy state has two keys. `files` maps a path to its contents: a write
# to a path replaces that path's whole value. `log` is a list: each write is
# appended.

# %%
import operator
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph

PATH = "/requirements.json"


def replace_path(current: dict, write: dict) -> dict:
    return {**current, **write}


class ToyState(TypedDict):
    files: Annotated[dict[str, dict], replace_path]
    log: Annotated[list[str], operator.add]


# %% [markdown]
# Two writer nodes start together. Each reads the file, adds its field,
# writes the whole file back, and logs what it read:


# %%
def writer(field: str, value: str):
    def store(state: ToyState) -> dict:
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
# Both writers read an empty file, so each wrote a file with only its own
# field. The `files` reducer kept the second write whole. The `log` reducer
# kept both. That is the whole mechanism. Now the same loss in a real agent.
#
# ## 2. Reproduce: five fields in one reply
# [`create_deep_agent`](../docs/glossary.md#create-deep-agent) builds an
# agent whose state has a `files` key like the toy's. A **tool** is a
# function the model asks to run. This one reads the file from the state
# (its `ToolRuntime` argument), adds one field, and returns the whole file
# in a `Command`, the object that updates the state. `work_seconds` stands
# for real work between the read and the write.

# %%
import json
import time
from typing import Any

from deepagents.backends.utils import create_file_data, file_data_to_string
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

work_seconds: dict[str, float] = {}  # field -> seconds between the read and the write
show_reads = True


def fields_in(files: dict | None) -> dict:  # what /requirements.json holds
    return json.loads(file_data_to_string(files[PATH])) if files and PATH in files else {}


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in /requirements.json."""
    files = runtime.state.get("files") or {}
    current = json.loads(file_data_to_string(files[PATH])) if PATH in files else {}
    time.sleep(work_seconds.get(field_name, 0))
    if show_reads:
        print(f"store_requirement({field_name}) read {current}")
    current[field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps(current))
    return Command(update={"files": {PATH: data}, "messages": [done]})


# %% [markdown]
# The model is **scripted**: it replays fixed replies, so every run is the
# same and needs no API key. Its first reply holds five **tool calls**, one
# `store_requirement` per field. The pauses make the **last** call finish
# **first** (0.5 s for call 1 down to 0.1 s for call 5). `ToolTimeline` is a
# **middleware**, an object that hooks into the agent's loop. It records
# what each call read and wrote, its super-step and its thread.

# %%
from deepagents import create_deep_agent

from agentstate.lessons.fixtures import POSTGRES_FIELDS
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import ToolTimeline

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


def stores(fields: dict) -> list:  # one call per field
    return [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]


def one_reply(*calls) -> ScriptedChatModel:  # these calls at once, then an answer
    return ScriptedChatModel(script=[reply(*calls), reply(text="Stored.")])


order = list(POSTGRES_FIELDS)
work_seconds.update({field: 0.1 * (len(order) - i) for i, field in enumerate(order)})
timeline = ToolTimeline()
broken_agent = create_deep_agent(
    one_reply(*stores(POSTGRES_FIELDS)), tools=[store_requirement], middleware=[timeline]
)
state = broken_agent.invoke(TURN)
kept = fields_in(state["files"])
assert kept == {"username": "dbadmin"}
print("threads used:", timeline.thread_count())
kept

# %% [markdown]
# Every tool said "Stored", and the file holds one field. The five calls
# ran at once, and each read an empty file like the toy's writers. Call 5
# finished first.
#
# ## 3. Look inside: one super-step, drawn
# `draw_superstep` draws the step the timeline recorded, from left to right:
# the state before, what each call read and wrote, the reducer, and the
# state after. Green writes survived, red ones were lost.

# %%
from agentstate.tracing import draw_superstep

draw_superstep(
    timeline,
    key="files",
    show=lambda files: str(fields_in(files)),
    reducer="the files reducer",
    title="one reply, five store_requirement calls",
)

# %% [markdown]
# The reducer is not hidden. The agent keeps it on the `files` **channel**,
# where LangGraph stores that key. Call it by hand on the five recorded
# writes, in call order and reversed:

# %%
files_reducer = broken_agent.channels["files"].reducer
writes = [event.update["files"] for event in timeline.events]
by_hand = {
    "in call order": fields_in(files_reducer({}, writes)),
    "reversed": fields_in(files_reducer({}, writes[::-1])),
}
by_hand

# %% [markdown]
# A later write to a path replaces the whole file, so the order decides.
# LangGraph folds the writes in the order of the calls in the reply, not in
# the order they finished. Call 5 finished first, yet its write came last.
#
# ## 4. The fix: one file per field
# Give each field its own path. Parallel calls then write different paths,
# and the reducer keeps every path. A reader merges the files back:

# %%
FOLDER = "/requirements/"


@tool("store_requirement")
def store_in_own_file(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in its own file, /requirements/<field>.json."""
    path = f"{FOLDER}{field_name}.json"
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps({field_name: value}))
    return Command(update={"files": {path: data}, "messages": [done]})


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement stored so far, as JSON."""
    files = runtime.state.get("files") or {}
    merged = {}
    for path in sorted(p for p in files if p.startswith(FOLDER)):
        merged.update(json.loads(file_data_to_string(files[path])))
    return json.dumps(merged, sort_keys=True)


# %% [markdown]
# Five calls in one reply, read back by the model's next reply:

# %%
show_reads = False  # quiet from here on
work_seconds.clear()
store_then_read = [reply(*stores(POSTGRES_FIELDS)), reply(tool_call("get_collected_requirements"))]
fixed_agent = create_deep_agent(
    ScriptedChatModel(script=[*store_then_read, reply(text="All five stored.")]),
    tools=[store_in_own_file, get_collected_requirements],
)
fixed_state = fixed_agent.invoke(TURN)
json.loads(fixed_state["messages"][-2].content)

# %% [markdown]
# The package's `PerFieldFileStorage` is this layout under the full agent's
# six tools, and also checks every value against the database spec:

# %%
from agentstate.lessons.fixtures import PerFieldFileStorage
from agentstate.rds import assemble_rds_agent

package_model = ScriptedChatModel(script=[*store_then_read, reply(text="All five stored.")])
package_state = assemble_rds_agent(package_model, PerFieldFileStorage()).invoke(TURN)
package_files, teaching_files = (
    {path: json.loads(file_data_to_string(data)) for path, data in out["files"].items()}
    for out in (package_state, fixed_state)
)
print("the same files, holding the same fields:", package_files == teaching_files)

# %% [markdown]
# ## 5. Prove: any number of parallel calls
# `fields_kept` runs one reply of `parallel_calls` stores with either tool
# and counts the fields the files hold. With 20 calls:


# %%
LAYOUTS = {"one file": store_requirement, "one file per field": store_in_own_file}


def fields_kept(layout: str = "one file", parallel_calls: int = 5) -> int:
    fields = {f"labels.k{i:02d}": str(i) for i in range(parallel_calls)}
    agent = create_deep_agent(one_reply(*stores(fields)), tools=[LAYOUTS[layout]])
    files = agent.invoke(TURN)["files"]
    return len({f for data in files.values() for f in json.loads(file_data_to_string(data))})


at_twenty = {layout: fields_kept(layout, 20) for layout in LAYOUTS}
assert at_twenty == {"one file": 1, "one file per field": 20}
at_twenty

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) (`agentstate.doctor.diagnose`)
# reads an agent's code without running it and names this series' hazards.
# Every deep agent has a `general-purpose` **subagent**, a helper agent with
# the same tools, so the doctor finds the hazard there too:

# %%
from agentstate.doctor import diagnose
from agentstate.lessons.display import compare_findings

compare_findings({"broken agent": diagnose(broken_agent), "fixed agent": diagnose(fixed_agent)})

# %% [markdown]
# ## A knob: how many parallel calls?
# Run the cells above first. The shared file keeps one field, and one file
# per field keeps them all.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

WIDE = {"description_width": "initial"}
knob_widget = widgets.interact(
    fields_kept,
    layout=widgets.Dropdown(options=list(LAYOUTS), description="layout", style=WIDE),
    parallel_calls=widgets.IntSlider(
        value=5, min=1, max=20, description="parallel calls", style=WIDE
    ),
)

# %% [markdown]
# ## Summary
# - Five parallel calls that read the file, add a field and write it back
#   kept **one** field, while every tool said "Stored".
# - Each call read the state from before the super-step. The `files`
#   reducer folded the whole-file writes in call order, so the **last call
#   of the reply** survived.
# - One file per field keeps all five. [Lesson 02](02_state_reducer.ipynb)
#   uses a reducer instead.
# - Going further: [inside a super-step](going_further/01_inside_a_super_step.ipynb)
#   has the state after every step, the calls in time, and deepagents'
#   own guard (since 0.7.16).
#
# ## Exercises
# 1. In the toy, make `replace_path` merge a write's fields into the file
#    instead of replacing it. What does the file hold after the step?
# 2. With `store_in_own_file`, store the same field twice in one reply with
#    different values. Which value is kept, and on every run?
# 3. Run the shared-file agent with one call per reply and a `ToolTimeline`.
#    Draw its second tool step with `draw_superstep(..., step=...)`. What did
#    that call read?

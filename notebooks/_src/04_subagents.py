# %% [markdown]
# # 04 · Subagents: what crosses the `task` boundary, and why
#
# A [subagent](../docs/glossary.md#subagent) is an agent that the main
# agent, the *parent*, starts to do one job. The RDS agent's collector
# subagent stores the fields, reports "Stored 5 field(s).", and the parent
# finds none. The agent's changelog blamed "isolated execution contexts"
# and added a cache that both agents' tools share. This notebook finds the
# real cause in the collector's state schema, fixes it with one schema for
# both agents, and compares that fix with the cache. Which releases this
# happens in:
# [subagent-drops-key](../docs/hazards-by-version.md#subagent-drops-key),
# and for a list handed back whole
# [list-doubled-by-subagent](../docs/hazards-by-version.md#list-doubled-by-subagent).

# %% [markdown]
# ## Recap
# Stage 02: a `requirements` key with a field-merge
# [reducer](../docs/glossary.md#reducer) keeps every parallel write. Stage
# 03: within one batch of parallel tool calls, readers see the state from
# before the batch.
#
# ## Goals
# - Reproduce: the collector stores five fields, and the parent sees none.
# - Look inside: what goes down to the collector, what comes back up.
# - Fix it with one state schema, and compare it with the cache.
# - See a list come back doubled.

# %% [markdown]
# ## 1. Reproduce: the parent sees nothing
# First the pieces of stage 02. A
# [state schema](../docs/glossary.md#state-schema) is the class that lists
# the keys of an agent's state. `RequirementsState` adds `requirements`, with
# its reducer, to the keys every LangChain agent has (`AgentState`: the
# messages). One tool writes a field, one reads them all.

# %%
import json
from typing import Annotated, NotRequired

from langchain.agents import AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


def merge_fields(current, new):
    return {**(current or {}), **(new or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict], merge_fields]


@tool
def store_requirement(field_name: str, value: str | int, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


# %% [markdown]
# The collector's model, offline: a
# [policy model](../docs/glossary.md#policy-model) that replies with
# `collect(messages)`. It prints what it was given, stores every field in
# one reply (so the calls run in parallel), then reports.

# %%
from langchain_core.messages import HumanMessage

from agentstate.fixtures import POSTGRES_FIELDS
from agentstate.models import PolicyChatModel, reply, tool_call


def collect(messages):
    """The collector's reply: store each field of the task, then report."""
    task = messages[-1]
    if isinstance(task, HumanMessage):
        print("collector was given:", [m.type for m in messages])
        fields = json.loads(task.text)
        return reply(
            *(tool_call("store_requirement", field_name=k, value=v) for k, v in fields.items())
        )
    stored = [m for m in messages if isinstance(m, ToolMessage) and m.status != "error"]
    return reply(text=f"Stored {len(stored)} field(s).")


FIELDS = json.dumps(POSTGRES_FIELDS)
FIELDS

# %% [markdown]
# The two agents, as a developer writes them. The collector is a plain
# [`create_agent`](../docs/glossary.md#create-agent) with the store tool.
# The parent is a [`create_deep_agent`](../docs/glossary.md#create-deep-agent)
# whose `state_schema` declares `requirements`, and gets the collector as a
# *compiled subagent*: a name, a description, the graph. Its scripted model
# calls `task` with the fields, then reads, then says "Done.".

# %%
from deepagents import create_deep_agent
from langchain.agents import create_agent

from agentstate.models import ScriptedChatModel

DELEGATE = reply(tool_call("task", subagent_type="requirements-collector", description=FIELDS))
READ, DONE = reply(tool_call("get_collected_requirements")), reply(text="Done.")


def collector_agent(schema=AgentState, store=store_requirement):
    model = PolicyChatModel(policy=collect)
    prompt = "Store each field you are given."
    return create_agent(model, [store], system_prompt=prompt, state_schema=schema)


def parent_agent(collector, script=(DELEGATE, READ, DONE), **options):
    subagent = {"name": "requirements-collector", "description": "Collects RDS requirements."}
    options = {"tools": [get_collected_requirements], "state_schema": RequirementsState, **options}
    model = ScriptedChatModel(script=list(script))
    return create_deep_agent(model, subagents=[{**subagent, "runnable": collector}], **options)


# %% [markdown]
# `CommandRecorder` is a middleware (code that wraps each tool call) that
# records which keys each `task` call returned to the parent.

# %%
from agentstate.display import Table
from agentstate.tracing import CommandRecorder

USER = {"messages": [("user", "Give me a Postgres 15.5 manifest")]}
collector, recorder = collector_agent(), CommandRecorder(["task"])
broken = parent_agent(collector, middleware=[recorder])
state = broken.invoke(USER)
said = {m.name: m.text for m in state["messages"] if isinstance(m, ToolMessage)}
Table([{"collector said": said["task"], "parent's reader got": said["get_collected_requirements"]}])

# %% [markdown]
# ## 2. Look inside: down and up the `task` boundary
#
# ```mermaid
# flowchart TB
#     T["parent: task call"]
#     M["collector: model"]
#     S["collector: store_requirement x5"]
#     R["parent: reader gets {}"]
#     X["dropped"]
#     T -->|"down: the task description"| M
#     M --> S
#     S -->|"up: declared keys that changed, none"| R
#     S -.->|"requirements: not in its schema"| X
#     classDef parent fill:#eaf2f8,stroke:#2471a3
#     classDef collector fill:#fef9e7,stroke:#b7950b
#     class T,R parent
#     class M,S collector
# ```
#
# **Down.** In deepagents' default
# [isolated mode](../docs/glossary.md#isolated-mode) the collector gets its
# system prompt and one human message, the task description, as printed
# above. The user's message does not go down.
#
# **Up.** When the collector ends, `task` returns the keys of its final
# state that changed (except `messages` and a few others), plus one
# ToolMessage with its last answer. A graph keeps only the keys its schema
# declares (its `.channels`), and drops a write to any other key without
# an error. The collector, and its state after a run of its own:

# %%
alone = collector.invoke({"messages": [HumanMessage(FIELDS)]})
Table(
    [
        {
            "collector declares requirements": "requirements" in collector.channels,
            "collector's state after its run": sorted(alone),
            "parent declares requirements": "requirements" in broken.channels,
            "task returned keys": recorder.updates[0]["update keys"],
        }
    ]
)

# %% [markdown]
# So the cause is the collector's schema: its tool ran, and its write had
# no key to land in. The contexts are not isolated either: both agents'
# tools share Python objects, which is why the write-up's cache (section
# 4) works within a turn.
#
# ## 3. The fix: one schema for both
# Build the collector with the parent's schema. It now declares
# `requirements` with the reducer, and `task` brings the key up:

# %%
recorder = CommandRecorder(["task"])
fixed = parent_agent(collector_agent(RequirementsState), middleware=[recorder])
state = fixed.invoke(USER)
Table(
    [
        {
            "task returned keys": recorder.updates[0]["update keys"],
            "parent holds": list(state["requirements"]),
        }
    ]
)

# %% [markdown]
# A [declarative subagent](../docs/glossary.md#declarative-subagent) (a
# dict from which deepagents builds the graph) gets the parent's
# `state_schema` without a line.
#
# The package's `agentstate.rds.build_shared_schema_agent` is this fix on
# the full RDS agent of stages 01-03, with a declarative collector whose
# model is `collect`. Its parent holds the same fields:

# %%
from agentstate.fixtures import collector_model
from agentstate.rds import build_shared_schema_agent

package = build_shared_schema_agent(
    ScriptedChatModel(script=[DELEGATE, READ, DONE]), collector_model()
)
package_holds = package.invoke(USER)["requirements"]
Table(
    [
        {
            "package's parent holds": list(package_holds),
            "same as the fix": package_holds == state["requirements"],
        }
    ]
)

# %% [markdown]
# ## 4. Prove it: who sees what, schema fix versus cache fix
# The write-up's fix kept the split schema. It added a cache of this
# turn's fields that both agents' tools share, dropped after each turn,
# and mirrored state plus cache to `/requirements.json`, the file the user
# looks at:

# %%
from deepagents.backends.utils import create_file_data
from langchain.agents.middleware import AgentMiddleware

turn_cache = {}  # this turn's fields: one dict for every tool in the process


@tool("store_requirement")
def store_in_cache(field_name: str, value: str | int, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    turn_cache[field_name] = value
    return store_requirement.func(field_name, value, runtime)


@tool("get_collected_requirements")
def read_with_cache(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps({**runtime.state.get("requirements", {}), **turn_cache})


class MirrorFile(AgentMiddleware):
    def after_agent(self, state, runtime):  # after each turn: the file, then the cache is dropped
        fields = {**state.get("requirements", {}), **turn_cache}
        turn_cache.clear()
        if fields:
            return {"files": {"/requirements.json": create_file_data(json.dumps(fields))}}


# %% [markdown]
# Three builds on one script. Turn 1 delegates and reads, turn 2 reads
# again, then a new agent over the same SQLite file (a restart) reads once
# more. Each column counts the fields the parent's reader listed, the last
# one those in `/requirements.json`.

# %%
from langgraph.checkpoint.sqlite import SqliteSaver


def fields_read(state):
    reads = [m for m in state["messages"] if m.name == "get_collected_requirements"]
    return len(json.loads(reads[-1].text))


CONFIG = {"configurable": {"thread_id": "t"}}


def who_sees_what(options, db):
    options = {**options, "middleware": [MirrorFile()]}
    with SqliteSaver.from_conn_string(db) as saver:
        script = [DELEGATE, READ, DONE, READ, DONE]  # two turns
        agent = parent_agent(script=script, checkpointer=saver, **options)
        row = {"same turn": fields_read(agent.invoke(USER, CONFIG))}
        row["next turn"] = fields_read(agent.invoke(USER, CONFIG))
    with SqliteSaver.from_conn_string(db) as saver:  # a new agent over the same file: a restart
        agent = parent_agent(script=[READ, DONE], checkpointer=saver, **options)
        state = agent.invoke(USER, CONFIG)
    file = state["files"].get("/requirements.json")
    in_file = len(json.loads(file["content"])) if file else 0
    return {**row, "after restart": fields_read(state), "file after restart": in_file}


import tempfile

builds = {
    "split schema (broken)": {"collector": collector_agent()},
    "cache fix (the write-up)": {
        "collector": collector_agent(store=store_in_cache),
        "tools": [read_with_cache],
    },
    "one schema (the fix)": {"collector": collector_agent(RequirementsState)},
}
folder = tempfile.mkdtemp()
Table(
    {"build": build, **who_sees_what(options, f"{folder}/{i}.db")}
    for i, (build, options) in enumerate(builds.items())
)

# %% [markdown]
# With the cache the parent reads the five fields in the same turn, but
# they never enter state. At the next turn and after a restart the agent
# has lost them, while the file still lists all five. The schema fix puts
# them in state, which the [checkpointer](../docs/glossary.md#checkpointer)
# keeps, and the file agrees.
#
# ## A list comes back doubled
# `task` returns a changed key *whole*, and the parent's reducer folds it
# into its own value. A dict merge does not mind. A list with `operator.add`
# (append) gets its own items a second time. A parent starts with the note
# `pre`, and a note-taker subagent adds `new`:

# %%
import operator


class NotesState(RequirementsState):
    notes: Annotated[NotRequired[list], operator.add]


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Add a note."""
    done = ToolMessage("Noted.", tool_call_id=runtime.tool_call_id)
    return Command(update={"notes": [text], "messages": [done]})


note_taker = create_agent(
    ScriptedChatModel(script=[reply(tool_call("add_note", text="new")), reply(text="Noted.")]),
    [add_note],
    state_schema=NotesState,
)
script = [reply(tool_call("task", subagent_type="note-taker", description="Add: new")), DONE]
notes_parent = create_deep_agent(
    ScriptedChatModel(script=script),
    subagents=[{"name": "note-taker", "description": "Adds notes.", "runnable": note_taker}],
    state_schema=NotesState,
)
notes = notes_parent.invoke({**USER, "notes": ["pre"]})["notes"]
notes

# %% [markdown]
# The note-taker returned `["pre", "new"]`, and the parent appended it to
# its own `["pre"]`. A key that crosses the boundary needs a reducer that
# keeps one copy of what it holds (exercise 3).
#
# ## 5. What the doctor says
# The [doctor](../docs/glossary.md#doctor), `agentstate.doctor.diagnose`,
# reads a compiled graph without running it. One row per hazard in either
# build of sections 1 and 3:

# %%
from agentstate.display import compare_findings
from agentstate.doctor import diagnose

reports = {"broken build": diagnose(broken), "fixed build": diagnose(fixed)}
compare_findings(reports, subagents=["requirements-collector"])

# %% [markdown]
# A *note* is what the doctor cannot decide from the graph alone: a reader
# in the same reply as `task` would see the state from before it
# ([notebook 03](03_same_turn_visibility.ipynb)).
#
# ## A knob: who declares `requirements`
# Run the cells above first. Each position gives a different answer.

# %%
from langgraph.errors import InvalidUpdateError


class PlainState(AgentState):
    requirements: NotRequired[dict]  # no reducer


SCHEMAS = {  # (the parent's, the collector's)
    "the parent only": (RequirementsState, AgentState),
    "the collector only": (AgentState, RequirementsState),
    "both, one schema": (RequirementsState, RequirementsState),
    "both, no reducer": (PlainState, PlainState),
}


def declared_by(who="the parent only"):
    parent_schema, collector_schema = SCHEMAS[who]
    recorder = CommandRecorder(["task"])
    agent = parent_agent(
        collector_agent(collector_schema), state_schema=parent_schema, middleware=[recorder]
    )
    try:
        got = f"{fields_read(agent.invoke(USER))} fields"
    except InvalidUpdateError:
        return Table([{"error": "InvalidUpdateError (the collector's 5 parallel writes)"}])
    return Table([{"task returned keys": recorder.updates[0]["update keys"], "reader got": got}])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    declared_by, who=widgets.Dropdown(options=list(SCHEMAS), description="declared by")
)

# %% [markdown]
# On the collector only, `requirements` crosses up and the parent drops
# it: both sides must declare the key. Without the reducer the collector's
# own five parallel stores fail, as in stage 02.
#
# ## Summary
# - A subagent whose schema lacks `requirements` drops its own writes, so
#   the parent sees no field. The cause is the schema, not isolation.
# - By default the subagent receives only the task description.
# - One schema for both brings `requirements` up, and the fields last
#   across turns and a restart. The cache shows them in the same turn only.
# - `task` returns a key whole: a list with `operator.add` comes back
#   doubled.
# - Going further: [idempotent reducers, fork mode, and the user's message
#   shown twice](going_further/04_lists_and_fork_mode.ipynb).
#
# ## Exercises
# 1. Build the collector with `PlainState` and keep `RequirementsState` on
#    the parent. Which fails: two `task` calls of one field each, or one
#    `task` of two fields?
# 2. Give the collector a tool that writes `todos` (the todo list's key)
#    and declare `todos` in its schema. Do its todos reach the parent?
# 3. Make `notes` a list of dicts with an `id`, and write a reducer that
#    merges by id. Show that the note-taker no longer doubles `pre`, and
#    can update a note in place.

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
# - Look inside: what goes down to the collector, and what comes back up.
# - Fix it with one state schema, and compare it with the cache.

# %% [markdown]
# ## 1. Reproduce: the parent sees nothing
# A [state schema](../docs/glossary.md#state-schema) lists the keys of an
# agent's state. `RequirementsState` adds `requirements` to `AgentState`
# (the messages), with `operator.or_` as its reducer: it merges two dicts.
# One tool writes a field, one reads them all.

# %%
import json
import operator
from typing import Annotated, NotRequired

from langchain.agents import AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict], operator.or_]


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

from agentstate.lessons.fixtures import POSTGRES_FIELDS
from agentstate.models import PolicyChatModel, ScriptedChatModel, reply, tool_call


def collect(messages):
    """The collector's reply: store each field of the task, then report."""
    if isinstance(messages[-1], HumanMessage):
        print("collector was given:", [m.type for m in messages])
        fields = json.loads(messages[-1].text)
        return reply(
            *(tool_call("store_requirement", field_name=k, value=v) for k, v in fields.items())
        )
    stored = [m for m in messages if isinstance(m, ToolMessage) and m.status != "error"]
    return reply(text=f"Stored {len(stored)} field(s).")


FIELDS = json.dumps(POSTGRES_FIELDS)
DELEGATE = reply(tool_call("task", subagent_type="requirements-collector", description=FIELDS))
READ, DONE = reply(tool_call("get_collected_requirements")), reply(text="Done.")
USER = {"messages": [("user", "Give me a Postgres 15.5 manifest")]}

# %% [markdown]
# The two agents, as a developer writes them. The collector is a plain
# [`create_agent`](../docs/glossary.md#create-agent). The parent is a
# [`create_deep_agent`](../docs/glossary.md#create-deep-agent) that gets
# the collector as a *compiled subagent* (a name, a description, the
# graph). Its scripted model calls `task`, then reads, then says "Done.".

# %%
from deepagents import create_deep_agent
from langchain.agents import create_agent


def collector_agent(schema=AgentState):
    model = PolicyChatModel(policy=collect)
    prompt = "Store each field you are given."
    return create_agent(model, [store_requirement], system_prompt=prompt, state_schema=schema)


def parent_agent(collector, schema=RequirementsState, script=(DELEGATE, READ, DONE), **options):
    subagent = {"name": "requirements-collector", "description": "Collects RDS requirements."}
    subagents = [{**subagent, "runnable": collector}]
    model, tools = ScriptedChatModel(script=list(script)), [get_collected_requirements]
    return create_deep_agent(model, tools, subagents=subagents, state_schema=schema, **options)


# %% [markdown]
# `declared_by` runs one turn with `requirements` declared by the parent
# only, the collector only, or both. `CommandRecorder`, a middleware (code
# that wraps each tool call), records the keys `task` returned. The
# developer declared the key on the parent only:

# %%
from agentstate.lessons.display import Table
from agentstate.tracing import CommandRecorder

SCHEMAS = {  # who declares requirements: (the parent's schema, the collector's)
    "the parent only": (RequirementsState, AgentState),
    "the collector only": (AgentState, RequirementsState),
    "both, one schema": (RequirementsState, RequirementsState),
}


def declared_by(who="the parent only"):
    parent_schema, collector_schema = SCHEMAS[who]
    recorder = CommandRecorder(["task"])
    agent = parent_agent(collector_agent(collector_schema), parent_schema, middleware=[recorder])
    said = {m.name: m.text for m in agent.invoke(USER)["messages"] if m.type == "tool"}
    got = f"{len(json.loads(said['get_collected_requirements']))} fields"
    row = {"collector said": said["task"], "task returned keys": recorder.updates[0]["update keys"]}
    return Table([{**row, "parent's reader got": got}])


declared_by("the parent only")

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
# declares (its `.channels`). It drops a write to any other key without an
# error. Here is the collector on its own, and its state after a run:

# %%
collector = collector_agent()
alone = collector.invoke({"messages": [HumanMessage(FIELDS)]})
Table(
    [
        {
            "collector declares requirements": "requirements" in collector.channels,
            "collector's state after its run": sorted(alone),
            "parent declares requirements": "requirements" in parent_agent(collector).channels,
        }
    ]
)

# %% [markdown]
# So the cause is the collector's schema: its tool ran, and its write had
# no key to land in. Nor are the contexts isolated: both agents' tools run
# in one process and can share objects, which is why the write-up's cache
# works.
#
# ## 3. The fix: one schema for both
# Build the collector with the parent's schema, and `task` brings
# `requirements` up:

# %%
declared_by("both, one schema")

# %% [markdown]
# A [declarative subagent](../docs/glossary.md#declarative-subagent) (a
# dict from which deepagents builds the graph) gets the parent's schema
# without a line. The package's `agentstate.rds.build_shared_schema_agent`
# is this fix on the full RDS agent, with a declarative collector. Given the
# same two models, its parent holds the same fields:

# %%
from agentstate.rds import build_shared_schema_agent

fixed = parent_agent(collector_agent(RequirementsState))
package = build_shared_schema_agent(
    ScriptedChatModel(script=[DELEGATE, READ, DONE]), PolicyChatModel(policy=collect)
)
package_holds = package.invoke(USER)["requirements"]
Table(
    [
        {
            "package's parent holds": list(package_holds),
            "same as the fix": package_holds == fixed.invoke(USER)["requirements"],
        }
    ]
)

# %% [markdown]
# ## 4. Prove it: who sees what, schema fix versus cache fix
# The write-up kept the split schema and added a cache of the turn's
# fields, shared by both agents' tools and emptied after each turn. It
# also copied state plus cache to `/requirements.json`, the file the user
# reads. The package builds all three fixes on the full RDS agent (going
# further 04 writes the cache out). `who_sees_what` runs each: turn 1
# delegates and reads, turn 2 reads again, then a new agent over the same
# SQLite file (a restart) reads. Each column counts the fields read, the
# last one those in the file:

# %%
import tempfile

from agentstate.lessons.fixtures import who_sees_what
from agentstate.rds import build_cache_fix_agent, build_split_schema_agent

builds = {
    "split schema (broken)": build_split_schema_agent,
    "cache fix (the write-up)": build_cache_fix_agent,
    "one schema (the fix)": build_shared_schema_agent,
}
folder = tempfile.mkdtemp()
Table(
    {"build": name, **who_sees_what(build, POSTGRES_FIELDS, f"{folder}/{i}.db")}
    for i, (name, build) in enumerate(builds.items())
)

# %% [markdown]
# With the cache the parent reads the five fields in the same turn, but
# they never enter state: at the next turn the agent has lost them, while
# the file still lists all five. The schema fix puts them in state, which
# the [checkpointer](../docs/glossary.md#checkpointer) keeps.
#
# ## A list comes back doubled
# `task` returns a changed key *whole*, and the parent's reducer folds it
# into its own value. A dict merge does not mind, but a list with
# `operator.add` (append) gets its own items again. A parent starts with
# the note `pre`, and a note-taker subagent adds `new`:


# %%
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
# its own `["pre"]`. A list that crosses the boundary needs a reducer that
# keeps one copy (exercise 3).
#
# ## 5. What the doctor says
# The [doctor](../docs/glossary.md#doctor), `agentstate.doctor.diagnose`,
# reads a compiled graph without running it. Both builds:

# %%
from agentstate.doctor import diagnose
from agentstate.lessons.display import compare_findings

broken = parent_agent(collector_agent())
reports = {"broken build": diagnose(broken), "fixed build": diagnose(fixed)}
compare_findings(reports, subagents=["requirements-collector"])

# %% [markdown]
# A *note* is what it cannot decide from the graph alone: a reader in the
# same reply as `task` would see the state from before it (notebook 03).
#
# ## A knob: who declares `requirements`
# Run the cells above first. Each position gives a different answer.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    declared_by, who=widgets.Dropdown(options=list(SCHEMAS), description="declared by")
)

# %% [markdown]
# On the collector only, `requirements` crosses up and the parent drops
# it: both sides must declare the key.
#
# ## Summary
# - A subagent whose schema lacks `requirements` drops its own writes
#   without an error. The cause is the schema, not isolation.
# - One schema for both brings the key up, and the fields last across turns
#   and a restart. The cache shows them in the same turn only.
# - `task` returns a key whole: a list with `operator.add` comes back
#   doubled.
# - Going further: [the write-up's cache written out, idempotent reducers,
#   fork mode, and the user's message shown
#   twice](going_further/04_lists_and_fork_mode.ipynb).
#
# ## Exercises
# 1. Keep `RequirementsState` on the parent, and build the collector with a
#    `PlainState` whose `requirements` has no reducer. Which fails: two
#    `task` calls of one field each, or one `task` of two fields?
# 2. Give the collector a tool that writes `todos` (the todo list's key)
#    and declare `todos` in its schema. Do its todos reach the parent?
# 3. Make `notes` a list of dicts with an `id`, and write a reducer that
#    merges by id. Show that the note-taker no longer doubles `pre`, and
#    can update a note in place.

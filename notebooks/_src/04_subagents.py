# %% [markdown]
# # 04 · Subagents: what crosses the `task` boundary, and why
#
# A [subagent](../docs/glossary.md#subagent) is an agent that the
# *parent* agent starts for one job with its `task` tool. In
# the RDS agent (it collects an Amazon RDS database's settings), the
# collector subagent stores five fields, says "Stored 5 field(s).", and
# the parent finds none. The changelog ([where this comes
# from](../README.md#where-this-comes-from)) blamed "isolated execution
# contexts" and added a cache. This lesson finds the cause in the
# collector's state schema.

# %% [markdown]
# ## Recap
# Lesson 02: a field-merge [reducer](../docs/glossary.md#reducer) keeps
# every parallel write to `requirements`. Lesson 03: a tool reading state
# in a [batch](../docs/glossary.md#batch) (one model reply's tool calls)
# sees the state from before the batch.
#
# ## Goals
# - Reproduce: the parent sees none of five stored fields.
# - Look inside: which keys go down `task` and come back up.
# - Fix it with one schema; compare with the cache.
#
# Releases with these hazards:
# [subagent-drops-key](../docs/hazards-by-version.md#subagent-drops-key),
# [list-doubled-by-subagent](../docs/hazards-by-version.md#list-doubled-by-subagent).

# %% [markdown]
# ## 1. Reproduce: the parent sees nothing
# A [state schema](../docs/glossary.md#state-schema) lists an agent's
# state keys. From `agentstate`, this series' package: lesson 02's
# `RequirementsState` and `store_requirement`; `collector_model`, a
# [scripted model](../docs/glossary.md#scripted-model) (fixed replies) that
# stores its task's fields in one reply; `get_collected_requirements`, the
# parent's reader; `parent_script`, the parent's model (call `task`, read,
# say "Done.").

# %% [markdown]
# The two agents, as a developer writes them: the collector is a plain
# [`create_agent`](../docs/glossary.md#create-agent) (LangChain's agent
# loop), the parent a [`create_deep_agent`](../docs/glossary.md#create-deep-agent)
# (from [deepagents](../docs/glossary.md#deepagents), LangChain's library
# for agents with subagents) that gets the compiled collector as `runnable`.

# %%
from deepagents import create_deep_agent
from langchain.agents import AgentState, create_agent

from agentstate.lessons.fixtures import RequirementsState, collector_model, store_requirement
from agentstate.lessons.subagents import get_collected_requirements, parent_script, what_each_said


def collector_agent(schema=AgentState, model=None):
    return create_agent(model or collector_model(), [store_requirement], state_schema=schema)


def parent_agent(collector, schema=RequirementsState, model=None, **options):
    subagent = {"name": "requirements-collector", "description": "Collects RDS requirements."}
    model, tools = model or parent_script(), [get_collected_requirements]
    subagents = [{**subagent, "runnable": collector}]
    return create_deep_agent(model, tools, subagents=subagents, state_schema=schema, **options)


# %% [markdown]
# The developer declared `requirements` on the parent only. One turn:

# %%
from agentstate.lessons.fixtures import user_turn

broken = parent_agent(collector_agent())
what_each_said(broken.invoke(user_turn()))

# %% [markdown]
# ## 2. Look inside: down and up the `task` boundary
#
# ```mermaid
# flowchart LR
#   P["parent's state<br/>messages, files, requirements"]
#   C["collector<br/>keeps the keys its schema declares"]
#   P -- "down: all but the kept-out keys;<br/>messages = one human message: the task" --> C
#   C -- "up: changed keys except messages and kept-out keys;<br/>+ a ToolMessage: its reply" --> P
# ```
#
# `messages` is replaced both ways: the task goes down; the collector's
# last reply ("Stored 5 field(s)." above) comes up as a ToolMessage.

# %% [markdown]
# **Down.** `TaskInputs`, a callback (called as each step starts), records
# the dict `task` hands the collector. `what_went_down` prints the messages
# the collector's model got (type, first characters) and the parent's keys
# not handed down:

# %%
from agentstate.lessons.subagents import what_went_down
from agentstate.tracing import TaskInputs

model, handed = collector_model(), TaskInputs()
parent = parent_agent(collector_agent(model=model))
parent.invoke(user_turn(), config={"callbacks": [handed]})
what_went_down(handed, model, parent)

# %% [markdown]
# `requirements` goes down too, but this collector's schema lacks it. Its
# model got one human message: the task (the fields as JSON). `files` is
# deepagents' virtual file store, kept in state, not on disk.

# %% [markdown]
# **Kept out**, both ways (printed going down): `structured_response` (a
# final answer in a set format) and the keys deepagents' middleware marks
# private: `jump_to` and the three starting with an underscore. `todos` is
# kept out too; deepagents 0.7.32's `create_deep_agent` adds none by default
# (exercise 2).

# %% [markdown]
# **Up.** A compiled graph keeps only the keys its schema declares (its
# `.channels`), and drops writes to other keys silently.
# `CommandRecorder`, a [middleware](../docs/glossary.md#middleware) around
# each tool call, records the keys `task` brought up besides `messages`,
# for each choice of who declares `requirements`:

# %%
from agentstate.lessons.display import Table
from agentstate.lessons.subagents import task_report
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
    return task_report(who, agent.invoke(user_turn()), recorder)


Table(declared_by(who) for who in SCHEMAS)  # the three one-row tables, stacked

# %% [markdown]
# Middle row: `task` brings `requirements` up; the parent, lacking it,
# drops it: 0 fields. A write reaches the parent's reader only if it
# passes two doors:
#
# ```mermaid
# flowchart LR
#     W["collector's tool<br/>writes requirements"] --> A{{"collector<br/>declares it?"}}
#     A -- "yes: task<br/>brings it up" --> B{{"parent<br/>declares it?"}}
#     B -- "yes: its reducer<br/>merges it" --> R["the reader<br/>sees 5 fields"]
#     A -- no --> X["dropped,<br/>no error"]
#     B -- no --> X
# ```
#
# So the cause is the schema, not isolation: section 4's cache, a dict
# both agents' tools share, shows the fields.

# %% [markdown]
# ## 3. The fix: one schema for both
# Build the collector with the parent's schema: the last row above. The
# package's `build_shared_schema_agent` is this fix on the full RDS agent,
# with a [declarative subagent](../docs/glossary.md#declarative-subagent)
# (a dict deepagents builds with the parent's schema):

# %%
from agentstate.rds import build_shared_schema_agent

fixed = parent_agent(collector_agent(RequirementsState))
package = build_shared_schema_agent(parent_script(), collector_model())
package_holds = package.invoke(user_turn())["requirements"]
same = package_holds == fixed.invoke(user_turn())["requirements"]
Table([{"package's parent holds": list(package_holds), "same as the fix": same}])

# %% [markdown]
# ## 4. Prove it: the schema fix against the cache fix
# The changelog kept the split schema and added a cache:
#
# ```mermaid
# flowchart LR
#     S["collector's<br/>store_requirement"] -->|"also writes"| C[("turn_cache:<br/>a dict")]
#     C --> G["parent's reader:<br/>state + cache"]
#     C -->|"after the turn:<br/>copied, then emptied"| F["/requirements.json"]
# ```
#
# Its code is in [going further 04](going_further/04_lists_and_fork_mode.ipynb).

# %% [markdown]
# `who_sees_what` runs one build: turn 1 delegates and reads, turn 2 reads
# again, then a new agent on the same SQLite database (a restart) reads.
# Columns count the fields the reader got; the last, those in
# `/requirements.json`:

# %%
from agentstate.lessons.fixtures import who_sees_what
from agentstate.rds import build_cache_fix_agent, build_split_schema_agent

builds = {
    "split schema (broken)": build_split_schema_agent,
    "cache fix (the changelog)": build_cache_fix_agent,
    "one schema (the fix)": build_shared_schema_agent,
}
Table({"build": name, **who_sees_what(build)} for name, build in builds.items())

# %% [markdown]
# The cache fix's reader reads state plus the cache, emptied after each
# turn: its next-turn 0 says the fields never entered `requirements`;
# `/requirements.json` lists all five. The schema fix puts them in state,
# which the [checkpointer](../docs/glossary.md#checkpointer) saves.

# %% [markdown]
# ## A list comes back doubled
# `task` brings a changed key up *whole*, into the parent's reducer:
# harmless for a dict merge, not for a list with `operator.add` (append):
#
# ```mermaid
# flowchart LR
#     P["parent:<br/>notes = [pre]"] -->|down| S["note-taker adds new:<br/>[pre, new]"]
#     S -->|"up, whole"| R["operator.add:<br/>[pre] + [pre, new]"]
#     R --> D["parent:<br/>[pre, pre, new]"]
# ```
#
# The package's note-taker, a subagent that adds one note, shows it:

# %%
from agentstate.lessons.fixtures import AddNotesState, build_notes_agent

# AddNotesState: `notes`, a list whose reducer is operator.add
notes = build_notes_agent(AddNotesState).invoke({**user_turn(), "notes": ["pre"]})["notes"]
notes

# %% [markdown]
# A list that crosses the boundary needs a reducer that keeps one copy
# (exercise 3).
#
# ## 5. What the doctor says
# The [doctor](../docs/glossary.md#doctor) reads a compiled agent's state
# schema and its tools' code, without running it, and names the hazards
# these lessons teach. `diagnose` reads both builds (`subagents=` names
# where a finding sits). The fixed build gets a *note*: its `task` now
# brings `requirements` up, which a reader in `task`'s own batch would miss
# (lesson 03).

# %%
from agentstate.doctor import diagnose
from agentstate.lessons.display import compare_findings

reports = {"broken build": diagnose(broken), "fixed build": diagnose(fixed)}
compare_findings(reports, subagents=["requirements-collector"])

# %% [markdown]
# The broken build gets none (its `task` brings nothing up). The parent's
# script reads in its next reply (5 fields above): nothing to act on.

# %% [markdown]
# ## Try it: who declares `requirements`
# Run the cells above first; the dropdown runs one turn per choice.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob = widgets.Dropdown(options=list(SCHEMAS), description="declared by")
knob_widget = widgets.interact(declared_by, who=knob)

# %% [markdown]
# ## Summary
# - A subagent whose schema lacks `requirements` drops its own writes
#   without an error. The cause is the schema, not isolation.
# - One schema for both brings the key up, and the fields last across
#   turns and a restart. The cache shows them in the same turn only.
# - `task` brings a key up whole: a list with `operator.add` doubles.
# - Going further: [the cache written out, idempotent reducers, fork
#   mode](going_further/04_lists_and_fork_mode.ipynb).

# %% [markdown]
# ## Exercises
# 1. Keep `RequirementsState` on the parent; build the collector with
#    `agentstate.rds.PlainRequirementsState` (no reducer). Which fails: two
#    `task` calls of one field each (`model=parent_script(one, other)`,
#    collector model `collector_model(tasks=2)`), or one `task` of two fields?
# 2. Give the collector a tool writing `todos`, declared in its schema: do
#    its todos stay below?
# 3. Make `notes` a list of dicts with an `id` and a reducer that merges by
#    id: `pre` is no longer doubled, and a subagent can update a note.

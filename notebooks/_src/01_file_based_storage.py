# %% [markdown]
# # 01 · File-based requirements storage, and the fields it loses
#
# Our agent is an RDS manifest generator. A user describes the database they
# want ("a Postgres 15.5 instance with sensible defaults"), the agent collects
# the requirements one field at a time with `store_requirement`, and finally
# writes a Project Planton `AwsRdsInstance` manifest. In its first design each
# `store_requirement` call keeps the collected fields in a file,
# `/requirements.json`, inside deepagents' virtual filesystem: read the file,
# add one field, write the file back. It works while the model stores one
# field per reply. Then a model stores five fields in one reply, and four of
# them disappear without an error. This notebook reproduces that loss with the
# real libraries, measures it, shows exactly where it comes from, and ends on
# the two smallest layouts that keep every field with files alone.

# %% [markdown]
# ## Recap
# This is the first stage, so there is nothing to recap. Two facts carry the
# series: LangGraph runs a graph in **super-steps** (every node scheduled for a
# step runs, then all their writes are applied together), and each state key
# has a **reducer** that decides how several writes to it combine. Both are
# shown at work below.
#
# ## Goals
# - Reproduce the loss: five parallel `store_requirement` calls keep one field.
# - Find which field survives, and show that it is not the last call to finish.
# - See why: the thread timeline, the state after each super-step, the reducer.
# - Turn a knob: whatever the number of parallel calls, one field survives.
# - Learn to write the two smallest safe alternatives (one file per field, one
#   call per model step), each proved, and what each costs.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "langchain-core", "deepagents")}
# The lines this lesson was verified against; a moved pin must be re-checked.
assert versions["langgraph"].startswith("1.2.") and versions["deepagents"].startswith("0.7.")
versions

# %% [markdown]
# ## Reproduce: five fields in one reply
# The scripted model (the offline default of this series) answers the user's
# request with one AIMessage holding five `store_requirement` calls. The
# tools keep requirements with `FileStorage` (its code is shown in "How the
# fix is written" below). A small delay inside each tool makes the **last**
# call of the message finish **first**, so we can tell "last in the message"
# from "last to finish".

# %%
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    file_fields,
    finish_last_first,
    one_batch_model,
    user_turn,
)
from agentstate.rds import build_file_storage_agent
from agentstate.tracing import ToolTimeline

order = list(POSTGRES_FIELDS)
timeline = ToolTimeline()
delay = finish_last_first(order, unit=0.1)  # call 1 sleeps 0.5 s ... call 5 sleeps 0.1 s
agent = build_file_storage_agent(
    one_batch_model(POSTGRES_FIELDS), delay=delay, middleware=[timeline]
)
state = agent.invoke(user_turn())
survivors = file_fields(state)
survivors

# %%
assert len(survivors) == 1, survivors
assert list(survivors) == [order[-1]]  # the LAST call of the AIMessage survives
{"fields stored": len(order), "fields in /requirements.json": len(survivors)}

# %% [markdown]
# Every tool reported success; the model has no reason to doubt it:

# %%
from agentstate.tracing import tool_replies

replies = [m.content for m in tool_replies(state)]
assert replies == [f"Stored {f}." for f in order]
replies

# %% [markdown]
# ## Look inside: who ran where, and when
# A widely shared write-up about this agent assumed that **"tools run
# single-threaded within a turn"**, so that a read-modify-write of one file
# could not race. `ToolTimeline` is a middleware that wraps every tool call
# and records its super-step and thread. Timings vary from run to run, so
# this table is not compared; its assertions still hold every time.

# %%
# NBVAL_IGNORE_OUTPUT
from agentstate.display import Table
from agentstate.fixtures import timeline_rows

rows = timeline_rows(timeline.events)
assert len({r["step"] for r in rows}) == 1  # one super-step
assert len({r["thread"] for r in rows}) == 5  # five threads
assert [r["finished"] for r in rows] == [5, 4, 3, 2, 1]  # last call finished first
Table(rows)

# %%
# NBVAL_IGNORE_OUTPUT
from agentstate.tracing import plot_timeline

plot_timeline(timeline.events, title="five store_requirement calls, one super-step");

# %% [markdown]
# The belief is wrong: the five calls of one reply ran in **one** super-step
# on **five** threads at once.

# %%
super_steps = len({e.step for e in timeline.events})
threads = {"super-steps": super_steps, "threads": timeline.thread_count()}
assert threads == {"super-steps": 1, "threads": 5}, threads
threads

# %% [markdown]
# A second common belief: **"the last call to finish wins"**. Here the
# survivor, `username`, is call 5 of 5 and it finished **first**. What
# decides is the position of the call in the AIMessage, as the next sections
# show.

# %%
last_in_message = timeline.events[-1]
finish_rank = [e.call_id for e in timeline.finish_order()].index(last_in_message.call_id) + 1
assert list(survivors) == [last_in_message.args["field_name"]] and finish_rank == 1
{"survivor": list(survivors)[0], "call #": last_in_message.position + 1, "finished": finish_rank}

# %% [markdown]
# ## Look inside: the state after each super-step
# With a checkpointer, LangGraph keeps the state after every super-step. How
# to read the table: **step** is the super-step that just ended (-1 is the
# empty state before the input, 0 is the input being written); **next** is
# what runs in the following super-step (`tools x5` = five tasks of the tools
# node, one per tool call; `(end)` = nothing left to run); **changed** lists
# the state keys that differ from the row above, i.e. what the nodes in the
# previous row's `next` wrote. The last two columns count messages and list
# the fields in the file.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.tracing import state_by_step

agent = build_file_storage_agent(one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "stage-01"}}
agent.invoke(user_turn(), config)
history = state_by_step(
    agent, config, lambda v: {"messages": len(v["messages"]), "file": sorted(file_fields(v))}
)
Table(history)

# %% [markdown]
# The file is empty until the tools' step is applied, and from then on it
# holds one field. The tools ran in step 3 (the row above says `next: tools
# x5`) and the file appears in row 3:

# %%
from agentstate.fixtures import graph_steps

steps = graph_steps(history)
assert steps[-1]["messages"] == 0 and steps[0]["changed"] == ["messages"]  # before / input
assert steps[2]["next"] == "tools x5" and "files" in steps[3]["changed"]
assert {e.step for e in timeline.events} == {3}  # the timeline's step for the tools
assert steps[3]["file"] == ["username"]
assert all(r["file"] in ([], ["username"]) for r in history)
{"tools ran in step": 3, "file after step 3": steps[3]["file"]}

# %% [markdown]
# The `next` column names nodes that LangGraph, LangChain and deepagents add
# to the graph. What each one does (this table lists exactly the nodes of this
# agent's graph):

# %%
from agentstate.fixtures import glossary_rows

glossary = Table(glossary_rows(agent))
shown = {n for r in history for n in r["next"].replace(" x5", "").split(", ")} - {"(end)"}
assert shown <= set(glossary.column("node"))
# the two hooks that write nothing in this run: their rows change no key
assert steps[0]["next"] == "PatchToolCallsMiddleware.before_agent" and steps[1]["changed"] == []
assert steps[4]["next"] == "_ParentNotifierMiddleware.after_agent" and steps[5]["changed"] == []
glossary

# %% [markdown]
# ## Look inside: the reducer of `files`
# Each call read the same empty file (the state *before* the step), added its
# own field and returned a whole new `/requirements.json`. LangGraph hands the
# five writes of the step to the `files` reducer **in task order**, which is
# the order of the calls in the AIMessage, not the order they finished in.
# This is deepagents' own reducer: for each path, a later write **replaces**
# the whole value.

# %%
from deepagents.middleware.filesystem import _file_data_delta_reducer

from agentstate.display import show_source

show_source(_file_data_delta_reducer)

# %% [markdown]
# We can call the real reducer with the five writes, in call order:

# %%
from agentstate.rds import REQUIREMENTS_PATH, json_file

writes = [{REQUIREMENTS_PATH: json_file({f: POSTGRES_FIELDS[f]})} for f in order]
merged = _file_data_delta_reducer({}, writes)
assert file_fields({"files": merged}) == {"username": "dbadmin"}
file_fields({"files": merged})

# %% [markdown]
# ## Look inside: shuffle the calls
# If the survivor is the last call *in the message*, reordering the calls must
# change it. Three shuffles, three different survivors, each the last call:

# %%
import random

shuffles = []
for seed in (7, 8, 11):
    shuffled = list(POSTGRES_FIELDS)
    random.Random(seed).shuffle(shuffled)
    fields = {f: POSTGRES_FIELDS[f] for f in shuffled}
    kept = file_fields(build_file_storage_agent(one_batch_model(fields)).invoke(user_turn()))
    shuffles.append({"call order": shuffled, "survivor": list(kept)[0]})
assert all(s["survivor"] == s["call order"][-1] for s in shuffles)
assert len({s["survivor"] for s in shuffles}) == 3
Table(shuffles)

# %% [markdown]
# ## A knob: how many parallel calls?
# Move the slider: whatever the number of calls in the reply, one field
# survives. (Widget output is not compared; the cell after it checks the same
# claim for fixed values.)

# %%
from agentstate.fixtures import label_fields


def survivors_for(n_calls: int) -> dict:
    fields = label_fields(n_calls)
    kept = file_fields(build_file_storage_agent(one_batch_model(fields)).invoke(user_turn()))
    return {"parallel calls": n_calls, "fields kept": len(kept), "lost": n_calls - len(kept)}


# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

widgets.interact(survivors_for, n_calls=widgets.IntSlider(value=5, min=1, max=20));

# %%
knob = Table(survivors_for(n) for n in (1, 2, 5, 10, 20))
assert knob.column("fields kept") == [1, 1, 1, 1, 1]
knob

# %% [markdown]
# ## The fix: not in this stage
# The real fix moves requirements out of the file and into a state key whose
# reducer merges fields: that is stage 02. With files alone there are two
# small layouts that keep every field, each with a cost. The next section
# writes both, piece by piece, after the piece that loses data.

# %% [markdown]
# ## How the fix is written
# ### The piece that loses data: `FileStorage.write`
# The tools are written once in the package over a *storage* strategy; stage
# 01 uses `FileStorage`. Its write path reads the file, (waits, standing in
# for real work), adds one field, and returns the **whole file** as the
# update:

# %%
from agentstate.rds import FileStorage

show_source(FileStorage.write)

# %% [markdown]
# Called five times on the same state, as the five parallel calls are (they
# all see the state from before the super-step), it returns five files, each
# holding **only its own field**. The `files` reducer then keeps the last:

# %%
before_step = {"files": {}}
updates = [FileStorage().write(before_step, None, f, v) for f, v in POSTGRES_FIELDS.items()]
each_holds = [sorted(file_fields(update)) for update in updates]
assert each_holds == [[f] for f in order]
each_holds

# %% [markdown]
# ### Safe alternative 1, piece 1: one path per field
# `PerFieldFileStorage` writes each field to its own path,
# `/requirements/<field>.json`. Parallel calls now write *different* keys of
# `files`, and the reducer above keeps every key it is given:

# %%
from agentstate.fixtures import PerFieldFileStorage

show_source(PerFieldFileStorage.write)

# %%
from agentstate.fixtures import store_then_read_model
from agentstate.rds import assemble_rds_agent

per_field = assemble_rds_agent(store_then_read_model(POSTGRES_FIELDS), PerFieldFileStorage())
per_field_state = per_field.invoke(user_turn())
paths = sorted(p for p in per_field_state["files"] if p.startswith("/requirements/"))
assert len(paths) == 5
paths

# %% [markdown]
# **Break it:** give every field the same path, and the stage 01 loss comes
# back: one file, one field.

# %%
from agentstate.fixtures import fields_seen_by_reader

same_path = PerFieldFileStorage(path_for=lambda field: "/requirements/all.json")
broken = assemble_rds_agent(store_then_read_model(POSTGRES_FIELDS), same_path).invoke(user_turn())
broken_paths = sorted(p for p in broken["files"] if p.startswith("/requirements/"))
assert broken_paths == ["/requirements/all.json"] and fields_seen_by_reader(broken) == 1
{"files": broken_paths, "fields the reader sees": fields_seen_by_reader(broken)}

# %% [markdown]
# ### Safe alternative 1, piece 2: a read that merges every file
# The manifest generator needs all requirements at once, so every reader
# (`get_collected_requirements`, `validate_manifest`,
# `generate_rds_manifest`) must merge the files back:

# %%
show_source(PerFieldFileStorage.read)

# %% [markdown]
# The model above read the requirements back in its **next** step: all five.
# **Break it:** keep the per-field writes but read `/requirements.json` as
# before, and the reader finds nothing, although all five files exist:

# %%
class PerFieldWritesOldRead(PerFieldFileStorage):
    read = FileStorage.read


old_read = assemble_rds_agent(store_then_read_model(POSTGRES_FIELDS), PerFieldWritesOldRead())
old_read_state = old_read.invoke(user_turn())
seen = {
    "merged read": fields_seen_by_reader(per_field_state),
    "old read": fields_seen_by_reader(old_read_state),
}
assert seen == {"merged read": 5, "old read": 0}
seen

# %% [markdown]
# ### Safe alternative 2: one `store_requirement` per model step
# Keep `FileStorage` as it is and have the model store one field per reply.
# Each call then reads the file written by the previous step. The lesson
# model for this is in the fixtures module:

# %%
from agentstate.fixtures import one_call_per_step_model

show_source(one_call_per_step_model)

# %%
serial_model = one_call_per_step_model(POSTGRES_FIELDS)
serial = file_fields(build_file_storage_agent(serial_model).invoke(user_turn()))
assert serial == POSTGRES_FIELDS
{"fields kept": len(serial), "model calls": serial_model.position}

# %% [markdown]
# **Break it:** the same storage, the same fields, but the model batches them
# in one reply (nothing in the storage stops a model from batching): one
# field.

# %%
batched_model = one_batch_model(POSTGRES_FIELDS)
batched = file_fields(build_file_storage_agent(batched_model).invoke(user_turn()))
assert len(batched) == 1
{"fields kept": len(batched), "model calls": batched_model.position}

# %% [markdown]
# ## Prove it: every layout, side by side
# The same five fields through each layout. The per-field files keep all five
# in one model round trip; one call per step keeps all five at the price of
# one model call per field (6 instead of 2); the shared file keeps one.

# %%
def run_layout(storage, model) -> dict:
    state = assemble_rds_agent(model, storage).invoke(user_turn())
    return {"fields kept": len(storage.read(state, None)), "model calls": model.position}


cases = {
    "one file, one batch": (FileStorage(), one_batch_model),
    "one file, one call per step": (FileStorage(), one_call_per_step_model),
    "one file per field, one batch": (PerFieldFileStorage(), one_batch_model),
}
layouts = Table(
    {"layout": name, **run_layout(storage, make_model(POSTGRES_FIELDS))}
    for name, (storage, make_model) in cases.items()
)
assert layouts.column("fields kept") == [1, 5, 5]
assert layouts.column("model calls") == [2, len(POSTGRES_FIELDS) + 1, 2]
assert REQUIREMENTS_PATH not in per_field_state["files"]  # no single file for the user
layouts

# %% [markdown]
# Neither alternative is the end of the story: a user who opens
# `/requirements.json` finds nothing with per-field files, and one call per
# step relies on the model never batching. Stage 02 keeps requirements in
# state, where a reducer merges them, and renders the one file from state.
#
# ## Summary
# - Five parallel read-modify-write calls on `/requirements.json` kept **one**
#   field; every tool said "Stored".
# - "Tools run single-threaded within a turn" is wrong: all five ran in one
#   super-step on five threads. Each read the state from before the step, so
#   each wrote a file holding only its own field.
# - "The last call to finish wins" is wrong too: the writes were applied in
#   the order of the calls in the AIMessage, and the `files` reducer replaces
#   a path's whole value, so the **last call in the message** survives (here
#   the one that finished first).
# - One file per field keeps all five (a write per path, a read that merges);
#   one call per model step keeps all five at the price of a model call per
#   field. Give every field the same path, or let the model batch, and the
#   loss is back.
#
# ## Exercises
# 1. Give `finish_last_first` a `unit` of 0 and run the reproduction several
#    times. Does the survivor change? Why not?
# 2. With `PerFieldFileStorage`, store the same field twice in one reply with
#    different values. Which value is kept, and why is that deterministic?
# 3. Run the batch with `config={"max_concurrency": 1}`. The calls now run one
#    after another: does that save the fields? Explain with the super-step rule.

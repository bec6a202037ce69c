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
# real libraries, measures it, and shows exactly where it comes from.

# %% [markdown]
# ## Recap
# This is the first stage, so there is nothing to recap. Two facts carry the
# series: LangGraph runs a graph in **super-steps** (every node scheduled for a
# step runs, then all their writes are applied together), and each state key
# has a **reducer** that decides how several writes to it combine.
#
# ## Goals
# - Reproduce the loss: five parallel `store_requirement` calls keep one field.
# - Find which field survives, and show that it is not the last call to finish.
# - See why: the thread timeline, the state after each super-step, the reducer.
# - Turn a knob: whatever the number of parallel calls, one field survives.
# - See that one call per model step loses nothing, and why that is no fix.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "langchain-core", "deepagents")}
assert all(versions.values())
versions

# %% [markdown]
# ## The broken storage
# The tools are written once in the package over a *storage* strategy. Stage 01
# uses `FileStorage`; here is its whole write path. Note the read, then the
# write of the **whole file**.

# %%
import inspect

from agentstate.rds import FileStorage

print(inspect.getsource(FileStorage.write))

# %% [markdown]
# ## Reproduce: five fields in one reply
# The scripted model (the offline default of this series) answers the user's
# request with one AIMessage holding five `store_requirement` calls. A small
# delay inside each tool makes the **last** call of the message finish
# **first**, so we can tell "last in the message" from "last to finish".

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
agent = build_file_storage_agent(
    one_batch_model(POSTGRES_FIELDS), delay=finish_last_first(order), middleware=[timeline]
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
from langchain_core.messages import ToolMessage

replies = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
assert replies == [f"Stored {f}." for f in order]
replies

# %% [markdown]
# ## Look inside: who ran where, and when
# `ToolTimeline` is a middleware that wraps every tool call. All five calls ran
# in the same super-step, each on its own thread. Timings vary from run to run,
# so this cell's output is not compared; its assertions still hold every time.

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
# So the survivor (`username`, call 5) is the call that finished **first**.
# Completion order does not decide anything. What does?
#
# ## Look inside: the state after each super-step
# With a checkpointer, LangGraph keeps the state after every super-step. The
# file is empty until the tools' step is applied, and then it holds one field.

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

# %%
after_tools = next(r for r in history if r["messages"] == 7)
assert after_tools["file"] == ["username"]
assert all(r["file"] in ([], ["username"]) for r in history)
after_tools

# %% [markdown]
# ## Look inside: the reducer of `files`
# Each call read the same empty file (the state *before* the step), added its
# own field and returned a whole new `/requirements.json`. LangGraph then hands
# the five writes of the step to the `files` reducer **in task order**, which
# is the order of the calls in the AIMessage. deepagents' reducer replaces a
# path's whole value, so the last write wins. We can call the real reducer:

# %%
from deepagents.middleware.filesystem import _file_data_delta_reducer

from agentstate.rds import REQUIREMENTS_PATH, json_file

writes = [{REQUIREMENTS_PATH: json_file({f: POSTGRES_FIELDS[f]})} for f in order]
merged = _file_data_delta_reducer({}, writes)
assert file_fields({"files": merged}) == {"username": "dbadmin"}
file_fields({"files": merged})

# %% [markdown]
# ## Shuffle the calls
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
# ## One call per step loses nothing, and fixes nothing
# If the model stores one field per reply, each call reads the file written by
# the previous step, so every field is kept:

# %%
from agentstate.fixtures import one_call_per_step_model

serial_model = one_call_per_step_model(POSTGRES_FIELDS)
serial = file_fields(build_file_storage_agent(serial_model).invoke(user_turn()))
assert serial == POSTGRES_FIELDS
{"fields kept": len(serial), "model calls": serial_model.position}

# %% [markdown]
# That costs one model round trip per field (6 calls instead of 2 here), and it
# relies on the model never batching calls, which a prompt cannot guarantee.
# The storage itself is still unsafe: the next stage moves requirements out of
# the file and into a state key whose reducer merges fields.

# %%
batched_model = one_batch_model(POSTGRES_FIELDS)
build_file_storage_agent(batched_model).invoke(user_turn())
calls = {"one batch": batched_model.position, "one call per step": serial_model.position}
assert calls == {"one batch": 2, "one call per step": len(POSTGRES_FIELDS) + 1}
calls

# %% [markdown]
# ## Summary
# - Five parallel read-modify-write calls on `/requirements.json` kept **one**
#   field; every tool said "Stored".
# - All five ran in one super-step on five threads. Each read the state from
#   before the step, so each wrote a file holding only its own field.
# - The writes were applied in the order of the calls in the AIMessage, and
#   the `files` reducer replaces a path's whole value: the **last call in the
#   message** survives, whichever finished last.
# - Serialising calls hides the loss at the price of a model round trip per
#   field; the storage is still wrong.
#
# ## Exercises
# 1. Give `finish_last_first` a `unit` of 0 and run the reproduction several
#    times. Does the survivor change? Why not?
# 2. Store each field in its own file (`/requirements/<field>.json`). How many
#    fields survive, and what would the manifest generator have to do instead?
# 3. Run the batch with `config={"max_concurrency": 1}`. The calls now run one
#    after another: does that save the fields? Explain with the super-step rule.

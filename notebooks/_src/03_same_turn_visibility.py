# %% [markdown]
# # 03 · Same-turn visibility: what a reader sees, and a cache that is not a race
#
# The user writes "Give me a Postgres 15.5 manifest with sensible defaults".
# A capable model does it all in one reply: a `store_requirement` call per
# field, and next to them `get_collected_requirements`, `validate_manifest` and
# `generate_rds_manifest`. With the stage 02 agent the readers find nothing,
# validation fails and no manifest is written, although every store
# succeeded. A widely shared write-up blamed "updates apply at the end of the
# turn" and added a cache in `runtime.config`. This notebook measures what
# really happens with today's libraries, shows why that cache cannot run, why
# its obvious repair fails silently and why a naive shared cache is a race,
# then builds a fix that is none of these, piece by piece.

# %% [markdown]
# ## Recap
# Stage 02 stored requirements in a `requirements` state key with a
# field-merge reducer, so parallel writes all survive; `/requirements.json`
# is synced after the turn; a checkpointer keeps state per `thread_id`.
#
# ## Goals
# - Reproduce: a reader in the writers' batch sees the state from before it.
# - Show that the next model step of the same invoke sees everything.
# - Run the write-up's `runtime.config` cache and its `get_config()` repair.
# - Measure a naive shared cache: a race.
# - Build the turn cache piece by piece (record, wait, merge, drop), break
#   each piece and watch the failure return; use it in an agent of your own.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "deepagents")}
assert versions["langgraph"].startswith("1.2.") and versions["langchain"].startswith("1.")
versions

# %% [markdown]
# ## Reproduce: readers next to the writers
# One scripted reply holds eight stores (a complete, valid set of fields) and
# the three readers; `user_turn()` is the user's request above.
# `reader_summary` shows each reader's reply in one line.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.fixtures import all_in_one_reply_model, reader_summary, user_turn
from agentstate.rds import build_reducer_agent
from agentstate.tracing import ToolTimeline

timeline = ToolTimeline()
stage02 = build_reducer_agent(
    all_in_one_reply_model(), middleware=[timeline], checkpointer=InMemorySaver()
)
config = {"configurable": {"thread_id": "stage-03"}}
state = stage02.invoke(user_turn(), config)
reader_summary(state)

# %%
from agentstate.fixtures import VALID_REQUIREMENTS

replies = reader_summary(state)
assert replies["get_collected_requirements"] == "0 fields"
assert replies["validate_manifest"] == "invalid:"
assert replies["generate_rds_manifest"].startswith("Error: cannot generate")
assert state["requirements"] == VALID_REQUIREMENTS  # yet every store landed
{"stored fields": len(state["requirements"]), "manifest": "/manifest.yaml" in state["files"]}

# %% [markdown]
# ## Look inside: one batch, parallel threads, one snapshot
# All eleven calls ran in one super-step, on more than one thread (timings
# vary, so this output is not compared; the cell still asserts both facts).
# `call #` is the call's position in the AIMessage, threads are named T1, T2...
# in order of first start, and `finished` is the order in which calls ended:

# %%
# NBVAL_IGNORE_OUTPUT
from agentstate.display import Table
from agentstate.fixtures import timeline_rows

rows = timeline_rows(timeline.events)
assert len({r["step"] for r in rows}) == 1 and len(rows) == 11
Table(rows)

# %% [markdown]
# The same run drawn: one bar per call, colour = thread.

# %%
# NBVAL_IGNORE_OUTPUT
from agentstate.tracing import plot_timeline

assert timeline.thread_count() > 1  # the batch ran on parallel threads
plot_timeline(timeline.events, title="one reply = one super-step: 8 stores, 3 readers");

# %% [markdown]
# A common belief is that **"tools run single-threaded within a turn"**, one
# after the other. Make each store take 0.1 s: if they ran one by one, no
# store would overlap another call. Every one of the eight does:

# %%
from agentstate.fixtures import overlapping_calls
from agentstate.simulation import SlowToolMiddleware

slow_stores = ToolTimeline()
build_reducer_agent(
    all_in_one_reply_model(),
    middleware=[slow_stores, SlowToolMiddleware("store_requirement", 0.1)],
).invoke(user_turn())
overlap = overlapping_calls(slow_stores.events, "store_requirement")
assert overlap == 8 and slow_stores.thread_count() > 1
{"stores that ran while another call was running": f"{overlap} of 8"}

# %% [markdown]
# Is the reader simply too early? Make it sleep 0.2 s, so it reads long after
# every store of its batch has returned:

# %%
from agentstate.fixtures import fields_seen_by_reader

late = ToolTimeline()
sleepy = build_reducer_agent(
    all_in_one_reply_model(),
    middleware=[late, SlowToolMiddleware("get_collected_requirements", 0.2)],
).invoke(user_turn())
reader = next(e for e in late.events if e.name == "get_collected_requirements")
last_store_end = max(e.end for e in late.events if e.name == "store_requirement")
read_after_stores = reader.start + 0.2 > last_store_end  # the read comes after the sleep
assert read_after_stores and fields_seen_by_reader(sleepy) == 0
{"read after every store had returned": read_after_stores,
 "fields it saw": fields_seen_by_reader(sleepy)}

# %% [markdown]
# So the reader does not lose a race: it reads the state as it was when the
# super-step began, and the stores' updates are not in it until the step ends.
# The state after each super-step (read from the checkpointer) says when the
# writes land:

# %%
from agentstate.tracing import state_by_step

history = Table(
    state_by_step(stage02, config, lambda v: {"requirements": len(v.get("requirements", {}))})
)
history

# %% [markdown]
# **How to read this table.** One row per checkpoint, oldest first.
# `step` is the super-step that just ended (-1 is the empty state before the
# input, 0 is the input being written); `next` is what runs in the following
# super-step (`tools x11`: eleven tasks of the `tools` node, one per tool
# call, all in that one step; `(end)`: nothing left to run); `changed` lists
# the state keys that differ from the row above, i.e. what the nodes in the
# previous row's `next` wrote; `requirements` counts the fields in state.
#
# The nodes in `next`, and what each does (exactly the nodes of this graph):

# %%
from agentstate.fixtures import glossary_rows

glossary = Table(glossary_rows(stage02))
shown = {n for r in history.rows for n in r["next"].replace(" x11", "").split(", ")} - {"(end)"}
assert shown <= set(glossary.column("node"))
glossary

# %% [markdown]
# The next cell checks the table against the glossary: the patch hook and
# deepagents' parent notifier write nothing here, the readers ran in the tools
# step while state still held 0 fields, the 8 fields are in the checkpoint that
# step wrote, and the sync hook writes only `files`:

# %%
rows = history.rows
after = {rows[i - 1]["next"]: rows[i] for i in range(1, len(rows))}
assert rows[0]["next"] == "__start__" and rows[-1]["next"] == "(end)"
assert after["PatchToolCallsMiddleware.before_agent"]["changed"] == []
before_tools, after_tools = next(r for r in rows if r["next"] == "tools x11"), after["tools x11"]
assert before_tools["requirements"] == 0 and after_tools["requirements"] == 8
assert "requirements" in after_tools["changed"]
assert after["RequirementsSyncMiddleware.after_agent"]["changed"] == ["files"]
assert after["_ParentNotifierMiddleware.after_agent"]["changed"] == []
{"fields before the tools step (what the readers saw)": before_tools["requirements"],
 "fields after it": after_tools["requirements"]}

# %% [markdown]
# ## The next model step sees everything
# The write-up's belief was **"Commands apply at the end of the turn"**. Same
# invoke, but the model reads in its **next** reply: the readers are now in a
# later super-step, and see all eight writes. So writes apply at the end of
# the super-step, not at the end of the turn: the gap is only the batch.

# %%
from agentstate.fixtures import READ_CALLS, store_calls
from agentstate.models import ScriptedChatModel, reply, tool_call

next_step = ScriptedChatModel(
    script=[
        reply(*store_calls(VALID_REQUIREMENTS)),
        reply(*(tool_call(n) for n in READ_CALLS)),
        reply(text="Done."),
    ]
)
later = build_reducer_agent(next_step).invoke(user_turn())
assert reader_summary(later)["get_collected_requirements"] == "8 fields"
assert reader_summary(later)["validate_manifest"] == "valid: all rules pass"
assert "/manifest.yaml" in later["files"]
reader_summary(later)

# %% [markdown]
# That costs one more model round trip. Can the readers of the *same* reply
# see the writes? The write-up tried a cache.
#
# ## The write-up's cache cannot run today
# A `before_agent` middleware put a dict into `runtime.config["configurable"]`.
# The middleware runtime is `langgraph.runtime.Runtime`, which has no
# `config`:

# %%
from agentstate.rds import build_original_cache_agent

try:
    build_original_cache_agent(all_in_one_reply_model()).invoke(user_turn())
    raise AssertionError("expected AttributeError")
except AttributeError as err:
    original_error = str(err)
assert original_error == "'Runtime' object has no attribute 'config'"
original_error

# %% [markdown]
# ## The obvious repair fails silently
# `langgraph.config.get_config()` does return the run's config inside a hook,
# so the obvious repair puts the dict there. The tools then use the cache if
# it is there and create it if not:

# %%
from agentstate.display import show_source
from agentstate.fixtures import ConfigCacheStorage, GetConfigCacheMiddleware

show_source(GetConfigCacheMiddleware.before_agent)

# %% [markdown]
# No error this time, and no effect: each super-step gets a new shallow copy
# of `configurable`, so the key added in the `before_agent` step never reaches
# a tool. Every tool call finds no cache and creates its own, and the reader
# of the batch sees 0 fields:

# %%
from agentstate.fixtures import POSTGRES_FIELDS, build_get_config_cache_agent, reader_batch_model

storage = ConfigCacheStorage()
repaired = build_get_config_cache_agent(reader_batch_model(POSTGRES_FIELDS, 1), storage)
state = repaired.invoke(user_turn())
assert storage.found == [False] * 6 and fields_seen_by_reader(state) == 0
{"tool calls that found the cache": f"{storage.found.count(True)} of {len(storage.found)}",
 "fields the reader saw": fields_seen_by_reader(state)}

# %% [markdown]
# ## A naive shared cache is a race
# Something the **caller** puts in `config["configurable"]` at invoke time
# *is* shared by identity with every tool. So: writers add to a shared dict as
# well as to state, readers merge the dict into state. But the tools of one
# batch run in parallel threads, and nothing makes a reader wait. With up to
# 5 ms of seeded random tool latency, count what the reader sees over 200
# turns of five stores and one reader:

# %%
from agentstate.fixtures import same_batch_reader_trials
from agentstate.rds import NAIVE_KEY, build_naive_cache_agent
from agentstate.simulation import ToolLatencyMiddleware

TRIALS = 200
naive = build_naive_cache_agent(
    reader_batch_model(POSTGRES_FIELDS, TRIALS), middleware=[ToolLatencyMiddleware(0.005, seed=3)]
)
naive_seen = same_batch_reader_trials(
    naive, TRIALS, config=lambda: {"configurable": {NAIVE_KEY: {}}}
)
len(naive_seen)

# %% [markdown]
# Thread timing decides each turn, so the exact distribution changes from run
# to run (the figure is not compared). What must hold, and is asserted: on
# some turns the reader saw fewer than all 5 writes, and on some it saw more
# than none.

# %%
# NBVAL_IGNORE_OUTPUT
from collections import Counter

import matplotlib.pyplot as plt

counts = Counter(naive_seen)
assert min(naive_seen) < 5 and max(naive_seen) > 0
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.bar(range(6), [counts.get(k, 0) for k in range(6)])
ax.set_xlabel("writes of its own batch the reader saw (of 5)")
ax.set_ylabel("turns")
ax.set_title(f"naive shared cache, {TRIALS} turns")
dict(sorted(counts.items()))

# %% [markdown]
# ## The fix: a turn cache, and readers that wait for their batch
# `build_turn_cache_agent` is the stage 02 agent plus one middleware,
# `agentstate.core.TurnCacheMiddleware`, told which tools write, which read,
# and which state key they share. Same latency, same 200 turns:

# %%
from agentstate.rds import build_turn_cache_agent

fixed = build_turn_cache_agent(
    reader_batch_model(POSTGRES_FIELDS, TRIALS), middleware=[ToolLatencyMiddleware(0.005, seed=3)]
)
fixed_seen = same_batch_reader_trials(fixed, TRIALS)
assert fixed_seen == [5] * TRIALS
{"turns": TRIALS, "reader saw all 5 writes": fixed_seen.count(5)}

# %% [markdown]
# ## How the fix is written
# The whole fix is one middleware that wraps each tool call
# (`wrap_tool_call`). The RDS agent configures it with its tool names and
# state key; the reducer is the key's own (`merge_fields`, the default):

# %%
from agentstate.rds import rds_turn_cache

show_source(rds_turn_cache)

# %% [markdown]
# **The batch.** The first writer or reader call of an AIMessage creates a
# `Batch`, keyed by thread id, graph namespace, AIMessage id and the ids of
# all its calls; the other calls of that AIMessage find it. It lists the
# writer call ids in tool-call order. Because the key names the thread, the
# graph (a subagent has its own namespace) and the one AIMessage, two invokes,
# two threads or two batches never share one (exercise 3 runs two threads at
# once on one agent).

# %%
from agentstate.core import TurnCacheMiddleware

show_source(TurnCacheMiddleware._join, start="    message, calls", stop="    now =")

# %% [markdown]
# **Piece 1: record.** A writer runs normally; if its result is a `Command`
# that updates the key, the value it wrote is kept in the batch under its call
# id. A rejected write (an error message, no update) records nothing
# (exercise 4 measures what its reader sees).

# %%
writer_branch = {"start": "        if name in self.writers:", "stop": "        missing ="}
show_source(TurnCacheMiddleware.wrap_tool_call, **writer_branch)

# %%
from agentstate.core import written_value

show_source(written_value)

# %% [markdown]
# Without the record, the readers wait for writers whose values are thrown
# away, and see nothing: `NoRecordTurnCache` (in `agentstate.fixtures`) is
# the same middleware whose batches forget every write.

# %%
from agentstate.rds import READER_TOOLS, WRITER_TOOLS

PROOF_TURNS = 50


def seen_with(cache, turns=PROOF_TURNS):
    """What the same-batch reader saw on each turn, with ``cache`` and seeded latency."""
    agent = build_reducer_agent(
        reader_batch_model(POSTGRES_FIELDS, turns),
        middleware=[cache, ToolLatencyMiddleware(0.005, seed=3)],
    )
    return same_batch_reader_trials(agent, turns)


# %%
def turn_cache(kind=TurnCacheMiddleware, **options):
    """The RDS turn cache, or one of its broken variants ``kind``."""
    return kind(writers=WRITER_TOOLS, readers=READER_TOOLS, key="requirements", **options)


# %%
from agentstate.fixtures import NoRecordTurnCache

no_record = seen_with(turn_cache(NoRecordTurnCache))
assert no_record == [0] * PROOF_TURNS
{"turns": PROOF_TURNS, "reader saw 0 writes": no_record.count(0)}

# %% [markdown]
# **Piece 2: wait.** A reader first waits until every writer call of its own
# AIMessage has finished (stored or rejected): `finish` marks a call and wakes
# the waiting readers, `wait_for_writers` sleeps on a condition variable until
# none is missing, or the timeout passes.

# %%
show_source(TurnCacheMiddleware.wrap_tool_call, start="        missing =", stop="    finally:")

# %%
from agentstate.core import Batch

show_source(Batch.wait_for_writers)

# %% [markdown]
# Without the wait the race of the naive cache comes back: `NoWaitTurnCache`
# answers "nobody missing" at once, so the reader merges whatever happens to
# be recorded when it starts. Under the same seeded latency, some turns see
# fewer than 5 writes (the exact counts vary with thread timing; what is
# asserted must hold on every run):

# %%
from agentstate.fixtures import NoWaitTurnCache

no_wait = seen_with(turn_cache(NoWaitTurnCache), turns=TRIALS)
assert min(no_wait) < 5
{"turns": TRIALS, "reader saw all 5 on every turn": min(no_wait) == 5}

# %% [markdown]
# The wait has a timeout because it can be unsatisfiable. With
# `max_concurrency=1` LangGraph runs the calls one by one in tool-call order;
# a reader placed before its writers would wait forever for calls that cannot
# start until it returns. (The same happens whenever the readers placed before
# the writers fill every call LangGraph runs at once: exercise 1.) Instead it
# returns an error to the model after the timeout, and the writers then run:

# %%
import time

calls = [tool_call("get_collected_requirements"), *store_calls(POSTGRES_FIELDS)]
serial = build_turn_cache_agent(
    ScriptedChatModel(script=[reply(*calls), reply(text="I will read again.")]), timeout=0.2
)
started = time.perf_counter()
state = serial.invoke(user_turn(), {"max_concurrency": 1})
took = time.perf_counter() - started
error = reader_summary(state)["get_collected_requirements"]
assert error.startswith("Error: get_collected_requirements timed out after 0.2s waiting for 5")
assert took < 5 and state["requirements"] == POSTGRES_FIELDS
error

# %% [markdown]
# **Piece 3: merge.** After the wait, the reader runs on a copy of the state
# whose key holds the state's value with the batch's writes applied through
# the key's reducer, in tool-call order: the value LangGraph itself will store
# at the end of the step. The tool is unchanged; it reads `runtime.state` as
# always.

# %%
show_source(TurnCacheMiddleware._reader_view)

# %%
show_source(Batch.merged)

# %% [markdown]
# Without the merge the reader waits for every writer and still reads the
# state from before the batch; with a reducer that is not the key's own (last
# write wins instead of the field merge), it sees only the last write:

# %%
from agentstate.fixtures import NoMergeTurnCache, last_write_wins

no_merge = seen_with(turn_cache(NoMergeTurnCache))
wrong_reducer = seen_with(turn_cache(reducer=last_write_wins))
assert no_merge == [0] * PROOF_TURNS and wrong_reducer == [1] * PROOF_TURNS
{"no merge: reader saw": sorted(set(no_merge)),
 "last write wins: reader saw": sorted(set(wrong_reducer))}

# %% [markdown]
# **Piece 4: drop the batch when it ends.** Every writer and reader call
# leaves its batch in a `finally`, and the last one to leave removes the
# batch, so nothing stays in memory after a turn:

# %%
show_source(TurnCacheMiddleware._leave)

# %%
cache = turn_cache()
assert seen_with(cache) == [5] * PROOF_TURNS and cache.open_batches == 0
{"turns": PROOF_TURNS, "batches left in memory": cache.open_batches}

# %% [markdown]
# Without the removal (`KeepBatchesTurnCache`), every turn leaves its batch
# behind, one more per turn, for the life of the agent:

# %%
from agentstate.fixtures import KeepBatchesTurnCache

keep = turn_cache(KeepBatchesTurnCache)
assert seen_with(keep) == [5] * PROOF_TURNS and keep.open_batches == PROOF_TURNS
{"turns": PROOF_TURNS, "batches left in memory": keep.open_batches}

# %% [markdown]
# ## The same middleware in your own agent
# Nothing in `TurnCacheMiddleware` knows about RDS. Here is a plain
# `create_agent` with a `save_note` writer (it returns a `Command` that
# updates `notes`) and a `read_notes` reader (it reads `runtime.state`), over
# a `notes` key whose reducer is `append_unique`. One reply saves three notes
# and reads them; the turn cache is told the tool names, the key, and the
# key's reducer:

# %%
from agentstate.core import append_unique
from agentstate.fixtures import build_note_agent, note_batch_model, notes_read

without = build_note_agent(note_batch_model("a", "b", "c")).invoke(user_turn("note it"))
notes_cache = TurnCacheMiddleware(
    writers=["save_note"], readers=["read_notes"], key="notes", reducer=append_unique
)
with_cache = build_note_agent(note_batch_model("a", "b", "c"), middleware=[notes_cache])
state = with_cache.invoke(user_turn("note it"))
assert notes_read(without) == [] and without["notes"] == ["a", "b", "c"]
assert notes_read(state) == ["a", "b", "c"] and notes_cache.open_batches == 0
{"read_notes without the cache": notes_read(without), "with it": notes_read(state)}

# %% [markdown]
# ## Prove it: one reply stores, validates, generates
# The user's request, done in one model reply, and both files are there after
# that one turn:

# %%
from agentstate.fixtures import file_fields

done = build_turn_cache_agent(all_in_one_reply_model()).invoke(user_turn())
assert reader_summary(done)["validate_manifest"] == "valid: all rules pass"
assert reader_summary(done)["generate_rds_manifest"] == "Wrote /manifest.yaml."
assert file_fields(done) == VALID_REQUIREMENTS
{**reader_summary(done), "files": sorted(done["files"])}

# %% [markdown]
# ## Prove it: a reader never hangs
# If a writer of its batch does not finish in time, the reader returns a clear
# error to the model instead of blocking the turn:

# %%
stuck = ScriptedChatModel(
    script=[reply(*store_calls({"engine": "postgres"}), tool_call("validate_manifest")),
            reply(text="I will validate again.")]
)
slow = build_turn_cache_agent(
    stuck, timeout=0.1, middleware=[SlowToolMiddleware("store_requirement", 1.0)]
).invoke(user_turn())
timeout_reply = reader_summary(slow)["validate_manifest"]
assert timeout_reply.startswith("Error: validate_manifest timed out after 0.1s")
timeout_reply

# %% [markdown]
# ## A knob: writers in the batch, with and without the cache

# %%
from agentstate.fixtures import label_fields


def reader_sees(writers: int, turn_cache: bool) -> dict:
    build = build_turn_cache_agent if turn_cache else build_reducer_agent
    agent = build(reader_batch_model(label_fields(writers), 1))
    seen = same_batch_reader_trials(agent, 1)[0]
    return {"writers": writers, "turn cache": turn_cache, "reader saw": seen}


# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

widgets.interact(
    reader_sees, writers=widgets.IntSlider(value=5, min=1, max=30), turn_cache=True
);

# %%
knob = Table(reader_sees(n, c) for n in (1, 5, 30) for c in (False, True))
assert knob.column("reader saw") == [0, 1, 0, 5, 0, 30]
knob

# %% [markdown]
# `scripts/bench_turn_cache.py` times the same turn with and without the turn
# cache, if you want to measure its cost on your machine.
#
# ## Summary
# - A reader in the writers' batch sees the state from before the batch,
#   even when it reads after every writer returned: the
#   batch's writes land together when the super-step ends.
# - A reader in the next model step sees all of them: Commands apply at the
#   end of the super-step, not of the turn; the gap is the batch.
# - The tools of a batch run at the same time, on several threads.
# - The write-up's `runtime.config` cache raises `AttributeError`; putting the
#   dict in `get_config()["configurable"]` in `before_agent` fails silently
#   (no tool ever sees it).
# - A truly shared but unsynchronised cache is a race: some turns miss
#   writes.
# - The turn cache records each writer's update, makes readers wait for the
#   writers of their own AIMessage (with a timeout), merges the batch's writes
#   through the key's reducer, and drops the batch when it ends. Remove any
#   piece and the failure returns: 0 seen, a race again, 1 seen with the wrong
#   reducer, a batch left per turn.
#
# ## Exercises
# 1. Put the three readers *first* in the reply, before the stores
#    (`all_in_one_reply_model(readers_first=True)`). What does the
#    turn-cached `get_collected_requirements` see, and why?
# 2. Force the naive cache's race: slow every store down by 0.5 s
#    (`SlowToolMiddleware`). What does the naive cache's reader see on every
#    turn, and what does the turn cache's reader see?
# 3. Invoke one turn-cached agent from two Python threads at once, each with
#    its own `thread_id` and its own fields. Does either reader see the other
#    thread's fields? Which parts of the batch key decide that?
# 4. Store one invalid field (`instance_class="t3.micro"`) next to four valid
#    ones, with a reader in the same reply. How many fields does the reader
#    see, and does it wait for the rejected write?

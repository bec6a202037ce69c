# %% [markdown]
# # 03 · Same-turn visibility: what a reader sees, and a cache that is not a race
#
# The user writes "Give me a Postgres 15.5 manifest with sensible defaults".
# A capable model does it all in one reply: a `store_requirement` call per
# field, and next to them `get_collected_requirements`, `validate_manifest` and
# `generate_rds_manifest`. With the stage 02 agent the readers find nothing,
# validation fails and no manifest is written, although every store
# succeeded. The original write-up blamed "updates apply at the end of the
# turn" and added a cache in `runtime.config`. This notebook measures what
# really happens with today's libraries, shows why that cache cannot run and
# why a naive shared cache is a race, then proves a fix that is neither.

# %% [markdown]
# ## Recap
# Stage 02 stored requirements in a `requirements` state key with a
# field-merge reducer: 500 parallel writes, 500 fields; `/requirements.json`
# synced after the turn; a checkpointer per `thread_id`.
#
# ## Goals
# - Reproduce: a reader in the writers' batch sees the state from before it.
# - Show that the next model step of the same invoke sees everything.
# - Run the original `runtime.config` cache and catch its real exception.
# - Measure a naive shared cache: readers see 0..N writes at random.
# - Prove the fix 200 times out of 200, and in one reply write both files.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "deepagents")}
assert all(versions.values())
versions

# %% [markdown]
# ## Reproduce: readers next to the writers
# One scripted reply holds eight stores (a complete, valid set of fields) and
# the three readers.

# %%
import json

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.fixtures import USER_REQUEST, VALID_REQUIREMENTS, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import build_reducer_agent
from agentstate.tracing import ToolTimeline

READERS = [tool_call(n) for n in ("get_collected_requirements", "validate_manifest",
                                  "generate_rds_manifest")]


def one_reply_does_it_all():
    return ScriptedChatModel(
        script=[reply(*store_calls(VALID_REQUIREMENTS), *READERS), reply(text="Done.")]
    )


def reader_replies(state):
    """Each reader's reply: the number of fields it listed, or its first line."""
    out = {}
    for m in state["messages"]:
        if isinstance(m, ToolMessage) and m.name != "store_requirement":
            listed = m.name == "get_collected_requirements" and m.status == "success"
            first_line = m.content.splitlines()[0]
            out[m.name] = f"{len(json.loads(m.content))} fields" if listed else first_line
    return out


timeline = ToolTimeline()
stage02 = build_reducer_agent(
    one_reply_does_it_all(), middleware=[timeline], checkpointer=InMemorySaver()
)
config = {"configurable": {"thread_id": "stage-03"}}
state = stage02.invoke(user_turn(USER_REQUEST), config)
reader_replies(state)

# %%
replies = reader_replies(state)
assert replies["get_collected_requirements"] == "0 fields"
assert replies["validate_manifest"] == "invalid:"
assert replies["generate_rds_manifest"].startswith("Error: cannot generate")
assert state["requirements"] == VALID_REQUIREMENTS  # yet every store landed
{"stored fields": len(state["requirements"]), "manifest": "/manifest.yaml" in state["files"]}

# %% [markdown]
# ## Look inside
# All eleven calls ran in one super-step, on parallel threads (timings vary,
# so this output is not compared):

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
# Is the reader simply too early? Make it sleep 0.2 s, so it reads long after
# every store of its batch has returned:

# %%
from agentstate.simulation import SlowToolMiddleware

late = ToolTimeline()
sleepy = build_reducer_agent(
    one_reply_does_it_all(),
    middleware=[late, SlowToolMiddleware("get_collected_requirements", 0.2)],
).invoke(user_turn(USER_REQUEST))
reader = next(e for e in late.events if e.name == "get_collected_requirements")
last_store_end = max(e.end for e in late.events if e.name == "store_requirement")
read_after_stores = reader.start + 0.2 > last_store_end  # the read comes after the sleep
assert read_after_stores
assert reader_replies(sleepy)["get_collected_requirements"] == "0 fields"
{"read after every store had returned": read_after_stores,
 "it saw": reader_replies(sleepy)["get_collected_requirements"]}

# %% [markdown]
# So the reader does not lose a race: it reads the state as it was when the
# super-step began, and the stores' updates are not in it until the step ends.
# The state after each super-step says when the writes land: in the
# checkpoint right after the tools' step, all at once. The readers ran inside that tools step,
# reading the state from before it.

# %%
from agentstate.fixtures import file_fields
from agentstate.tracing import state_by_step

history = Table(
    state_by_step(stage02, config, lambda v: {"requirements": len(v.get("requirements", {}))})
)
tools_step = next(r for r in history.rows if r["next"].startswith("tools"))
landed = next(r for r in history.rows if r["requirements"] > 0)
assert landed["step"] == tools_step["step"] + 1
history

# %% [markdown]
# ## The next model step sees everything
# Same invoke, but the model reads in its **next** reply. The readers are now
# in a later super-step, and see all eight writes. So writes apply at the end of
# the super-step, not at the end of the turn: the gap is only within a batch.

# %%
next_step = ScriptedChatModel(
    script=[
        reply(*store_calls(VALID_REQUIREMENTS)),
        reply(*READERS),
        reply(text="Done."),
    ]
)
later = build_reducer_agent(next_step).invoke(user_turn(USER_REQUEST))
assert reader_replies(later)["get_collected_requirements"] == "8 fields"
assert reader_replies(later)["validate_manifest"] == "valid: all rules pass"
assert "/manifest.yaml" in later["files"]
reader_replies(later)

# %% [markdown]
# That costs one more model round trip. Can the readers of the *same* reply
# see the writes? The original write-up tried a cache.
#
# ## The original cache cannot run today
# A `before_agent` middleware put a dict into `runtime.config["configurable"]`.
# The middleware runtime is `langgraph.runtime.Runtime`, which has no
# `config`:

# %%
from agentstate.rds import build_original_cache_agent

try:
    build_original_cache_agent(one_reply_does_it_all()).invoke(user_turn())
    raise AssertionError("expected AttributeError")
except AttributeError as err:
    original_error = str(err)
assert original_error == "'Runtime' object has no attribute 'config'"
original_error

# %% [markdown]
# ## A naive shared cache is a race
# Something the caller puts in `config["configurable"]` at invoke time *is*
# shared by identity with every tool. So: writers add to a shared dict as
# well as to state, readers merge the dict into state. But the tools of one
# batch run in parallel threads, and nothing makes a reader wait. With a few
# milliseconds of simulated tool latency, count what the reader sees over
# 200 turns:

# %%
from agentstate.fixtures import POSTGRES_FIELDS, reader_batch_model, same_batch_reader_trials
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

# %%
# NBVAL_IGNORE_OUTPUT
from collections import Counter

import matplotlib.pyplot as plt

counts = Counter(naive_seen)
assert min(naive_seen) < 5 and max(naive_seen) > 0  # sometimes all, sometimes not
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.bar(range(6), [counts.get(k, 0) for k in range(6)])
ax.set_xlabel("writes of its own batch the reader saw (of 5)")
ax.set_ylabel("turns")
ax.set_title(f"naive shared cache, {TRIALS} turns")
dict(sorted(counts.items()))

# %% [markdown]
# ## The fix: a turn cache, and readers that wait for their batch
# `build_turn_cache_agent` is the stage 02 agent plus one middleware,
# `agentstate.core.TurnCacheMiddleware`, told which tools write
# (`store_requirement`), which read, and which state key they share:
# - a writer's `Command` update to `requirements` is recorded for its batch;
# - a reader looks up the writer calls of its own AIMessage and waits until
#   each has finished (stored or rejected), with a timeout;
# - the reader then runs on the state with its batch's writes merged in.
# The batch's record lives in the middleware and is dropped when the batch
# ends, so the compiled graph needs no wrapper and nothing in the config.
#
# Same latency, same 200 turns:

# %%
from agentstate.rds import build_turn_cache_agent

fixed = build_turn_cache_agent(
    reader_batch_model(POSTGRES_FIELDS, TRIALS), middleware=[ToolLatencyMiddleware(0.005, seed=3)]
)
fixed_seen = same_batch_reader_trials(fixed, TRIALS)
assert fixed_seen == [5] * TRIALS
{"turns": TRIALS, "reader saw all 5 writes": fixed_seen.count(5)}

# %% [markdown]
# ## Prove: one reply stores, validates and generates
# The user's request, done in one model reply, and both files are there after
# that one turn:

# %%
done = build_turn_cache_agent(one_reply_does_it_all()).invoke(user_turn(USER_REQUEST))
assert reader_replies(done)["validate_manifest"] == "valid: all rules pass"
assert reader_replies(done)["generate_rds_manifest"] == "Wrote /manifest.yaml."
assert file_fields(done) == VALID_REQUIREMENTS
{**reader_replies(done), "files": sorted(done["files"])}

# %% [markdown]
# ## A reader never hangs
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
timeout_reply = reader_replies(slow)["validate_manifest"]
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
# ## What it costs
# `scripts/bench_turn_cache.py` times the same turn with and without the turn
# cache (scripted model, identical tool calls, interleaved rounds, medians);
# the README's performance section has the figures. The cache adds a dict
# copy per read and a lock per write; the readers wait only as long as the
# slowest writer of their batch.
#
# ## Summary
# - A reader in the writers' batch sees the state from before the batch, in
#   any position: the batch's writes apply together when the super-step ends.
# - A reader in the next model step sees all of them: the gap is the batch,
#   not the turn.
# - The original `runtime.config` cache raises `AttributeError` today.
# - A truly shared but unsynchronised cache is a race: readers saw between
#   0 and 5 of 5 writes.
# - The turn cache (dual write, merged read, readers wait for their batch's
#   writers, timeout) saw 5 of 5 in 200 of 200 turns, and lets one reply store,
#   validate and generate.
#
# ## Exercises
# 1. Put `get_collected_requirements` *first* in the reply, before the stores.
#    What does the turn-cached reader see, and why?
# 2. Set `ToolLatencyMiddleware(0.0)` for the naive cache. Does the race go
#    away? Try it on a loaded machine.
# 3. The middleware keys a batch by thread, namespace, AIMessage id and call
#    ids. What could go wrong if it keyed it by thread alone?
# 4. Invoke the turn-cached agent with `{"max_concurrency": 1}` and the reader
#    placed first in the reply. What does the reader return, after how long,
#    and why can it not be otherwise?

# %% [markdown]
# # 03 · Going further: the caches that fail, and the threads under a batch
#
# Notebook 03 fixed same-turn visibility with a turn cache whose readers wait
# for the writers of their batch. This notebook keeps what the lesson left
# out: the original write-up's own cache (a dict that a `before_agent`
# middleware put into `runtime.config`), the obvious repair of it that fails
# without an error, a measurement of the belief that tools run one after
# the other within a turn, and the thread pool in which a waiting reader
# holds a thread. Each claim is asserted in the cell that shows it.

# %% [markdown]
# ## The write-up's cache cannot run today
# The original write-up's middleware put an empty dict into
# `runtime.config["configurable"]` before the agent ran, and its tools wrote
# to and read from that dict. The middleware's `runtime` is
# `langgraph.runtime.Runtime`, which has no `config`:

# %%
from agentstate.lessons.fixtures import all_in_one_reply_model, user_turn
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
# so the obvious repair puts the dict there in `before_agent`:

# %%
from agentstate.lessons.display import show_source
from agentstate.lessons.fixtures import GetConfigCacheMiddleware

show_source(GetConfigCacheMiddleware.before_agent)

# %% [markdown]
# No error this time, and no effect: each super-step gets a new shallow copy
# of `configurable`, so the key added in the `before_agent` step never
# reaches a tool. The tools below use the dict if they find it and create
# their own if not; `found` records which case each call met. One reply with
# five stores and a reader:

# %%
from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    ConfigCacheStorage,
    build_get_config_cache_agent,
    fields_seen_by_reader,
    reader_batch_model,
)

storage = ConfigCacheStorage()
repaired = build_get_config_cache_agent(reader_batch_model(POSTGRES_FIELDS, 1), storage)
state = repaired.invoke(user_turn())
assert storage.found == [False] * 6 and fields_seen_by_reader(state) == 0
Table(
    [
        {
            "tool calls": len(storage.found),
            "found the cache": storage.found.count(True),
            "fields the reader saw": fields_seen_by_reader(state),
        }
    ]
)

# %% [markdown]
# What *is* shared by every tool of a run is an object the caller puts in
# `config["configurable"]` at invoke time, or `runtime.context`. Shared is
# not enough, though: the tools of one reply run at the same time.
#
# ## A dict the caller shares is a race
# `NaiveSharedCacheStorage` is the write-up's idea made to run: the RDS
# agent's writers add each field to a dict the caller puts in
# `config["configurable"]` as well as to the state, and its readers merge
# that dict into what they read. Nothing makes a reader wait for the
# writers on the other threads. 200 turns, each tool call delayed by a
# seeded random 0-5 ms standing in for real I/O; the counts vary from run to
# run:

# %% tags=["nbval-ignore-output"]
from collections import Counter

from agentstate.lessons.simulation import ToolLatencyMiddleware
from agentstate.rds import assemble_rds_agent
from agentstate.rds.storage import NAIVE_KEY, NaiveSharedCacheStorage

naive = assemble_rds_agent(
    reader_batch_model(POSTGRES_FIELDS, 200),
    NaiveSharedCacheStorage(),
    middleware=[ToolLatencyMiddleware(0.005, seed=3)],
)
saw = [
    fields_seen_by_reader(naive.invoke(user_turn(), {"configurable": {NAIVE_KEY: {}}}))
    for _ in range(200)
]
assert min(saw) < 5
Table({"fields the reader saw (of 5)": k, "turns": n} for k, n in sorted(Counter(saw).items()))

# %% [markdown]
# Notebook 03's turn cache is this dict with the missing piece: a reader
# waits for the writers of its own reply.
#
# ## Tools of one reply run at the same time
# A common belief is that tools run one after the other within a turn.
# `Together(2, ...)` makes each store wait until another store is waiting: if
# they ran one by one, the first would wait alone and time out. Count the
# stores that ran while another call was running:

# %%
from agentstate.lessons.fixtures import overlapping_calls
from agentstate.lessons.simulation import Together
from agentstate.rds import build_reducer_agent
from agentstate.tracing import ToolTimeline

slow_stores = ToolTimeline()
build_reducer_agent(
    all_in_one_reply_model(),
    middleware=[slow_stores, Together(2, "store_requirement")],
).invoke(user_turn())
overlap = overlapping_calls(slow_stores.events, "store_requirement")
stores = sum(e.name == "store_requirement" for e in slow_stores.events)
assert stores == overlap == 8 and slow_stores.thread_count() > 1
Table(
    [
        {
            "stores": stores,
            "overlapping another call": overlap,
            "more than one thread": slow_stores.thread_count() > 1,
        }
    ]
)

# %% [markdown]
# Each call is a task of the same super-step, run by LangGraph's executor on
# a worker thread. That is why a reader has to *wait* for its writers: on a
# different thread, nothing orders it after them.
#
# ## The threads under a batch
# Lesson 03's turn cache makes a reader wait, on its thread, for the writers
# of its reply. One batch of the RDS agent with the package's turn cache:
# five stores slowed to 50 ms, then both readers, drawn in time.
# `max_concurrency=7` in the config gives each of the seven calls its own
# thread, so the readers start with the writers (`Together(7)` holds each
# call until all seven have started, so that holds on a busy machine too).
# They wait (their long bars) until the last writer has finished, then see
# all five fields, in the same super-step.

# %%
from agentstate.lessons.fixtures import one_batch_model, reader_summary
from agentstate.lessons.simulation import SlowToolMiddleware
from agentstate.models import tool_call
from agentstate.rds import rds_turn_cache
from agentstate.tracing import draw_run

readers = [tool_call("get_collected_requirements"), tool_call("validate_manifest")]
slow_writes = SlowToolMiddleware("store_requirement", 0.05)  # long enough to see
cached_timeline = ToolTimeline()
cached = build_reducer_agent(
    one_batch_model(POSTGRES_FIELDS, extra=readers),
    middleware=[cached_timeline, Together(7), rds_turn_cache(), slow_writes],
).invoke(user_turn(), {"max_concurrency": 7})
first_end = min(e.end for e in cached_timeline.events)
assert all(e.start < first_end for e in cached_timeline.events)
assert reader_summary(cached)["get_collected_requirements"] == "5 fields"
draw_run(cached_timeline, cached, key="requirements", title="7 threads for 7 calls")

# %% [markdown]
# Why set `max_concurrency`? LangGraph runs the calls of a step on a thread
# pool. With no limit in the config, that pool is Python's default
# `ThreadPoolExecutor` of `min(32, cpu_count + 4)` threads. (LangGraph's
# [executor](https://github.com/langchain-ai/langgraph/blob/main/libs/langgraph/langgraph/pregel/_executor.py),
# as installed here in langgraph 1.2.22, gets it from `get_executor_for_config`
# in `langchain_core/runnables/config.py`.) That is 6 threads on a 2-core
# machine, for 7 calls, so the last call waits for a free thread. A reader
# that waits also holds its thread. If the readers of a reply fill the pool
# before their writers start, no writer gets a thread, and each reader gives
# up at its timeout. The next two sections show it on one thread.
#
# ## With one worker, the order is the reply's order
# `max_concurrency=1` in the config makes LangGraph run the calls one by one,
# in tool-call order. The readers of the all-in-one reply come after the
# stores, so the turn cache has nothing to wait for and they still see every
# field:

# %%
from agentstate.lessons.fixtures import reader_summary
from agentstate.rds import build_turn_cache_agent

serial = build_turn_cache_agent(all_in_one_reply_model()).invoke(
    user_turn(), {"max_concurrency": 1}
)
assert reader_summary(serial)["get_collected_requirements"] == "8 fields"
Table({"reader": k, "reply": v} for k, v in reader_summary(serial).items())

# %% [markdown]
# A reader placed *before* its writers is the hard case: with one worker it
# would wait for calls that cannot start until it returns. The package's
# turn cache returns an error to the model instead of hanging, and the
# writers then run (the exact wording of the error is the package's):

# %%
import time

from agentstate.lessons.fixtures import store_calls
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import tool_replies

calls = [tool_call("get_collected_requirements"), *store_calls(POSTGRES_FIELDS)]
model = ScriptedChatModel(script=[reply(*calls), reply(text="I will read again.")])
started = time.perf_counter()
first = build_turn_cache_agent(model, timeout=0.5).invoke(user_turn(), {"max_concurrency": 1})
took = time.perf_counter() - started
reader = tool_replies(first, "get_collected_requirements")[0]
assert reader.status == "error" and took < 5 and first["requirements"] == POSTGRES_FIELDS
Table([{"reader": reader.status, "fields stored": len(first["requirements"])}])

# %% [markdown]
# ## Summary
# - The write-up's `runtime.config` cache raises `AttributeError` today; the
#   `get_config()` repair runs without error and no tool ever sees its dict.
# - The calls of one reply overlap in time on several threads, so a shared
#   cache needs readers that wait for the writers of their own reply.
# - A waiting reader holds one of the step's threads: `min(32, cpu_count + 4)`
#   by default, `max_concurrency` when the config sets it.
# - With one worker the calls run in the reply's order; a reader placed
#   before its writers gets an error, not a hang.

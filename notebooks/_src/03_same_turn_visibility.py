# %% [markdown]
# # 03 · Same-turn visibility: readers that wait for their batch
#
# A model may store five fields and, in the same reply, call two readers:
# `get_collected_requirements` and `validate_manifest`. With lesson 02's
# agent the readers find nothing. The agent's changelog
# ([where this comes from](../README.md#where-this-comes-from)) said
# "Commands are batched and applied only after ALL tools complete", and
# tools are "Single-threaded within agent turn". We test both, then write a
# turn cache whose readers see their batch.

# %% [markdown]
# ## Recap
# Lesson 02's **reducer** keeps every parallel write. The writes land
# together when the tools' [super-step](../docs/glossary.md#super-step)
# ends. What does a reader in that same step see? Releases affected:
# [same-batch-read](../docs/hazards-by-version.md#same-batch-read).

# %% [markdown]
# ## Goals
# - Reproduce: a reader in the writers' own reply sees none of their writes.
# - Look inside: the step drawn; the cheap fix weighed against a turn cache.
# - Write the turn cache whole; prove it agrees with the package's.

# %% [markdown]
# ## 1. Reproduce: readers next to the writers
# Lesson 02's state and writer, imported: `RequirementsState`
# (`requirements` merged by `merge_fields`) and `store_requirement`. New
# here: two readers of `runtime.state`; the first prints what it read.

# %%
import json

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from agentstate.core import merge_fields
from agentstate.lessons.fixtures import POSTGRES_FIELDS, RequirementsState, store_requirement

show_reads = True


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement collected so far, as JSON."""
    collected = runtime.state.get("requirements", {})
    if show_reads:
        print(f"get_collected_requirements read {collected}")
    return json.dumps(collected)


@tool
def validate_manifest(runtime: ToolRuntime) -> str:
    """Check that every field of a Postgres manifest has been collected."""
    missing = [f for f in POSTGRES_FIELDS if f not in runtime.state.get("requirements", {})]
    return f"invalid: missing {', '.join(missing)}" if missing else "valid"


# %% [markdown]
# `my_agent` builds the plain agent on a scripted model (fixed replies,
# offline): one reply with five stores and both readers, or the readers in
# the next reply. As in lesson 02, the tools run in super-step 2.

# %%
from langchain.agents import create_agent

from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import ToolTimeline

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
TOOLS = [store_requirement, get_collected_requirements, validate_manifest]
READS = ["get_collected_requirements", "validate_manifest"]


def my_agent(*middleware, fields=POSTGRES_FIELDS, next_reply=False, turns=1):
    stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    reads = [tool_call(name) for name in READS]
    replies = [reply(*stores), reply(*reads)] if next_reply else [reply(*stores, *reads)]
    model = ScriptedChatModel(script=[*replies, reply(text="Done.")] * turns)
    used = filter(None, middleware)  # None: no middleware
    return create_agent(model, tools=TOOLS, state_schema=RequirementsState, middleware=[*used])


def reply_of(state: dict, tool_name: str) -> str:
    return next(m.text for m in reversed(state["messages"]) if m.name == tool_name)


def seen(state: dict) -> int:  # how many fields get_collected_requirements listed
    return len(json.loads(reply_of(state, "get_collected_requirements")))


timeline = ToolTimeline()
state = my_agent(timeline).invoke(TURN)
print("validate_manifest replied:", reply_of(state, "validate_manifest"))
print("fields in the state after the turn:", len(state["requirements"]))

# %% [markdown]
# Both readers found nothing, yet the state held all five fields after the
# turn.

# %% [markdown]
# ## 2. Look inside: one super-step, read from the state before it
# The same run as state flow. Every call got the state from before the
# step; the readers replied from it.

# %%
from agentstate.tracing import draw_superstep

draw_superstep(timeline, key="requirements", reducer=merge_fields, title="one reply")

# %% [markdown]
# Is the reader just too early? Make it wait until every store returned
# (the package's `ReadLast`; each of the 7 calls needs a thread). Then
# move the readers to the model's next reply.

# %%
from agentstate.lessons.simulation import ReadLast

show_reads = False  # quiet from here on
late_timeline = ToolTimeline()
read_last = ReadLast(late_timeline, "get_collected_requirements", "store_requirement", writers=5)
late = my_agent(read_last, late_timeline).invoke(TURN, {"max_concurrency": 7})  # 7 threads
reader = next(e for e in late_timeline.events if e.name == "get_collected_requirements")
stores_done = max(e.end for e in late_timeline.events if e.name == "store_requirement")
print("the reader started after every store finished:", reader.start > stores_done)
print("super-steps of the seven calls:", sorted({e.step for e in late_timeline.events}))
print("they ran on more than one thread:", late_timeline.thread_count() > 1)
print("fields the late reader saw:", seen(late))
print("fields a reader in the next reply saw:", seen(my_agent(next_reply=True).invoke(TURN)))

# %% [markdown]
# The seven calls ran in one super-step on several threads: the tools are
# not "single-threaded". The late reader still saw nothing: writes apply
# when the **super-step** ends, not the turn.

# %% [markdown]
# A dict shared by every tool does not help: nothing makes a reader wait
# for the other threads ([going further](going_further/03_caches_that_fail.ipynb)).

# %% [markdown]
# ## 3. When is a turn cache worth it?
# The cheap fix is above: the readers in the next reply, often just a
# prompt line. A turn cache pays only when you cannot choose the order.
#
# ```mermaid
# flowchart LR
#     a["reply 1: 5 stores"] -- "writes applied" --> b["reply 2: 2 readers<br/>see 5 fields"]
#     c["one reply: 5 stores + 2 readers"] -- "turn cache: readers wait" --> d["see 5 fields"]
#     b -.- e["cost: one more model call,<br/>a second or two"]
#     d -.- f["cost: locking; each waiting<br/>reader holds a thread"]
# ```

# %% [markdown]
# ## 4. The fix: a turn cache whose readers wait for their batch
# A **batch** is the tool calls of one reply. A middleware wraps each tool
# call (`wrap_tool_call`) in four steps:
#
# ```mermaid
# sequenceDiagram
#     participant W as 5 writers
#     participant C as turn cache
#     participant R as 2 readers
#     W->>C: 1. record: what each Command wrote
#     R->>C: 2. wait: until every writer of the batch finished
#     C->>R: 3. merge: the state with the batch's writes folded in
#     Note over W,R: 4. drop: the batch's last call to finish forgets it
# ```

# %% [markdown]
# The teaching version, whole. `batches` maps a reply's id to its batch:
# each call id that finished, and what it wrote. One condition (a lock that
# threads can wait on) guards them all. Each call runs on its own thread:
# [going further](going_further/03_caches_that_fail.ipynb) draws them.

# %%
import threading
from dataclasses import replace
from functools import reduce

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.types import Command


class TurnCache(AgentMiddleware):
    def __init__(self, writers, readers, key, reducer, timeout=10.0):
        self.writers, self.readers, self.key = set(writers), set(readers), key
        self.reducer, self.timeout = reducer, timeout
        self.batches, self.changed = {}, threading.Condition()  # reply id -> batch

    def wrap_tool_call(self, request, handler):
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        if name not in self.writers | self.readers:
            return handler(request)
        batch = next(m for m in reversed(request.state["messages"]) if m.type == "ai")
        ours = [c for c in batch.tool_calls if c["name"] in self.writers | self.readers]
        writer_ids = [c["id"] for c in ours if c["name"] in self.writers]
        with self.changed:
            done = self.batches.setdefault(batch.id, {})  # call id -> what it wrote
        wrote = None
        try:
            if name in self.writers:  # 1. record
                result = handler(request)
                wrote = result.update.get(self.key) if isinstance(result, Command) else None
                return result
            with self.changed:  # 2. wait
                if not self.changed.wait_for(lambda: set(writer_ids) <= done.keys(), self.timeout):
                    error = f"Error: {name} timed out waiting for the writers of its reply."
                    return ToolMessage(error, tool_call_id=call_id, name=name, status="error")
                writes = [done[i] for i in writer_ids if done.get(i) is not None]
            merged = reduce(self.reducer, writes, request.state.get(self.key))  # 3. merge
            view = {**request.state, self.key: merged}
            runtime = replace(request.runtime, state=view)
            return handler(request.override(state=view, runtime=runtime))
        finally:
            with self.changed:  # 4. drop
                done[call_id] = wrote
                self.changed.notify_all()
                if len(done) == len(ours):
                    del self.batches[batch.id]


# %% [markdown]
# Where a reader stalls:
# - **Wait**: `wait_for` blocks the reader's thread until every writer id of
#   its reply is in `done`, or the timeout passes.
# - **Override**: the tool reads `runtime.state`, built before the
#   middleware ran, so the call gets the merged view in both.

# %% [markdown]
# - **None for a reader**: its entry in `done` only marks it finished.
# - **Drop**: once every call of the batch has an entry, the last to finish
#   deletes the batch, so the dict never grows.

# %% [markdown]
# ## 5. Prove it: 100 turns, and the package agrees
# The package's `TurnCacheMiddleware` does the same four steps, plus an
# async twin, a batch per conversation, and clear errors when a writer
# fails or never gets a thread. 100 turns each, every tool call delayed by
# a seeded random 0-5 ms (about 15 s):

# %%
from collections import Counter

from agentstate.core import TurnCacheMiddleware
from agentstate.lessons.simulation import ToolLatencyMiddleware

CACHE = dict(writers=["store_requirement"], readers=READS, key="requirements", reducer=merge_fields)

for name, cache in {
    "plain agent": None,
    "teaching TurnCache": TurnCache(**CACHE),
    "package TurnCacheMiddleware": TurnCacheMiddleware(**CACHE),
}.items():
    agent = my_agent(cache, ToolLatencyMiddleware(0.005, seed=3), turns=100)
    saw = Counter(seen(agent.invoke(TURN)) for _ in range(100))
    print(f"{name}:", ", ".join(f"saw {k} of 5 in {n} turns" for k, n in sorted(saw.items())))

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) (`agentstate.doctor.diagnose`)
# reads an agent's code without running it. On the plain agent and the same
# agent with the package's turn cache, after the diff `--fix` would write,
# run:

# %%
from agentstate.doctor import diagnose, preview_fix
from agentstate.lessons.display import compare_findings

fix = preview_fix(my_agent(), unsafe=True)  # what --fix --unsafe-fixes would write
print(fix.diff)
namespace = dict(globals())
exec(fix.fixed("my_agent"), namespace)  # the fixed my_agent, run as the lesson runs it
saw = seen(namespace["my_agent"]().invoke(TURN))
by_hand = seen(my_agent(TurnCacheMiddleware(**CACHE)).invoke(TURN))
print(f"--fix: the reader saw {saw} of 5, as with TurnCacheMiddleware:", saw == by_hand)
compare_findings(
    {
        "plain agent": diagnose(my_agent()),
        "with TurnCacheMiddleware": diagnose(my_agent(TurnCacheMiddleware(**CACHE))),
    }
)

# %% [markdown]
# ## A knob: writers in the reply, with and without the cache
# Without the cache the reader sees 0 fields, however many writers. With it,
# all of them.


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets


def reader_sees(writers: int = 5, turn_cache: bool = True) -> int:
    fields = {f"labels.k{i:02d}": str(i) for i in range(writers)}
    return seen(my_agent(TurnCache(**CACHE) if turn_cache else None, fields=fields).invoke(TURN))


knob_widget = widgets.interact(
    reader_sees,
    writers=widgets.IntSlider(value=5, min=1, max=30, description="writers"),
    turn_cache=widgets.Checkbox(value=True, description="turn cache"),
)

# %% [markdown]
# ## Summary
# - A reader in the writers' own reply sees the state from before the
#   super-step, even when it reads after they returned, on another thread.
# - The cheap fix: readers in the next reply. A turn cache (readers wait for
#   their batch and read its writes merged) pays only when you cannot
#   choose the order.
# - Going further: [caches that fail, and the threads under a
#   batch](going_further/03_caches_that_fail.ipynb).

# %% [markdown]
# ## Exercises
# 1. With `TurnCache`, put the readers *first* in the reply. What does
#    `get_collected_requirements` see, and why?
# 2. Run one `TurnCache` turn with each store slowed to 50 ms
#    (`SlowToolMiddleware`) and `{"max_concurrency": 4}`. Which calls start
#    late, and why does no reader time out?
# 3. Take step 2 away: a condition whose `wait_for` returns `True` at once.
#    Over 100 turns, how many fields does the reader see?
# 4. Invoke one `TurnCache` agent from two Python threads at once, each with
#    its own fields. Does either reader see the other's?

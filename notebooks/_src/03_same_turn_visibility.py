# %% [markdown]
# # 03 · Same-turn visibility: readers that wait for their batch
#
# A model stores five fields and, in the same reply, calls two readers.
# They find nothing. The agent's changelog
# ([where this comes from](../README.md#where-this-comes-from)) said
# "Commands are batched and applied only after ALL tools complete", and
# tools are "Single-threaded within agent turn". We test both.

# %% [markdown]
# ## Recap
# Lesson 02's **reducer** keeps every parallel write. The writes land
# together when the tools' [super-step](../docs/glossary.md#super-step)
# ends. What does a reader in that same step see? Releases affected:
# [same-batch-read](../docs/hazards-by-version.md#same-batch-read).

# %% [markdown]
# ## Goals
# - Reproduce: readers beside the writers see nothing.
# - Look inside: the step drawn.
# - Fix: a turn cache, checked against the package's.

# %% [markdown]
# ## 1. Reproduce: readers next to the writers
# Lesson 02's `RequirementsState` (`requirements` merged by `merge_fields`)
# and `store_requirement`, imported; new here, a reader of `runtime.state`.
# `validate_manifest`, a second reader, is imported: it replies how many
# fields are missing.
#
# `my_agent` builds the plain agent on a scripted model (`same_turn_model`,
# offline): five stores and both readers in one reply, or the readers in
# the next. The tools run in super-step 2.

# %%
import json

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool

from agentstate.core import merge_fields
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    RequirementsState,
    fields_seen_by_reader,
    same_turn_model,
    store_requirement,
    validate_manifest,
)
from agentstate.tracing import ToolTimeline


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
TOOLS = [store_requirement, get_collected_requirements, validate_manifest]
READS = ["get_collected_requirements", "validate_manifest"]


def my_agent(*middleware, fields=POSTGRES_FIELDS, next_reply=False, turns=1):
    model = same_turn_model(fields, READS, next_reply=next_reply, turns=turns)
    used = filter(None, middleware)  # None: no middleware
    return create_agent(model, tools=TOOLS, state_schema=RequirementsState, middleware=[*used])


timeline = ToolTimeline()  # a middleware that records each tool call, for the figure below
state = my_agent(timeline).invoke(TURN)
print("fields get_collected_requirements listed:", fields_seen_by_reader(state))
print("fields in the state after the turn:", len(state["requirements"]))

# %% [markdown]
# ## 2. Look inside: one super-step, read from the state before it
# The reader listed nothing; the state after the turn held all five fields.
# Drawn: every call got the state from before the step.

# %%
from agentstate.tracing import draw_superstep

draw_superstep(timeline, key="requirements", reducer=merge_fields, title="one reply")

# %% [markdown]
# Is the reader just too early? `ReadLast` holds it until every store has
# returned. Then a second run: the readers in the next reply.

# %%
from agentstate.lessons.simulation import ReadLast

late_timeline = ToolTimeline()
read_last = ReadLast(late_timeline, "get_collected_requirements", "store_requirement", writers=5)
# ReadLast also holds each store until the reader has started: 6 calls at once need 6 threads
late = my_agent(read_last, late_timeline).invoke(TURN, {"max_concurrency": 6})
print(*(f"{claim}: {value}" for claim, value in read_last.evidence().items()), sep="\n")
print("fields the late reader saw:", fields_seen_by_reader(late))
next_reply = my_agent(next_reply=True).invoke(TURN)
print("fields a reader in the next reply saw:", fields_seen_by_reader(next_reply))

# %% [markdown]
# The reader was held until every store had returned, and it still saw
# nothing: timing is not the cause. Writes apply when the **super-step**
# ends, not the turn. And the calls ran on several threads: not
# "single-threaded".

# %% [markdown]
# ## 3. When is a turn cache worth it?
# The cheap fix is above (readers in the next reply); a turn cache pays when
# you cannot choose the order.
#
# ```mermaid
# flowchart LR
#     a["reply 1: 5 stores"] -- "writes applied" --> b["reply 2: 2 readers<br/>see 5 fields"]
#     c["one reply: 5 stores + 2 readers"] -- "turn cache: readers wait" --> d["see 5 fields"]
#     b -.- e["cost: one more model call"]
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
#     R->>C: 1. wait: until every writer of the batch finished
#     C->>R: 2. merge: the state with the batch's writes folded in
#     W->>C: 3. record: what each Command wrote
#     Note over W,R: 4. drop: the batch's last call to finish forgets it
# ```

# %% [markdown]
# The idea, whole. `batches`: a reply's id -> what each finished call
# wrote. A `Condition` is a lock threads can wait on.

# %%
import threading
from dataclasses import replace
from functools import reduce

from langchain.agents.middleware import AgentMiddleware
from langgraph.types import Command


class TurnCache(AgentMiddleware):
    def __init__(self, writers, readers, key, reducer, timeout=10.0):
        self.writers, self.readers, self.key, self.reducer = writers, readers, key, reducer
        self.timeout, self.batches, self.changed = timeout, {}, threading.Condition()

    def wrap_tool_call(self, request, handler):
        call, state = request.tool_call, request.state
        batch = next(m for m in reversed(state["messages"]) if m.type == "ai")  # its reply
        writer_ids = [c["id"] for c in batch.tool_calls if c["name"] in self.writers]
        with self.changed:
            done = self.batches.setdefault(batch.id, {})  # call id -> what it wrote
            if call["name"] in self.readers:  # 1. wait for every writer of the reply
                if not self.changed.wait_for(lambda: set(writer_ids) <= done.keys(), self.timeout):
                    raise TimeoutError(f"{call['name']}: writers still busy after {self.timeout} s")
                # 2. merge: each writer's value folded into the state's, in the model's call order
                merged = reduce(self.reducer, map(done.get, writer_ids), state.get(self.key))
                view = {**state, self.key: merged}  # tools read runtime.state: override both
                request = request.override(state=view, runtime=replace(request.runtime, state=view))
        result = handler(request)
        with self.changed:  # 3. record (a reader records None: it wrote nothing), 4. drop
            done[call["id"]] = result.update.get(self.key) if isinstance(result, Command) else None
            self.changed.notify_all()
            if len(done) == len(batch.tool_calls):  # every call of the reply has finished
                del self.batches[batch.id]
        return result


# %% [markdown]
# ## 5. Prove it: 100 turns, and the package agrees
# The package's `TurnCacheMiddleware` adds async, a batch per conversation
# and errors the model can read; its `reducer` defaults to `merge_fields`.
# Each tool call waits a seeded random 0-5 ms:

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
    agent = my_agent(cache, ToolLatencyMiddleware(0.005, seed=3), turns=100)  # 100 scripted turns
    saw = Counter(fields_seen_by_reader(agent.invoke(TURN)) for _ in range(100))
    print(f"{name}:", ", ".join(f"saw {k} of 5 in {n} turns" for k, n in sorted(saw.items())))

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) (`agentstate.doctor.diagnose`)
# reads an agent's code without running it. Below: the diff its
# `--fix --unsafe-fixes` would write, the fixed agent run once, and the
# doctor's findings on the plain agent and on the package's turn cache.

# %%
from agentstate.doctor import diagnose, preview_fix
from agentstate.lessons.display import compare_findings

fix = preview_fix(my_agent(), unsafe=True)  # what --fix --unsafe-fixes would write
print(fix.diff)
fixed_agent = fix.load("my_agent", globals())()  # the fixed my_agent; ours stays as it was
print("--fix: the reader saw", fields_seen_by_reader(fixed_agent.invoke(TURN)), "of 5")
cached = my_agent(TurnCacheMiddleware(**CACHE))
compare_findings({"plain agent": diagnose(my_agent()), "package cache": diagnose(cached)})

# %% [markdown]
# ## A knob: writers in the reply
# Without the cache the reader sees 0 fields, however many writers; with
# it, all of them.


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

from agentstate.lessons.fixtures import label_fields


def reader_sees(writers: int = 5, turn_cache: bool = True) -> int:
    agent = my_agent(TurnCache(**CACHE) if turn_cache else None, fields=label_fields(writers))
    return fields_seen_by_reader(agent.invoke(TURN))


knob_widget = widgets.interact(reader_sees, writers=(1, 30))  # a slider, and a checkbox

# %% [markdown]
# ## Summary
# - A reader in the writers' reply sees the state from before the
#   super-step, even when it starts after them.
# - Fix: readers in the next reply, or a turn cache when you cannot choose
#   the order.
# - A shared dict races ([going further](going_further/03_caches_that_fail.ipynb)).

# %% [markdown]
# ## Exercises
# 1. Readers *first* in the reply: what does the cached reader see, and why?
# 2. Run `my_agent(t, TurnCache(**CACHE)).invoke(TURN, {"max_concurrency": 4})`
#    with `t = ToolTimeline()`: which calls start late (`t.events`)? Why does
#    no reader time out?
# 3. Without step 1 (`wait_for` returns `True` at once), how many fields
#    does the reader see over 100 turns?
# 4. One `TurnCache` agent run from two threads, each with its own fields:
#    does either reader see the other's?

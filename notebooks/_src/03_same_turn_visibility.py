# %% [markdown]
# # 03 · Same-turn visibility: readers that wait for their batch
#
# A model stores five fields and, in the same reply, calls two readers.
# They find nothing. The RDS agent's changelog
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

# %%
import json

from langchain.tools import ToolRuntime, tool

from agentstate.lessons.fixtures import POSTGRES_FIELDS, RequirementsState, store_requirement


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


# %% [markdown]
# `my_agent` runs on an offline scripted model, `same_turn_model`, for
# `turns` invokes. Its reply stores five fields and calls two readers: ours,
# and `validate_manifest` (replies `valid` or how many fields are missing).
# `next_reply=True` moves the readers a reply later. The model runs in
# super-step 1, the tools in 2.

# %%
from langchain.agents import create_agent

from agentstate.lessons.fixtures import fields_seen_by_reader, same_turn_model, validate_manifest
from agentstate.tracing import ToolTimeline, draw_superstep

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
TOOLS = [store_requirement, get_collected_requirements, validate_manifest]
READS = ["get_collected_requirements", "validate_manifest"]


def my_agent(*extra, fields=POSTGRES_FIELDS, next_reply=False, turns=1):
    model = same_turn_model(fields, READS, next_reply=next_reply, turns=turns)
    return create_agent(model, tools=TOOLS, state_schema=RequirementsState, middleware=[*extra])


timeline = ToolTimeline()  # a middleware that records each tool call, for the figure below
state = my_agent(timeline).invoke(TURN)
print("fields our reader listed:", fields_seen_by_reader(state), "of", len(state["requirements"]))

# %% [markdown]
# ## 2. Look inside: one super-step, read from the state before it

# %%
draw_superstep(timeline, key="requirements", reducer="merge_fields", title="one reply")

# %% [markdown]
# Is the reader just too early? Two tries: hold it until every store
# returned (`ReadLast`, a middleware; it also holds each store until the
# reader waits, so the reader and the stores run on different threads),
# then move the readers to the next reply.

# %%
from agentstate.lessons.simulation import run_read_last

# TURN on my_agent(ReadLast, a ToolTimeline)
reader, store = "get_collected_requirements", "store_requirement"
print(run_read_last(my_agent, TURN, reader, store, writers=5))
next_reply = my_agent(next_reply=True).invoke(TURN)
print("fields a reader in the next reply saw:", fields_seen_by_reader(next_reply))

# %% [markdown]
# Started last, the reader still replied `{}`: timing is not the cause.
# "Applied only after ALL tools complete": true (one super-step).
# "Single-threaded within agent turn": false (more than one thread).

# %% [markdown]
# ## 3. When is a turn cache worth it?
# Two fixes; a turn cache pays when you cannot move the readers to a
# later reply:
#
# ```mermaid
# flowchart LR
#     a["reply 1: 5 stores"] -- "writes applied" --> b["reply 2: our reader<br/>sees 5 fields"]
#     d["our reader<br/>sees 5 fields"]
#     c["one reply: 5 stores + 2 readers"] -- "turn cache: readers wait" --> d
#     b -.- e["cost: one more<br/>model call"]
#     d -.- f["cost: locking; each waiting<br/>reader holds a thread"]
# ```

# %% [markdown]
# ## 4. The fix: a turn cache whose readers wait for their batch
# A **batch** is the tool calls of one reply. A middleware wraps each tool
# call (`wrap_tool_call`), in this order:
#
# ```mermaid
# flowchart LR
#     c["a tool call"] --> q{"a reader?"}
#     q -- yes --> w["step 1, wait: every writer<br/>of its reply finished"]
#     w --> m["step 2, merge: their writes<br/>into the state it reads"]
#     m --> t["the tool runs"]
#     q -- no --> t
#     t --> r["step 3, record what it<br/>wrote (a reader: None)"]
#     r --> d["step 4, drop the batch<br/>after its last call"]
# ```

# %% [markdown]
# `TurnCacheBase` (from `agentstate.core`) keeps the settings (`writers`,
# `readers`, `key`; `reducer`: `merge_fields` unless given; `timeout`:
# 10 s), `batches` (a reply's id -> what each finished call wrote) and
# `changed`, a `Condition`: a lock threads can wait on. Three helpers:
# `batch_of` finds a call's reply, `reader_view` puts a value where a tool
# reads state (`runtime.state`, not only the request's `state`),
# `written_value` reads what a call's `Command` set the key to (`.value`).

# %%
from functools import reduce

from agentstate.core import TurnCacheBase, TurnCacheMiddleware, batch_of, reader_view, written_value


class TurnCache(TurnCacheBase):
    def wrap_tool_call(self, request, handler):
        reply, writer_ids, size = batch_of(request, self.writers)  # reply id, writer ids, n calls
        with self.changed:
            done = self.batches.setdefault(reply, {})  # call id -> what it wrote
            if request.tool_call["name"] in self.readers:  # 1. wait
                if not self.changed.wait_for(lambda: set(writer_ids) <= done.keys(), self.timeout):
                    raise self.timed_out(request.tool_call)
                view = reduce(self.reducer, map(done.get, writer_ids), request.state.get(self.key))
                request = reader_view(request, self.key, view)  # 2. merge, into runtime.state
        result = handler(request)
        with self.changed:  # 3. record what it set key to (a reader: None)
            done[request.tool_call["id"]] = written_value(result, self.key).value
            self.changed.notify_all()  # wake the waiting readers
            if len(done) == size:  # 4. drop, after the reply's last call
                del self.batches[reply]
        return result


# %% [markdown]
# ## 5. Prove it: 100 turns, and the package agrees
# Beside it, the package's `TurnCacheMiddleware`. Each tool call waits a
# seeded random 0-5 ms:

# %%
from agentstate.lessons.simulation import ToolLatencyMiddleware

CACHE = dict(writers=["store_requirement"], readers=READS, key="requirements")
for caches in ([], [TurnCache(**CACHE)], [TurnCacheMiddleware(**CACHE)]):  # []: the plain agent
    agent = my_agent(*caches, ToolLatencyMiddleware(0.005, seed=3), turns=100)  # scripted for 100
    seen = {fields_seen_by_reader(agent.invoke(TURN)) for _ in range(100)}  # a set: the counts seen
    print(caches[0].name if caches else "plain agent", "saw", seen, "of 5 fields in 100 turns")

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) reads a compiled agent's state
# schema and its tools' code, without running it, and names the hazards
# these lessons teach. Below: the change `agentstate doctor --fix
# --unsafe-fixes` would make (unsafe: it adds a dependency on agentstate),
# and its findings without and with the package's cache.

# %%
from agentstate.doctor import diagnose, preview_fix

print(*(fix.title for fix in preview_fix(my_agent(), unsafe=True).fixes))
for agent in (my_agent(), my_agent(TurnCacheMiddleware(**CACHE))):
    print("the doctor finds:", diagnose(agent).codes())

# %% [markdown]
# ## A knob: writers in the reply
# Try more writers, with and without the cache.


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets  # Jupyter's sliders and checkboxes

from agentstate.lessons.fixtures import label_fields  # n distinct fields to store


def reader_sees(writers=5, turn_cache=True):
    caches = [TurnCache(**CACHE)] if turn_cache else []
    return fields_seen_by_reader(my_agent(*caches, fields=label_fields(writers)).invoke(TURN))


knob_widget = widgets.interact(reader_sees, writers=(1, 30), turn_cache=True)

# %% [markdown]
# ## Summary
# - A reader in the writers' reply sees the state from before the
#   super-step, even when it starts after them.
# - Fix: readers in the next reply, or a turn cache.
# - [Going further 03](going_further/03_caches_that_fail.ipynb) shows a
#   shared-dict cache racing.

# %% [markdown]
# ## Exercises
# 1. Readers *first* in the reply (a model of your own: `agentstate.models`'
#    `ScriptedChatModel`, `reply`, `tool_call`): what does the cached reader
#    see, and why?
# 2. `my_agent(t, TurnCache(**CACHE)).invoke(TURN, {"max_concurrency": 4})`,
#    `t` a `ToolTimeline`: which calls start late? Why does no reader time out?
# 3. Without step 1 (`wait_for` returns `True` at once), what does the
#    reader see over 100 turns?
# 4. One `TurnCache` shared by two agents, each storing its own fields,
#    invoked from two threads at once: does either reader see the other's?

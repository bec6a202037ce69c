# %% [markdown]
# # 03 · Same-turn visibility: readers that wait for their batch
#
# A capable model may store five fields and, in the same reply, call two
# readers: `get_collected_requirements` and `validate_manifest`. With lesson
# 02's agent the readers find nothing. The agent's changelog
# ([where this comes from](../README.md#where-this-comes-from)) said
# "Commands are batched and applied only after ALL tools complete", and
# tools are "Single-threaded within agent turn". We test both claims, show
# why its shared dict is a race, and write a turn cache that is not.

# %% [markdown]
# ## Recap
# Lesson 02's **reducer** keeps every parallel write. The writes land
# together when the tools' [super-step](../docs/glossary.md#super-step)
# ends. What does a reader in that same step see?
#
# ## Goals
# - Reproduce: a reader in the writers' own reply sees none of their writes.
# - Look inside: the step drawn, and a shared dict that races.
# - Weigh the cheap fix, a reader in the next reply, against a turn cache.
# - Write the turn cache whole and prove it on 200 turns.

# %% [markdown]
# ## 1. Reproduce: readers next to the writers
# The agent, written here: lesson 02's state and writer, and two readers
# that read `runtime.state`. The first reader prints what it read while
# `show_reads` is on.

# %%
import json
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.fixtures import POSTGRES_FIELDS

REQUIRED = list(POSTGRES_FIELDS)  # the five fields a manifest needs here


def merge_fields(current: dict | None, write: dict | None) -> dict:
    return {**(current or {}), **(write or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


# %%
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
    """Check that every required field has been collected."""
    collected = runtime.state.get("requirements", {})
    missing = [f for f in REQUIRED if f not in collected]
    return f"invalid: missing {', '.join(missing)}" if missing else "valid"


# %% [markdown]
# The scripted model: five stores and both readers in one reply (or the
# readers in the next reply), `turns` times over. `my_agent` builds the
# plain agent, with optional middleware:

# %%
from agentstate.models import ScriptedChatModel, reply, tool_call

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
TOOLS = [store_requirement, get_collected_requirements, validate_manifest]
READS = ["get_collected_requirements", "validate_manifest"]


def my_agent(*middleware, turns=1, tools=TOOLS, fields=POSTGRES_FIELDS, next_reply=False):
    stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    reads = [tool_call(name) for name in READS]
    replies = [reply(*stores), reply(*reads)] if next_reply else [reply(*stores, *reads)]
    model = ScriptedChatModel(script=[*replies, reply(text="Done.")] * turns)
    used = [m for m in middleware if m]
    return create_agent(model, tools=tools, state_schema=RequirementsState, middleware=used)


# %%
from agentstate.tracing import ToolTimeline


def reply_of(state: dict, tool_name: str) -> str:
    return next(m.text for m in reversed(state["messages"]) if m.name == tool_name)


def seen(state: dict) -> int:  # how many fields get_collected_requirements listed
    return len(json.loads(reply_of(state, "get_collected_requirements")))


timeline = ToolTimeline()
state = my_agent(timeline).invoke(TURN)
assert reply_of(state, "get_collected_requirements") == "{}" and len(state["requirements"]) == 5
print("fields in the state after the turn:", len(state["requirements"]))

# %% [markdown]
# The reader read an empty dict, yet the state held all five fields when
# the turn ended.
#
# ## 2. Look inside: one super-step, read from the state before it
# The same run as state flow. Every call was handed the state from before
# the step. The readers wrote nothing, and replied from that old state.

# %%
from agentstate.tracing import draw_superstep

draw_superstep(timeline, key="requirements", reducer=merge_fields, title="one reply")

# %% [markdown]
# Is the reader just too early? Make it sleep 0.2 s first (the package's
# `SlowToolMiddleware`), so it reads after every store returned:

# %%
from agentstate.simulation import SlowToolMiddleware

show_reads = False  # quiet from here on
late_timeline = ToolTimeline()
late = my_agent(late_timeline, SlowToolMiddleware("get_collected_requirements", 0.2)).invoke(TURN)
reader = next(e for e in late_timeline.events if e.name == "get_collected_requirements")
stores_done = max(e.end for e in late_timeline.events if e.name == "store_requirement")
print("the reader read after every store finished:", reader.start + 0.2 > stores_done)
print("super-steps of the seven calls:", sorted({e.step for e in late_timeline.events}))
print("fields the reader saw:", seen(late))

# %% [markdown]
# The seven calls ran in one super-step on parallel threads, so the tools
# are not "single-threaded". The reader read late and still saw nothing.
# Writes apply at the end of the **super-step**, not of the turn. A reader
# in the model's **next** reply sees them all:

# %%
next_reply = my_agent(next_reply=True).invoke(TURN)
print("fields a reader in the next reply saw:", seen(next_reply))

# %% [markdown]
# ## 3. Look inside: a shared dict is a race
# The write-up's fix was a dict shared by every tool of the turn: writers
# add to it, and readers merge it into what they read. But the calls run on
# parallel threads, and nothing makes a reader wait for the writers. Run 200
# times, it sees anything from 0 to 5 fields
# ([going further](going_further/03_caches_that_fail.ipynb) runs it).
#
# ## 4. When is a turn cache worth it?
# The cheap fix is above: the readers in the model's next reply. It costs
# one more model call, a second or two with a real model, and no code. A
# line in the prompt asking for readers after writers is often enough. A
# turn cache costs the 60 lines of thread synchronisation below, and each
# waiting reader holds a thread. It is worth it only when you cannot choose
# the order: a model that batches readers with writers anyway, or a check
# that must run on the batch's own writes.
#
# ## 5. The fix: a turn cache whose readers wait for their batch
# A **batch** is the tool calls of one reply. One middleware wraps each
# tool call (`wrap_tool_call`) in four steps:
#
# 1. **Record** the value each writer's `Command` wrote.
# 2. **Wait**: a reader waits until every writer of its reply has finished
#    (stored, rejected or failed), with a timeout.
# 3. **Merge**: the reader runs on a copy of the state with the batch's
#    writes folded in by the key's reducer, in call order. That is the value
#    LangGraph will store when the step ends.
# 4. **Drop**: the batch's last call to finish forgets the batch.
#
# Before the code, one batch through the package's `TurnCacheMiddleware`,
# with each store slowed to 50 ms. Every call's start and end, in time
# order: the readers start with the writers, wait, and end just after the
# last writer, having seen all five fields.

# %% tags=["nbval-ignore-output"]
from agentstate.core import TurnCacheMiddleware

trace = ToolTimeline()
package_cache = TurnCacheMiddleware(
    writers=["store_requirement"], readers=READS, key="requirements"
)
slow_stores = SlowToolMiddleware("store_requirement", 0.05)
my_agent(trace, package_cache, slow_stores).invoke(TURN, {"max_concurrency": 7})
t0 = min(e.start for e in trace.events)
moments = [(e.start, e.position, e.label, "starts") for e in trace.events]
moments += [(e.end, e.position, e.label, f"ends, replied {e.reply[:32]}") for e in trace.events]
print(
    "\n".join(
        f"{(t - t0) * 1000:4.0f} ms  #{p + 1} {name} {what}" for t, p, name, what in sorted(moments)
    )
)

# %% [markdown]
# The teaching version. A batch's bookkeeping: its writers' ids in call
# order, the calls finished so far with what each wrote, and a condition
# readers wait on:

# %%
import threading
from dataclasses import replace
from functools import reduce

from langchain.agents.middleware import AgentMiddleware


class Batch:
    def __init__(self, writer_ids: list[str], call_ids: list[str]):
        self.writer_ids, self.call_ids = writer_ids, set(call_ids)
        self.done: dict[str, Any] = {}  # call id -> what it wrote (None: nothing)
        self.changed = threading.Condition()

    def finish(self, call_id: str, write: Any = None) -> bool:  # True for the last call
        with self.changed:
            self.done[call_id] = write
            self.changed.notify_all()
            return self.call_ids <= self.done.keys()

    def wait_for_writers(self, timeout: float) -> bool:  # False if one is still running
        with self.changed:
            return self.changed.wait_for(lambda: set(self.writer_ids) <= self.done.keys(), timeout)

    def writes(self) -> list:  # in call order
        return [self.done[c] for c in self.writer_ids if self.done.get(c) is not None]


# %% [markdown]
# A tool call finds its batch through the reply (`AIMessage`) that holds it;
# the first call of a reply opens the batch:


# %%
def batch_of(cache, request) -> tuple[str, Batch]:
    call_id = request.tool_call["id"]
    replies = [m for m in request.state["messages"] if m.type == "ai"]
    message = next(m for m in reversed(replies) if call_id in {c["id"] for c in m.tool_calls})
    ours = [c for c in message.tool_calls if c["name"] in cache.writers | cache.readers]
    with cache.lock:
        if message.id not in cache.batches:
            writer_ids = [c["id"] for c in ours if c["name"] in cache.writers]
            cache.batches[message.id] = Batch(writer_ids, [c["id"] for c in ours])
        return message.id, cache.batches[message.id]


# %% [markdown]
# The middleware, with the four steps numbered:


# %%
class TeachingTurnCache(AgentMiddleware):
    def __init__(self, *, writers, readers, key, reducer, timeout=10.0):
        super().__init__()
        self.writers, self.readers, self.key = set(writers), set(readers), key
        self.reducer, self.timeout, self.batches, self.lock = reducer, timeout, {}, threading.Lock()

    def wait(self, batch: Batch) -> bool:
        return batch.wait_for_writers(self.timeout)

    def wrap_tool_call(self, request, handler):
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        if name not in self.writers | self.readers:
            return handler(request)
        batch_id, batch = batch_of(self, request)
        write = None
        try:
            if name in self.writers:  # 1. record
                result = handler(request)
                if isinstance(result, Command) and self.key in (result.update or {}):
                    write = result.update[self.key]
                return result
            if not self.wait(batch):  # 2. wait
                error = f"Error: {name} timed out waiting for the writers of its reply."
                return ToolMessage(error, tool_call_id=call_id, name=name, status="error")
            merged = reduce(self.reducer, batch.writes(), request.state.get(self.key))  # 3. merge
            view = {**request.state, self.key: merged}
            runtime = replace(request.runtime, state=view)
            return handler(request.override(state=view, runtime=runtime))
        finally:
            if batch.finish(call_id, write):  # 4. drop
                with self.lock:
                    del self.batches[batch_id]


# %% [markdown]
# ## 6. Prove it: 200 turns, and the package agrees
# The package's `TurnCacheMiddleware` does the same four steps, and adds an
# async twin, a batch key per conversation and cleanup of stale batches.
# The plain agent and both caches, on 200 turns, each tool call delayed by a
# seeded random 0-5 ms standing in for real I/O (about 20 s):


# %%
from collections import Counter

from agentstate.display import Table, progress
from agentstate.simulation import ToolLatencyMiddleware

TRIALS = 200


def latency():  # a seeded random 0-5 ms before each tool call
    return ToolLatencyMiddleware(0.005, seed=3)


def fields_seen(agent, desc="turns") -> list[int]:  # what the reader saw, turn by turn
    turns = progress(range(TRIALS), desc=desc, done=f"{desc}: {TRIALS} turns run")
    return [seen(agent.invoke(TURN)) for _ in turns]


def distribution(counts: list[int]) -> Table:
    rows = sorted(Counter(counts).items())
    return Table({"fields the reader saw (of 5)": k, "turns": n} for k, n in rows)


def my_cache(kind=TeachingTurnCache, **options):
    return kind(
        writers=["store_requirement"],
        readers=READS,
        key="requirements",
        reducer=merge_fields,
        **options,
    )


caches = {"plain": None, "teaching": my_cache(), "package": my_cache(TurnCacheMiddleware)}
saw_all = {
    name: fields_seen(my_agent(c, latency(), turns=TRIALS), desc=name).count(5)
    for name, c in caches.items()
}
Table({"turn cache": name, "turns the reader saw 5 of 5": n} for name, n in saw_all.items())

# %% [markdown]
# One turn with the teaching cache, drawn in time, each store slowed to
# 50 ms. `max_concurrency=7` in the config gives each call its own thread,
# so the readers start with the writers. They wait (their long bars) until
# the last writer has finished, then see all five fields, in the same
# super-step.

# %%
from agentstate.tracing import draw_run

cached_timeline = ToolTimeline()
cached_agent = my_agent(cached_timeline, my_cache(), slow_stores)
cached = cached_agent.invoke(TURN, {"max_concurrency": 7})
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
# up at its timeout ([going further](going_further/03_caches_that_fail.ipynb)
# shows it on one thread).
#
# Take step 2, the wait, away, and the race of section 3 comes back:


# %% tags=["nbval-ignore-output"]
class NoWait(TeachingTurnCache):
    def wait(self, batch: Batch) -> bool:
        return True


no_wait = fields_seen(my_agent(my_cache(NoWait), latency(), turns=TRIALS), desc="no wait")
assert min(no_wait) < 5
distribution(no_wait)

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) (`agentstate.doctor.diagnose`)
# reads an agent's code without running it. On the plain agent and the same
# agent with the package's turn cache:

# %%
from agentstate.display import compare_findings
from agentstate.doctor import diagnose

plain_report = diagnose(my_agent())
cached_report = diagnose(my_agent(my_cache(TurnCacheMiddleware)))
compare_findings({"plain agent": plain_report, "with TurnCacheMiddleware": cached_report})

# %% [markdown]
# ## A knob: writers in the reply, with and without the cache
# Run the cells above first. Without the cache the reader sees 0 fields
# whatever the number of writers. With it, it sees all of them.


# %%
def reader_sees(writers: int = 5, turn_cache: bool = True) -> Table:
    fields = {f"labels.k{i:02d}": str(i) for i in range(writers)}
    agent = my_agent(my_cache() if turn_cache else None, fields=fields)
    return Table(
        [{"writers": writers, "turn cache": turn_cache, "reader saw": seen(agent.invoke(TURN))}]
    )


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    reader_sees,
    writers=widgets.IntSlider(value=5, min=1, max=30, description="writers"),
    turn_cache=widgets.Checkbox(value=True, description="turn cache"),
)

# %% [markdown]
# ## Summary
# - A reader in the writers' own reply sees the state from before the
#   super-step, even when it reads after they returned. Writes apply at the
#   end of the super-step. A reader in the next reply sees everything.
# - The calls of one reply run on parallel threads, so a shared dict that
#   nobody waits on is a race.
# - A reader in the next reply is the cheap fix. The turn cache is worth its
#   threads only when you cannot choose the order.
# - Going further: [the write-up's own cache and the threads under a
#   batch](going_further/03_caches_that_fail.ipynb).
#
# ## Exercises
# 1. Put the readers *first* in the reply, before the stores, with the
#    teaching cache. What does `get_collected_requirements` see, and why?
# 2. Run the cached turn of section 6 with `{"max_concurrency": 4}`. Which
#    calls start late, and why does no reader time out?
# 3. Invoke one turn-cached agent from two Python threads at once, each with
#    its own fields. Does either reader see the other's fields?

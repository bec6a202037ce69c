# %% [markdown]
# # 03 · Same-turn visibility: readers that wait for their batch
#
# A capable model answers "a Postgres 15.5 manifest, sensible defaults" in
# one reply: a `store_requirement` call per field and, next to them,
# `get_collected_requirements` and `validate_manifest`. With stage 02's agent
# the readers find nothing. The RDS agent's changelog of November 11, 2025
# (introduced in [01](01_file_based_storage.ipynb)) said why: "Commands are
# batched and applied only after ALL tools complete", and tools are
# "Single-threaded within agent turn"; it added a dict that writers fill and
# readers merge. We test both claims, show why that dict is a race, and
# write a turn cache of 60 lines that is not.

# %% [markdown]
# ## Recap
# Stage 02's field-merge **reducer** keeps every parallel write; they land
# together when the tools' **super-step** ends ([02](02_state_reducer.ipynb);
# terms: [glossary](../docs/glossary.md)). What does a reader in that same
# step see?
#
# ## Goals
# - Reproduce: a reader in the writers' own reply sees none of their writes.
# - Look inside, drawn: one super-step on parallel threads; a shared dict races.
# - Write a turn cache whole (record, wait, merge, drop); prove it on 200
#   turns, beside the package's `TurnCacheMiddleware`.

# %% [markdown]
# ## 1. Reproduce: readers next to the writers
# The agent, written here: stage 02's state and writer, and two readers that
# read `runtime.state`, as every tool of the RDS agent does.

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
@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


@tool
def validate_manifest(runtime: ToolRuntime) -> str:
    """Check that every required field has been collected."""
    collected = runtime.state.get("requirements", {})
    missing = [f for f in REQUIRED if f not in collected]
    return f"invalid: missing {', '.join(missing)}" if missing else "valid"


# %% [markdown]
# The scripted model: five stores and both readers in one reply (or the
# readers in the next reply), `turns` times over, one reply set per user
# turn. `my_agent` builds the plain agent, with optional middleware:

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
from agentstate.display import Table


def reply_of(state: dict, tool_name: str) -> str:
    return next(m.text for m in reversed(state["messages"]) if m.name == tool_name)


def seen(state: dict) -> int:  # how many fields get_collected_requirements listed
    return len(json.loads(reply_of(state, "get_collected_requirements")))


state = my_agent().invoke(TURN)
readers = Table({"reader": name, "its reply": reply_of(state, name)} for name in READS)
assert readers.column("its reply")[0] == "{}" and state["requirements"] == POSTGRES_FIELDS
readers

# %% [markdown]
# Both readers saw an empty state, yet all five fields were in the state
# when the turn ended.
#
# ## 2. Look inside: one super-step, read from a snapshot
# Is the reader just too early? Make it sleep 0.2 s first (the package's
# `SlowToolMiddleware`), so it reads after every store returned, and draw the
# run as in [01](01_file_based_storage.ipynb), each reader labelled with
# what it saw:

# %%
from agentstate.simulation import SlowToolMiddleware
from agentstate.tracing import ToolTimeline, draw_run


def saw(event) -> str:
    if event.name == "get_collected_requirements":
        return f"saw {len(json.loads(event.reply))} fields"
    return event.reply.split(":")[0]


timeline = ToolTimeline()
late = my_agent(timeline, SlowToolMiddleware("get_collected_requirements", 0.2)).invoke(TURN)
draw_run(timeline, late, key="requirements", saw=saw, title="a reader that waits 0.2 s")

# %% [markdown]
# All seven calls ran in one super-step on parallel threads: not
# single-threaded. The reader read after every store and saw nothing: each
# call reads the state as it was when the step began; writes apply when it
# ends (dashed line). So the first claim is half right: writes apply at the
# end of the **super-step**, not of the turn. A reader in the model's
# **next** reply sees them all:

# %%
seen_same, seen_next = seen(late), seen(my_agent(next_reply=True).invoke(TURN))
assert (seen_same, seen_next) == (0, 5)
Table(
    [
        {"reader": "in the writers' reply, after they finished", "fields it saw": seen_same},
        {"reader": "in the model's next reply", "fields it saw": seen_next},
    ]
)

# %% [markdown]
# ## 3. Look inside: a naive shared cache is a race
# The write-up's idea: a dict shared by every tool of the turn; writers add
# to it as well as to state, readers merge it into what they read. (Its own
# version cannot run today: see going further.) A dict the **caller** puts in
# `config["configurable"]` is shared by every tool:


# %%
@tool("store_requirement")
def store_in_dict_too(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement field, in state and in the turn's shared dict."""
    runtime.config["configurable"]["turn"][field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool("get_collected_requirements")
def read_dict_too(runtime: ToolRuntime) -> str:
    """Every requirement collected so far: the state, plus the turn's shared dict."""
    turn = runtime.config["configurable"]["turn"]
    return json.dumps({**runtime.state.get("requirements", {}), **turn})


# %% [markdown]
# Nothing makes the reader wait for the writers on the other threads. 200
# turns, each tool call delayed by a seeded random 0-5 ms (the package's
# `ToolLatencyMiddleware`, standing in for real I/O). The counts vary from
# run to run; about 10 s, with a progress bar:

# %% tags=["nbval-ignore-output"]
from collections import Counter

from tqdm.auto import tqdm, trange

from agentstate.simulation import ToolLatencyMiddleware

TRIALS = 200


def latency():  # a seeded random 0-5 ms before each tool call
    return ToolLatencyMiddleware(0.005, seed=3)


def fields_seen(agent, config=dict, progress=True) -> list[int]:
    """What the reader saw on each of TRIALS turns (a fresh `config()` each)."""
    turns = trange(TRIALS, leave=False, disable=not progress)
    return [seen(agent.invoke(TURN, config())) for _ in turns]


naive_tools = [store_in_dict_too, read_dict_too, validate_manifest]
naive_agent = my_agent(latency(), turns=TRIALS, tools=naive_tools)
naive = fields_seen(naive_agent, config=lambda: {"configurable": {"turn": {}}})
assert min(naive) < 5
Table({"fields the reader saw (of 5)": k, "turns": n} for k, n in sorted(Counter(naive).items()))

# %% [markdown]
# ## 4. The fix: a turn cache whose readers wait for their batch
# A **batch** is the tool calls of one reply. One middleware wraps each
# tool call (`wrap_tool_call`) in four steps:
#
# 1. **Record** the value each writer's `Command` wrote.
# 2. **Wait**: a reader waits until every writer of its reply has finished
#    (stored, rejected or failed), with a timeout.
# 3. **Merge**: the reader runs on a copy of the state with the batch's
#    writes folded in by the key's reducer, in call order: the value
#    LangGraph will store when the step ends.
# 4. **Drop**: the batch's last call to finish forgets the batch.
#
# ```mermaid
# sequenceDiagram
#     participant W as store_requirement x5
#     participant C as turn cache
#     participant R as get_collected_requirements
#     R->>C: 2. wait for the writers of my reply
#     W->>C: 1. record each value written
#     C-->>R: 3. state + the batch's writes
#     Note over W,R: one super-step, whose writes LangGraph applies at its end
#     R->>C: 4. the last call drops the batch
# ```
#
# A batch's bookkeeping: its writers' ids in call order, the calls finished
# so far with what each wrote, and a condition readers wait on:

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
# ## 5. Prove it: 200 turns, and the package agrees
# The package's `agentstate.core.TurnCacheMiddleware` does the same four
# steps, and adds an async twin, a batch key naming the conversation and the
# subgraph, handling of writers that never run, and cleanup of stale
# batches. Plain agent, teaching cache and package cache on section 3's
# scenario (200 turns, 0-5 ms latency); about 20 s:

# %% tags=["nbval-ignore-output"]
from agentstate.core import TurnCacheMiddleware


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
    name: fields_seen(my_agent(c, latency(), turns=TRIALS), progress=False).count(5)
    for name, c in tqdm(caches.items(), leave=False)  # one tick per agent
}
assert saw_all == {"plain": 0, "teaching": TRIALS, "package": TRIALS}
Table({"turn cache": name, "turns the reader saw 5 of 5": n} for name, n in saw_all.items())

# %% [markdown]
# One turn with the teaching cache, drawn (each store slowed to 50 ms so the
# wait shows): the readers start with the writers, wait (their long bars)
# until the last writer of their reply has finished, then see all five
# fields, still inside the same super-step.

# %%
timeline = ToolTimeline()
cached = my_agent(timeline, my_cache(), SlowToolMiddleware("store_requirement", 0.05)).invoke(TURN)
draw_run(timeline, cached, key="requirements", saw=saw, title="with the teaching turn cache")

# %% [markdown]
# Take step 2 away and the race of section 3 comes back: a reader that does
# not wait reads whatever is recorded when it starts.


# %%
class NoWait(TeachingTurnCache):
    def wait(self, batch: Batch) -> bool:
        return True


no_wait = fields_seen(my_agent(my_cache(NoWait), latency(), turns=TRIALS), progress=False)
assert min(no_wait) < 5
Table([{"turns": TRIALS, "the reader saw 5 of 5 on every turn": min(no_wait) == 5}])

# %% [markdown]
# A reader never hangs: if a writer of its reply takes longer than the
# timeout (0.1 s here, a store slowed to 0.5 s), the reader returns an error
# the model can read, and the stores still land:

# %%
slow = my_agent(my_cache(timeout=0.1), SlowToolMiddleware("store_requirement", 0.5)).invoke(TURN)
said = reply_of(slow, "get_collected_requirements")
assert said.startswith("Error") and len(slow["requirements"]) == 5
Table([{"reader's reply": said, "fields in state after the turn": len(slow["requirements"])}])

# %% [markdown]
# The **doctor** (`agentstate.doctor.diagnose`) reads an agent's tools and
# state schema without running it. On the plain agent and the same agent
# with the package's turn cache:

# %%
from agentstate.display import compare_findings
from agentstate.doctor import diagnose

broken, fixed = diagnose(my_agent()), diagnose(my_agent(my_cache(TurnCacheMiddleware)))
assert broken.codes() == ["same-batch-read"] and fixed.codes() == []
compare_findings({"plain agent": broken, "with TurnCacheMiddleware": fixed})

# %% [markdown]
# ## A knob: writers in the reply, with and without the cache
# Run the cells above first. One turn with `writers` stores and the readers:
# without the cache the reader sees 0 fields whatever the number; with it,
# all of them.


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
#   super-step, even reading after every writer returned; a reader in the
#   next reply sees everything. Writes apply at the end of the super-step.
# - The calls of one reply run on parallel threads, so a shared dict nobody
#   waits on is a race.
# - The turn cache records each writer's value, makes readers wait for the
#   writers of their reply (with a timeout), merges the writes through the
#   reducer and drops the batch: 200 of 200 turns, as the package's
#   `TurnCacheMiddleware`.
# - Going further: [the original write-up's cache, its silent repair, and
#   the threads under a batch](going_further/03_caches_that_fail.ipynb).
#
# ## Exercises
# 1. Put the readers *first* in the reply, before the stores, with the
#    teaching cache. What does `get_collected_requirements` see, and why?
# 2. Force the naive dict's race: slow every store down by 0.5 s
#    (`SlowToolMiddleware`). What does its reader see on every turn, and
#    what does the turn cache's reader see?
# 3. Invoke one turn-cached agent from two Python threads at once, each with
#    its own `thread_id` and its own fields. Does either reader see the
#    other's fields? Which part of the package's batch key
#    decides that?
# 4. In the package's RDS agent (`agentstate.rds.build_turn_cache_agent`),
#    store an invalid `instance_class="t3.micro"` next to four valid fields
#    and a reader. How many fields does the reader see? Does it wait for the
#    rejected write?

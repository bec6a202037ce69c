# %% [markdown]
# # 03 · Same-turn visibility: readers that wait for their batch
#
# The user writes "Give me a Postgres 15.5 manifest with sensible defaults".
# A capable model does it all in one reply: a `store_requirement` call per
# field, and next to them `get_collected_requirements`, `validate_manifest` and
# `generate_rds_manifest`. With the stage 02 agent the readers find nothing,
# validation fails and no manifest is written, although every store
# succeeded. The original write-up said the stores' Commands are applied
# only after every tool of the batch has finished, and added a dict that the
# writers fill and the readers merge. This notebook checks that diagnosis,
# shows why such a shared dict is a race unless readers wait, and
# writes a turn cache of about 60 lines that is not.

# %% [markdown]
# ## Recap
# Stage 02 stored requirements in a `requirements` state key with a
# field-merge reducer, so parallel writes all survive. Its state table showed
# the batch's writes landing together when the tools' step ends, so the
# model's next step reads them all: updates apply at the end of the
# super-step, not of the turn
# ([02, section 5](02_state_reducer.ipynb#5.-Look-inside:-the-state-after-each-super-step)).
# What about a reader in the same step as the writers?
#
# ## Goals
# - Reproduce: a reader in the writers' own reply sees none of their writes.
# - Look inside: one super-step, parallel threads, a snapshot taken before it.
# - See a naive shared cache race.
# - Write a turn cache whole (record, wait, merge, drop), run it, and check
#   that the package's `TurnCacheMiddleware` gives the same results.

# %% [markdown]
# ## 1. Reproduce: readers next to the writers
# One scripted reply holds eight stores (a complete, valid set of fields) and
# the three readers. `reader_summary` shows each reader's reply in one line.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.display import Table
from agentstate.fixtures import (
    VALID_REQUIREMENTS,
    all_in_one_reply_model,
    reader_summary,
    user_turn,
)
from agentstate.rds import build_reducer_agent

stage02 = build_reducer_agent(all_in_one_reply_model(), checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "stage-03"}}
state = stage02.invoke(user_turn(), config)
replies = reader_summary(state)
assert replies["get_collected_requirements"] == "0 fields"
assert replies["generate_rds_manifest"].startswith("Error: cannot generate")
assert state["requirements"] == VALID_REQUIREMENTS  # yet every store landed
Table({"reader": name, "reply": text} for name, text in replies.items())

# %% [markdown]
# ## 2. Look inside: one super-step, read from a snapshot
# The state after each super-step, read back from the checkpointer (how to
# read this table is explained once, in
# [01](01_file_based_storage.ipynb#super-step-table)). `requirements` counts the fields in
# state after each step:

# %%
from agentstate.tracing import state_by_step

history = Table(
    state_by_step(stage02, config, lambda v: {"requirements": len(v.get("requirements", {}))})
)
history

# %% [markdown]
# All eleven calls are tasks of one `tools` step. The readers ran in it while
# state still held 0 fields; the eight fields are in the checkpoint that step
# wrote:

# %%
rows = history.rows
tools_at = next(i for i, r in enumerate(rows) if r["next"] == "tools x11")
assert rows[tools_at]["requirements"] == 0 and rows[tools_at + 1]["requirements"] == 8
Table(
    [
        {
            "fields when the tools step began": rows[tools_at]["requirements"],
            "fields when it ended": rows[tools_at + 1]["requirements"],
        }
    ]
)

# %% [markdown]
# Is the reader just too early? Make it sleep 0.2 s, so it reads long after
# every store of its reply has returned. It still sees nothing: each task
# reads the state as it was when the super-step began.

# %%
from agentstate.fixtures import fields_seen_by_reader
from agentstate.simulation import SlowToolMiddleware
from agentstate.tracing import ToolTimeline, tool_replies

late = ToolTimeline()
sleepy = build_reducer_agent(
    all_in_one_reply_model(),
    middleware=[late, SlowToolMiddleware("get_collected_requirements", 0.2)],
).invoke(user_turn())
reader = next(e for e in late.events if e.name == "get_collected_requirements")
last_store_end = max(e.end for e in late.events if e.name == "store_requirement")
read_after_stores = reader.start + 0.2 > last_store_end  # it reads after its 0.2 s sleep
assert read_after_stores and fields_seen_by_reader(sleepy) == 0 and late.thread_count() > 1
Table(
    [
        {
            "read after every store returned": read_after_stores,
            "fields it saw": fields_seen_by_reader(sleepy),
            "threads the calls ran on": late.thread_count() > 1 and "more than one",
        }
    ]
)

# %% [markdown]
# ## 3. Look inside: a naive shared cache is a race
# The original write-up's idea was a dict shared by every tool of the turn:
# writers add to it as well as to state, readers merge it into what they
# read. (Its own version, a dict put into `runtime.config` by a middleware,
# cannot run today: see the going-further notebook.) A dict the **caller**
# puts in `config["configurable"]` is shared by every tool. But the calls run
# on parallel threads and nothing makes the reader wait. Five stores and one
# reader per turn, up to 5 ms of seeded random tool latency, 200 turns; the
# counts vary with thread timing:

# %% tags=["nbval-ignore-output"]
from collections import Counter

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
assert min(naive_seen) < 5 and max(naive_seen) > 0
Table(
    {"writes the reader saw (of 5)": k, "turns": n} for k, n in sorted(Counter(naive_seen).items())
)

# %% [markdown]
# ## 4. The fix: a turn cache whose readers wait for their batch
# Four steps, in one middleware that wraps each tool call (`wrap_tool_call`):
#
# 1. **Record**: a writer runs; if it returned a `Command` that updates the
#    key, keep the value it wrote, under its call id.
# 2. **Wait**: a reader first waits until every writer call of its own
#    AIMessage has finished (stored, rejected or failed), with a timeout.
# 3. **Merge**: the reader then runs on a copy of the state whose key holds
#    the batch's writes applied through the key's reducer, in tool-call
#    order: the value LangGraph will store when the step ends.
# 4. **Drop**: the last call of the batch to finish removes the batch.
#
# A `Batch` is the bookkeeping of one AIMessage:

# %%
import threading


class Batch:
    """The writer and reader calls of one AIMessage, and what the writers wrote."""

    def __init__(self, writer_ids, member_ids):
        self.writer_ids, self.member_ids = list(writer_ids), set(member_ids)
        self.writes, self.finished = {}, set()
        self.cond = threading.Condition()

    def finish(self, call_id, wrote=False, value=None):
        """Mark a call finished (and keep its write); True for the batch's last call."""
        with self.cond:
            if wrote:
                self.writes[call_id] = value
            self.finished.add(call_id)
            self.cond.notify_all()
            return self.member_ids <= self.finished

    def wait_for_writers(self, timeout):
        """Block until every writer finished; return the ids still missing."""
        with self.cond:
            self.cond.wait_for(lambda: set(self.writer_ids) <= self.finished, timeout)
            return [c for c in self.writer_ids if c not in self.finished]

    def merged(self, current, reducer):
        """``current`` with the recorded writes applied in tool-call order."""
        for call_id in self.writer_ids:
            if call_id in self.writes:
                current = reducer(current, self.writes[call_id])
        return current


# %% [markdown]
# The middleware finds the AIMessage that holds the call, opens or joins its
# batch, and runs the four steps:

# %%
from dataclasses import replace

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command


class TeachingTurnCache(AgentMiddleware):
    def __init__(self, *, writers, readers, key, reducer, timeout=10.0):
        super().__init__()
        self.writers, self.readers, self.key = set(writers), set(readers), key
        self.reducer, self.timeout = reducer, timeout
        self.batches, self.lock = {}, threading.Lock()

    def batch_of(self, request):
        call_id = request.tool_call["id"]
        message = next(
            m
            for m in reversed(request.state["messages"])
            if isinstance(m, AIMessage) and any(c["id"] == call_id for c in m.tool_calls)
        )
        ours = [c for c in message.tool_calls if c["name"] in self.writers | self.readers]
        with self.lock:
            if message.id not in self.batches:
                writer_ids = [c["id"] for c in ours if c["name"] in self.writers]
                self.batches[message.id] = Batch(writer_ids, [c["id"] for c in ours])
            return message.id, self.batches[message.id]

    def wrap_tool_call(self, request, handler):
        name, call_id = request.tool_call["name"], request.tool_call["id"]
        if name not in self.writers | self.readers:
            return handler(request)
        batch_id, batch = self.batch_of(request)
        wrote, value = False, None
        try:
            if name in self.writers:  # 1. record
                result = handler(request)
                if isinstance(result, Command) and self.key in (result.update or {}):
                    wrote, value = True, result.update[self.key]
                return result
            missing = batch.wait_for_writers(self.timeout)  # 2. wait
            if missing:
                return ToolMessage(
                    f"Error: {name} timed out waiting for {len(missing)} writer(s)",
                    tool_call_id=call_id,
                    name=name,
                    status="error",
                )
            state = request.state  # 3. merge
            view = {**state, self.key: batch.merged(state.get(self.key), self.reducer)}
            return handler(
                request.override(state=view, runtime=replace(request.runtime, state=view))
            )
        finally:
            if batch.finish(call_id, wrote, value):  # 4. drop
                with self.lock:
                    del self.batches[batch_id]


# %% [markdown]
# Now a plain `create_agent` agent, written here: a `requirements` key with
# a field-merge reducer, a writer tool that returns a `Command`, and a reader
# tool that reads `runtime.state`, as every tool of the RDS agent does.

# %%
import json
from typing import Annotated, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool


def merge_fields(current, new):
    return {**(current or {}), **(new or {})}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict], merge_fields]


# %%
@tool
def store_requirement(field_name: str, value: str | int, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


# %% [markdown]
# The lesson's scenario: one reply stores five fields and lists them, under
# the naive cache's seeded latency, for 200 turns. `cache=None` is the plain
# agent as stage 02 left it:


# %%
def my_agent(cache=None, turns=TRIALS):
    model = reader_batch_model(POSTGRES_FIELDS, turns)
    middleware = [cache] if cache else []
    return create_agent(
        model,
        tools=[store_requirement, get_collected_requirements],
        state_schema=RequirementsState,
        middleware=[*middleware, ToolLatencyMiddleware(0.005, seed=3)],
    )


def my_cache(kind=TeachingTurnCache, **options):
    return kind(
        writers=["store_requirement"],
        readers=["get_collected_requirements"],
        key="requirements",
        reducer=merge_fields,
        **options,
    )


# %%
teaching = my_cache()
without = same_batch_reader_trials(my_agent(), TRIALS)
with_teaching = same_batch_reader_trials(my_agent(teaching), TRIALS)
assert without == [0] * TRIALS and with_teaching == [5] * TRIALS
assert teaching.batches == {}  # every batch dropped at the end of its turn
Table(
    [
        {"agent": "plain", "turns the reader saw all 5": without.count(5)},
        {
            "agent": "plain + teaching turn cache",
            "turns the reader saw all 5": with_teaching.count(5),
        },
    ]
)

# %% [markdown]
# ## 5. The package's version
# `agentstate.core.TurnCacheMiddleware` is the same four steps; it adds an
# async twin (readers wait on the event loop, not a thread), a batch key that
# names the thread and the subgraph, handling of writers that never run,
# cleanup of stale batches, and checks of its arguments. On the same agent
# and the same 200 turns, and on the RDS agent's all-in-one reply, both give
# the same results:

# %%
from agentstate.core import TurnCacheMiddleware
from agentstate.rds import READER_TOOLS, WRITER_TOOLS

with_package = same_batch_reader_trials(my_agent(my_cache(TurnCacheMiddleware)), TRIALS)
assert with_package == with_teaching


def rds_reply(kind):
    cache = kind(
        writers=WRITER_TOOLS, readers=READER_TOOLS, key="requirements", reducer=merge_fields
    )
    done = build_reducer_agent(all_in_one_reply_model(), middleware=[cache]).invoke(user_turn())
    return reader_summary(done)


assert rds_reply(TeachingTurnCache) == rds_reply(TurnCacheMiddleware)
Table({"reader": k, "reply": v} for k, v in rds_reply(TeachingTurnCache).items())

# %% [markdown]
# ## 6. Prove it
# One reply stores, validates and generates: the manifest and the synced
# `/requirements.json` exist after that one turn, with every field:

# %%
from agentstate.fixtures import file_fields
from agentstate.rds import build_turn_cache_agent

done = build_turn_cache_agent(all_in_one_reply_model()).invoke(user_turn())
assert reader_summary(done)["validate_manifest"] == "valid: all rules pass"
assert file_fields(done) == VALID_REQUIREMENTS and "/manifest.yaml" in done["files"]
Table([{"files": sorted(done["files"]), "fields in /requirements.json": len(file_fields(done))}])

# %% [markdown]
# Take step 2 away and the race of section 3 comes back: a cache that
# answers "nobody missing" at once reads whatever is recorded when the
# reader starts.


# %%
class NoWait(TeachingTurnCache):
    def batch_of(self, request):
        batch_id, batch = super().batch_of(request)
        batch.wait_for_writers = lambda timeout: []
        return batch_id, batch


no_wait = same_batch_reader_trials(my_agent(my_cache(NoWait)), TRIALS)
assert min(no_wait) < 5
Table([{"turns": TRIALS, "reader saw all 5 on every turn": min(no_wait) == 5}])

# %% [markdown]
# A reader never hangs: if a writer of its batch takes longer than the
# timeout, the reader returns an error to the model instead of blocking:

# %%
slow = create_agent(
    reader_batch_model(POSTGRES_FIELDS, 1),
    tools=[store_requirement, get_collected_requirements],
    state_schema=RequirementsState,
    middleware=[my_cache(timeout=0.1), SlowToolMiddleware("store_requirement", 0.5)],
).invoke(user_turn())
reader_reply = tool_replies(slow, "get_collected_requirements")[-1]
assert reader_reply.status == "error" and slow["requirements"] == POSTGRES_FIELDS
Table(
    [
        {
            "reader's reply": reader_reply.content,
            "fields stored when the turn ended": len(slow["requirements"]),
        }
    ]
)

# %% [markdown]
# What the doctor (`agentstate.doctor.diagnose`) says about the plain agent,
# and about the same agent with the package's turn cache:

# %%
from agentstate.doctor import diagnose

broken, fixed = diagnose(my_agent()), diagnose(my_agent(my_cache(TurnCacheMiddleware)))
assert broken.codes() == ["same-batch-read"] and fixed.errors == [] and fixed.codes() == []
broken

# %% [markdown]
# ## A knob: writers in the batch, with and without the cache
# Run the cells above first. One turn of `writers` stores and a reader:

# %%
from agentstate.fixtures import label_fields


def reader_sees(writers: int = 5, turn_cache: bool = True) -> Table:
    agent = create_agent(
        reader_batch_model(label_fields(writers), 1),
        state_schema=RequirementsState,
        tools=[store_requirement, get_collected_requirements],
        middleware=[my_cache()] if turn_cache else [],
    )
    seen = same_batch_reader_trials(agent, 1)[0]
    return Table([{"writers": writers, "turn cache": turn_cache, "reader saw": seen}])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    reader_sees,
    writers=widgets.IntSlider(value=5, min=1, max=30, description="writers"),
    turn_cache=widgets.Checkbox(value=True, description="turn cache"),
)


# %%
knob = Table(reader_sees(n, c).rows[0] for n in (1, 5, 30) for c in (False, True))
assert knob.column("reader saw") == [0, 1, 0, 5, 0, 30]
knob

# %% [markdown]
# ## Summary
# - A reader in the writers' own reply sees the state from before the
#   super-step, even when it reads after every writer returned.
# - The calls of one reply run on parallel threads, so a shared cache that
#   nobody waits on is a race.
# - The turn cache records each writer's value, makes readers wait for the
#   writers of their own AIMessage (with a timeout), merges the writes
#   through the key's reducer and drops the batch; the package's
#   `TurnCacheMiddleware` gives the same results and adds async, per-thread
#   keys and cleanup.
# - Going further: [the original write-up's cache, its silent repair, and
#   each step broken on purpose](going_further/03_caches_that_fail.ipynb).
#
# ## Exercises
# 1. Put the three readers *first* in the reply
#    (`all_in_one_reply_model(readers_first=True)`) with the package's
#    turn cache (`build_turn_cache_agent`). What does
#    `get_collected_requirements` see, and why?
# 2. Force the naive cache's race: slow every store down by 0.5 s
#    (`SlowToolMiddleware`). What does the naive cache's reader see on every
#    turn, and what does the turn cache's reader see?
# 3. Invoke one turn-cached agent from two Python threads at once, each with
#    its own `thread_id` and its own fields. Does either reader see the other
#    thread's fields? Which part of the batch key decides that?
# 4. Store one invalid field (`instance_class="t3.micro"`) next to four valid
#    ones, with a reader in the same reply and the package's turn cache. How
#    many fields does the reader see, and does it wait for the rejected write?

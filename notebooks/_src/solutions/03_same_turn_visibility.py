# %% [markdown]
# # 03 · Same-turn visibility: exercise solutions
#
# Each exercise of notebook 03, answered with the lesson's own code: lesson
# 02's state and writer and the second reader imported as the lesson imports
# them, its reader, the teaching `TurnCache` and its settings `CACHE`,
# written again here as the lesson has them. Everything runs offline and asserts its answer.

# %%
import json
import threading
from functools import reduce

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool

from agentstate.core import TurnCacheBase, batch_of, reader_view, written_value
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    RequirementsState,
    fields_seen_by_reader,
    reader_replies,
    store_requirement,
    validate_manifest,
)
from agentstate.lessons.simulation import SlowToolMiddleware
from agentstate.models import ScriptedChatModel, reply, tool_call

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}
READS = ["get_collected_requirements", "validate_manifest"]


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


TOOLS = [store_requirement, get_collected_requirements, validate_manifest]


def reply_of(state: dict, tool_name: str) -> str:  # a tool's last reply
    return reader_replies(state)[tool_name]


# %% [markdown]
# The teaching turn cache, as the lesson writes it, and the settings the
# lesson gives it:


# %%
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


CACHE = dict(writers=["store_requirement"], readers=READS, key="requirements")


def readers_first_agent(*middleware, fields=POSTGRES_FIELDS):
    """my_agent's model with the readers before the stores in the reply."""
    stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    calls = [*(tool_call(name) for name in READS), *stores]
    model = ScriptedChatModel(script=[reply(*calls), reply(text="Done.")])
    return create_agent(
        model, tools=TOOLS, state_schema=RequirementsState, middleware=list(middleware)
    )


# %% [markdown]
# ## Exercise 1
# The readers first in the reply, with the teaching cache:

# %%
first = readers_first_agent(TurnCache(**CACHE)).invoke(TURN)
assert fields_seen_by_reader(first) == 5 and reply_of(first, "validate_manifest") == "valid"
print("fields get_collected_requirements saw:", fields_seen_by_reader(first))
print("validate_manifest said:", reply_of(first, "validate_manifest"))

# %% [markdown]
# It sees all five fields. The batch is keyed by the reply, not by the order
# of its calls: every call, the first reader too, takes `writer_ids` from the
# whole reply, so the reader waits for all five stores, even though they come
# after it in the reply.

# %% [markdown]
# ## Exercise 2
# The lesson's `my_agent(t, TurnCache(**CACHE)).invoke(TURN, {"max_concurrency": 4})`
# (the readers after the stores): at most four calls run at a time.
# `FinishOrder` (lesson 01) holds the first four stores until all four are
# running, so they surely fill the four places together, however busy the
# machine. A `ToolTimeline` records
# when each call started:

# %%
from agentstate.lessons.simulation import FinishOrder
from agentstate.tracing import ToolTimeline, draw_run

timeline = ToolTimeline()
first_four = FinishOrder(timeline, order=list(POSTGRES_FIELDS)[:4])  # store 5 passes at once
stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in POSTGRES_FIELDS.items()]
model = ScriptedChatModel(script=[reply(*stores, *(tool_call(n) for n in READS)), reply(text="ok")])
four = create_agent(
    model,
    tools=TOOLS,
    state_schema=RequirementsState,
    middleware=[timeline, TurnCache(**CACHE), first_four],
).invoke(TURN, {"max_concurrency": 4})
first_end = min(e.end for e in timeline.events)
late = [f"#{e.position + 1} {e.label}" for e in timeline.events if e.start >= first_end]
assert (
    late
    == [
        "#5 store_requirement(username)",
        "#6 get_collected_requirements",
        "#7 validate_manifest",
    ]
    and fields_seen_by_reader(four) == 5
)
print("started only after a call had finished:", late)
print("fields the reader saw:", fields_seen_by_reader(four))
draw_run(
    timeline, four, key="requirements", title="7 calls, at most 4 at a time (max_concurrency=4)"
)

# %% [markdown]
# Calls 5, 6 and 7 start late: LangGraph hands the calls of the step to its
# pool in call order, and the first four, all stores, take the four places
# until all four run. When one finishes, store 5 and the readers start. The
# readers then wait only for store 5, which is already running, so they see
# all five fields and nobody times out. Writers before readers in the reply
# can never starve: the pool serves them first. (Readers before writers can,
# as going further 03 shows.)

# %% [markdown]
# ## Exercise 3
# A condition whose `wait_for` returns `True` at once takes step 1 away: a
# reader merges whatever writes have finished when it starts. 100 turns,
# with the lesson's seeded 0-5 ms delay before each tool call; the counts
# vary from run to run:


# %% tags=["nbval-ignore-output"]
from collections import Counter

from agentstate.lessons.simulation import ToolLatencyMiddleware


class NeverWait(threading.Condition):
    def wait_for(self, predicate, timeout=None):
        return True


no_wait = TurnCache(**CACHE)
no_wait.changed = NeverWait()
racing = create_agent(
    ScriptedChatModel(
        script=[reply(*stores, *(tool_call(n) for n in READS)), reply(text="ok")] * 100
    ),
    tools=TOOLS,
    state_schema=RequirementsState,
    middleware=[no_wait, ToolLatencyMiddleware(0.005, seed=3)],
)
saw = Counter(fields_seen_by_reader(racing.invoke(TURN)) for _ in range(100))
assert set(saw) != {5}
{f"saw {k} of 5": n for k, n in sorted(saw.items())}

# %% [markdown]
# Without the wait the reader sees anything from none to all five fields:
# it merges the writes of the stores that happened to finish before it
# started. That is the race of a shared dict; the wait is what removes it.

# %% [markdown]
# ## Exercise 4
# One teaching-cached agent, invoked from two Python threads at once, each
# turn storing its own fields (each store slowed to 50 ms, so the turns
# likely overlap; what each turn's reader sees does not depend on it):

# %%
shared_cache = TurnCache(**CACHE)
slow_stores = SlowToolMiddleware("store_requirement", 0.05)


def one_turn(fields: dict, results: dict) -> None:
    stores = [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]
    model = ScriptedChatModel(
        script=[reply(*stores, tool_call("get_collected_requirements")), reply(text="Done.")]
    )
    agent = create_agent(
        model,
        tools=TOOLS,
        state_schema=RequirementsState,
        middleware=[shared_cache, slow_stores],
    )
    results[fields["engine"]] = json.loads(
        reply_of(agent.invoke(TURN), "get_collected_requirements")
    )


results: dict = {}
threads = [
    threading.Thread(target=one_turn, args=(fields, results))
    for fields in ({"engine": "postgres"}, {"engine": "mysql"})
]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
assert results == {"postgres": {"engine": "postgres"}, "mysql": {"engine": "mysql"}}
dict(sorted(results.items()))  # in name order: the threads may finish either way round

# %% [markdown]
# Neither reader sees the other's fields. The teaching cache keys a batch by
# the id of the reply (`AIMessage`) that holds it, and each turn's reply has
# its own id, so the two batches never mix. The package's
# `TurnCacheMiddleware` keys a batch by the conversation (`thread_id`), the
# subgraph and the reply, which also keeps two conversations apart when a
# model reuses message ids.

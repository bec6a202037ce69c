# %% [markdown]
# # 03 · Same-turn visibility: exercise solutions
#
# Each exercise of notebook 03, answered with code that runs offline and
# asserts its answer.

# %% [markdown]
# ## Exercise 1
# Put the readers *first* in the reply, before the stores, with a turn
# cache. What does `get_collected_requirements` see, and why? Here with the
# package's turn cache on the RDS agent (`build_turn_cache_agent`, the
# lesson's four steps), whose reply stores eight fields and has three
# readers (`all_in_one_reply_model(readers_first=True)`).

# %%
from agentstate.fixtures import all_in_one_reply_model, reader_summary, user_turn
from agentstate.rds import build_turn_cache_agent

first = build_turn_cache_agent(all_in_one_reply_model(readers_first=True)).invoke(user_turn())
assert reader_summary(first) == {
    "get_collected_requirements": "8 fields",
    "validate_manifest": "valid: all rules pass",
    "generate_rds_manifest": "Wrote /manifest.yaml.",
}
reader_summary(first)

# %% [markdown]
# All eight fields: a reader waits for every writer call of its own AIMessage,
# wherever it stands in the reply. The calls run on parallel worker threads,
# so the writers run while the reader waits. That needs a free worker:
# readers placed first that fill every worker LangGraph runs at once
# (`max_concurrency`) leave none for the writers; the package's turn cache
# then answers them with an error instead of hanging.

# %% [markdown]
# ## Exercise 2
# Force the naive dict's race: slow every store down by 0.5 s
# (`SlowToolMiddleware`). What does its reader see on every turn, and what
# does the turn cache's reader see? The package's `build_naive_cache_agent`
# is the lesson's shared dict on the RDS agent.

# %%
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    reader_batch_model,
    same_batch_reader_trials,
    store_calls,
)
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import NAIVE_KEY, build_naive_cache_agent
from agentstate.simulation import SlowToolMiddleware
from agentstate.tracing import tool_replies

TURNS = 3
slow = SlowToolMiddleware("store_requirement", 0.5)
naive = build_naive_cache_agent(reader_batch_model(POSTGRES_FIELDS, TURNS), middleware=[slow])
naive_seen = same_batch_reader_trials(
    naive, TURNS, config=lambda: {"configurable": {NAIVE_KEY: {}}}
)
cached = build_turn_cache_agent(reader_batch_model(POSTGRES_FIELDS, TURNS), middleware=[slow])
cached_seen = same_batch_reader_trials(cached, TURNS)
assert naive_seen == [0] * TURNS and cached_seen == [5] * TURNS
{"naive cache": naive_seen, "turn cache": cached_seen}

# %% [markdown]
# The naive reader reads the shared dict while every writer is still asleep,
# so it sees 0 writes every time; the turn-cached reader waits for the five
# writers and sees all five. The race has not gone away: slow writers just
# make the naive cache lose it every time.

# %% [markdown]
# ## Exercise 3
# Invoke one turn-cached agent from two Python threads at once, each with its
# own `thread_id` and its own fields. Does either reader see the other's
# fields? Which part of the package's batch key decides that?

# %%
import json
import threading

from agentstate.simulation import ToolLatencyMiddleware

FIELDS = {"a": {"labels.a": "1", "labels.b": "2"}, "b": {"labels.c": "3"}}


# %%
def step(messages):
    """Thread "a" or "b" (named by the user message) stores its fields and reads, then stops."""
    name = next(m.content for m in messages if m.type == "human")
    if any(m.type == "ai" for m in messages):
        return reply(text="Done.")
    return reply(*store_calls(FIELDS[name]), tool_call("get_collected_requirements"))


# %%
agent = build_turn_cache_agent(
    ScriptedChatModel(script=[step] * 4), middleware=[ToolLatencyMiddleware(0.01, seed=2)]
)
seen = {}


def run(name):
    state = agent.invoke(user_turn(name), {"configurable": {"thread_id": name}})
    seen[name] = json.loads(tool_replies(state, "get_collected_requirements")[-1].content)


# %%
threads = [threading.Thread(target=run, args=(name,)) for name in FIELDS]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert seen == FIELDS
{name: seen[name] for name in FIELDS}  # the threads finish in any order

# %% [markdown]
# No: each reader sees exactly its own thread's fields. The batch key holds
# the thread id (different per thread), the graph namespace, the AIMessage id
# and the ids of every call in that message; any one of the last two would
# already keep the batches apart, and the thread id separates them even if
# two models produced the same ids.

# %% [markdown]
# ## Exercise 4
# Store one invalid field (`instance_class="t3.micro"`) next to four valid
# ones in the package's RDS agent (`agentstate.rds.build_turn_cache_agent`),
# with a reader in the same reply. How many fields does the reader see, and
# does it wait for the rejected write?

# %%
import time

from agentstate.fixtures import fields_seen_by_reader

fields = {**POSTGRES_FIELDS, "instance_class": "t3.micro"}
model = ScriptedChatModel(
    script=[
        reply(*store_calls(fields), tool_call("get_collected_requirements")),
        reply(text="Done."),
    ]
)
started = time.perf_counter()
state = build_turn_cache_agent(model, timeout=5.0).invoke(user_turn())
took = time.perf_counter() - started
rejected = [m.content for m in tool_replies(state, "store_requirement") if m.status == "error"]
assert fields_seen_by_reader(state) == 4 and len(rejected) == 1 and took < 5.0
{"reader saw": fields_seen_by_reader(state), "rejected": rejected[0].splitlines()[0][:60]}

# %% [markdown]
# Four: the rejected call finishes (with an error message and no update), so
# it releases the reader without recording anything, and the turn ends long
# before the 5 s timeout.

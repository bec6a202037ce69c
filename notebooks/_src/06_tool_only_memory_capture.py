# %% [markdown]
# # 06 · Tool-only memory capture: code decides what is stored
#
# An agent watches a user's chat with an assistant and stores one memory
# entry per message (the memory server's tool `add_entry`), with its role
# and text. A post-mortem shared with this project, not public
# ([where this comes from](../README.md#where-this-comes-from)), built it as
# a prebuilt agent with the rules in its prompt: "Prompt-only constraints
# are insufficient: even with strong guidance, the ReAct loop still produced
# assistant chat and duplicate `add_entry`". We replay that report against
# a real memory server, then write a guard in code.

# %% [markdown]
# ## Recap
# Lesson 05 decided what goes into a model's prompt; this lesson decides
# which of its tool calls may run at all. Releases affected:
# [memory-in-react-loop](../docs/hazards-by-version.md#memory-in-react-loop).
#
# ## Goals
# - Replay the post-mortem's report through its agent; read the store.
# - Write a guard: one `add_entry` per message, whatever the model
#   proposes, and prove it over random proposals.

# %% [markdown]
# ## 1. Reproduce: the post-mortem's report, replayed
# The memory server is a real process (SQLite, on 127.0.0.1) with tools
# over [MCP](../docs/glossary.md#mcp). The chat reaches the agent as
# events: user and assistant messages, numbered by `msg_idx`, and control
# events (`SESSION_START`, `FLUSH_CONTEXT`, `SESSION_END`), sent as system
# messages. The capture rules say what to store:

# %%
from agentstate import memory  # this series' package: the server, its client, the chats
from agentstate.lessons.display import Table, compare_findings  # tables for the page

server = memory.start_server()  # a real process on 127.0.0.1, over a new SQLite file
client = memory.MemoryClient(server.url)
tools = await client.tools()  # the server's tools (add_entry, put_context...) for LangChain
rules = memory.system_prompt("agentstate", "react.trip")  # the rules, and the memory to write
print(rules)

# %% [markdown]
# The rules, drawn: one `add_entry` per message, between a
# [bootstrap](../docs/glossary.md#bootstrap-and-flush-calls) (read the memory's
# context and last entries) and flushes (save a new context).
#
# ```mermaid
# flowchart LR
#     S["SESSION_START"] --> B["bootstrap: get_context, list_entries"]
#     M["each message"] --> E["add_entry, once"]
#     P["flush: await_consistency, put_context"]
#     F["every 6th message, FLUSH_CONTEXT, SESSION_END"] --> P
# ```

# %% [markdown]
# The post-mortem's agent: a [ReAct loop](../docs/glossary.md#react-loop),
# LangChain's `create_agent`, with the rules as its system prompt, all that
# guards the store. `observe` sends it each event as one invoke (the event
# as `messages` and as `turn`; the memory's ids in the config) and returns
# the store's entries, read from `server.db`, its SQLite file.

# %% [markdown]
# **This is a replay.** A scripted model [replays](../docs/glossary.md#replay)
# the report's faults at fixed positions, whatever the prompt says.

# %%
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver  # keeps each thread's state in memory

travel = memory.load("solo_travel")  # a stored chat; its events sit in one chat thread, "trip"
# replay_model(): the scripted model; observe() returns (msg_idx, role, text) per entry
loop = create_agent(memory.replay_model(), tools, system_prompt=rules, checkpointer=InMemorySaver())
react_store = await memory.observe(loop, client, server.db, travel.events, "react.trip")
{"messages in the chat": len(travel.messages("trip")), "entries in the store": len(react_store)}

# %% [markdown]
# ## 2. Look inside: the store
# 21 entries for 14 messages: beside each message's own entry, the model's
# answers and second copies. The replay's schedule (`msg_idx` values)
# beside where the store holds each wrong entry, with one example:

# %%
Table(memory.replay_vs_store(server.db, "react.trip", travel, "trip"))

# %% [markdown]
# The loop runs every call as proposed. The bootstrap and flush faults are
# calls, not entries: section 3 counts them.

# %% [markdown]
# ## 3. The fix: a guard in code
# A [tool-only graph](../docs/glossary.md#tool-only-graph): a graph whose
# nodes, not the model, make every tool call.

# %% [markdown]
# - `decide` asks the model at every event, as the loop does, but builds
#   the call from the message: the reply may only offer a summary (a bad
#   one gets a default).
# - A control event or a resend gets no tool call.
# - `write` sends the plan, one `add_entry` tool call per entry
#   (`memory.awrite_entries`), and marks a message stored only if the server
#   took it (a refusal raises; `tests/test_lesson_06.py` sends one). The
#   checkpointer keeps `stored` from one invoke (one event) to the next,
#   per thread (`observe` gives each memory its own).

# %%
import operator
from typing import Annotated, TypedDict

from langchain_core.messages import BaseMessage  # LangChain's message class
from langgraph.graph import START, StateGraph


class GuardState(TypedDict, total=False):
    turn: BaseMessage  # this invoke's event: a chat message or a control event
    plan: list[dict]  # add_entry's arguments, for none or one entry
    stored: Annotated[list[int], operator.add]  # msg_idx stored so far in this thread


def build_guarded_capture(model, tools, checkpointer):
    model, add_entry = model.bind_tools(tools), {t.name: t for t in tools}["add_entry"]

    async def decide(state: GuardState, config) -> dict:
        turn, ids = state["turn"], config["configurable"]  # observe sets the ids
        reply = await model.ainvoke([memory.rules_for(ids), turn])  # section 1's rules
        idx = memory.chat_msg_idx(turn)  # None for a control event
        if idx is None or idx in state.get("stored", []):
            return {"plan": []}
        summary = memory.offered_summary(reply)
        return {"plan": [memory.add_entry_args(turn, summary, ids)]}  # text, role, msg_idx: turn's

    async def write(state: GuardState) -> dict:
        return {"stored": await memory.awrite_entries(add_entry, state["plan"])}

    graph = StateGraph(GuardState).add_sequence([decide, write]).add_edge(START, "decide")
    return graph.compile(checkpointer=checkpointer)  # no edge out of write: the run ends


# %% [markdown]
# The two graphs. In the ReAct loop the model's reply picks the next step
# (dotted), and `tools` runs whatever it proposed. The guard's path is
# fixed.

# %% [markdown]
# **The ReAct loop (`create_agent`)**
#
# ```mermaid
# flowchart LR
#   start([start]) --> model
#   model -.-> tools
#   tools --> model
#   model -.-> done([done])
# ```
#
# **The guard**
#
# ```mermaid
# flowchart LR
#   start([start]) --> decide
#   decide --> write
#   write --> done([done])
# ```
#
# %% [markdown]
# The teaching guard stores entries only; the package's
# `build_capture_graph` also bootstraps and flushes. The same replay
# behind both, beside the ReAct loop's run, read from the server's file:

# %%
guarded = build_guarded_capture(memory.replay_model(), tools, InMemorySaver())
package = memory.build_capture_graph(memory.replay_model(), tools, InMemorySaver())
await memory.observe(guarded, client, server.db, travel.events, "teaching.trip")
await memory.observe(package, client, server.db, travel.events, "package.trip")
stores = {"ReAct loop": "react.trip", "teaching guard": "teaching.trip", "package": "package.trip"}
Table(memory.rules_kept(server.db, travel, "trip", stores))  # each agent's entries and calls

# %% [markdown]
# The loop's extra bootstrap and missing flushes are section 2's scheduled
# faults. A replay's faults sit at fixed positions, so this proves little.

# %% [markdown]
# ## 4. Prove it: whatever the model proposes
# A model proposes random misbehaviours at every event, on random chats
# in which some messages are sent twice (resends). Twelve seeded runs:

# %%
model = memory.random_model(seed=6)  # model.policy counts its replies and kinds of proposal
guard = build_guarded_capture(model, tools, InMemorySaver())
runs = []  # per chat: (the chat, the events sent, resends included; is the store exact?)
for seed in range(12):
    chat, sent = memory.random_events(seed, n_messages=8)
    stored = await memory.observe(guard, client, server.db, sent, f"random.{seed}")
    runs.append((chat, sent, stored == memory.expected_entries(chat, "chat")))
print(memory.proof_summary(runs, model.policy))

# %% [markdown]
# ## 5. What the doctor says
# The [doctor](../docs/glossary.md#doctor) reads a compiled agent's state
# schema and its tools' code, without running it, and names the hazards
# these lessons teach (an MCP tool's code runs on the server, out of its
# sight: it goes by the tool's name). This lesson's: a memory-writing tool (`add_entry`,
# the flush's `put_context`) inside a ReAct loop:

# %%
from agentstate.doctor import diagnose

compare_findings({"ReAct loop": diagnose(loop), "guard": diagnose(guarded)})

# %% [markdown]
# ## Try it: the two stores, message by message
# Pick a `msg_idx`: what the chat said, and what the ReAct loop and the
# guard stored for it, with section 2's verdicts.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets  # Jupyter's sliders and boxes

agents = {"ReAct loop": "react.trip", "guard": "teaching.trip"}  # the memory each wrote
by_msg = memory.stores_by_message(server.db, travel, "trip", agents)  # msg_idx -> a table
knob_widget = widgets.interact(lambda msg_idx=8: by_msg[msg_idx], msg_idx=(1, 14))

# %% [markdown]
# ## Summary
# - Replayed through `create_agent`, the report lands in the store: the
#   loop runs every proposed call.
# - The guard in code builds one `add_entry` per message from the message;
#   its `stored` list stops resends. It holds over random proposals.
# - `build_capture_graph` adds the bootstrap and the flushes.
# - Going further: [the auditor's rules, three conversations and the kill
#   tests, retries after a crash](going_further/06_audit_and_kill_tests.ipynb); [the memory service
#   for a fleet](going_further/06_memory_fleet.ipynb), several replicas over
#   one Postgres.

# %% [markdown]
# ## Exercises
# 1. Let the teaching guard take the model's `raw_entry` instead of the
#    message's text. Which kind of random proposal breaks the store first?
# 2. Remove the `stored` check from `decide`. Which part of the random run
#    fails, and why does the replayed report alone not show it?
# 3. Add the bootstrap to the teaching guard: on `SESSION_START`, call
#    `get_context` then `list_entries(limit=10)`. Check it with `agentstate.memory.audit`,
#    which reads the server's SQLite file and checks every capture rule.
#    What does it still miss, and why?

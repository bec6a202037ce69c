# %% [markdown]
# # 06 · Tool-only memory capture: code decides what is stored
#
# An agent watches a user's chat with an assistant and keeps its memory:
# one entry per message on a memory server, with its role and text. A
# post-mortem built it as a prebuilt agent with the rules in its prompt:
# "even with strong guidance, the ReAct loop still produced assistant chat
# and duplicate `add_entry`". We replay that report against a real memory
# server, then write a guard in code that keeps the store right.

# %% [markdown]
# ## Recap
# Lesson 05 decided what goes into a model's prompt; this lesson decides
# which of its tool calls may run at all. Releases:
# [memory-in-react-loop](../docs/hazards-by-version.md#memory-in-react-loop).
#
# ## Goals
# - Replay the write-up's report through its agent; read the store.
# - Write a guard: one `add_entry` per message, whatever the model
#   proposes, and prove it over random proposals.

# %% [markdown]
# ## 1. Reproduce: the write-up's report, replayed
# The memory server is a real process (SQLite, on 127.0.0.1) with tools
# over [MCP](../docs/glossary.md#mcp). The write-up's agent is a
# [ReAct loop](../docs/glossary.md#react-loop), `create_agent`, whose
# system prompt, the capture rules, is all that guards the store.

# %%
import tempfile
from pathlib import Path

from agentstate.memory import MemoryClient, ServerProcess, system_prompt

server = ServerProcess(Path(tempfile.mkdtemp(prefix="lesson06-")) / "memory.sqlite").start()
client = MemoryClient(server.url)
tools = await client.tools()  # the server's tools, as LangChain tools
print("tools:", ", ".join(sorted(t.name for t in tools)), end="\n\n")
VAULT = "agentstate"
print(system_prompt(VAULT, "react.trip"))

# %% [markdown]
# `observe` sends the agent each event of the chat as one invoke, the new
# message only (`messages` for the ReAct loop, `turn` for section 3's
# guard), then returns what the store holds. `msg_idx` is a message's
# position in the chat.

# %%
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory import expected_entries, stored_entries


def react_agent(model, tools, memory_id):
    prompt = system_prompt(VAULT, memory_id)  # the rules, and which memory to write
    return create_agent(model, tools, system_prompt=prompt, checkpointer=InMemorySaver())


async def observe(agent, client, events, memory_id):
    await client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
    ids = {"thread_id": memory_id, "vault_id": VAULT, "memory_id": memory_id}
    for event in events:
        message = event.to_message()  # a chat message, or a control message
        await agent.ainvoke({"messages": [message], "turn": message}, {"configurable": ids})
    await client.call("await_consistency", memory_id=memory_id)  # its writes are queued
    return stored_entries(server.db, memory_id)


# %% [markdown]
# **This is a replay.** A scripted model [replays](../docs/glossary.md#replay)
# the report at fixed positions, whatever the prompt says: it shows what the
# loop does with such calls. Its fault schedule, then the run:

# %%
from IPython.display import display

from agentstate.lessons.display import Table
from agentstate.memory import load, replay_model, replay_schedule

travel = load("solo_travel")
display(Table(replay_schedule(travel, "trip")))
react_store = await observe(
    react_agent(replay_model(), tools, "react.trip"), client, travel.events, "react.trip"
)
{"messages in the chat": len(travel.messages("trip")), "entries in the store": len(react_store)}

# %% [markdown]
# ## 2. Look inside: the store
# One row per wrong entry: what the chat said, what the store holds, and
# the fault.

# %%
from agentstate.memory import store_rows

damage = store_rows(server.db, "react.trip", travel, "trip")
Table(r for r in damage if r["verdict"] != "ok")

# %% [markdown]
# Each row sits where the schedule put a fault: the loop runs every call as
# proposed. A model that follows the rules (`replay_model("none")`) leaves
# the store clean: the loop is exactly as correct as its model.

# %%
good_store = await observe(
    react_agent(replay_model("none"), tools, "good.trip"), client, travel.events, "good.trip"
)
stores = {"replayed report": react_store, "well-behaved": good_store}
Table(
    {
        "model": m,
        "entries": len(s),
        "the chat, once, in order": s == expected_entries(travel, "trip"),
    }
    for m, s in stores.items()
)

# %% [markdown]
# ## 3. The fix: a guard in code
# A [tool-only graph](../docs/glossary.md#tool-only-graph): the model is
# asked, but code builds the call.

# %% [markdown]
# - `decide` shows the model the rules and the new message, and keeps at
#   most a usable summary from its reply. The call is built from the
#   message: role, `msg_idx`, text.
# - A control message or a resend gets no call.
# - `write` marks a message stored only if the server took it.

# %%
import operator
from typing import Annotated, TypedDict

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

from agentstate.memory import turn_line


class GuardState(TypedDict, total=False):
    turn: BaseMessage  # the one new message of this invoke
    plan: list[dict]  # the add_entry arguments the guard decided on
    stored: Annotated[list[int], operator.add]  # msg_idx already stored in this thread


def usable(summary) -> bool:  # a summary the model may supply: one printable line, 1-200 chars
    text = summary if isinstance(summary, str) else ""
    return text.strip() != "" and text.isprintable() and len(text) <= 200


def build_guarded_capture(model, tools, checkpointer):
    model, add_entry = model.bind_tools(tools), {t.name: t for t in tools}["add_entry"]

    async def decide(state: GuardState, config) -> dict:
        turn, ids = state["turn"], config["configurable"]
        rules = system_prompt(ids["vault_id"], ids["memory_id"]) + "\n" + turn_line(turn)
        reply = await model.ainvoke([SystemMessage(rules), turn])  # it may propose anything
        chat = isinstance(turn, ChatMessage) and turn.role in ("user", "assistant")
        idx = turn.additional_kwargs.get("msg_idx")
        if not chat or idx in state.get("stored", []):
            return {"plan": []}  # a control message, or one sent again: nothing to store
        offered = [c["args"].get("summary") for c in reply.tool_calls if c["name"] == "add_entry"]
        summary = next((s for s in offered if usable(s)), f"{turn.role} #{idx}")
        where = {"vault_id": ids["vault_id"], "memory_id": ids["memory_id"]}
        tags = {"role": turn.role, "msg_idx": idx}
        return {"plan": [{**where, "raw_entry": turn.content, "summary": summary, "tags": tags}]}

    async def write(state: GuardState) -> dict:
        for entry in state["plan"]:
            call = {"name": "add_entry", "args": entry, "id": "write", "type": "tool_call"}
            reply = await add_entry.ainvoke(call)  # a ToolMessage
            if reply.status == "error":  # refused: the run fails, the message stays unstored
                raise ValueError(f"add_entry refused: {reply.text}")
        return {"stored": [entry["tags"]["msg_idx"] for entry in state["plan"]]}

    builder = StateGraph(GuardState).add_sequence([decide, write])
    builder.add_edge(START, "decide")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=checkpointer)


# %% [markdown]
# The two graphs, as `graph.get_graph().edges` lists them. In the ReAct
# loop the model's reply picks the next step (dotted), and `tools` runs
# whatever it proposed. The guard's path is fixed.

# %% [markdown]
# **The ReAct loop (`create_agent`)**
#
# ```mermaid
# flowchart LR
#   start([start]) --> model
#   model -.-> tools
#   tools -.-> model
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
# The teaching guard stores entries only. The rules printed in section 1
# also ask for a [bootstrap and flushes](../docs/glossary.md#bootstrap-and-flush-calls);
# those come from the package's `build_capture_graph`, with an
# [idempotency key](../docs/glossary.md#idempotency-key) on each write:
#
# ```mermaid
# flowchart LR
#     S["SESSION_START"] -->|package only| B["get_context, list_entries"]
#     M["each chat message"] -->|"guard and package"| E["add_entry, once"]
#     F["6th message, FLUSH_CONTEXT, SESSION_END"] -->|package only| P["put_context"]
# ```
#
# The same replay behind both:

# %%
from agentstate.memory import build_capture_graph

guarded = build_guarded_capture(replay_model(), tools, InMemorySaver())
teaching_store = await observe(guarded, client, travel.events, "teaching.trip")
package = build_capture_graph(replay_model(), tools, InMemorySaver())
package_store = await observe(package, client, travel.events, "package.trip")
expected = expected_entries(travel, "trip")
Table(
    {"guard": g, "entries": len(s), "the chat, once, in order": s == expected}
    for g, s in {"teaching": teaching_store, "package": package_store}.items()
)

# %% [markdown]
# The replay's faults sit at fixed positions, so that proves little.
#
# ## 4. Prove it: whatever the model proposes
# A model proposes random misbehaviours at every message (chat, duplicates,
# wrong roles, unknown tools, bad arguments...) on random chats with
# resends. Twelve seeded runs:

# %%
from agentstate.memory import RandomProposals, random_events
from agentstate.models import PolicyChatModel

proposer, sent_total, exact = RandomProposals(seed=6), 0, 0
for seed in range(12):
    chat, sent = random_events(seed, n_messages=8)
    graph = build_guarded_capture(PolicyChatModel(policy=proposer), tools, InMemorySaver())
    exact += await observe(graph, client, sent, f"random.{seed}") == expected_entries(chat, "chat")
    sent_total += len(sent)
counted = {"random chats": 12, "events sent": sent_total, "model replies": proposer.tried}
kinds = f"{len(proposer.kinds)} of {len(proposer.KINDS)}"
Table([{**counted, "kinds of proposal": kinds, "stores exact": f"{exact} of 12"}])

# %% [markdown]
# Every store holds one entry per message, resends included: `decide`
# checks `stored`.
#
# ## 5. What the doctor says
# The [doctor](../docs/glossary.md#doctor) reads a compiled graph without
# running it. This lesson's hazard: a memory-writing tool (`add_entry`,
# the flush's `put_context`) inside a ReAct loop:

# %%
from agentstate.doctor import diagnose
from agentstate.lessons.display import compare_findings

loop = react_agent(replay_model(), tools, "react.trip")
reports = {"ReAct loop": diagnose(loop), "guard": diagnose(guarded)}
compare_findings(reports)

# %% [markdown]
# ## Try it: the two stores, message by message
# Pick a `msg_idx`: what the ReAct loop and the guard stored for it, with
# section 2's verdicts.


# %%
def stored_for(msg_idx=8):
    rows = []
    for agent, memory in {"ReAct loop": "react.trip", "guard": "teaching.trip"}.items():
        rows += [{"agent": agent, **r} for r in store_rows(server.db, memory, travel, "trip")]
    return Table(r for r in rows if r["msg_idx"] == msg_idx)


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    stored_for, msg_idx=widgets.IntSlider(value=8, min=1, max=14, description="msg_idx")
)

# %% [markdown]
# The guard stores each message once, as the chat said it. The loop's rows
# follow the schedule: message 8 is stored twice, with the wrong role.

# %% [markdown]
# ## Summary
# - Replayed through `create_agent`, the report lands in the store: the
#   loop runs every proposed call.
# - The fix, a guard in code: one `add_entry` per message, built from the
#   message, and a `stored` list against resends. It holds over random
#   proposals and chats.
# - The teaching guard stores entries only; `build_capture_graph` adds the
#   bootstrap, flushes and idempotent retries.
# - Going further: [the auditor's rules, three conversations and the kill
#   tests](going_further/06_audit_and_kill_tests.ipynb); [the memory service
#   for a fleet](going_further/06_memory_fleet.ipynb), several replicas over
#   one Postgres.

# %% [markdown]
# ## Exercises
# 1. Let the teaching guard take the model's `raw_entry` instead of the
#    message's text. Which kind of random proposal breaks the store first?
# 2. Remove the `stored` check from `decide`. Which part of the random run
#    fails, and why does the replayed report alone not show it?
# 3. Add the bootstrap to the teaching guard: on a `SESSION_START` control
#    message (a chat session begins), call `get_context` then
#    `list_entries(limit=10)`. Check it with `agentstate.memory.audit`,
#    which reads the server's SQLite file and checks every capture rule.
#    What does it still miss, and why?

# %% [markdown]
# # 06 · Tool-only memory capture over a real MCP memory server
#
# An agent sits beside a chat between a user and an assistant and keeps a
# memory of it: every message goes to a memory service through MCP tools, and
# now and then a short context document is written. The first version used
# the prebuilt ReAct agent, and the memory filled with trouble: text the
# agent wrote itself, the same message stored twice, an assistant turn stored
# as the user's, a bootstrap done twice, flushes missing. This notebook
# reproduces those symptoms against a real memory server, reads them out of
# the store, and replaces the loop with a tool-only graph whose rules are
# enforced in code: a guard builds every call, so the store stays correct
# even with a model that proposes nothing. It proves that on hard
# conversations, a killed capture process and a killed server.

# %% [markdown]
# ## Recap
# Stage 05: every expert call shares one large, invariant prefix (global
# instructions plus the manual, byte for byte), so the engine's prefix cache
# serves the second and later experts; anything variable goes after it.
#
# ## Goals
# - Start a real MCP memory server (SQLite, queued writes) and load its tools
#   with `langchain-mcp-adapters`.
# - Reproduce the prebuilt agent's symptoms, in its state and in the store.
# - Audit the store itself: missing, duplicated, reordered, wrong role,
#   altered content, system messages, flushes, bootstrap.
# - Build the tool-only graph and see how it is written, piece by piece, with
#   a cell that removes each piece and shows the failure come back.
# - Prove it clean on three conversations with a well-behaved model, a
#   misbehaving one and one that proposes no tool call at all.
# - Kill the capture process, then the server, mid-run: nothing lost, nothing
#   doubled.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("mcp", "langchain-mcp-adapters", "langgraph", "langchain")}
assert versions["langgraph"].split(".")[0] == "1" and versions["langchain"].split(".")[0] == "1"
versions

# %% [markdown]
# ## The memory server, a real process
# `agentstate memory serve --db PATH` runs an MCP server whose memory tools
# (listed by the next cell) keep their data in one SQLite file. Here it runs
# over streamable HTTP on 127.0.0.1 (a free port), and the agent side loads its tools with
# `langchain-mcp-adapters`, as any MCP client would.

# %%
# ruff: noqa: F704 - top-level await: the notebook's kernel runs an event loop
import tempfile
from pathlib import Path

from agentstate.memory import MemoryClient, ServerProcess

workdir = Path(tempfile.mkdtemp(prefix="stage06-"))
server = ServerProcess(workdir / "memory.sqlite").start()
client = MemoryClient(server.url)
tools = await client.tools()
assert server.running and server.url.startswith("http://127.0.0.1:")
{"bound to": "127.0.0.1", "tools": sorted(t.name for t in tools)}

# %% [markdown]
# `add_entry` and `put_context` only queue the write and answer "enqueued";
# a writer thread applies the queue (which is itself a SQLite table, so it
# survives a kill: "kill the server", below, proves it). `await_consistency`
# returns once every queued write of the memory is applied. One round trip
# through the adapter's tool:

# %%
by_name = {t.name: t for t in tools}
demo = {"vault_id": "demo", "memory_id": "demo.chat"}
await client.call("create_memory", **demo)
reply = await by_name["add_entry"].ainvoke(
    {**demo, "raw_entry": "Olá 👋", "summary": "greeting", "tags": {"role": "user", "msg_idx": 1}})
consistent = await client.call("await_consistency", memory_id="demo.chat")
listed = await client.call("list_entries", **demo, limit=10)  # structured: a dict
assert reply[0]["text"] == "enqueued" and consistent == "consistent"
{"add_entry": reply[0]["text"], "await_consistency": consistent,
 "stored": [(e["raw_entry"], e["tags"]) for e in listed["entries"]]}

# %% [markdown]
# Bad input is an MCP error with a message that says what is wrong, and
# nothing is written: the memory's entries, call log, queue and contexts have
# the same counts after the five refused calls as before, and no memory
# `nope` appears.

# %%
from agentstate.display import Table
from agentstate.memory import MemoryToolError, read_memory


def sizes(memory_id):
    return {part: len(v) if isinstance(v, list) else v for part, v in
            read_memory(server.db, memory_id).items()}


before = sizes("demo.chat")

bad = [("list_entries", {**demo, "limit": 0}), ("list_entries", {**demo, "limit": 51}),
       ("list_entries", {**demo, "before": "2026-01-01T00:00:00Z", "after": "2026-01-01Z"}),
       ("add_entry", {**demo, "memory_id": "nope", "raw_entry": "x", "summary": "s"}),
       ("add_entry", {**demo, "vault_id": "", "raw_entry": "x", "summary": "s"})]
errors = []
for tool, args in bad:
    try:
        await client.call(tool, **args)
    except MemoryToolError as exc:
        errors.append({"call": tool, "error": str(exc).split(": ", 2)[-1][:70]})
assert len(errors) == len(bad)
assert sizes("demo.chat") == before and sum(sizes("nope").values()) == 0
Table(errors)

# %% [markdown]
# ## Reproduce: the prebuilt ReAct agent
# `create_agent` with the same tools and the capture prompt. The observer
# sends each message of the solo-travel chat to it on one thread. Offline,
# the model is a policy (`AS_REPORTED`) that shows the symptoms above at
# fixed positions: it answers the user in its own words, stores some
# messages twice, tags some assistant turns as the user's, bootstraps twice,
# and forgets the periodic flush.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.memory import AS_REPORTED, CapturePolicy, ReactRun, load, policy_model

travel = load("solo_travel")
reported = policy_model(CapturePolicy(AS_REPORTED, one_call_per_step=True), "reported")
react = ReactRun(client, reported, tools, run="react", checkpointer=InMemorySaver())
await react.replay(travel)
await client.call("await_consistency", memory_id=react.memory_id("trip"))
messages = (await react.state("trip"))["messages"]
{"events sent": len(travel.events), "conversation messages": len(travel.messages("trip")),
 "messages in the agent's state": len(messages)}

# %% [markdown]
# ## Look inside: the agent's state
# The thread starts with two bootstraps (`get_context`, `list_entries`, and
# again). Then, below: after storing the first user message, the agent
# answers the user itself (an AI message with text, kept in state); at the
# next turn it stores that text as the assistant's message #1; message 3 is
# stored twice. One row per message in the agent's state: its `type`, the
# `role` and `msg_idx` of a conversation message, the start of its `text`,
# and the tool `calls` an AI message makes (`add_entry(user #3)`: an entry
# tagged role `user`, `msg_idx` 3; `-> name`: a tool's result):

# %%
from agentstate.memory import message_rows

rows = message_rows(messages)[:24]
assert [r["calls"] for r in rows[1:9:2]] == [["get_context"], ["list_entries"]] * 2
assert rows[13]["type"] == "AIMessage" and rows[13]["text"].startswith("Happy to help")
assert rows[15]["calls"] == ["add_entry(assistant #1)"]  # the agent's own text, stored
assert rows[21]["calls"] == rows[23]["calls"] == ["add_entry(user #3)"]  # twice
Table(rows[10:24])

# %% [markdown]
# ## The capture rules
# What a correct store holds, message by message:
# - **one `add_entry` per conversation message**, content byte for byte,
#   tags exactly `{role, msg_idx}` (role `user` or `assistant`);
# - a message with role `system` is **never stored**;
# - **bootstrap** on each `SESSION_START`: `get_context`, then
#   `list_entries(limit=10)`, once;
# - **flush** after every message whose `msg_idx` is a multiple of 6, and on
#   `FLUSH_CONTEXT` and `SESSION_END`: `await_consistency`, then `put_context`;
# - control messages (`SESSION_START`, `FLUSH_CONTEXT`, `SESSION_END`) are
#   signals, never stored.
#
# What the rules ask of the solo-travel chat (columns: the messages, each
# one `add_entry`; the `SESSION_START`s, each one bootstrap; the `msg_idx`
# after which a flush is due: 6 and 12 as every 6th message, 8 because a
# `FLUSH_CONTEXT` follows message 8, 14 because `SESSION_END` follows it):

# %%
from agentstate.memory import rules_table

rules = Table(rules_table(travel))
# 6 and 12: every 6th message; 8: FLUSH_CONTEXT after message 8; 14: SESSION_END
assert rules.rows == [{"thread": "trip", "messages (add_entry)": 14,
                       "SESSION_START (bootstrap)": 1, "flush after msg_idx": [6, 8, 12, 14]}]
rules

# %% [markdown]
# ## Look inside: the store
# The auditor opens the server's SQLite file read-only and checks those
# rules against the conversation: entries (one per message, in order, role
# and content byte-identical, no system message, nothing extra) and, from the
# server's call log, flushes and bootstraps. It never looks at the agent's
# state. Each row is one broken rule: its `kind`, the `thread`, the
# `msg_idx` where it was found (empty for a whole-thread rule) and what was
# found.

# %%
from agentstate.memory import audit, counts

violations = audit(server.db, travel, react.memories(travel))
assert counts(violations) == {"duplicated": 3, "wrong_role": 3, "extra_entry": 4,
                              "missing_flush": 2, "repeated_bootstrap": 1}
Table(v.row() for v in violations)

# %% [markdown]
# Every symptom, in the store. This disproves a common belief: **"the rules
# are in the prompt, so the agent follows them."** In a ReAct loop the model
# both decides the tools and talks. Its text stays in state and becomes part
# of its next context; each tool call it makes is executed as made; the rules
# exist only in the prompt. Nothing in the loop checks a call against the
# message it is supposed to store.
#
# ## The fix: a tool-only graph
# Three nodes: `llm_call` shows the model the capture prompt and the
# conversation, keeps only its tool calls, and lets a guard in code build the
# turn's calls from the capture rules above; `tools` (a `ToolNode`) runs
# them one at a time, `dispatch` handing over the next; a checkpointer keeps
# the state per thread. "How the fix is written", below, shows each piece.

# %%
from agentstate.display import graph_mermaid
from agentstate.memory import CaptureRun

capture = CaptureRun(client, policy_model(CapturePolicy(), "policy"), tools, run="capture",
                     checkpointer=InMemorySaver())
diagram = graph_mermaid(capture.graph)
assert "llm_call" in diagram.source and "dispatch" in diagram.source
diagram

# %% [markdown]
# The state after three events (SESSION_START, user #1, assistant #2): the
# conversation, and the current turn's tool call with its result. Earlier
# turns' tool traffic is removed when a new turn starts: the memory server
# holds the history, so the state (and each checkpoint) stays small (the
# next cell: 21 messages after the whole chat, against the prebuilt agent's
# 92). Same columns as the table above.

# %%
events = list(travel.events)
await capture.replay(travel, events[:3])
early = message_rows((await capture.state("trip"))["messages"])
assert [r["type"] for r in early] == ["SystemMessage", "ChatMessage", "ChatMessage",
                                      "AIMessage", "ToolMessage"]
assert early[3]["calls"] == ["add_entry(assistant #2)"] and early[3]["text"] == ""
Table(early)

# %%
await capture.replay(travel, events[3:])
await client.call("await_consistency", memory_id=capture.memory_id("trip"))
state = await capture.state("trip")
ai = [m for m in state["messages"] if type(m).__name__ == "AIMessage"]
assert all(m.content == "" and len(m.tool_calls) == 1 for m in ai)
assert len(state["messages"]) < len(messages) / 4  # the prebuilt agent's state: 92
assert audit(server.db, travel, capture.memories(travel)) == []
{"events sent": len(events), "messages in state": len(state["messages"]),
 "persisted msg_idx": state["persisted"], "violations": 0}

# %% [markdown]
# The same graph with the misbehaving model: the store is still clean, and
# the guard records, in `corrections`, each call it dropped, added or
# corrected (here the first ones):

# %%
guarded = CaptureRun(client, policy_model(CapturePolicy(AS_REPORTED), "reported"), tools,
                     run="guarded", checkpointer=InMemorySaver())
await guarded.replay(travel)
await client.call("await_consistency", memory_id=guarded.memory_id("trip"))
corrections = (await guarded.state("trip"))["corrections"]
assert audit(server.db, travel, guarded.memories(travel)) == []
assert "SESSION_START: dropped get_context" in corrections
corrections[:6]

# %% [markdown]
# ## Prove it: a model that proposes nothing
# A natural reading of the last two cells is **"the graph is clean because
# the model is good enough"**. It is not: correctness comes from the guard,
# and the model is optional for it. The
# strongest test: a model that proposes no tool call at all (every reply is
# empty). The prebuilt agent with it stores nothing, so every message is
# `missing`; the tool-only graph with it stores every message, bootstraps and
# flushes exactly as the rules say. So "clean with a faulty model" is a
# property of the guard, not of the model: the model may add a summary or a
# context document, never a call the rules do not ask for.

# %%
from agentstate.memory import proposes_nothing

silent = policy_model(proposes_nothing, "silent")
mute_react = ReactRun(client, silent, tools, run="mute-react")
mute = CaptureRun(client, silent, tools, run="mute")
for run in (mute_react, mute):
    await run.replay(travel)
    await client.call("await_consistency", memory_id=run.memory_id("trip"))
silent_found = {"react": counts(audit(server.db, travel, mute_react.memories(travel))),
                "capture": counts(audit(server.db, travel, mute.memories(travel)))}
assert silent_found["react"]["missing"] == len(travel.messages("trip"))
assert silent_found["capture"] == {}
silent_found

# %% [markdown]
# Every call the silent run sent was added by the guard: one `add_entry` per
# message, and each bootstrap and flush call:

# %%
added = (await mute.state("trip"))["corrections"]
assert all(": added " in c for c in added)
assert sum("added add_entry" in c for c in added) == len(travel.messages("trip"))
{"corrections": len(added), "all of them 'added'": True,
 "add_entry added": sum("added add_entry" in c for c in added)}

# %% [markdown]
# ## How the fix is written
# Four pieces, each shown from the package's own source, each followed by a
# cell that removes it and shows the failure come back.
#
# **1. The model sees only the prompt and the conversation, and only its tool
# calls are kept.** In `llm_call`, the model is shown the capture prompt
# (with the current message's role and `msg_idx`) plus `curated(...)`: the
# control and user/assistant messages, never an AI or tool message. Of its
# reply only `tool_calls` are read; its text is dropped.

# %%
from agentstate.display import show_source
from agentstate.memory import build_capture_graph

piece = show_source(build_capture_graph, start="prompt = SystemMessage", stop="for n, c in")
assert "curated(state[" in piece and "tool_calls" in piece
piece

# %%
from agentstate.memory import curated

show_source(curated)

# %% [markdown]
# Without it, the model reads its own earlier answer and takes it for the
# assistant's turn. The misbehaving policy, asked for its calls at
# assistant message #2 of the prebuilt agent's thread, given the agent's
# whole state (as the ReAct loop does) and given the curated messages only:

# %%
from langchain_core.messages import ChatMessage

faulty, ids = CapturePolicy(AS_REPORTED), (react.vault_id, react.memory_id("trip"))
at = next(i for i, m in enumerate(messages)
          if isinstance(m, ChatMessage) and m.additional_kwargs["msg_idx"] == 2)
whole = faulty.plan(messages[at], messages[:at], *ids)
shown = faulty.plan(messages[at], curated(messages[:at]), *ids)
def entry_texts(plan):
    return [c["args"]["raw_entry"][:20] for c in plan if c["name"] == "add_entry"]


assert entry_texts(whole)[0].startswith("Happy to help")  # the agent's own words, stored
assert not any(t.startswith("Happy") for t in entry_texts(shown))
{"whole state: add_entry texts": entry_texts(whole), "curated: add_entry texts": entry_texts(shown)}

# %% [markdown]
# **2. The guard builds each turn's calls from the rules.** The plan comes
# from the turn, never from the model: a system message gets no call; a
# conversation message gets exactly one `add_entry` (skipped if its
# `msg_idx` is already persisted) with role, content and tags copied from
# the message; only the `summary` is taken from the model. `SESSION_START`
# gets one bootstrap per session; `FLUSH_CONTEXT`/`SESSION_END` and every
# 6th message get a flush, whose `put_context` text is the only other thing
# the model may supply.

# %%
from agentstate.memory import guard

show_source(guard, start='if isinstance(turn, ChatMessage) and turn.role == "system"',
            stop='update["corrections"] = update.get')

# %% [markdown]
# The calls themselves are built in one place, `calls`, which the auditor
# reads too; for example one message's `add_entry`:

# %%
from agentstate.memory import add_entry

show_source(add_entry)

# %% [markdown]
# A system message gets no call, whatever the model proposes:

# %%
note = ChatMessage(role="system", content="be brief", additional_kwargs={"msg_idx": 9})
proposal = [add_entry("v", "m", "system", 9, "be brief")]
plan, update = guard(note, proposal, {"messages": []}, "v", "m")
assert plan == [] and update["corrections"][0] == "msg 9: system message, not persisted"
update["corrections"]

# %% [markdown]
# Remove the guard (`without_guard` replaces it with a pass-through: the
# plan is whatever the model proposed) and run the same graph with the
# misbehaving model. This disproves **"hiding the agent's own text from the
# model is the fix"**: the curated prompt, the `ToolNode` and the
# checkpointer are all still there, the agent's text stays out, and the
# duplicates, wrong roles, missing flushes and the second bootstrap come
# back:

# %%
from agentstate.memory import without_guard

with without_guard():
    unguarded = CaptureRun(client, policy_model(CapturePolicy(AS_REPORTED), "reported"),
                           tools, run="unguarded")
    await unguarded.replay(travel)
await client.call("await_consistency", memory_id=unguarded.memory_id("trip"))
no_guard = counts(audit(server.db, travel, unguarded.memories(travel)))
assert {"duplicated", "wrong_role", "missing_flush", "repeated_bootstrap"} <= set(no_guard)
assert "extra_entry" not in no_guard  # curation (piece 1) still keeps the agent's text out
no_guard

# %% [markdown]
# **3. A `ToolNode` runs the plan, one call at a time.** `llm_call` puts the
# plan's first call in an `AIMessage`; `tools` runs it; `dispatch` hands over
# the next one while any is left. One call per step means the store sees
# the calls in plan order (`await_consistency` before `put_context`), and
# each call is checkpointed before it is sent, so a killed process knows
# exactly which call was in flight (the kill test below relies on it).

# %%
show_source(build_capture_graph, start="async def dispatch", stop="return builder.compile")

# %% [markdown]
# Message #6 is a flush turn: its `add_entry`, `await_consistency` and
# `put_context` each have a checkpoint of their own, taken before the tool
# ran (`next` is `tools`):

# %%
history = [s async for s in mute.graph.aget_state_history(mute.config("trip"))]
flush_turn = [s for s in reversed(history) if s.next == ("tools",)
              and s.values["turn"].additional_kwargs.get("msg_idx") == 6]
pending = [s.values["messages"][-1].tool_calls[0]["name"] for s in flush_turn]
assert pending == ["add_entry", "await_consistency", "put_context"]
pending

# %% [markdown]
# **4. A checkpointer, one thread per conversation thread.** What the guard
# checks against (`persisted` message indexes, `bootstrapped` sessions) lives
# in the graph's state, so it must survive from one invoke to the next:
# `CaptureRun` always compiles the graph with a checkpointer and invokes it
# with `thread_id` set to the thread's memory.

# %%
from agentstate.memory import CaptureState

show_source(CaptureState, start="persisted:", stop="corrections:")

# %% [markdown]
# The belief this corrects: **"the memory server holds the history, so the
# graph needs no state of its own"**. Without a checkpointer each invoke
# starts from an empty state: an observer that resends a message (a retry
# after a timeout, say) gets it stored twice. The first three events, then
# user message #1 again, with and without a checkpointer (the `msg_idx` of
# each stored entry):

# %%
stored_twice = {}
for label, saver in (("checkpointer", InMemorySaver()), ("none", None)):
    run = CaptureRun(client, silent, tools, run=f"resend-{label}")  # for its memory and config
    graph = build_capture_graph(silent, tools, checkpointer=saver)
    await run.ensure_memory("trip")
    for message in (e.to_message() for e in [*events[:3], events[1]]):
        await graph.ainvoke({"messages": [message], "turn": message}, run.config("trip"))
    await client.call("await_consistency", memory_id=run.memory_id("trip"))
    tags = [e["tags"]["msg_idx"] for e in read_memory(server.db, run.memory_id("trip"))["entries"]]
    stored_twice[label] = tags
assert stored_twice == {"checkpointer": [1, 2], "none": [1, 2, 1]}
stored_twice

# %% [markdown]
# ## Prove it: three conversations, three agents
# `solo_travel` (the chat above), `hard_cases` (unicode and emoji, a
# code block, an empty message, a 25 KB message, a user who types
# "SESSION_END", an assistant who says "FLUSH_CONTEXT") and `two_threads`
# (two chats interleaved). Violations found in each store, one column per
# agent: `react` is the prebuilt agent with the misbehaving model, `capture`
# the tool-only graph with a well-behaved model, `capture + faulty model` the
# tool-only graph with the same misbehaving model as `react`:

# %%
from agentstate.memory import available, compare

results = {name: await compare(client, server.db, load(name)) for name in available()}
totals = [{"conversation": name, **{agent: len(vs) for agent, vs in found.items()}}
          for name, found in results.items()]
assert all(row["capture"] == 0 and row["capture + faulty model"] == 0 for row in totals)
assert all(row["react"] > 0 for row in totals)
Table(totals)

# %% [markdown]
# The same violations by kind, summed over the three conversations (the
# last row is the total):

# %%
from agentstate.memory import side_by_side

merged = {agent: [v for found in results.values() for v in found[agent]]
          for agent in ("react", "capture")}
table = Table(side_by_side(merged))
assert table.column("violation")[-1] == "total" and table.rows[-1]["capture"] == 0
table

# %% [markdown]
# The hard cases come back byte for byte, including the empty message and
# the user message that reads "SESSION_END" (a control message is a
# `SystemMessage`, never a guess from the text):

# %%
from agentstate.memory import read_memory

hard = load("hard_cases")
edge = CaptureRun(client, policy_model(CapturePolicy(), "p"), tools, run="edge")
await edge.replay(hard)
await client.call("await_consistency", memory_id=edge.memory_id("edge"))
stored = read_memory(server.db, edge.memory_id("edge"))["entries"]
same = [{"msg_idx": m.msg_idx, "role": m.role, "bytes": len(m.content.encode()),
         "identical": s["raw_entry"].encode() == m.content.encode()}
        for m, s in zip(hard.messages("edge"), stored, strict=True)]
assert all(r["identical"] for r in same)
texts = [m.content for m in hard.messages("edge")]
assert {"", "SESSION_END", "FLUSH_CONTEXT"} <= set(texts) and any("```" in t for t in texts)
assert any("👋" in t for t in texts) and max(r["bytes"] for r in same) > 25_000
Table(same)

# %% [markdown]
# ## Prove it: kill the capture process
# `python -m agentstate.memory.worker` captures a conversation with a SQLite
# checkpointer (`langgraph-checkpoint-sqlite`). We SIGKILL it after a few
# events, wherever it is, and start it again on the same checkpoint file: it
# first finishes the turn the dead process left (if that turn's write already
# reached the server, it is marked done, not sent again), then sends the rest.

# %%
import subprocess
import sys

chat = load("two_threads")
cmd = [sys.executable, "-m", "agentstate.memory.worker", "--url", server.url, "--checkpoints",
       str(workdir / "checkpoints.sqlite"), "--conversation", "two_threads", "--run", "crash"]
proc = subprocess.Popen([*cmd, "--pace", "0.03"], stdout=subprocess.PIPE, text=True)
before = [proc.stdout.readline() for _ in range(9)]
proc.kill()
proc.wait()
proc.stdout.close()
crashed = {t: len(read_memory(server.db, f"crash.{t}")["entries"]) for t in chat.threads}
assert 0 < sum(crashed.values()) < sum(len(chat.messages(t)) for t in chat.threads)
{"events sent before the kill": sum(line.startswith("sent") for line in before)}

# %%
again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
assert again.returncode == 0 and again.stdout.strip().endswith("done"), again.stderr[-500:]
for t in chat.threads:
    await client.call("await_consistency", memory_id=f"crash.{t}")
after_crash = audit(server.db, chat, {t: f"crash.{t}" for t in chat.threads})
assert after_crash == []
{"violations after the restart": len(after_crash),
 "entries": {t: len(read_memory(server.db, f"crash.{t}")["entries"]) for t in chat.threads}}

# %% [markdown]
# ## Prove it: kill the server
# A second server with a slow writer, so that writes are still queued when it
# is SIGKILLed. The capture keeps going: its next call fails, the client
# waits for the server to come back (restarted a second later on the same
# file), checks whether the write it was sending already landed, and sends it
# only if not. The queued writes are applied by the new process.

# %%
import asyncio

flaky = ServerProcess(workdir / "restart.sqlite", write_delay=0.2).start()
flaky_client = MemoryClient(flaky.url, retry_for=30)
run = CaptureRun(flaky_client, policy_model(CapturePolicy(), "p"), await flaky_client.tools(),
                 run="restart", checkpointer=InMemorySaver())
first, rest = list(travel.events)[:6], list(travel.events)[6:]
await run.replay(travel, first)
flaky.kill()
queued_at_kill = read_memory(flaky.db, "restart.trip")["pending"]
flaky.write_delay = 0.0
assert queued_at_kill > 0
{"events sent before the kill": len(first), "writes still queued at the kill": queued_at_kill > 0}

# %%
asyncio.get_running_loop().call_later(1.0, flaky.start)  # back on the same file in 1 s
await run.replay(travel, rest)
await flaky_client.call("await_consistency", memory_id="restart.trip")
after_restart = audit(flaky.db, travel, run.memories(travel))
assert flaky_client.stats["retries"] >= 1 and after_restart == []
{"client retried": flaky_client.stats["retries"] >= 1, "violations": len(after_restart)}

# %% [markdown]
# ## Turn a knob: one fault at a time
# Pick a conversation and one misbehaviour of the model. The prebuilt agent
# stores whatever the model does; the tool-only graph, with the same model,
# stays clean. (With no fault at all, the prebuilt agent is clean too: the
# loop does not invent errors, it just lets every one through.) Each turn of
# the knob starts a memory server of its own on a fresh file and stops it
# before it answers, so the knob works at any time, also after Run All.

# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

from agentstate.memory import FAULTS, knob_counts


def knob(conversation="solo_travel", fault="writes twice"):
    found = knob_counts(conversation, [fault])[0]
    assert found["capture"] == 0 and found["capture + faulty model"] == 0
    return Table([{"agent": a, "violations": n} for a, n in found.items() if a != "fault"])


widgets.interact(knob, conversation=available(), fault=list(FAULTS));

# %% [markdown]
# Four positions of the knob on the solo-travel chat, violations per agent:

# %%
fixed = Table(knob_counts("solo_travel", ["none", "writes twice", "swaps roles",
                                          "skips the periodic flush"]))
assert fixed.column("react") == [0, 3, 3, 2]
assert fixed.column("capture + faulty model") == [0, 0, 0, 0]
fixed

# %% [markdown]
# (No timings here: for throughput, the repository's
# `scripts/bench_memory.py` measures the real server and graph; see the
# README.)
#
# Finally, stop the notebook's two servers:

# %%
from agentstate.memory import port_open

await client.close()
await flaky_client.close()
server.stop()
flaky.stop()
assert not server.running and not flaky.running
assert not port_open(server.port) and not port_open(flaky.port)
{"notebook servers running": 0}

# %% [markdown]
# The knob does not need them: turned now, as after Run All, it starts and
# stops a server of its own. With the knob's servers, every server this
# notebook started is stopped and no port is still open:

# %%
from agentstate.memory import knob_servers

after_all = knob("solo_travel", "swaps roles")
assert after_all.rows[0] == {"agent": "react", "violations": 3}
every = [server, flaky, *knob_servers]
left = [s.port for s in every if s.running or port_open(s.port)]
assert len(every) == 5 and left == []
{"servers started": len(every), "still running or listening": len(left)}

# %% [markdown]
# ## Summary
# - The memory server is a real MCP process over SQLite: writes are queued
#   durably, `await_consistency` waits for them, bad input is a clear error
#   and writes nothing.
# - The prebuilt ReAct agent, with a model that misbehaves, stores
#   agent-authored text, duplicates, wrong roles, and bootstraps twice: rules
#   in a prompt are not enforced. The auditor finds each one in the store,
#   without looking at state.
# - The tool-only graph is four pieces: the model sees only the prompt and
#   the conversation and only its tool calls are kept; a guard builds each
#   turn's calls from the rules; a `ToolNode` runs them one at a time; a
#   checkpointer keeps what was persisted per thread. Removing any one brings
#   a failure back.
# - Correctness comes from the guard: with a model that proposes nothing the
#   store is exactly as clean as with a good model.
# - A SQLite checkpointer lets a killed capture process resume; a write whose
#   reply was lost is checked in the store before it is sent again; a killed
#   server loses no queued write.
#
# ## Exercises
# 1. Write a policy that also stores `SESSION_START` as an entry (subclass
#    `CapturePolicy`). Which violation does the auditor report for the
#    prebuilt agent, and what does the guard record for the tool-only graph?
# 2. Change the periodic flush to every 4 messages (`calls.FLUSH_EVERY`).
#    Which conversations now expect more flushes, and does the tool-only
#    graph still pass the audit?
# 3. Connect another MCP client, the `mcp` package's own
#    (`mcp.client.streamable_http`), to a memory server you start with
#    `ServerProcess`: write two entries with `add_entry` and find one of them
#    with `search_memories`.

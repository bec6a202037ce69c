# %% [markdown]
# # 06 · Tool-only memory capture over a real MCP memory server
#
# An agent sits beside a chat between a user and an assistant and keeps a
# memory of it: every message goes to a memory service through MCP tools, and
# now and then a short context document is written. The first version used
# the prebuilt ReAct agent, and the memory filled with trouble: text the
# agent wrote itself, the same message stored twice, an assistant turn stored
# as the user's, a bootstrap done twice, flushes missing. The original
# write-up replaced the loop with a tool-only graph. This notebook reproduces
# the symptoms against a real memory server, reads them out of the store,
# builds the tool-only graph with the rules enforced in code, and proves it
# on hard conversations, a killed capture process and a killed server.

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
# - Build the tool-only graph, prove it clean on three conversations, with a
#   well-behaved and with a misbehaving model.
# - Kill the capture process, then the server, mid-run: nothing lost, nothing
#   doubled.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("mcp", "langchain-mcp-adapters", "langgraph", "langchain")}
assert all(versions.values())
versions

# %% [markdown]
# ## The memory server, a real process
# `agentstate memory serve --db PATH` runs an MCP server with Mycelian Memory's
# tools over a SQLite file. Here it runs over streamable HTTP on 127.0.0.1
# (a free port), and the agent side loads its tools with
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
# survives a kill). `await_consistency` returns once every queued write of the
# memory is applied. One round trip through the adapter's tool:

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
# nothing is written:

# %%
from agentstate.display import Table
from agentstate.memory import MemoryToolError

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
Table(errors)

# %% [markdown]
# ## Reproduce: the prebuilt ReAct agent
# `create_agent` with the same tools and the capture prompt. The observer
# sends each message of the solo-travel chat to it on one thread. Offline,
# the model is a policy that behaves as the write-up reports: it answers the
# user in its own words, stores some messages twice, tags some assistant
# turns as the user's, bootstraps twice, and forgets the periodic flush.

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
# stored twice:

# %%
from agentstate.memory import message_rows

rows = message_rows(messages)[:24]
assert [r["calls"] for r in rows[1:9:2]] == [["get_context"], ["list_entries"]] * 2
assert rows[13]["type"] == "AIMessage" and rows[13]["text"].startswith("Happy to help")
assert rows[15]["calls"] == ["add_entry(assistant #1)"]  # the agent's own text, stored
assert rows[21]["calls"] == rows[23]["calls"] == ["add_entry(user #3)"]  # twice
Table(rows[10:24])

# %% [markdown]
# ## Look inside: the store
# The auditor opens the server's SQLite file read-only and compares it with
# the conversation: entries (one per message, in order, role and content
# byte-identical, no system message, nothing extra) and, from the server's
# call log, flushes and bootstraps. It never looks at the agent's state.

# %%
from agentstate.memory import audit, counts

violations = audit(server.db, travel, react.memories(travel))
assert counts(violations) == {"duplicated": 3, "wrong_role": 3, "extra_entry": 4,
                              "missing_flush": 2, "repeated_bootstrap": 1}
Table(v.row() for v in violations)

# %% [markdown]
# Every symptom of the write-up, in the store. Why: in a ReAct loop the model
# both decides the tools and talks. Its text stays in state and becomes part
# of its next context; each tool call it makes is executed as made; the rules
# exist only in the prompt. Nothing in the loop checks a call against the
# message it is supposed to store.
#
# ## The fix: a tool-only graph
# The model is shown only the capture prompt (with the current message's
# role and `msg_idx`) plus the control and user/assistant messages; of its
# reply only the tool calls are kept; a guard in code builds the turn's plan
# from the rules (one `add_entry` per message, role and content copied from
# the message, tags exactly `{role, msg_idx}`, bootstrap once, flush after
# `msg_idx % 6 == 0`, at FLUSH_CONTEXT and SESSION_END, always
# `await_consistency` first); a `ToolNode` runs the plan one call at a time.
# State is checkpointed per thread and each invoke sends only the new message.

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
# holds the history, so the state (and each checkpoint) stays small.

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
assert audit(server.db, travel, capture.memories(travel)) == []
{"events sent": len(events), "messages in state": len(state["messages"]),
 "persisted msg_idx": state["persisted"], "violations": 0}

# %% [markdown]
# Now the real test of "enforced in code": the same graph with the
# misbehaving model. The guard records what it changed:

# %%
guarded = CaptureRun(client, policy_model(CapturePolicy(AS_REPORTED), "reported"), tools,
                     run="guarded", checkpointer=InMemorySaver())
await guarded.replay(travel)
await client.call("await_consistency", memory_id=guarded.memory_id("trip"))
corrections = (await guarded.state("trip"))["corrections"]
assert audit(server.db, travel, guarded.memories(travel)) == []
corrections

# %% [markdown]
# ## Prove: three conversations, three agents
# `solo_travel` (the write-up's story), `hard_cases` (unicode and emoji, a
# code block, an empty message, a 25 KB message, a user who types
# "SESSION_END", an assistant who says "FLUSH_CONTEXT") and `two_threads`
# (two chats interleaved). Violations found in each store:

# %%
from agentstate.memory import available, compare

results = {name: await compare(client, server.db, load(name)) for name in available()}
totals = [{"conversation": name, **{agent: len(vs) for agent, vs in found.items()}}
          for name, found in results.items()]
assert all(row["capture"] == 0 and row["capture + faulty model"] == 0 for row in totals)
assert all(row["react"] > 0 for row in totals)
Table(totals)

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
Table(same)

# %% [markdown]
# ## Prove: kill the capture process
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
# ## Prove: kill the server
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
# loop does not invent errors, it just lets every one through.)

# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

from agentstate.memory import FAULTS, compare_sync


def knob(conversation="solo_travel", fault="writes twice"):
    found = compare_sync(server.url, server.db, conversation, fault)
    assert found["capture"] == 0 and found["capture + faulty model"] == 0
    return Table([{"agent": agent, "violations": n} for agent, n in found.items()])


widgets.interact(knob, conversation=available(), fault=list(FAULTS));

# %%
fixed = Table({"fault": f, **compare_sync(server.url, server.db, "solo_travel", f)}
              for f in ("none", "writes twice", "swaps roles", "skips the periodic flush"))
assert fixed.column("react") == [0, 3, 3, 2]
assert fixed.column("capture + faulty model") == [0, 0, 0, 0]
fixed

# %% [markdown]
# How fast is it? `scripts/bench_memory.py` pushes 1,000 messages through the
# real server and the tool-only graph, checks the store with the auditor, and
# prints the median messages per second (see the README); no timings here.
#
# Finally, stop both servers: no process is left behind.

# %%
from agentstate.memory import port_open

await client.close()
await flaky_client.close()
server.stop()
flaky.stop()
assert not server.running and not flaky.running
left = [p for p in (server.port, flaky.port) if port_open(p)]
assert left == []
{"servers running": 0, "ports still open": len(left)}

# %% [markdown]
# ## Summary
# - The memory server is a real MCP process over SQLite: writes are queued
#   durably, `await_consistency` waits for them, bad input is a clear error.
# - The prebuilt ReAct agent, with a model that misbehaves as reported,
#   stores agent-authored text, duplicates, wrong roles, and bootstraps twice;
#   the auditor finds each one in the store, without looking at state.
# - The tool-only graph shows the model only the conversation, keeps only
#   its tool calls, and builds each turn's calls from the rules in code: the
#   store is clean with a good model and with the faulty one.
# - A SQLite checkpointer lets a killed capture process resume; a write whose
#   reply was lost is checked in the store before it is sent again; a killed
#   server loses no queued write.
#
# ## Exercises
# 1. Add a fault to `Faults`: the model stores `SESSION_START` as an entry.
#    Which violation does the auditor report for the prebuilt agent, and what
#    does the guard record for the tool-only graph?
# 2. Change the periodic flush to every 4 messages (`calls.FLUSH_EVERY`).
#    Which conversations now expect more flushes, and does anything else move?
# 3. Connect another MCP client (the MCP inspector, or `mcp` in a script) to
#    `agentstate memory serve --db /tmp/m.sqlite --transport http` and call
#    `search_memories` on a memory this notebook wrote.

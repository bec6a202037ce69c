# %% [markdown]
# # 06 · Tool-only memory capture: exercise solutions
#
# Each exercise of notebook 06, answered with code that runs offline and
# asserts its answer. One memory server is started here, on a fresh SQLite
# file, and stopped in the last cell.

# %%
# ruff: noqa: F704 - top-level await: the notebook's kernel runs an event loop
import tempfile
from pathlib import Path

from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.display import Table
from agentstate.memory import (
    CapturePolicy,
    CaptureRun,
    MemoryClient,
    ReactRun,
    ServerProcess,
    audit,
    available,
    calls,
    counts,
    load,
    policy_model,
    port_open,
    read_memory,
    rules_table,
)

workdir = Path(tempfile.mkdtemp(prefix="stage06-solutions-"))
server = ServerProcess(workdir / "memory.sqlite").start()
client = MemoryClient(server.url)
tools = await client.tools()
travel = load("solo_travel")
assert server.running
{"server": "running on 127.0.0.1", "tools": len(tools)}

# %% [markdown]
# ## Exercise 1
# A policy that also stores `SESSION_START` as an entry: the prebuilt agent
# runs the extra `add_entry`, and the auditor reports it as an
# `extra_entry` (an entry that matches no conversation message). The
# tool-only graph's guard builds the bootstrap from the rules and drops the
# proposed `add_entry`; it records that in `corrections`.

# %%
class StoresSessionStart(CapturePolicy):
    """A well-behaved policy, except that SESSION_START is also stored as an entry."""

    def plan(self, turn, history, vault_id, memory_id):
        planned = super().plan(turn, history, vault_id, memory_id)
        if isinstance(turn, SystemMessage) and turn.content == "SESSION_START":
            planned = [calls.add_entry(vault_id, memory_id, "user", 0, "SESSION_START"), *planned]
        return planned


react = ReactRun(client, policy_model(StoresSessionStart(one_call_per_step=True), "s"), tools,
                 run="ex1-react", checkpointer=InMemorySaver())
capture = CaptureRun(client, policy_model(StoresSessionStart(), "s"), tools, run="ex1-capture")
for run in (react, capture):
    await run.replay(travel)
    await client.call("await_consistency", memory_id=run.memory_id("trip"))
react_found = counts(audit(server.db, travel, react.memories(travel)))
assert react_found == {"extra_entry": 1}
assert audit(server.db, travel, capture.memories(travel)) == []
recorded = [c for c in (await capture.state("trip"))["corrections"] if "add_entry" in c]
assert recorded == ["SESSION_START: dropped add_entry"]
{"prebuilt agent": react_found, "guard recorded": recorded}

# %% [markdown]
# ## Exercise 2
# With a flush every 4 messages, `solo_travel` and `hard_cases` expect one
# more flush each; `two_threads` does not (7 messages a thread: one flush
# after message 4 instead of one after message 6). The guard and the auditor read the same
# `calls.FLUSH_EVERY`, so the tool-only graph still passes the audit (and
# nothing else moves: the entries are the same).

# %%
def flush_points(every):
    calls.FLUSH_EVERY = every
    try:
        return {name: {r["thread"]: r["flush after msg_idx"] for r in rules_table(load(name))}
                for name in available()}
    finally:
        calls.FLUSH_EVERY = 6


six, four = flush_points(6), flush_points(4)
more = {name: {t: len(four[name][t]) - len(six[name][t]) for t in four[name]} for name in four}
assert more == {"hard_cases": {"edge": 1}, "solo_travel": {"trip": 1},
                "two_threads": {"alice": 0, "bob": 0}}
Table({"conversation": name, "more flushes per thread": per} for name, per in more.items())

# %%
calls.FLUSH_EVERY = 4
try:
    every4 = CaptureRun(client, policy_model(CapturePolicy(), "p"), tools, run="ex2-every4")
    await every4.replay(travel)
    await client.call("await_consistency", memory_id=every4.memory_id("trip"))
    found = audit(server.db, travel, every4.memories(travel))
    ops = read_memory(server.db, "ex2-every4.trip")["ops"]
    puts = sum(op["tool"] == "put_context" for op in ops)
finally:
    calls.FLUSH_EVERY = 6
assert found == [] and puts == len(four["solo_travel"]["trip"])
entries = len(read_memory(server.db, "ex2-every4.trip")["entries"])
assert entries == len(travel.messages("trip"))
{"violations": len(found), "put_context calls": puts, "entries": entries}

# %% [markdown]
# ## Exercise 3
# Another MCP client: the `mcp` package's own streamable-HTTP client and
# `ClientSession`, talking to the same server, with no LangChain in between.

# %%
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

ids = {"vault_id": "ex3", "memory_id": "ex3.notes"}
async with streamablehttp_client(server.url) as (read, write, _), ClientSession(read, write) as s:
    await s.initialize()
    await s.call_tool("create_memory", ids)
    for idx, text in enumerate(["Lisbon in May, solo", "Prefers trains to flights"], start=1):
        await s.call_tool("add_entry", {**ids, "raw_entry": text, "summary": text,
                                        "tags": {"role": "user", "msg_idx": idx}})
    await s.call_tool("await_consistency", {"memory_id": ids["memory_id"]})
    found = await s.call_tool("search_memories", {"memory_id": ids["memory_id"], "query": "trains"})
hits = [e["raw_entry"] for e in found.structuredContent["entries"]]
assert not found.isError and hits == ["Prefers trains to flights"]
hits

# %% [markdown]
# Stop the server: no process is left behind.

# %%
await client.close()
server.stop()
assert not server.running and not port_open(server.port)
{"server running": server.running, "port open": port_open(server.port)}

# %% [markdown]
# # 06 · Going further: the auditor's rules, three conversations and the kill tests
#
# Notebook 06 proved one property of its guard: one entry per message, with
# its role and text. The package's capture graph promises more: a bootstrap
# per session, flushes on time, no write lost or doubled when the capture
# process or the server is killed. This notebook checks those promises with
# the auditor, which opens the memory server's SQLite file read-only and never
# looks at an agent's state. The ReAct runs use the scripted model that
# replays the original write-up's report (faults at fixed positions), so
# they show what the loop lets through, not what a model does.

# %%
import tempfile
from pathlib import Path

from agentstate.memory import MemoryClient, ServerProcess

workdir = Path(tempfile.mkdtemp(prefix="stage06-further-"))
server = ServerProcess(workdir / "memory.sqlite").start()  # stopped when the kernel exits
client = MemoryClient(server.url)
tools = await client.tools()
sorted(t.name for t in tools)

# %% [markdown]
# ## Bad input writes nothing
# Each refused call is an MCP error that says what is wrong; the memory's
# entries, call log, queue and contexts have the same sizes afterwards, and
# the unknown memory `nope` does not appear.

# %%
from agentstate.lessons.display import Table
from agentstate.memory import MemoryToolError, read_memory

demo = {"vault_id": "demo", "memory_id": "demo.chat"}
await client.call("create_memory", **demo)


def sizes(memory_id):
    return {
        k: len(v) if isinstance(v, list) else v
        for k, v in read_memory(server.db, memory_id).items()
    }


before = sizes("demo.chat")
bad = [
    ("list_entries", {**demo, "limit": 0}),
    ("list_entries", {**demo, "limit": 51}),
    ("add_entry", {**demo, "memory_id": "nope", "raw_entry": "x", "summary": "s"}),
    ("add_entry", {**demo, "vault_id": "", "raw_entry": "x", "summary": "s"}),
]
errors = []
for tool, args in bad:
    try:
        await client.call(tool, **args)
    except MemoryToolError as exc:
        errors.append({"call": tool, "error": str(exc).split(": ", 2)[-1][:70]})
assert len(errors) == len(bad) and sizes("demo.chat") == before
assert sum(sizes("nope").values()) == 0
Table(errors)

# %% [markdown]
# ## The capture rules, and what they ask of one chat
# One `add_entry` per message (content byte for byte, tags exactly
# `{role, msg_idx}`); a bootstrap (`get_context`, then `list_entries(limit=10)`)
# per `SESSION_START`; a flush (`await_consistency`, then `put_context`) after
# every 6th message and on `FLUSH_CONTEXT` and `SESSION_END`; control and
# `system` messages never stored.

# %%
from agentstate.memory import load, rules_table

travel = load("solo_travel")
rules = Table(rules_table(travel))
assert rules.column("flush after msg_idx") == [[6, 8, 12, 14]]
rules

# %% [markdown]
# ## The auditor on the replayed report
# The ReAct loop with the replaying model, audited. One row per broken rule.

# %%
from agentstate.memory import AS_REPORTED, CapturePolicy, ReactRun, audit, counts, policy_model

replayed = CapturePolicy(AS_REPORTED, one_call_per_step=True)
react = ReactRun(client, policy_model(replayed, "replayed"), tools, run="react")
await react.replay(travel)
await client.call("await_consistency", memory_id=react.memory_id("trip"))
violations = audit(server.db, travel, react.memories(travel))
assert set(counts(violations)) == {
    "duplicated",
    "wrong_role",
    "extra_entry",
    "missing_flush",
    "repeated_bootstrap",
}
Table(v.row() for v in violations)

# %% [markdown]
# The same store drawn message by message, beside the rules and the
# package's capture graph on the same chat:

# %%
from agentstate.memory import CaptureRun, draw_capture

graph_run = CaptureRun(client, policy_model(CapturePolicy(), "p"), tools, run="graph")
await graph_run.replay(travel)
await client.call("await_consistency", memory_id=graph_run.memory_id("trip"))
stores = {"ReAct, replayed": react, "capture graph": graph_run}
draw_capture(
    travel,
    "trip",
    {name: read_memory(server.db, r.memory_id("trip")) for name, r in stores.items()},
)

# %% [markdown]
# Each red mark is a row of the table above: `uu` a message stored twice,
# `u` where the assistant spoke (the wrong role), `F?` a flush missing, `BB`
# the bootstrap repeated, `+n` entries of the agent's own text.

# %% [markdown]
# ## Three conversations, three agents
# `solo_travel`, `hard_cases` (unicode and emoji, a code block, an empty
# message, a 25 KB message, a user who types "SESSION_END", an assistant who
# says "FLUSH_CONTEXT") and `two_threads` (two chats interleaved). Columns:
# `react` is the ReAct loop with the replaying model, `capture` the package's
# tool-only graph with a well-behaved model, `capture + faulty model` the same
# graph with the replaying model (its guard discards the model's calls, so
# this column shows the guard, not the model; notebook 06 proves the guard
# over random proposals).

# %%
from agentstate.memory import available, compare

results = {name: await compare(client, server.db, load(name)) for name in available()}
totals = Table(
    {"conversation": name, **{agent: len(vs) for agent, vs in found.items()}}
    for name, found in results.items()
)
assert all(n > 0 for n in totals.column("react"))
assert totals.column("capture") == totals.column("capture + faulty model") == [0, 0, 0]
totals

# %% [markdown]
# The same violations by kind, summed over the three conversations:

# %%
from agentstate.memory import side_by_side

merged = {
    agent: [v for found in results.values() for v in found[agent]] for agent in ("react", "capture")
}
by_kind = Table(side_by_side(merged))
assert by_kind.rows[-1]["capture"] == 0 and len(by_kind) - 1 == len(
    set(v.kind for v in merged["react"])
)
by_kind

# %% [markdown]
# ## The hard cases come back byte for byte
# Including the empty message and the user message that reads "SESSION_END"
# (a control message is a typed `SystemMessage`, never a guess from the text).

# %%
hard = load("hard_cases")
edge = CaptureRun(client, policy_model(CapturePolicy(), "p"), tools, run="edge")
await edge.replay(hard)
await client.call("await_consistency", memory_id=edge.memory_id("edge"))
stored = read_memory(server.db, edge.memory_id("edge"))["entries"]
same = Table(
    {
        "msg_idx": m.msg_idx,
        "role": m.role,
        "bytes": len(m.content.encode()),
        "identical": s["raw_entry"].encode() == m.content.encode(),
    }
    for m, s in zip(hard.messages("edge"), stored, strict=True)
)
texts = [m.content for m in hard.messages("edge")]
assert all(same.column("identical")) and {"", "SESSION_END", "FLUSH_CONTEXT"} <= set(texts)
assert max(same.column("bytes")) > 25_000
same

# %% [markdown]
# ## Kill the capture process
# `python -m agentstate.memory.capture.worker` captures a conversation with a SQLite
# checkpointer. It is SIGKILLed after a few events, wherever it is, and
# started again on the same checkpoint file: it first finishes the turn the
# dead process left (a write that already reached the server is not sent
# twice), then sends the rest.

# %%
import subprocess
import sys

chat = load("two_threads")
cmd = [
    sys.executable,
    "-m",
    "agentstate.memory.capture.worker",
    "--url",
    server.url,
    "--checkpoints",
    str(workdir / "checkpoints.sqlite"),
    "--conversation",
    "two_threads",
    "--run",
    "crash",
]
with subprocess.Popen([*cmd, "--pace", "0.03"], stdout=subprocess.PIPE, text=True) as proc:
    before_kill = [proc.stdout.readline() for _ in range(9)]
    proc.kill()
for t in chat.threads:  # what reached the server before the kill is applied, then read
    await client.call("await_consistency", memory_id=f"crash.{t}")
at_kill = {t: read_memory(server.db, f"crash.{t}") for t in chat.threads}
crashed = sum(len(stored["entries"]) for stored in at_kill.values())
assert 0 < crashed < sum(len(chat.messages(t)) for t in chat.threads)
# counted for the events the worker said it sent (one more may be in flight at the kill)
sent = {tuple(line.split()[1:]) for line in before_kill if line.startswith("sent")}
said = {(e.thread, e.msg_idx) for e in chat.events if (e.thread, str(e.position)) in sent}
{
    "events sent before the kill": len(sent),
    "their messages stored": sum(
        (t, e["tags"]["msg_idx"]) in said for t in at_kill for e in at_kill[t]["entries"]
    ),
}

# %%
again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
assert again.returncode == 0 and again.stdout.strip().endswith("done"), again.stderr[-500:]
for t in chat.threads:
    await client.call("await_consistency", memory_id=f"crash.{t}")
after_crash = audit(server.db, chat, {t: f"crash.{t}" for t in chat.threads})
assert after_crash == []
{"violations after the restart": len(after_crash)}

# %%
thread = next(t for t in chat.threads if len(at_kill[t]["entries"]) < len(chat.messages(t)))
restarted = read_memory(server.db, f"crash.{thread}")
draw_capture(chat, thread, {"at the kill": at_kill[thread], "after the restart": restarted})

# %% [markdown]
# At the kill the later messages and their flushes are missing; after the
# restart every message is stored once, with its flushes, and none twice.

# %% [markdown]
# ## Kill the server
# A second server with a slow writer, so that writes are still queued when it
# is SIGKILLed. The capture keeps going: its next call fails, the client waits
# for the server to come back (restarted a second later on the same file),
# checks whether the write it was sending already landed, and sends it only if
# not. The queued writes are applied by the new process.

# %%
import asyncio

from langgraph.checkpoint.memory import InMemorySaver

flaky = ServerProcess(workdir / "restart.sqlite", write_delay=0.2).start()
flaky_client = MemoryClient(flaky.url, retry_for=30)
run = CaptureRun(
    flaky_client,
    policy_model(CapturePolicy(), "p"),
    await flaky_client.tools(),
    run="restart",
    checkpointer=InMemorySaver(),
)
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

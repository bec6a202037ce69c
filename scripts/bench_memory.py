"""Benchmark lesson 06: messages captured per second, each layer beside its floor, in one run.

Starts ``agentstate.memory.service.server`` over streamable HTTP on 127.0.0.1 and
measures, per message of a generated conversation (SESSION_START, N messages,
SESSION_END), every layer from the bottom up:

- ``store``: the server's SQLite store alone, in this process (enqueue + apply);
- ``http``: a bare HTTP round trip to the same server (a path MCP does not
  serve: uvicorn and starlette only);
- ``mcp ping``: one MCP tool call over the client's kept session (``get_context``:
  a read plus its line in the call log, no queued write);
- ``graph step``: a one-node LangGraph graph with the capture graph's SQLite
  checkpointer (WAL, synchronous=NORMAL, ``durability="sync"``), no tool;
- ``direct``: the capture calls (add_entry, bootstrap, flushes) sent straight
  through ``MemoryClient``: what a message costs through the server;
- ``capture``: the tool-only graph with the offline policy and the SQLite
  checkpointer: the product;
- ``capture exit``: the same graph checkpointed once per turn
  (``durability="exit"``), not what the product does (exactly-once after a
  kill needs a checkpoint after every step): what that promise costs.

Each agent run ends with ``await_consistency`` and the auditor (a run with any
violation fails the benchmark). The floor of ``direct`` is store + HTTP round
trip per call; the floor of ``capture`` adds one no-op graph step per graph
step it takes. After the rounds, one more ``capture`` run goes under cProfile:
this process's own time by package (where a message's time goes).

The per-round figures and the profile go to ``data/results/memory_benchmark.json``
with their provenance (``scripts/bench_results.py``); ``scripts/bench_docs.py``
renders docs/benchmarks.md's tables from it (medians over the rounds, the ratio
actual/floor), and the same tables are printed here. It also writes a figure
of msg/s per layer (``--figure``).

    python scripts/bench_memory.py                        # 1000 messages, 3 rounds
    python scripts/bench_memory.py --messages 300 --rounds 1 --out /tmp/memory.json
    python scripts/bench_memory.py --fleet --rounds 3     # the fleet case (issue 35)

``--fleet`` runs only the fleet case (``scripts/bench_memory_fleet.py``): the
capture calls of 4 and 8 conversations side by side against the single SQLite
service and against 1, 2 and 4 replicas on one Postgres, each beside its floor,
with the CPU per message of the client, the replicas and Postgres; written to
``data/results/memory_fleet_benchmark.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TypedDict

sys.modules.setdefault("rfc3987_syntax", None)  # see agentstate.memory.service.server

import httpx  # noqa: E402
from bench_docs import render  # noqa: E402
from bench_results import start_provenance, write_results  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from tqdm import tqdm  # noqa: E402

from agentstate.memory.capture import calls  # noqa: E402
from agentstate.memory.capture.baselines.auditor import audit  # noqa: E402
from agentstate.memory.capture.checkpoints import async_capture_checkpointer  # noqa: E402
from agentstate.memory.capture.conversations import Conversation, synthetic  # noqa: E402
from agentstate.memory.capture.observer import VAULT, CaptureRun  # noqa: E402
from agentstate.memory.capture.policy import CapturePolicy, policy_model  # noqa: E402
from agentstate.memory.client import MemoryClient  # noqa: E402
from agentstate.memory.service.process import ServerProcess  # noqa: E402
from agentstate.memory.service.store import MemoryStore, new_entry_id  # noqa: E402

LAYERS = ("store", "http", "mcp ping", "graph step", "direct", "capture")


def planned_calls(conversation: Conversation, memory_id: str) -> list[dict]:
    """Every tool call a well-behaved capture makes for ``conversation``, in order."""
    out = []
    for event in conversation.events:
        if event.kind == "message":
            out.append(calls.add_entry(VAULT, memory_id, event.role, event.msg_idx, event.content))
            if calls.periodic_flush_due(event.msg_idx):
                out += calls.flush(VAULT, memory_id, "context")
        elif event.content == "SESSION_START":
            out += calls.bootstrap(VAULT, memory_id)
        else:
            out += calls.flush(VAULT, memory_id, "context")
    return out


def store_floor(workdir: Path, conversation: Conversation, run: str, bar: tqdm) -> float:
    """Seconds to enqueue and apply every message's entry in the store, no server."""
    store = MemoryStore(workdir / f"{run}-store.sqlite")
    store.create_memory(VAULT, "m")
    started = time.perf_counter()
    for event in conversation.events:
        if event.kind != "message":
            continue
        payload = {
            "entry_id": new_entry_id(),
            "vault_id": VAULT,
            "raw_entry": event.content,
            "summary": "s",
            "tags": {"role": event.role, "msg_idx": event.msg_idx},
        }
        store.enqueue("m", "entry", payload, {"tags": payload["tags"]})
        store.apply_many(store.pending())
        bar.update()
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


async def http_floor(server: ServerProcess, n: int, bar: tqdm) -> float:
    """Seconds for ``n`` bare HTTP round trips to the server (keep-alive, one client)."""
    base = server.url.rsplit("/", 1)[0]
    token = os.environ.get("AGENTSTATE_MEMORY_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers) as http:
        await http.get(f"{base}/bench-floor")
        started = time.perf_counter()
        for _ in range(n):
            await http.get(f"{base}/bench-floor")
            bar.update()
        return time.perf_counter() - started


async def ping_floor(client: MemoryClient, n: int, bar: tqdm) -> float:
    """Seconds for ``n`` MCP calls over the kept session (``get_context``: no queued write)."""
    await client.call("create_memory", vault_id=VAULT, memory_id="ping")
    started = time.perf_counter()
    for _ in range(n):
        await client.call("get_context", vault_id=VAULT, memory_id="ping")
        bar.update()
    return time.perf_counter() - started


class _Empty(TypedDict, total=False):
    n: int


async def graph_step_floor(workdir: Path, n: int, run: str, bar: tqdm) -> float:
    """Seconds for ``n`` invokes of a one-node graph with the capture checkpointer."""
    builder = StateGraph(_Empty)
    builder.add_node("step", lambda state: {"n": state.get("n", 0) + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    async with async_capture_checkpointer(workdir / f"{run}-noop.sqlite") as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "noop"}}
        started = time.perf_counter()
        for _ in range(n):
            await graph.ainvoke({"n": 0}, config, durability="sync")
            bar.update()
        return time.perf_counter() - started


def split(conversation: Conversation) -> list[Conversation]:
    """One conversation per thread (threads are captured concurrently)."""
    return [Conversation(t, t, tuple(conversation.thread_events(t))) for t in conversation.threads]


async def direct(client: MemoryClient, conversation: Conversation, run: str, bar) -> dict:
    """The capture calls sent straight through the client; threads side by side."""

    async def one(thread: Conversation) -> None:
        memory_id = f"{run}.{thread.name}"
        await client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
        for c in planned_calls(thread, memory_id):
            await client.call(c["name"], **c["args"])
            bar.update(c["name"] == "add_entry")

    await asyncio.gather(*(one(t) for t in split(conversation)))
    return {t: f"{run}.{t}" for t in conversation.threads}


async def capture(
    client, conversation, run: str, workdir: Path, bar, durability: str = "sync"
) -> tuple[dict, int]:
    """Replay through the tool-only graph (threads side by side); memories and graph steps."""
    async with async_capture_checkpointer(workdir / f"{run}.sqlite") as saver:
        agent = CaptureRun(
            client,
            policy_model(CapturePolicy(), "p"),
            await client.tools(),
            run=run,
            checkpointer=saver,
        )
        steps = 0

        async def one(thread: Conversation) -> None:
            nonlocal steps
            for event in thread.events:
                await agent.ensure_memory(event.thread)
                message = event.to_message()
                async for _ in agent.graph.astream(
                    {"messages": [message], "turn": message},
                    agent.config(event.thread),
                    durability=durability,
                    stream_mode="updates",
                ):
                    steps += 1
                bar.update(event.kind == "message")

        await asyncio.gather(*(one(t) for t in split(conversation)))
    return agent.memories(conversation), steps + len(conversation.events)  # + input step


async def one_round(
    server, conversation, n: int, workdir: Path, bar, concurrent: Conversation | None
) -> dict[str, float]:
    """Seconds per message for every layer, measured back to back in one round."""
    messages = sum(len(conversation.messages(t)) for t in conversation.threads)
    planned = planned_calls(conversation, "x")
    per_call = {}
    bar.set_description(f"round {n + 1}: store")
    per_call["store"] = store_floor(workdir, conversation, f"r{n}", bar) / messages
    bar.set_description(f"round {n + 1}: http")
    per_call["http"] = await http_floor(server, messages, bar) / messages
    async with MemoryClient(server.url) as client:
        bar.set_description(f"round {n + 1}: mcp ping")
        per_call["mcp ping"] = await ping_floor(client, messages, bar) / messages
        bar.set_description(f"round {n + 1}: graph step")
        per_call["graph step"] = await graph_step_floor(workdir, messages, f"r{n}", bar) / messages
        results: dict[str, float] = {}
        steps = 0
        runs = [("direct", conversation), ("capture", conversation), ("capture exit", conversation)]
        if concurrent is not None:
            width = len(concurrent.threads)
            runs += [(f"direct x{width}", concurrent), (f"capture x{width}", concurrent)]
        for agent, conv in runs:
            bar.set_description(f"round {n + 1}: {agent}")
            run = f"{agent.replace(' ', '-')}{n}{'c' if conv is concurrent else ''}"
            started, cpu = time.perf_counter(), time.process_time()
            if agent.startswith("direct"):
                memories = await direct(client, conv, run, bar)
            else:
                durability = "exit" if agent == "capture exit" else "sync"
                memories, taken = await capture(client, conv, run, workdir, bar, durability)
                if agent == "capture":
                    steps = taken
            for memory_id in memories.values():
                await client.call("await_consistency", memory_id=memory_id)
            count = sum(len(conv.messages(t)) for t in conv.threads)
            results[agent] = (time.perf_counter() - started) / count
            results[f"{agent} cpu"] = (time.process_time() - cpu) / count
            violations = audit(server.db, conv, memories)
            if violations:
                raise SystemExit(f"{agent}: the auditor found {violations[0]} (+{len(violations)})")
    calls_per_message = len(planned) / messages
    direct_floor = calls_per_message * (per_call["store"] + per_call["http"])
    return {
        **per_call,
        **results,
        "calls_per_message": calls_per_message,
        "steps_per_message": steps / messages,
        "direct_floor": direct_floor,
        "capture_floor": direct_floor + steps / messages * per_call["graph step"],
    }


STDLIB = Path(sysconfig.get_paths()["stdlib"])


def module_of(filename: str, function: str) -> str:
    """The top-level package a profiled function belongs to (built-ins by their type's module)."""
    path = Path(filename)
    if "site-packages" in path.parts:
        return path.parts[path.parts.index("site-packages") + 1].removesuffix(".py")
    if "agentstate" in path.parts:
        return "agentstate"
    if path.is_relative_to(STDLIB):
        return path.relative_to(STDLIB).parts[0].removesuffix(".py")
    if filename == "~":  # a built-in: "<method 'poll' of 'select.epoll' objects>"
        if " of '" in function:
            return function.split(" of '", 1)[1].split(".", 1)[0].split("'", 1)[0]
        name = function.removeprefix("<built-in method ").removesuffix(">")
        return name.split(".", 1)[0] if "." in name else "builtins"
    return "other"


async def profiled_capture(server, conversation: Conversation, workdir: Path) -> dict:
    """One more sequential ``capture`` run under cProfile: own seconds by package."""
    async with MemoryClient(server.url) as client:
        profiler = cProfile.Profile()
        profiler.enable()
        memories, _ = await capture(client, conversation, "profile", workdir, tqdm(disable=True))
        for memory_id in memories.values():
            await client.call("await_consistency", memory_id=memory_id)
        profiler.disable()
    own: Counter[str] = Counter()
    for (filename, _, function), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        own[module_of(filename, function)] += row[2]  # tottime: time in the function itself
    return {"own_s_by_module": {k: round(v, 4) for k, v in own.most_common()}}


def figure(medians: dict[str, float], layers: list[str], path: Path) -> None:
    """A bar chart of msg/s (or calls/s for the floors) per layer."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    rates = [1 / medians[k] for k in layers]
    colours = ["#9ab" if k in LAYERS[:4] else "#37a" for k in layers]
    bars = ax.barh(layers, rates, color=colours)
    ax.bar_label(bars, labels=[f"{r:,.0f}" for r in rates], padding=3, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no overlapping labels
    ax.set_xlabel("per second (log scale): floors per call or step, agents per message")
    ax.set_title("Memory capture, each layer (medians)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=4,
        help="also capture this many conversations side by side (1: sequential only)",
    )
    parser.add_argument("--out", type=Path, help="write the results here instead of data/results")
    parser.add_argument(
        "--figure", type=Path, help="where to write the figure (default: the run's temp folder)"
    )
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="only the fleet case: 1, 2 and 4 replicas on one Postgres against the single SQLite "
        "service, 4 and 8 conversations side by side (data/results/memory_fleet_benchmark.json)",
    )
    parser.add_argument(
        "--fleet-messages", type=int, default=60, help="fleet case: messages per conversation"
    )
    args = parser.parse_args(argv)
    if args.fleet:
        from bench_memory_fleet import run_fleet

        if args.fleet_messages < 12 or args.rounds < 1:
            parser.error("--fleet-messages must be >= 12 and --rounds >= 1")
        path = run_fleet(args, planned_calls)
        print("\n" + render("memory_fleet", json.loads(path.read_text())))
        print(f"written {path}", file=sys.stderr)
        return 0
    if args.messages < 12 or args.rounds < 1:
        parser.error("--messages must be >= 12 and --rounds >= 1")
    provenance = start_provenance("bench_memory.py", argv, ["mcp", "httpx", "uvicorn"])
    conversation = synthetic(args.messages, thread="t0")
    concurrent = None
    if args.threads > 1:
        events = []
        for t in range(args.threads):
            events += synthetic(args.messages // args.threads, thread=f"c{t}").events
        concurrent = Conversation("concurrent", "concurrent", tuple(events))
    agents = 3 + (2 if concurrent else 0)
    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    rounds = []
    # per round: the four floors and each agent count the messages
    total = (4 + agents) * args.messages * args.rounds
    with (
        ServerProcess(workdir / "memory.sqlite") as server,
        tqdm(total=total, unit="msg", file=sys.stderr) as bar,
    ):
        for n in range(args.rounds):
            rounds.append(asyncio.run(one_round(server, conversation, n, workdir, bar, concurrent)))
        bar.set_description("profile: capture")
        profile = asyncio.run(profiled_capture(server, conversation, workdir))
    data = {
        "messages": args.messages,
        "threads_side_by_side": args.threads if concurrent else 1,
        "rounds": rounds,
        "profile": profile,
    }
    path = write_results("memory", provenance, data, args.out)
    recorded = json.loads(path.read_text())
    print("\n" + render("memory", recorded) + "\n\n" + render("memory/profile", recorded))
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    layers = [k for k in rounds[0] if k in LAYERS or k.startswith(("direct", "capture"))]
    layers = [k for k in layers if not k.endswith((" cpu", "_floor"))]
    figure_path = args.figure or workdir / "bench_memory.png"
    figure(med, layers, figure_path)
    print(f"figure: {figure_path}\nwritten {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark stage 06: messages captured per second through the real memory server.

Starts ``agentstate.memory.server`` over streamable HTTP on 127.0.0.1, replays
a generated conversation of N messages (plus SESSION_START and SESSION_END)
through an agent, waits until the store is consistent, runs the auditor (a
run with any violation fails the benchmark), and prints the median over the
rounds. The agents:

- ``capture``: the tool-only graph (offline policy model) with a checkpointer;
- ``react``: the prebuilt agent with a well-behaved offline model, for scale;
- ``direct``: the same add_entry/flush calls sent straight through the client,
  no agent, to show what the server and MCP transport cost on their own.

    python scripts/bench_memory.py                       # 1000 messages, 3 rounds
    python scripts/bench_memory.py --messages 200 --rounds 1 --agents capture
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.modules.setdefault("rfc3987_syntax", None)  # see agentstate.memory.server

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402

from agentstate.memory import calls  # noqa: E402
from agentstate.memory.auditor import audit  # noqa: E402
from agentstate.memory.client import MemoryClient  # noqa: E402
from agentstate.memory.conversations import Conversation, synthetic  # noqa: E402
from agentstate.memory.observer import VAULT, CaptureRun, ReactRun  # noqa: E402
from agentstate.memory.policy import CapturePolicy, policy_model  # noqa: E402
from agentstate.memory.process import ServerProcess  # noqa: E402


async def direct(client: MemoryClient, conversation: Conversation, run: str) -> dict[str, str]:
    """The capture calls without an agent: the floor set by server + MCP transport."""
    memories = {}
    for thread in conversation.threads:
        memories[thread] = memory_id = f"{run}.{thread}"
        await client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
    for event in conversation.events:
        memory_id = memories[event.thread]
        if event.kind == "message":
            planned = [calls.add_entry(VAULT, memory_id, event.role, event.msg_idx, event.content)]
            if calls.periodic_flush_due(event.msg_idx):
                planned += calls.flush(VAULT, memory_id, "context")
        elif event.content == "SESSION_START":
            planned = calls.bootstrap(VAULT, memory_id)
        else:
            planned = calls.flush(VAULT, memory_id, "context")
        for c in planned:
            await client.call(c["name"], **c["args"])
    return memories


async def one_round(
    agent: str,
    server: ServerProcess,
    conversation: Conversation,
    n: int,
    checkpoints: str,
    workdir: Path,
) -> dict[str, float]:
    run = f"{agent}{n}"
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        started = time.perf_counter()
        if agent == "direct":
            memories = await direct(client, conversation, run)
        elif agent == "react":
            react = ReactRun(
                client,
                policy_model(CapturePolicy(one_call_per_step=True), "p"),
                tools,
                run=run,
                checkpointer=InMemorySaver(),
            )
            await react.replay(conversation)
            memories = react.memories(conversation)
        elif checkpoints == "sqlite":
            async with AsyncSqliteSaver.from_conn_string(str(workdir / f"{run}.sqlite")) as saver:
                capture = CaptureRun(
                    client, policy_model(CapturePolicy(), "p"), tools, run=run, checkpointer=saver
                )
                await capture.replay(conversation)
            memories = capture.memories(conversation)
        else:
            capture = CaptureRun(
                client,
                policy_model(CapturePolicy(), "p"),
                tools,
                run=run,
                checkpointer=InMemorySaver(),
            )
            await capture.replay(conversation)
            memories = capture.memories(conversation)
        sent = time.perf_counter()
        for memory_id in memories.values():
            await client.call("await_consistency", memory_id=memory_id)
        consistent = time.perf_counter()
    violations = audit(server.db, conversation, memories)
    if violations:
        raise SystemExit(
            f"{agent}: the auditor found {len(violations)} violations, first: {violations[0]}"
        )
    messages = sum(len(conversation.messages(t)) for t in conversation.threads)
    return {
        "messages_per_s": messages / (consistent - started),
        "seconds": consistent - started,
        "drain_s": consistent - sent,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="split the messages over this many conversations (one thread each)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agents", default="direct,capture,react")
    parser.add_argument(
        "--checkpointer",
        choices=["memory", "sqlite"],
        default="sqlite",
        help="the capture graph's checkpointer",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    per_thread = args.messages // args.threads
    events = []
    for t in range(args.threads):
        events += synthetic(per_thread, thread=f"t{t}").events
    conversation = Conversation(f"synthetic_{args.messages}", "benchmark", tuple(events))
    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    results = {}
    with ServerProcess(workdir / "memory.sqlite") as server:
        for agent in args.agents.split(","):
            rounds = []
            for n in range(args.rounds):
                rounds.append(
                    asyncio.run(
                        one_round(agent, server, conversation, n, args.checkpointer, workdir)
                    )
                )
                print(
                    f"{agent} round {n + 1}: {rounds[-1]['messages_per_s']:.1f} msg/s "
                    f"({rounds[-1]['seconds']:.1f} s, auditor: 0 violations)",
                    flush=True,
                )
            results[agent] = {
                "median_messages_per_s": round(
                    statistics.median(r["messages_per_s"] for r in rounds), 1
                ),
                "median_seconds": round(statistics.median(r["seconds"] for r in rounds), 2),
                "rounds": len(rounds),
            }
    summary = {
        "messages": per_thread * args.threads,
        "threads": args.threads,
        "checkpointer": args.checkpointer,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": results,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a checkpointer costs per turn: in memory, a SQLite file, a real Postgres server.

Each round runs one stage 02 turn (N parallel ``store_requirement`` calls,
then a final reply) on a new thread with each checkpointer, the order
rotated every round, and prints the median wall time per turn and the
median ratio to the in-memory saver, all from this one run. It also times
the throwaway server: ``initdb`` plus first start, and a restart on the same
data directory. The Postgres server is a real one on 127.0.0.1
(:mod:`agentstate.postgres_server`) with ``fsync`` on, as durable as the
SQLite file (whose commits are synced too), and is stopped at the end.

    .venv/bin/python scripts/bench_checkpointers.py [--rounds 20] [--fields 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from agentstate.fixtures import label_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply
from agentstate.persistence import memory_checkpointer, postgres_checkpointer, sqlite_checkpointer
from agentstate.postgres_server import PostgresServer
from agentstate.rds import build_reducer_agent


def model(n_fields: int, turns: int) -> ScriptedChatModel:
    batch = reply(*store_calls(label_fields(n_fields)))
    return ScriptedChatModel(script=[batch, reply(text="Done.")] * turns)


def turn_ms(agent, thread: str) -> float:
    start = time.perf_counter()
    agent.invoke(user_turn(), {"configurable": {"thread_id": thread}})
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--fields", type=int, default=5)
    args = parser.parse_args()
    warmup = 2
    turns = args.rounds + warmup

    t0 = time.perf_counter()
    with ExitStack() as stack:
        server = stack.enter_context(PostgresServer(fsync=True))  # durable, like the SQLite file
        start_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        server.restart()
        restart_ms = (time.perf_counter() - t0) * 1000
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        savers = {
            "memory": memory_checkpointer(),
            "sqlite": stack.enter_context(sqlite_checkpointer(folder / "threads.sqlite")),
            "postgres": stack.enter_context(postgres_checkpointer(server.create_database("bench"))),
        }
        agents = {
            name: build_reducer_agent(model(args.fields, turns), checkpointer=saver)
            for name, saver in savers.items()
        }
        samples: dict[str, list[float]] = {name: [] for name in agents}
        names = list(agents)
        for i in range(turns):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                ms = turn_ms(agents[name], f"round-{i}")
                if i >= warmup:
                    samples[name].append(ms)

    base = samples["memory"]
    print(f"throwaway server: initdb + start {start_ms:.0f} ms, restart {restart_ms:.0f} ms")
    print(f"one stage 02 turn, {args.fields} parallel fields, median of {args.rounds} rounds:")
    print("| checkpointer | ms per turn | ratio to memory (median per round) |")
    print("|---|---|---|")
    for name, values in samples.items():
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"| {name} | {statistics.median(values):.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()

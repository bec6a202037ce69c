"""What a checkpointer costs per turn: in memory, a SQLite file, a real Postgres server.

Each round runs one lesson 02 turn (N parallel ``store_requirement`` calls,
then a final reply) on a new thread with each checkpointer, the order
rotated every round, and prints the median wall time per turn and the
median ratio to the in-memory saver, all from this one run. It also times
the throwaway server: ``initdb`` plus first start, and a restart on the same
data directory. The Postgres server is a real one on 127.0.0.1
(:mod:`agentstate.servers.postgres`) with ``fsync`` on, as durable as the
SQLite file (whose commits are synced too), and is stopped at the end.

The raw samples go to ``data/results/checkpointers_benchmark.json`` with their
provenance (``scripts/bench_results.py``); ``scripts/bench_docs.py`` renders
docs/postgres.md's figures from it, and the same figures are printed here.

    .venv/bin/python scripts/bench_checkpointers.py [--rounds 20] [--fields 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench_docs import render
from bench_results import start_provenance, write_results

from agentstate.lessons.fixtures import label_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply
from agentstate.persistence import memory_checkpointer, postgres_checkpointer, sqlite_checkpointer
from agentstate.rds import build_reducer_agent
from agentstate.servers.postgres import PostgresServer, postgres_bindir


def model(n_fields: int, turns: int) -> ScriptedChatModel:
    batch = reply(*store_calls(label_fields(n_fields)))
    return ScriptedChatModel(script=[batch, reply(text="Done.")] * turns)


def turn_ms(agent, thread: str) -> float:
    start = time.perf_counter()
    agent.invoke(user_turn(), {"configurable": {"thread_id": thread}})
    return (time.perf_counter() - start) * 1000


def postgres_version() -> str:
    """``postgres --version`` of the server programs the benchmark started."""
    done = subprocess.run(
        [postgres_bindir() / "postgres", "--version"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--fields", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the results here instead of data/results")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (quartiles of the per-round ratio)")
    provenance = start_provenance(
        "bench_checkpointers.py",
        argv,
        ["langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "psycopg"],
    )
    provenance["postgres"] = postgres_version()
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

    data = {
        "fields": args.fields,
        "rounds": args.rounds,
        "initdb_and_start_ms": round(start_ms, 1),
        "restart_ms": round(restart_ms, 1),
        "turn_ms": {name: [round(v, 3) for v in values] for name, values in samples.items()},
    }
    path = write_results("checkpointers", provenance, data, args.out)
    print(render("checkpointers", json.loads(path.read_text())))
    print(f"written {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

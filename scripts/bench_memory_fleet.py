"""The fleet case of ``scripts/bench_memory.py --fleet``: replicas on one Postgres against SQLite.

Runs the capture calls of W conversations side by side (W = 4 and 8; each
conversation its own ``MemoryClient``, conversation i through replica i mod R)
against the single SQLite service and against 1, 2 and 4 replicas of the
service on one throwaway Postgres (:mod:`agentstate.servers.postgres`). Per
run: messages per second, the auditor over the database (any violation fails
the benchmark: exactly once is part of the result), and the CPU each tier
spent per message (the client process, the server replicas, Postgres), read
from ``/proc``. The floors, measured in the same round on the same backend:
the store alone in this process (enqueue + apply one entry), a bare HTTP
round trip to a replica, and so the service floor ``calls/msg x (store +
http)``. Figures go to ``data/results/memory_fleet_benchmark.json``;
``scripts/bench_docs.py`` renders the table in docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from bench_results import start_provenance, write_results
from tqdm import tqdm

from agentstate.memory.capture.baselines.auditor import audit
from agentstate.memory.capture.conversations import Conversation, synthetic
from agentstate.memory.capture.observer import VAULT
from agentstate.memory.client import MemoryClient
from agentstate.memory.service.process import ServerProcess
from agentstate.memory.service.store import new_entry_id
from agentstate.memory.service.stores import open_store
from agentstate.memory.service.targets import is_postgres
from agentstate.servers.postgres import PostgresServer, process_tree

TICKS = os.sysconf("SC_CLK_TCK")
SETUPS = [("sqlite", 1), ("postgres", 1), ("postgres", 2), ("postgres", 4)]


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime (and reaped children's) of ``pids``, in seconds; a gone pid counts 0."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / TICKS


def postgres_pids(server: PostgresServer | None) -> list[int]:
    """The postmaster and its live children (backends, writer, checkpointer, ...)."""
    if server is None or server.process is None:
        return []
    return sorted(pid for pid, _ in process_tree(server.process.pid))


def conversations(width: int, per: int, run: str) -> list[Conversation]:
    return [synthetic(per, thread=f"{run}c{n}") for n in range(width)]


async def drive(urls: list[str], convs: list[Conversation], planned) -> None:
    """Every conversation's capture calls, side by side, conversation i through replica i."""

    async def one(n: int, conv: Conversation) -> None:
        thread = conv.threads[0]
        async with MemoryClient(urls[n % len(urls)]) as client:
            await client.call("create_memory", vault_id=VAULT, memory_id=thread)
            for c in planned(conv, thread):
                await client.call(c["name"], **c["args"])
            await client.call("await_consistency", memory_id=thread)

    await asyncio.gather(*(one(n, c) for n, c in enumerate(convs)))


def store_floor(db, messages: int) -> float:
    """Seconds per message to enqueue and apply one entry in the store alone, in process."""
    store = open_store(db)
    store.create_memory(VAULT, "floor")
    started = time.perf_counter()
    for n in range(messages):
        payload = {"entry_id": new_entry_id(), "vault_id": VAULT, "raw_entry": f"m{n}",
                   "summary": "s", "tags": {"role": "user", "msg_idx": n + 1}}  # fmt: skip
        store.enqueue("floor", "entry", payload, {"tags": payload["tags"]})
        store.drain()
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed / messages


async def http_floor(url: str, n: int) -> float:
    """Seconds per bare HTTP round trip to a replica (keep-alive, no MCP)."""
    import httpx

    base = url.rsplit("/", 1)[0]
    async with httpx.AsyncClient() as http:
        await http.get(f"{base}/bench-floor")
        started = time.perf_counter()
        for _ in range(n):
            await http.get(f"{base}/bench-floor")
        return (time.perf_counter() - started) / n


def one_setup(backend: str, replicas: int, widths: list[int], per: int, round_: int,
              workdir: Path, pg: PostgresServer | None, planned, bar) -> list[dict]:  # fmt: skip
    """Every width on one setup (a fresh database), the floors first; one row per width."""
    tag = f"r{round_}-{backend}{replicas}"
    db: str | Path = workdir / f"{tag}.sqlite"
    if backend == "postgres":
        assert pg is not None
        db = pg.create_database(tag.replace("-", "_"))
    servers = [ServerProcess(db, log_path=workdir / f"{tag}-{n}.log") for n in range(replicas)]
    rows = []
    try:
        for server in servers:
            server.start(timeout=90)
        urls = [s.url for s in servers]
        floor_db = db if is_postgres(db) else workdir / f"{tag}-floor.sqlite"
        store_s = store_floor(floor_db, 200)
        http_s = asyncio.run(http_floor(urls[0], 200))
        for width in widths:
            run = f"{tag}w{width}"
            convs = conversations(width, per, run)
            messages = width * per
            calls = sum(len(planned(c, "x")) for c in convs)
            bar.set_description(f"round {round_ + 1}: {backend} x{replicas}, {width} side by side")
            server_pids = [s.pid for s in servers if s.pid]
            before = (time.process_time(), cpu_seconds(server_pids), cpu_seconds(postgres_pids(pg)))
            started = time.perf_counter()
            asyncio.run(drive(urls, convs, planned))
            wall = time.perf_counter() - started
            after = (time.process_time(), cpu_seconds(server_pids), cpu_seconds(postgres_pids(pg)))
            for conv in convs:
                thread = conv.threads[0]
                found = audit(db, conv, {thread: thread})
                if found:
                    raise SystemExit(f"{backend} x{replicas}: the auditor found {found[0]}")
            bar.update(messages)
            rows.append({
                "backend": backend,
                "replicas": replicas,
                "width": width,
                "messages": messages,
                "calls_per_message": calls / messages,
                "seconds": wall,
                "store_floor_s": store_s,
                "http_floor_s": http_s,
                "client_cpu_s": (after[0] - before[0]) / messages,
                "servers_cpu_s": (after[1] - before[1]) / messages,
                "postgres_cpu_s": (after[2] - before[2]) / messages if pg else 0.0,
            })  # fmt: skip
    finally:
        for server in servers:
            server.stop()
    return rows


def run_fleet(args, planned) -> Path:
    """All setups, ``args.rounds`` times; writes the data file and returns its path."""
    provenance = start_provenance(
        "bench_memory.py", sys.argv[1:], ["mcp", "httpx", "uvicorn", "psycopg", "psycopg-pool"]
    )
    widths = [4, 8]
    per = args.fleet_messages
    workdir = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    rows: list[dict] = []
    total = args.rounds * len(SETUPS) * sum(widths) * per
    with PostgresServer() as pg, tqdm(total=total, unit="msg", file=sys.stderr) as bar:
        postgres_version = pg.bindir.parent.name
        for round_ in range(args.rounds):
            for backend, replicas in SETUPS:
                rows += one_setup(backend, replicas, widths, per, round_, workdir,
                                  pg if backend == "postgres" else None, planned, bar)  # fmt: skip
    data = {
        "messages_per_conversation": per,
        "widths": widths,
        "setups": [f"{b} x{r}" for b, r in SETUPS],
        "postgres_major": postgres_version,
        "rounds": args.rounds,
        "rows": rows,
    }
    return write_results("memory_fleet", provenance, data, args.out)

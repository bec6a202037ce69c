"""The memory service as a fleet: replicas on one Postgres, and what the benchmark recorded.

Notebook 06's going-further notebook on the fleet (``going_further/06_memory_fleet``)
and ``tests/test_memory_fleet.py`` start replicas with :class:`Fleet`, catch a
replica in the middle of a write with :func:`write_in_flight` (to kill it
there), and show the recorded fleet benchmark with :func:`fleet_rows`
(``data/results/memory_fleet_benchmark.json``, written by
``scripts/bench_memory.py --fleet``, which renders the same medians into
docs/benchmarks.md).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from agentstate.lessons.datafiles import data_path
from agentstate.memory.service.process import ServerProcess

BENCHMARK_FILE = "results/memory_fleet_benchmark.json"
FIGURES = ("seconds", "messages", "calls_per_message", "store_floor_s", "http_floor_s",
           "client_cpu_s", "servers_cpu_s", "postgres_cpu_s")  # fmt: skip


class Fleet:
    """``replicas`` memory server processes over the one database ``url``.

    A context manager: all started on enter (each on a free port, its log in
    ``folder``), all stopped on exit. ``options`` go to every
    :class:`~agentstate.memory.service.process.ServerProcess` (``write_delay``,
    ``db_retry_for``).
    """

    def __init__(self, url: str, folder: str | Path, replicas: int, **options: Any) -> None:
        folder = Path(folder)
        self.url = url
        self.replicas = [
            ServerProcess(url, log_path=folder / f"replica-{n}-{id(self):x}.log", **options)
            for n in range(replicas)
        ]

    @property
    def urls(self) -> list[str]:
        """The replicas' MCP endpoints, for ``MemoryClient(fleet.urls)``."""
        return [replica.url for replica in self.replicas]

    def start(self, timeout: float = 60.0) -> Fleet:
        """Start every replica (and stop those started, if one fails)."""
        try:
            for replica in self.replicas:
                replica.start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every replica still running."""
        for replica in self.replicas:
            replica.stop()

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def write_in_flight(url: str, pid: int | None) -> bool:
    """True while the replica ``pid`` holds a claimed write uncommitted (its writer's transaction).

    Read from ``pg_stat_activity``: each replica's connections carry
    ``application_name = agentstate-memory-<pid>``.
    """
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND state = 'idle in transaction'",
            (f"agentstate-memory-{pid}",),
        ).fetchone()
    return bool(row and row[0])


def load_fleet_benchmark(path: str | Path | None = None) -> dict[str, Any]:
    """The recorded fleet benchmark (``data/results/memory_fleet_benchmark.json``)."""
    return json.loads(Path(path or data_path(BENCHMARK_FILE)).read_text())


def fleet_medians(data: dict[str, Any]) -> dict[tuple[str, int, int], dict[str, float]]:
    """(backend, replicas, side by side) -> the median over the rounds of each figure.

    ``rate`` is messages per second; ``floor_rate`` the service floor's
    (calls per message x (store alone + a bare HTTP round trip)).
    """
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for row in data["rows"]:
        groups.setdefault((row["backend"], row["replicas"], row["width"]), []).append(row)
    out = {}
    for key, rows in groups.items():
        m = {f: statistics.median(r[f] for r in rows) for f in FIGURES}
        m["rate"] = statistics.median(r["messages"] / r["seconds"] for r in rows)
        m["floor_rate"] = 1 / (m["calls_per_message"] * (m["store_floor_s"] + m["http_floor_s"]))
        out[key] = m
    return out


def fleet_rows(data: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per setup and width: msg/s, its ratio to SQLite, and CPU ms per message by tier."""
    med = fleet_medians(load_fleet_benchmark() if data is None else data)
    rows = []
    for backend, replicas, width in sorted(med, key=lambda k: (k[2], k[0] != "sqlite", k[1])):
        m = med[(backend, replicas, width)]
        setup = "SQLite" if backend == "sqlite" else f"Postgres x{replicas}"
        rows.append({
            "setup": setup,
            "side by side": width,
            "msg/s": round(m["rate"]),
            "to SQLite": round(m["rate"] / med[("sqlite", 1, width)]["rate"], 2),
            "client cpu ms": round(m["client_cpu_s"] * 1e3, 2),
            "servers cpu ms": round(m["servers_cpu_s"] * 1e3, 2),
            "postgres cpu ms": round(m["postgres_cpu_s"] * 1e3, 2),
        })  # fmt: skip
    return rows

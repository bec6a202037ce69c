"""The docs' performance figures, rendered from the data files under ``data/results/``.

A figure in ``docs/`` sits in a generated block::

    <!-- results:memory -->
    ...what render("memory", data/results/memory_benchmark.json) returns...
    <!-- /results:memory -->

The block's name up to its first ``/`` names the data file (written by
``scripts/bench_<name>.py``; ``engine_restart`` names
``data/results/engine_restart.json``, the restart case ``scripts/bench_experts.py``
writes apart). Every figure is computed here from the raw samples the file
records (medians, per-round ratios, quartiles), or, for the experts (lesson 05),
by the tables of ``agentstate.experts.results`` and
``agentstate.experts.restart_benchmark``, so a figure changes only when its
benchmark is re-run. ``tests/test_benchmark_docs.py`` runs the check.

    .venv/bin/python scripts/bench_docs.py            # --check: list stale blocks, exit 1 if any
    .venv/bin/python scripts/bench_docs.py --write    # re-render every block in place
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import flake_hunt
from bench_results import RESULTS, ROOT, results_path

from agentstate.experts.restart_benchmark import restart_rows
from agentstate.experts.results import (
    case_rows,
    markdown_table,
    mermaid_bars,
    summary_rows,
    sweep_rows,
)

DOCS = ROOT / "docs"
BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w/]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.DOTALL,
)
# what the memory server was asked to reach (issue 16), in messages per second
TARGETS = {"direct": 150, "capture": 100}
# the share of the ideal saving the prefix-cached experts aim for (lesson 05)
EXPERTS_TARGET = 0.98
# data files not named <name>_benchmark.json
DATA_FILES = {
    "engine_restart": RESULTS / "engine_restart.json",
    "flake_hunt": RESULTS / "flake_hunt.json",
}

Data = dict[str, Any]


def data_file(stem: str) -> Path:
    """The data file a block's name (up to its first ``/``) names."""
    return DATA_FILES.get(stem) or results_path(stem)


def load_data(stem: str) -> Data:
    data: Data = json.loads(data_file(stem).read_text())
    return data


def table(header: list[str], rows: Iterable[Iterable[Any]], align: str = "") -> str:
    """A Markdown table; ``align`` holds one of ``l``/``r`` per column (default: left)."""
    marks = ["---:" if a == "r" else "---" for a in align.ljust(len(header), "l")]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def provenance_line(data: Data, extra: str = "") -> str:
    """Where the figures come from, in one sentence (load average: 1-minute, before and after)."""
    p = data["provenance"]
    before, after = p["load_average_before"], p["load_average_after"]
    load = f"load average {before[0]:.1f} before and {after[0]:.1f} after" if before else "load n/a"
    libraries = ", ".join(f"{k} {v}" for k, v in p["libraries"].items() if v)
    commit = (p["git_commit"] or "unknown")[:10] + (
        " + uncommitted changes" if p["git_dirty"] else ""
    )
    return (
        f"Recorded {p['date']} by `{p['command']}` at commit {commit}, on {p['cores']} cores "
        f"({p['cpu']}) shared with other work, {load}; python {p['python']}, {libraries}"
        f"{extra}. Compare the ratios within the run, not the absolute times."
    )


def ratio_stats(numerators: list[float], denominators: list[float]) -> tuple[float, float, float]:
    """Median, first and third quartile of the paired ratios (pairs cancel the machine's drift)."""
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return median, q1, q3


# --- lesson 06: memory capture (scripts/bench_memory.py) -------------------------------------


def memory_medians(data: Data) -> dict[str, float]:
    """The median over the rounds of every figure a round records (seconds per message or call)."""
    rounds = data["rounds"]
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def render_memory(data: Data) -> str:
    m = memory_medians(data)
    w = data["threads_side_by_side"]
    floors = [
        ("store", "enqueue + apply one entry (SQLite, in process)"),
        ("http", "bare HTTP round trip on loopback (uvicorn, no MCP)"),
        ("mcp ping", "one MCP request over the kept session"),
        ("graph step", "one no-op graph step with the capture checkpointer"),
    ]
    agents = [
        ("direct", f"the capture calls without an agent ({m['calls_per_message']:.2f} calls/msg)"),
        (
            "capture",
            f"the tool-only graph, SQLite checkpoints ({m['steps_per_message']:.2f} steps/msg)",
        ),
        ("capture exit", "the same graph, one checkpoint per turn (not exactly-once)"),
    ]
    if w > 1:
        agents += [(f"direct x{w}", f"{w} conversations side by side")]
        agents += [(f"capture x{w}", f"{w} conversations side by side")]
    rows = [(k, what, f"{m[k] * 1e3:.2f}", f"{1 / m[k]:,.0f}", "", "", "") for k, what in floors]
    for k, what in agents:
        floor = m[f"{k.split()[0]}_floor"]
        rate = f"{1 / m[k]:,.0f}"
        shown = f"**{rate}**" if k in TARGETS else rate
        cpu = m[f"{k} cpu"]
        rows.append((k, what, f"{m[k] * 1e3:.2f}", shown, f"{floor * 1e3:.2f}",
                     f"{m[k] / floor:.2f}", f"{cpu * 1e3:.2f}"))  # fmt: skip
    header = ["layer", "what it is", "ms", "per s", "floor ms", "actual / floor", "cpu ms"]
    rate = {k: 1 / m[k] for k in TARGETS}
    verdict = {k: f"target {t}: {'met' if rate[k] >= t else 'not met'}" for k, t in TARGETS.items()}
    side = (
        f"; {w} conversations side by side: {1 / m[f'capture x{w}']:.0f} msg/s against "
        f"{rate['capture']:.0f} one at a time"
        if w > 1
        else ""
    )
    exit_saving = 1 - m["capture exit"] / m["capture"]
    exit_words = (
        f"saves {exit_saving:.0%}"
        if exit_saving >= 0  # it does strictly less work: slower is the machine's noise
        else f"saves nothing measurable (it came out {-exit_saving:.0%} slower, which is noise: "
        "it does strictly less work)"
    )
    floor_rate = 1 / m["capture_floor"]
    cpu_ms, capture_ms, rounds = m["capture cpu"] * 1e3, m["capture"] * 1e3, len(data["rounds"])
    return "\n".join([
        provenance_line(data, f"; {data['messages']} messages, medians of {rounds} rounds"),
        "",
        table(header, rows, "llrrrrr"),
        "",
        f"Against the targets: **direct {rate['direct']:.0f} msg/s ({verdict['direct']}), "
        f"the capture graph {rate['capture']:.0f} msg/s ({verdict['capture']})**. "
        f"The capture process's own CPU is {cpu_ms:.1f} of the {capture_ms:.1f} ms a "
        f"message takes ({cpu_ms / capture_ms:.0%}){side}. "
        f"Checkpointing once per turn (`capture exit`) {exit_words}. The floor of MCP "
        f"round trips plus no-op graph steps alone is {m['capture_floor'] * 1e3:.1f} ms a message "
        f"({floor_rate:.0f} msg/s, {'below' if floor_rate < TARGETS['capture'] else 'above'} the "
        "capture graph's target).",
    ])  # fmt: skip


# top-level modules of the profiled process, grouped as the docs name them; cProfile names a
# built-in by its type's module (``_socket`` for a socket's send and recv)
PROFILE_GROUPS = {
    "LangGraph (tasks, channels, checkpoint serialisation with ormsgpack)": (
        "langgraph", "ormsgpack",
    ),
    "the MCP client and its HTTP transport (mcp, httpx, httpcore, h11, anyio, sockets)": (
        "mcp", "httpx", "httpcore", "h11", "anyio", "sniffio", "httpx_sse",
        "_socket", "socket", "_ssl", "ssl",
    ),
    "asyncio's event loop": ("asyncio", "_asyncio", "selectors", "_contextvars"),
    "waiting in epoll (for the server's replies)": ("select",),
    "LangChain core": ("langchain_core", "langchain", "langsmith"),
    "pydantic": ("pydantic", "pydantic_core"),
    "SQLite (the checkpoints)": ("sqlite3", "_sqlite3", "aiosqlite"),
    "agentstate (the capture graph, its client)": ("agentstate",),
}  # fmt: skip
OTHER = "Python itself (built-ins, inspect, typing, contextlib, json, ...) and the rest"


def profile_shares(data: Data) -> list[tuple[str, float]]:
    """Each group's share of the profiled process's own time, largest first, "other" last."""
    own = data["profile"]["own_s_by_module"]
    total = sum(own.values())
    grouped = {
        group: sum(own.get(module, 0.0) for module in modules) / total
        for group, modules in PROFILE_GROUPS.items()
    }
    shares = sorted(grouped.items(), key=lambda kv: -kv[1])
    return [
        *shares,
        (OTHER, 1 - sum(grouped.values())),
    ]


def render_memory_profile(data: Data) -> str:
    rows = [(group, f"{share:.0%}") for group, share in profile_shares(data)]
    return "\n".join([
        f"cProfile of the benchmark process over one more `capture` run of the "
        f"{data['messages']} messages, after the rounds (the same run and machine as above; "
        "profiling slows the run, so only the shares count):",
        "",
        table(["where the capture process's own time goes", "share"], rows, "lr"),
    ])  # fmt: skip


# --- lesson 06's fleet: replicas on one Postgres (scripts/bench_memory.py --fleet) ----------


def render_memory_fleet(data: Data) -> str:
    from agentstate.memory.fleet import fleet_medians  # the notebook's table reads the same

    med = fleet_medians(data)
    per, rounds = data["messages_per_conversation"], data["rounds"]
    rows = []
    order = sorted(med, key=lambda k: (k[2], k[0] != "sqlite", k[1]))  # width, SQLite first
    for backend, replicas, width in order:
        m = med[(backend, replicas, width)]
        base = med[("sqlite", 1, width)]["rate"]
        setup = "SQLite, one service" if backend == "sqlite" else f"Postgres, {replicas} replica"
        setup += "s" if replicas > 1 else ""
        ms = {k: f"{m[k] * 1e3:.2f}" for k in m if k.endswith("_s")}
        rows.append((setup, width, f"{m['rate']:,.0f}", f"{m['rate'] / base:.2f}",
                     f"{m['floor_rate']:,.0f}", f"{m['rate'] / m['floor_rate']:.2f}",
                     ms["store_floor_s"], ms["client_cpu_s"], ms["servers_cpu_s"],
                     ms["postgres_cpu_s"]))  # fmt: skip
    header = ["setup", "side by side", "msg/s", "to SQLite", "floor msg/s", "actual / floor",
              "store ms", "client cpu ms", "servers cpu ms", "postgres cpu ms"]  # fmt: skip
    wide = max(data["widths"])
    rate = {(b, r): m["rate"] for (b, r, w), m in med.items() if w == wide}
    sqlite = rate[("sqlite", 1)]
    fleet = [rate[("postgres", r)] for r in (1, 2, 4)]
    four = med[("postgres", 4, wide)]
    cpu = {k: four[k] * 1e3 for k in ("client_cpu_s", "servers_cpu_s", "postgres_cpu_s")}
    total = sum(cpu.values())
    cores = data["provenance"]["cores"]
    load = data["provenance"]["load_average_before"]
    shared = f"load average {load[0]:.0f} at the start" if load else "its load unknown"
    crowd = (
        f" More replicas came out faster here, and that is the shared machine more than the "
        f"design ({shared}): each runnable process gets a share of the {cores} cores, and 4 "
        "replicas are 4 processes that take more of them from the other work. The rerun below "
        "says which of these figures carry over."
        if fleet[-1] > sqlite
        else f" More replicas do not add throughput on {cores} cores: they share them."
    )
    return "\n".join([
        provenance_line(data, f"; Postgres {data['postgres_major']}, {per} messages per "
                        f"conversation, medians of {rounds} rounds"),
        "",
        table(header, rows, "lrrrrrrrrr"),
        "",
        f"With {wide} conversations side by side: SQLite {sqlite:,.0f} msg/s, Postgres with 1, "
        f"2 and 4 replicas {fleet[0]:,.0f}, {fleet[1]:,.0f} and {fleet[2]:,.0f} msg/s "
        f"({', '.join(f'{r / sqlite:.2f}x' for r in fleet)} of SQLite); every run passed the "
        f"auditor (each message stored once). Per message, the 4-replica fleet spent "
        f"{total:.1f} ms of CPU: {cpu['client_cpu_s']:.1f} ms in the client process, "
        f"{cpu['servers_cpu_s']:.1f} ms in the replicas together and "
        f"{cpu['postgres_cpu_s']:.1f} ms in Postgres, so {cores} cores bound it at "
        f"{cores * 1000 / total:,.0f} msg/s.{crowd} On more machines the replicas' "
        f"{cpu['servers_cpu_s']:.1f} ms divides across their cores ("
        f"{1000 / cpu['servers_cpu_s']:,.0f} msg/s per core the replicas get), and what the one "
        f"database must do sets the fleet's ceiling: {cpu['postgres_cpu_s']:.1f} ms, about "
        f"{1000 / cpu['postgres_cpu_s']:,.0f} msg/s per core Postgres gets.",
    ])  # fmt: skip


def _fleet_summary(data: Data) -> dict[str, Any]:
    """The widest width's ratios to SQLite per replica count, and the 4-replica CPU per message."""
    from agentstate.memory.fleet import fleet_medians

    med = fleet_medians(data)
    wide = max(data["widths"])
    to_sqlite = {
        r: [med[("postgres", r, w)]["rate"] / med[("sqlite", 1, w)]["rate"] for w in data["widths"]]
        for r in (1, 2, 4)
    }
    ratios = {r: min(v) for r, v in to_sqlite.items()}
    highs = {r: max(v) for r, v in to_sqlite.items()}
    four = med[("postgres", 4, wide)]
    cpu = {k: four[k] * 1e3 for k in ("client_cpu_s", "servers_cpu_s", "postgres_cpu_s")}
    load = data["provenance"]["load_average_before"]
    return {"low": ratios, "high": highs, "cpu": cpu, "total": sum(cpu.values()),
            "load": load[0] if load else None, "date": data["provenance"]["date"]}  # fmt: skip


def render_memory_fleet_rerun(data: Data) -> str:
    """The same fleet command run again, beside the recorded run: what carries over (issue 43)."""
    new, old = _fleet_summary(data), _fleet_summary(load_data("memory_fleet"))
    moved = abs(new["total"] - old["total"]) / old["total"]
    names = {"client_cpu_s": "the client", "servers_cpu_s": "the replicas",
             "postgres_cpu_s": "Postgres"}  # fmt: skip

    def ranked(s: dict[str, Any]) -> list[str]:
        return [names[k] for k in sorted(names, key=lambda k: -s["cpu"][k])]

    order = ", then ".join(ranked(new))
    same_order = ranked(new) == ranked(old)

    def span(s: dict[str, Any]) -> str:
        return f"{s['low'][4]:.2f}-{s['high'][4]:.2f}x"

    def load(s: dict[str, Any]) -> str:
        return f"load average {s['load']:.1f}" if s["load"] is not None else "load unknown"

    flipped = (old["low"][4] > 1) != (new["low"][4] > 1) or (old["high"][4] > 1) != (
        new["high"][4] > 1
    )
    return "\n".join([
        provenance_line(data, "; the command of the table above, again"),
        "",
        table(
            ["run", "load average before", "4 replicas to SQLite", "4-replica CPU ms a message",
             "client / replicas / Postgres ms"],
            [(s["date"], f"{s['load']:.1f}" if s["load"] is not None else "n/a", span(s),
              f"{s['total']:.1f}", " / ".join(f"{v:.1f}" for v in s["cpu"].values()))
             for s in (old, new)],
            "lrrrr",
        ),
        "",
        f"What carries over between the two runs ({load(old)} and {new['load']:.1f}): every "
        f"run of both stored each message exactly once (the auditor)"
        + (f", and where the CPU goes (most in {order})" if same_order else "")
        + f". The CPU per message does not carry over as a figure: it moved by {moved:.0%} "
        f"({old['total']:.1f} to {new['total']:.1f} ms), so the bounds above are sizes, not "
        f"constants. Nor does the throughput or its ratio to SQLite: 4 replicas reached "
        f"{span(old)} of "
        f"one SQLite service in the recorded run and {span(new)} in this one"
        + (", on opposite sides of 1" if flipped else "")
        + ". On a shared machine a process's share of the cores follows how many runnable "
        "processes there are, so more replicas take more of the machine from the other work; "
        "on a machine of one's own they only share the same cores with Postgres and the "
        "clients, so no ratio here predicts one there. The fleet is for more machines, not "
        "for more processes on one.",
    ])  # fmt: skip


# --- lesson 03: the turn cache (scripts/bench_turn_cache.py) ---------------------------------


def render_turn_cache(data: Data) -> str:
    rows, ratios, straddle = [], [], 0
    for row in data["rows"]:
        ratio, q1, q3 = ratio_stats(row["cached_ms"], row["plain_ms"])
        ratios.append(ratio)
        straddle += q1 <= 1 <= q3
        latency = f"0..{row['latency_s'] * 1000:g}" if row["latency_s"] else "none"
        rows.append((row["fields"], latency, f"{statistics.median(row['plain_ms']):.1f}",
                     f"{statistics.median(row['cached_ms']):.1f}", f"{ratio:.2f}x",
                     f"{q1:.2f}-{q3:.2f}", len(row["plain_ms"])))  # fmt: skip
    header = ["fields in the batch", "tool latency (ms)", "without cache (median ms)",
              "with turn cache (median ms)", "ratio (median of rounds)", "ratio q1-q3",
              "rounds"]  # fmt: skip
    straddled = "every row" if straddle == len(ratios) else f"{straddle} of them"
    return "\n".join([
        provenance_line(data),
        "",
        table(header, rows, "rrrrrrr"),
        "",
        f"The medians of the per-round ratio run from {min(ratios):.2f}x to {max(ratios):.2f}x "
        f"over the {len(ratios)} rows; the quartiles straddle 1 in {straddled} (the cache's "
        "cost is inside the spread of the rounds there).",
    ])  # fmt: skip


def render_turn_cache_never_writes(data: Data) -> str:
    runs = data["runs"]
    cases = list(runs[0]["samples_ms"])
    header = ["the writer that never writes"] + [
        f"{'this checkout' if r['code'] == 'this checkout' else 'at ' + r['code']} "
        f"(median ms, {r['rounds']} rounds)"
        for r in runs
    ]
    rows = [
        [case] + [f"{statistics.median(r['samples_ms'][case]):.0f}" for r in runs] for case in cases
    ]
    commits = "".join(f"; {r['code']} is commit {r['commit']}" for r in runs[1:])
    return "\n".join(
        [provenance_line(data, commits), "", table(header, rows, "l" + "r" * len(runs))]
    )


# --- the checkpointers (scripts/bench_checkpointers.py) -------------------------------------


def render_checkpointers(data: Data) -> str:
    turns = data["turn_ms"]
    against_file = ratio_stats(turns["postgres"], turns["sqlite"])
    rows = []
    for name, values in turns.items():
        ratio, q1, q3 = ratio_stats(values, turns["memory"])
        if name == "memory":  # the base of the ratios
            rows.append((name, f"{statistics.median(values):.1f}", "1 (the base)", ""))
            continue
        rows.append(
            (name, f"{statistics.median(values):.1f}", f"{ratio:.2f}x", f"{q1:.2f}-{q3:.2f}")
        )
    header = ["checkpointer", "ms per turn (median)", "ratio to memory (median per round)", "q1-q3"]
    return "\n".join([
        provenance_line(data, f"; {data['provenance']['postgres']}"),
        "",
        f"One lesson 02 turn ({data['fields']} parallel fields), {data['rounds']} rounds:",
        "",
        table(header, rows, "lrrr"),
        "",
        f"Postgres against the SQLite file, per round: {against_file[0]:.2f}x (q1-q3 "
        f"{against_file[1]:.2f}-{against_file[2]:.2f}). "
        f"`initdb` plus the first start took {data['initdb_and_start_ms'] / 1000:.1f} s, "
        f"a restart {data['restart_ms'] / 1000:.2f} s.",
    ])  # fmt: skip


# --- the doctor (scripts/bench_doctor.py) ---------------------------------------------------


def render_doctor_diagnose(data: Data) -> str:
    d = data["diagnose"]
    rows = [
        (r["graph"], f"{r['first_s']:.3f}", f"{statistics.median(r['times_s']):.3f}") for r in d
    ]
    slowest = max(d, key=lambda r: statistics.median(r["times_s"]))
    first = max(d, key=lambda r: r["first_s"])
    return "\n".join([
        provenance_line(data),
        "",
        table(["graph", "first `diagnose` (s)", f"median of {data['repeat']} (s)"], rows, "lrr"),
        "",
        f"The slowest median is {statistics.median(slowest['times_s']):.3f} s "
        f"({slowest['graph']}); the slowest first call {first['first_s']:.3f} s "
        f"({first['graph']}).",
    ])  # fmt: skip


def render_doctor_watch(data: Data) -> str:
    rows = []
    for r in data["watch"]:
        ratio, q1, q3 = ratio_stats(r["with_ms"], r["without_ms"])
        medians = (f"{statistics.median(r[k]):.1f}" for k in ("without_ms", "noop_ms", "with_ms"))
        rows.append((r["turn"], *medians, f"{ratio:.2f}", f"{q1:.2f}-{q3:.2f}"))
    header = ["turn (scripted model)", "without (ms)", "no-op handler (ms)", "with `Watch` (ms)",
              "with / without (median per turn)", "q1-q3"]  # fmt: skip
    return "\n".join([
        f"Medians of {data['turns']} turns each, alternating in the run above:",
        "",
        table(header, rows, "lrrrrr"),
    ])  # fmt: skip


# --- lesson 05: the prefix-cached experts and the restart case (scripts/bench_experts.py) ----


def span(values: Iterable[float], fmt: str, unit: str = "") -> str:
    """``low-high`` of ``values`` in ``fmt`` (one value when both ends print the same)."""
    numbers = list(values)
    low, high = format(min(numbers), fmt), format(max(numbers), fmt)
    return f"{low}{unit}" if low == high else f"{low}-{high}{unit}"


def chapters(ks: list[int]) -> str:
    """``1, 2 and 4 chapters``."""
    words = ", ".join(map(str, ks[:-1])) + f" and {ks[-1]}" if len(ks) > 1 else str(ks[0])
    return f"{words} chapter{'s' if ks != [1] else ''}"


def calls_ms(sizes: list[Data]) -> float:
    """The wall time of every recorded round of every case at ``sizes`` (a graph run each)."""
    return sum(r["total_ms"] for size in sizes for rounds in size["raw"].values() for r in rounds)


def engine_line(p: Data, rounds: int, how: str) -> str:
    """Where the engine's figures come from, in one sentence."""
    made = p.get("model_made_from")
    threads = re.search(r"--n_threads (\d+)", p["server_flags"])
    return (
        f"Recorded {p['date']} by `{p['command']}`: llama.cpp ({p['engine']} "
        f"{p['engine_version']}) serving {p['model_file']}"
        + (f" (made by `make engine` from the shipped {made['file']})" if made else "")
        + f", {threads[1] if threads else 'default'} CPU threads, on {p['cores']} cores "
        f"({p['cpu']}), load average {p['load_average_at_start'][0]:.2f} at the start; "
        f"medians of {rounds} rounds, {how}."
    )


def render_experts(data: Data) -> str:
    how = "each case started from an evicted cache"
    return "\n".join([
        engine_line(data["provenance"], data["rounds"], how),
        "",
        markdown_table(summary_rows(data)),
    ])  # fmt: skip


def render_experts_cases(data: Data) -> str:
    return "\n".join([markdown_table(case_rows(data)), "", "```mermaid", mermaid_bars(data), "```"])


def render_experts_sweep(data: Data) -> str:
    sweep = data["sweep"]
    points, sizes = sweep["points"], data["sizes"]
    first, last = points[0], points[-1]
    colds = [p["cold_ms"] for p in points]
    grows = "grows" if colds == sorted(colds) else "goes"
    # where the floor's median is above warm's, the share reads above 100%: the first
    # no-manual call of a round reads the instructions cold
    above = [p for p in points if p["floor_ms"] > p["warm_ms"]]
    below = [p for p in points if p["floor_ms"] <= p["warm_ms"]]
    met = [s["sections"] for s in sizes if s["saving_share"] >= EXPERTS_TARGET]
    met_sweep = [p["sections"] for p in below if p["saving_share"] >= EXPERTS_TARGET]
    missed = [p for p in below if p["saving_share"] < EXPERTS_TARGET]
    one_hash = all(
        len(r["prefix_hashes"]) == 1 for s in (*sizes, *points) for r in s["raw"]["sequential"]
    )
    largest = points[-2:]
    minutes = calls_ms(sizes + points) / 60_000
    skipped = f" (skipped: {chapters(sweep['skipped'])})" if sweep["skipped"] else ""
    text = (
        f"The last table is the sweep over prefix size (notebook 05 draws it): every size whose "
        f"largest call fits the {sweep['n_ctx']:,}-token context{skipped}, "
        f"{first['sections']} to {last['sections']} chapters ({first['prefix_tokens']:,} to "
        f"{last['prefix_tokens']:,} prefix tokens). Cold {grows} from "
        f"{first['cold_ms'] / 1000:.1f} s to {last['cold_ms'] / 1000:.1f} s; warm from "
        f"{first['warm_ms'] / 1000:.2f} s to "
        f"{last['warm_ms'] / 1000:.2f} s, because the persona and the query are read after a "
        f"longer prefix. The share of the ideal saving is "
        f"{span((s['saving_share'] * 100 for s in sizes), '.1f', '%')} in the first table and "
        f"{span((p['saving_share'] * 100 for p in below), '.1f', '%')} in the sweep"
    )
    if above:
        text += (
            f" at {chapters([p['sections'] for p in below])} (it reads "
            f"{span((p['saving_share'] * 100 for p in above), '.1f', '%')} at "
            f"{chapters([p['sections'] for p in above])}, where the floor's median is above "
            "warm's: the first no-manual call of a round reads the instructions cold)"
        )
    text += (
        f", so the target of {EXPERTS_TARGET:.0%} is met at "
        f"{chapters(met) if met else 'no size'} in the first table and at "
        f"{chapters(met_sweep) if met_sweep else 'no size'} in the sweep"
    )
    if missed:
        text += (
            f", and missed by "
            f"{span(((EXPERTS_TARGET - p['saving_share']) * 100 for p in missed), '.1f')} "
            f"points at {chapters([p['sections'] for p in missed])} in the sweep"
        )
    hashes = (
        "every sequential call of a size sent one prefix hash (recorded in the JSON), and "
        "notebook 05's live cell asserts the engine's prefix-hit counts"
        if one_hash
        else "some sequential calls of one size sent more than one prefix hash (recorded in the "
        "JSON): the prefix was not invariant in that run"
    )
    if missed and one_hash:
        text += (
            ": what is lost is the warm call's own tokens read after a longer prefix, not a "
            f"cache miss: {hashes}."
        )
    else:
        text += f". {hashes[0].upper()}{hashes[1:]}."
    text += (
        f" The recorded run's calls took {minutes:.0f} minutes in all, "
        f"{calls_ms(largest) / 60_000 / minutes:.0%} of it at the sweep's "
        f"{chapters([p['sections'] for p in largest])}."
    )
    return "\n".join([markdown_table(sweep_rows(data)), "", text])


def render_engine_restart(data: Data) -> str:
    restart = data["restart"]
    points, target = restart["points"], restart["target_share"]
    how = "sizes interleaved within each round"
    raw = [r for p in points for r in p["raw"]]
    missed = [p["sections"] for p in points if p["share_kept"] < target]
    above = [p["sections"] for p in points if p["share_kept"] > 1]
    verdict = "is met at every size" if not missed else f"is missed at {chapters(missed)}"
    noise = (
        f" (above 100% at {chapters(above)}, where the restored median is below the warm one: "
        "within the noise)"
        if above
        else ""
    )
    first, last = points[0], points[-1]
    slower = [(p["restored_ms"] - p["warm_ms"]) / 1000 for p in points]
    same = all(p["same_replies_every_round"] for p in points)
    restored = all(p["restored_every_round"] for p in points)
    return "\n".join([
        engine_line(data["provenance"], restart["rounds"], how),
        "",
        markdown_table(restart_rows(data)),
        "",
        f"The target, {target:.0%} of the warm saving kept, {verdict}: "
        f"{span((p['share_kept'] * 100 for p in points), '.1f', '%')} of the warm saving survives "
        f"the restart{noise}. Restoring the state took "
        f"{span((r['restore_s'] * 1000 for r in raw), '.0f', ' ms')} and saving it "
        f"{span((r['save_s'] * 1000 for r in raw), '.0f', ' ms')} (over every round), for files "
        f"of {first['state_bytes'] / 1e6:.0f} MB ({chapters([first['sections']])}) to "
        f"{last['state_bytes'] / 1e6:.0f} MB ({chapters([last['sections']])}). The restored "
        f"call's TTFT minus a warm one's is {min(slower):+.2f} s to {max(slower):+.2f} s by "
        "size: the first request of a new process, which still reads the persona and the "
        "question after the prefix. "
        + (
            "Each restarted engine restored the state before its first request in every round"
            if restored
            else "Some restarted engines did not restore the state"
        )
        + (
            ", and its replies equalled the cold engine's in every round"
            if same
            else ", and its replies differed from the cold engine's in some rounds"
        )
        + " (`restored` and `same_replies` in the rounds).",
    ])  # fmt: skip


def render_engine_restart_cold(data: Data) -> str:
    """docs/experts-and-engine.md's paragraph on what a restart costs, from the restart case."""
    points = data["restart"]["points"]
    first, last = points[0], points[-1]
    per_token = statistics.median(p["state_bytes"] / p["prefix_tokens"] for p in points)
    return (
        "The warm prefix lives in the engine's memory, so a restart (a deploy, a crash, a "
        "second replica) would pay the cold prefill again: a median of "
        f"{first['cold_ms'] / 1000:.1f} s at {chapters([first['sections']])} and "
        f"{last['cold_ms'] / 1000:.1f} s at {chapters([last['sections']])} in the recorded "
        f"restart case ([benchmarks](benchmarks.md), {data['provenance']['date']}). The engine "
        "keeps it on disk instead, without logits: about "
        f"{per_token / 1000:.0f} KB per token, {first['state_bytes'] / 1e6:.0f} MB at "
        f"{chapters([first['sections']])} and {last['state_bytes'] / 1e6:.0f} MB at "
        f"{chapters([last['sections']])}:"
    )


# --- the secrets' value pass (scripts/bench_redaction.py) ----------------------------------


def duration(seconds: float) -> str:
    """``0.34 ms``, ``25 ms``, ``2.3 s``: three significant figures at most."""
    if seconds >= 1:
        return f"{seconds:,.1f} s"
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.2f} ms"


Row = tuple[str, float | str]  # a row's label, and its median seconds or the error it raised
GROWS = {"new1": "new0", "load1": "load0"}  # rows shown with their ratio to the row before


def times(ratio: float) -> str:
    """A ratio to three significant figures at most: ``1.02``, ``23.7``, ``210``."""
    return f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.1f}" if ratio >= 10 else f"{ratio:.2f}"


def redaction_medians(run: Data) -> dict[str, Row]:
    """Each row's label and median for one run of ``scripts/bench_redaction.py``, in order."""
    med: dict[str, Row] = {}
    passes = {r["known"]: statistics.median(r["samples_s"]) for r in run["value_pass"]}
    most = max(passes)
    med["pass"] = (f"a reply with no new value, {most:,} values known", passes[most])
    new, load = run["new_value"], run["loading"]
    for i, r in enumerate(new):
        ratio = f" (ratio to {new[0]['known']:,})" if i else ""
        label = f"a reply that brings a new value, {r['known']:,} values known{ratio}"
        med[f"new{i}"] = (label, statistics.median(r["samples_s"]))
    for i, r in enumerate(load):
        ratio = f" (ratio to {load[0]['values']:,})" if i else ""
        label = f"loading {r['values']:,} values, then one reply{ratio}"
        med[f"load{i}"] = (label, statistics.median(r["samples_s"]))
    words = {
        "nested values": "a {kb} KB reply after {values} values that are prefixes of one another",
        "description starting with [": "a {kb} KB task description starting with `[`",
        "broken arguments": "broken {kb} KB arguments of a watched tool",
    }
    for r in run["hostile"]:
        label = words[r["case"]].format(kb=round(r["chars"] / 1000), values=r["values"])
        med[r["case"]] = (
            label,
            f"`{r['error']}`" if r["error"] else statistics.median(r["samples_s"]),
        )
    return med


def render_redaction(data: Data) -> str:
    """docs/secrets.md's table: the value pass of this checkout against the release before."""
    now, *older = data["runs"]
    runs = [*older[:1], now]  # the release before (when recorded), then this checkout
    medians = [redaction_medians(run) for run in runs]
    if any([label for label, _ in m.values()] != [label for label, _ in medians[-1].values()]
           for m in medians):  # fmt: skip
        raise ValueError("the runs in data/results/redaction_benchmark.json measured other rows")

    def cell(m: dict[str, Row], key: str) -> str:
        value = m[key][1]
        if isinstance(value, str):
            return value
        base = m[GROWS[key]][1] if key in GROWS else None
        return duration(value) + (f" ({times(value / base)})" if isinstance(base, float) else "")

    def who(run: Data) -> str:
        return f"now ({run['commit'][:7]})" if run is now else f"before ({run['code']})"

    rows, slower = [], []
    for key, (label, value) in medians[-1].items():
        row = [label, *(cell(m, key) for m in medians)]
        before = medians[0][key][1]
        if older and isinstance(before, float) and isinstance(value, float):
            row.append(f"{times(before / value)}x")
            if value > before:
                slower.append((key, label, value / before))
        elif older:
            row.append("")
        rows.append(row)
    header = ["what", *(who(run) for run in runs)] + ["before / now"] * bool(older)
    counts = " ".join(
        f"{who(run).capitalize()}: medians of {run['rounds']['rounds']} rounds (loading "
        f"{run['rounds']['load']}, the last three rows {run['rounds']['hostile']}), load average "
        f"{run['load_average_before'][0]:.1f} before and {run['load_average_after'][0]:.1f} after."
        for run in runs
    )
    lines = [
        provenance_line(data) + " " + counts,
        "",
        table(header, rows, "l" + "r" * (len(header) - 1)),
    ]
    if older:
        said = []
        for key, label, ratio in slower:
            why = (
                " (each value's encodings go into the matcher when it is put, in Python, where "
                "the old regex was compiled in C at the first reply)"
                if key.startswith("load")
                else ""
            )
            said.append(f"{label}, {times(ratio)}x as long{why}")
        lines += [
            "",
            'A ratio in brackets is how a row grows with the values, within one run; "before / '
            "now\" divides the two runs' medians. "
            + (
                f"Slower than before: {'; '.join(said)}. Every other row, and how each grows, is "
                "the point of the change."
                if said
                else "Every row is faster than before."
            ),
        ]
    return "\n".join(lines)


def render_redaction_encryption(data: Data) -> str:
    """docs/secrets.md's sentence on what ``encrypt=True`` costs a turn, from the same run."""
    enc = data["runs"][0]["encryption"]
    if not enc:
        return "The recorded run did not time encrypted checkpoints (`--no-encryption`)."
    ratio, q1, q3 = ratio_stats(enc["encrypted_s"], enc["plain_s"])
    plain, encrypted = (statistics.median(enc[k]) for k in ("plain_s", "encrypted_s"))
    return (
        f"What it costs: one lesson 02 turn ({enc['fields']} parallel fields) on a SQLite file "
        f"took {duration(plain)} plain and {duration(encrypted)} encrypted (medians of "
        f"{len(enc['plain_s'])} rounds, the order alternated; `scripts/bench_redaction.py`, the "
        f"run of the table above), {ratio:.2f}x per round (q1-q3 {q1:.2f}-{q3:.2f})."
    )


# --- the first `make test` (scripts/bench_make_test.py) -------------------------------------

PHASE_WORDS = {
    "install": "the install (`.venv` with the tutorial's set)",
    "engine-compile": "llama.cpp's compile, beside the install, the checks and `make ends`",
    "checks": "lint, type check and the notebooks' check",
    "ends": "`make ends`",
    "pytest": "pytest",
}


def render_make_test(data: Data) -> str:
    """CONTRIBUTING.md's figure: how long a newcomer's first `make test` took, phase by phase."""
    found = data["phases"]
    spans = {
        name: (found[name]["end"] - found[name]["start"]) / 60
        for name in PHASE_WORDS
        if {"start", "end"} <= set(found.get(name, {}))
    }
    parts = ", ".join(f"{PHASE_WORDS[n]} {m:.1f}" for n, m in spans.items())
    p = data["provenance"]
    load = p["load_average_before"][0] if p["load_average_before"] else float("nan")
    present = data.get("system_packages_present_before", {})
    packages = (
        "PostgreSQL and Chromium already installed, so no `apt-get`"
        if present and all(present.values())
        else "PostgreSQL and Chromium fetched by `apt-get` in the run"
    )
    after = p.get("load_average_after") or []
    where = (
        f"from a fresh clone with an empty pip cache on {p['cores']} cores, {p['date']}, "
        f"load average {load:.1f} at the start"
        + (f" and {after[0]:.1f} at the end" if after else "")
        + f", {packages} (`{p['command']}`)"
    )
    disk = data["disk_bytes"]
    gb = (disk["venv"] + disk["pip_cache"]) / 1e9
    used = (
        f" It left {gb:.1f} GB on disk: `.venv` (with `make ends`' venvs) "
        f"{disk['venv'] / 1e9:.1f} GB, pip's cache {disk['pip_cache'] / 1e6:,.0f} MB."
    )
    if data["targets"] == ["test"] and data["exit_status"] == 0:
        return (
            f"A first `make test` {where} took **{data['total_s'] / 60:.1f} minutes**, "
            f"{data['pytest']}; in minutes: {parts}.{used}"
        )
    failed = [line.split(":")[1].strip() for line in data["ends"] if "failed" in line]
    status = (
        f" It exited with status {data['exit_status']}"
        + (
            f" (`make ends`: the core tests failed at the {', '.join(failed)} end)"
            if failed
            else ""
        )
        + "."
        if data["exit_status"]
        else ""
    )
    return (
        f"The first `make test` has not been timed whole yet. Its phases, run as "
        f"`make {' '.join(data['targets'])}` {where}, took {data['total_s'] / 60:.1f} "
        f"minutes side by side; in minutes: {parts}.{status} Add pytest and, on a machine "
        f"without them, the time `apt-get` takes to fetch PostgreSQL and Chromium.{used}"
    )


def render_flake_hunt(data: Data) -> str:
    """CONTRIBUTING.md's record of ``scripts/flake_hunt.py``: the verdict, then the last runs."""
    runs = data["runs"]
    whole = [r for r in runs if r["scope"] == "whole suite"]
    last = whole[-5:]
    red = [r for r in last if r["failed"] or r["exit_status"]]
    if not whole:
        verdict = (
            "No whole-suite run is recorded yet (`.venv/bin/python scripts/flake_hunt.py`); "
            "the runs below are subset runs, which prove the script, not the suite."
        )
    else:
        verdict = f"The last {len(last)} whole-suite run(s): {len(red)} with a failure" + (
            f" ({', '.join(sorted({t for r in red for t in r['failed']}))})." if red else "."
        )

    def load(x: list[float] | None) -> str:
        return f"{x[0]:.1f}" if x else "?"

    rows = [
        (
            r["run"], r["date"][:10], f"`{(r['git_commit'] or '?')[:8]}`",
            (r["scope"] if r["scope"] != "subset" else f"subset: {' '.join(r['selection'])}")
            + flake_hunt.slow_writer(r),
            r["workers"], f"{r['busy_processes']} on {r['cores']} cores",
            " / ".join(load(r["load_average"][k]) for k in ("start", "mid", "end")),
            f"{r['duration_s'] / 60:.1f} min", r["tests"],
            ", ".join(f"`{t}`" for t in r["failed"]) or ("none" if not r["exit_status"]
                                                         else f"exit {r['exit_status']}"),
        )
        for r in runs[-8:]
    ]  # fmt: skip
    header = ["run", "date", "commit", "what ran", "workers", "busy processes",
              "load (1 min) start / mid / end", "took", "tests", "failed"]  # fmt: skip
    return (
        f"{len(runs)} run(s) recorded in `data/results/flake_hunt.json` "
        f"({len(whole)} whole-suite, {len(runs) - len(whole)} subset). {verdict}\n\n"
        + table(header, rows, "rllllrlrrl")
    )


RENDERERS: dict[str, Callable[[Data], str]] = {
    "flake_hunt": render_flake_hunt,
    "experts": render_experts,
    "experts/cases": render_experts_cases,
    "experts/sweep": render_experts_sweep,
    "engine_restart": render_engine_restart,
    "engine_restart/cold": render_engine_restart_cold,
    "make_test": render_make_test,
    "memory": render_memory,
    "memory/profile": render_memory_profile,
    "memory_fleet": render_memory_fleet,
    "memory_fleet_rerun": render_memory_fleet_rerun,
    "turn_cache": render_turn_cache,
    "turn_cache_never_writes": render_turn_cache_never_writes,
    "checkpointers": render_checkpointers,
    "doctor/diagnose": render_doctor_diagnose,
    "doctor/watch": render_doctor_watch,
    "redaction": render_redaction,
    "redaction/encryption": render_redaction_encryption,
}


def render(name: str, data: Data | None = None) -> str:
    """Block ``name`` rendered from ``data`` (default: its data file under data/results)."""
    if name not in RENDERERS:
        raise KeyError(f"no renderer for results block {name!r}: one of {sorted(RENDERERS)}")
    return RENDERERS[name](load_data(name.split("/")[0]) if data is None else data)


def refresh(text: str, data: dict[str, Data] | None = None) -> str:
    """``text`` with every results block re-rendered (``data``: data files by name, for tests)."""

    def one(match: re.Match[str]) -> str:
        name = match["name"]
        body = render(name, (data or {}).get(name.split("/")[0]))
        return f"{match['open']}{body}\n{match['close']}"

    return BLOCK.sub(one, text)


def doc_files() -> list[Path]:
    """Every page a figure can be on: the README, CONTRIBUTING.md (the first `make test`) and
    docs/."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    return [page for page in pages if page.is_file()] + sorted(DOCS.rglob("*.md"))


def block_files() -> list[Path]:
    """Every page with a results block: the pages with figures, and CONTRIBUTING.md
    (the flake hunt's record)."""
    contributing = ROOT / "CONTRIBUTING.md"
    return doc_files() + [contributing] * contributing.is_file()


def stale_blocks() -> list[str]:
    """``file: block`` for every block whose text is not what its data file renders."""
    stale = []
    for path in block_files():
        for match in BLOCK.finditer(path.read_text()):
            if match["body"] != render(match["name"]) + "\n":
                stale.append(f"{path.relative_to(ROOT)}: {match['name']}")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="re-render every block in place")
    parser.add_argument("--check", action="store_true", help="list stale blocks (the default)")
    args = parser.parse_args(argv)
    if args.write:
        for path in block_files():
            text = path.read_text()
            if BLOCK.search(text) and refresh(text) != text:
                path.write_text(refresh(text))
                print(f"rewrote {path.relative_to(ROOT)}")
        return 0
    stale = stale_blocks()
    for line in stale:
        print(f"stale: {line} (run scripts/bench_docs.py --write)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

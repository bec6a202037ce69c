"""The docs' performance figures, rendered from the data files under ``data/results/``.

A figure in ``docs/`` sits in a generated block::

    <!-- results:memory -->
    ...what render("memory", data/results/memory_benchmark.json) returns...
    <!-- /results:memory -->

The block's name up to its first ``/`` names the data file (written by
``scripts/bench_<name>.py``). Every figure is computed here from the raw
samples the file records (medians, per-round ratios, quartiles), so a figure
changes only when its benchmark is re-run. ``tests/test_benchmark_docs.py``
runs the check; the experts' figures (stage 05) have their own module,
``agentstate.experts.results``.

    .venv/bin/python scripts/bench_docs.py            # --check: list stale blocks, exit 1 if any
    .venv/bin/python scripts/bench_docs.py --write    # re-render every block in place
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench_results import ROOT, load_results

DOCS = ROOT / "docs"
BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w/]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.DOTALL,
)
# what the memory server was asked to reach (issue 16), in messages per second
TARGETS = {"direct": 150, "capture": 100}

Data = dict[str, Any]


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


# --- stage 06: memory capture (scripts/bench_memory.py) -------------------------------------


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


# --- stage 03: the turn cache (scripts/bench_turn_cache.py) ---------------------------------


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
        f"One stage 02 turn ({data['fields']} parallel fields), {data['rounds']} rounds:",
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


RENDERERS: dict[str, Callable[[Data], str]] = {
    "memory": render_memory,
    "memory/profile": render_memory_profile,
    "turn_cache": render_turn_cache,
    "turn_cache_never_writes": render_turn_cache_never_writes,
    "checkpointers": render_checkpointers,
    "doctor/diagnose": render_doctor_diagnose,
    "doctor/watch": render_doctor_watch,
}


def render(name: str, data: Data | None = None) -> str:
    """Block ``name`` rendered from ``data`` (default: its data file under data/results)."""
    if name not in RENDERERS:
        raise KeyError(f"no renderer for results block {name!r}: one of {sorted(RENDERERS)}")
    return RENDERERS[name](load_results(name.split("/")[0]) if data is None else data)


def refresh(text: str, data: dict[str, Data] | None = None) -> str:
    """``text`` with every results block re-rendered (``data``: data files by name, for tests)."""

    def one(match: re.Match[str]) -> str:
        name = match["name"]
        body = render(name, (data or {}).get(name.split("/")[0]))
        return f"{match['open']}{body}\n{match['close']}"

    return BLOCK.sub(one, text)


def doc_files() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def stale_blocks() -> list[str]:
    """``file: block`` for every block whose text is not what its data file renders."""
    stale = []
    for path in doc_files():
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
        for path in doc_files():
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

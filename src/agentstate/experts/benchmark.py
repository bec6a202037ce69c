"""Measure what the invariant prefix buys on a real engine (used by scripts/bench_experts.py).

For each manual size, every round runs the same 3-expert query through the
real graph in five cases, each starting from an evicted cache (an unrelated
1-token call first, since the engine's single slot keeps only the last
prompt's prefix):

- ``cache_busted``: a timestamp before the manual, sequential (every call cold);
- ``sequential``, ``parallel``, ``primed``: the invariant prefix;
- ``no_manual``: the same calls without the manual (the floor).

Figures are medians over rounds. ``cold`` is the busted TTFT, ``warm`` the
TTFT of the sequential experts after the first, ``floor`` the no-manual TTFT;
``saving_share`` = (cold - warm) / (cold - floor), the share of the ideal
saving achieved. Synthesis is the deterministic combination, so totals time
the expert stage only. Taught (and the recorded figures shown) in notebook 05.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from agentstate.engine import count_tokens, engine_version, locate_model, model_sha256
from agentstate.experts.budget import turn_budget
from agentstate.experts.graph import Execution, ExpertsConfig, build_experts_graph, user_turn
from agentstate.experts.llm import RequestRecorder, chat_model
from agentstate.experts.manual import load_manual
from agentstate.experts.prompts import PrefixPolicy, system_prefix
from agentstate.models import ModelSettings

QUERY = (
    "Last night's batch outage sent a SEPA payment file twice and a customer complains "
    "about being debited twice: what should the systems team do, what must we report, "
    "and what do we tell the customer?"
)
CASES = ("cache_busted", "sequential", "parallel", "primed", "no_manual")
SWEEP_CASES = ("cache_busted", "sequential", "no_manual")
SWEEP_SECTIONS = (1, 2, 4, 8, 16)
BENCH_TIMEOUT = 900.0  # a benchmark waits: a cold 6k-token prefill on a loaded machine is slow
SERVER_FLAGS = "--n_ctx 8192 --n_threads 2 --n_threads_batch 2 --interrupt_requests false"


_CASE_POLICY: dict[str, PrefixPolicy] = {
    "cache_busted": "timestamp_first",
    "no_manual": "no_manual",
}
_CASE_EXECUTION: dict[str, Execution] = {"parallel": "parallel", "primed": "primed"}


def _case_config(case: str, manual, model) -> ExpertsConfig:
    policy = _CASE_POLICY.get(case, "invariant")
    execution = _CASE_EXECUTION.get(case, "sequential")
    return ExpertsConfig(manual=manual, mode="llm", expert_model=model, execution=execution,
                         prefix_policy=policy, synthesis="combine")  # fmt: skip


def evict(model) -> None:
    """Replace the engine's cached prefix with an unrelated prompt."""
    model.invoke([HumanMessage(f"Say one word. {time.time_ns()}")], extra_body={"max_tokens": 1})


def run_case(
    case: str, manual, model, query: str = QUERY, *, evict_first: bool = True
) -> dict[str, Any]:
    """One evicted, timed run of the graph; TTFT/latency per call, the wall time, the replies.

    ``evict_first=False`` keeps what the engine's cache holds (the restart case
    times the first call after a restored state).
    """
    if evict_first:
        evict(model)
    graph = build_experts_graph(_case_config(case, manual, model))
    start = time.perf_counter()
    state = graph.invoke(user_turn(query))
    total = round((time.perf_counter() - start) * 1000, 1)
    return {"experts": state["route"]["experts"], "ttft_ms": state["ttft_ms"],
            "latency_ms": state["latency_ms"], "total_ms": total,
            "prefix_hashes": sorted(set(state["prefix_by_call"].values())),
            "replies": state["expert_outputs"]}  # fmt: skip


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per case and the cold / warm / floor figures."""
    cases = {}
    for case, rounds in runs.items():
        experts = rounds[0]["experts"]
        cases[case] = {
            "ttft_ms": {e: _median([r["ttft_ms"][e] for r in rounds]) for e in experts},
            "total_ms": _median([r["total_ms"] for r in rounds]),
        }
        if case == "primed":
            cases[case]["prime_ms"] = _median([r["latency_ms"]["prime"] for r in rounds])
    first, *rest = runs["sequential"][0]["experts"]
    cold = _median([r["ttft_ms"][e] for r in runs["cache_busted"] for e in r["experts"]])
    warm = _median([r["ttft_ms"][e] for r in runs["sequential"] for e in rest])
    floor = _median([r["ttft_ms"][e] for r in runs["no_manual"] for e in r["experts"]])
    first_ms = _median([r["ttft_ms"][first] for r in runs["sequential"]])
    return {
        "cases": cases,
        "cold_ms": cold,
        "first_sequential_ms": first_ms,
        "warm_ms": warm,
        "floor_ms": floor,
        "warm_cold_ratio": round(cold / warm, 1),
        "saving_share": round((cold - warm) / (cold - floor), 3),
    }


def provenance(command: str, model_path: Path | None = None) -> dict[str, Any]:
    """What produced the figures: engine, model file and its origin, manual, machine, load."""
    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if "model name" in line), "")
    manual = load_manual()
    model = Path(model_path) if model_path else None
    shipped = locate_model()
    return {
        "engine": "llama-cpp-python",
        "engine_version": engine_version(),
        "server_flags": SERVER_FLAGS,
        "model_file": model.name if model else None,
        "model_sha256": model_sha256(model) if model else None,
        "model_made_from": None
        if model is None or model == shipped
        else {
            "file": shipped.name,
            "sha256": model_sha256(shipped),
            "how": "agentstate engine quantize (llama_cpp.llama_model_quantize)",
        },
        "manual_file": manual.name,
        "manual_sha256": manual.sha256,
        "manual_bytes": manual.size,
        "manual_tokens": count_tokens(manual.text),
        "cores": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "python": platform.python_version(),
        "date": datetime.now(UTC).date().isoformat(),
        "load_average_at_start": _load(),
        "command": command,
    }


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpuinfo() -> list[str]:
    try:
        with open("/proc/cpuinfo") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def sweep_point(sections: int, prefix_tokens: int | None, runs: dict[str, list]) -> dict[str, Any]:
    """One size of the sweep: cold, warm and floor medians and the share of the ideal saving."""
    figures = summarise(runs)
    keep = ("cold_ms", "warm_ms", "floor_ms", "warm_cold_ratio", "saving_share")
    return {"sections": sections, "prefix_tokens": prefix_tokens,
            **{k: figures[k] for k in keep}, "raw": runs}  # fmt: skip


def run_sweep(
    model,
    sections: list[int],
    rounds: int,
    max_tokens: int,
    n_ctx: int,
    log: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """TTFT against prefix size: cold, warm and floor at each size that fits ``n_ctx``."""
    points, skipped = [], []
    for k in sections:
        manual = load_manual(sections=k)
        needed = turn_budget(manual, QUERY, max_tokens).total
        if needed > n_ctx:
            skipped.append({"sections": k, "tokens_needed": needed})
            log(f"sweep: {k} chapters need {needed} tokens > context {n_ctx}: skipped")
            continue
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in SWEEP_CASES}
        for r in range(rounds):
            for case in SWEEP_CASES:
                runs[case].append(run_case(case, manual, model))
                log(f"sweep: {k} chapters round {r + 1} {case}: {runs[case][-1]['ttft_ms']}")
        prefix = system_prefix(manual)
        point = sweep_point(k, count_tokens(prefix.text), runs)
        points.append({**point, "part_sha256": manual.sha256, "prefix_sha256": prefix.sha256})
    return {"cases": list(SWEEP_CASES), "n_ctx": n_ctx, "rounds": rounds, "points": points,
            "skipped": skipped}  # fmt: skip


def run_benchmark(
    base_url: str,
    sections: list[int],
    rounds: int,
    max_tokens: int,
    command: str,
    log: Callable[[str], None] = _stderr,
    *,
    sweep: list[int] | None = None,
    sweep_rounds: int | None = None,
    n_ctx: int = 8192,
    model_path: Path | None = None,
) -> dict[str, Any]:
    """The whole benchmark against a running server; returns the results document."""
    recorder = RequestRecorder()
    model = chat_model(ModelSettings(base_url=base_url), max_tokens=max_tokens, recorder=recorder,
                       timeout=BENCH_TIMEOUT)  # fmt: skip
    start_provenance = provenance(command, model_path)
    sizes = []
    for k in sections:
        manual = load_manual(sections=k)
        prefix = system_prefix(manual)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CASES}
        for r in range(rounds):
            for case in CASES:
                runs[case].append(run_case(case, manual, model))
                log(f"sections={k} round={r + 1} {case}: {runs[case][-1]['ttft_ms']}")
        invariant_hashes = {h for c in ("sequential", "parallel", "primed") for run in runs[c]
                            for h in run["prefix_hashes"]}  # fmt: skip
        sizes.append({
            "sections": k,
            "part_bytes": manual.size,
            "part_sha256": manual.sha256,
            "prefix_sha256": prefix.sha256,
            "prefix_tokens": count_tokens(prefix.text),
            "invariant_prefix_identical": invariant_hashes == {prefix.sha256},
            **summarise(runs),
            "raw": runs,
        })  # fmt: skip
    document = {
        "provenance": start_provenance,
        "query": QUERY,
        "rounds": rounds,
        "max_tokens": max_tokens,
        "cases": list(CASES),
        "sizes": sizes,
    }
    if sweep:
        document["sweep"] = run_sweep(model, sweep, sweep_rounds or rounds, max_tokens, n_ctx, log)
    return document

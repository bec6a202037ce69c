"""The experts' restart case: cold, warm, and restored after an engine restart.

At each manual size, each round starts a fresh engine on an empty state
folder and runs the 3-expert query sequentially: the first expert's time to
first token is **cold** (the whole prefix read), the next experts' median is
**warm** (the prefix in the engine's memory). The prefix is then saved
(``POST /agentstate/prefix``: the cache already holds it, so nothing is
read again: the experts prime the engine with their own prefix, system
message 1), the engine stops, a new engine process starts on the same
folder and restores the state before its first request, and the same query
runs without evicting anything: its first expert's TTFT is **restored**.
``share_kept`` = (cold - restored) / (cold - warm): the share of the warm
saving that survives the restart (target: at least 90%). Every round also
checks that the restored engine's replies equal the cold engine's (greedy).
Run by ``scripts/bench_experts.py``; the recorded figures
(``data/results/engine_restart.json``) are shown in notebook 05 (its going-further page) and
docs/benchmarks.md.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentstate.datafiles import results_path
from agentstate.engine.prefix_client import engine_state, prime
from agentstate.engine.server import MEASURED_THREADS, EngineServer
from agentstate.engine.tokens import count_tokens
from agentstate.experts.benchmark import BENCH_TIMEOUT, QUERY, run_case
from agentstate.experts.llm import chat_model
from agentstate.experts.manual import load_manual
from agentstate.experts.prompts import system_prefix
from agentstate.models import ModelSettings

RESULTS_FILE = "engine_restart.json"
TARGET_SHARE = 0.9


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def restart_round(
    manual: Any, model_path: Path, max_tokens: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """One round at one size: two engine processes on one fresh folder."""

    def model(server: EngineServer) -> Any:
        return chat_model(ModelSettings(base_url=server.base_url), max_tokens=max_tokens,
                          timeout=BENCH_TIMEOUT)  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="agentstate-restart-") as folder:
        options = {"model_path": model_path, "threads": MEASURED_THREADS, "state_dir": folder}
        with EngineServer(restore="none", **options) as first:  # type: ignore[arg-type]
            before = run_case("sequential", manual, model(first), QUERY)
            done = prime(first.base_url, system_prefix(manual).text, manual.name)
        with EngineServer(**options) as second:  # type: ignore[arg-type]
            state = engine_state(second.base_url)
            after = run_case("sequential", manual, model(second), QUERY, evict_first=False)
    first_expert, *rest = before["experts"]
    saved = done["saved"] or {}
    figures = {
        "cold_ms": before["ttft_ms"][first_expert],
        "warm_ms": _median([before["ttft_ms"][e] for e in rest]),
        "restored_ms": after["ttft_ms"][first_expert],
        "restored": bool(state["restored"]),
        "restore_s": (state.get("restored_state") or {}).get("seconds"),
        "state_bytes": saved.get("bytes"),
        "save_s": saved.get("seconds"),
        "prime_source": done["source"],
        "same_replies": after["replies"] == before["replies"],
        "start_line": state["start"],
    }
    log(f"restart: {manual.name}: {figures}")
    return figures


def restart_point(sections: int, manual: Any, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One size: the medians, the share of the warm saving kept, the state file's size."""
    cold = _median([r["cold_ms"] for r in rounds])
    warm = _median([r["warm_ms"] for r in rounds])
    restored = _median([r["restored_ms"] for r in rounds])
    prefix = system_prefix(manual)
    return {
        "sections": sections,
        "prefix_tokens": count_tokens(prefix.text),
        "part_sha256": manual.sha256,
        "prefix_sha256": prefix.sha256,
        "cold_ms": cold,
        "warm_ms": warm,
        "restored_ms": restored,
        "share_kept": round((cold - restored) / (cold - warm), 3),
        "state_bytes": max(r["state_bytes"] or 0 for r in rounds),
        "restore_s": _median([r["restore_s"] or 0.0 for r in rounds]),
        "restored_every_round": all(r["restored"] for r in rounds),
        "same_replies_every_round": all(r["same_replies"] for r in rounds),
        "raw": rounds,
    }


def run_restart(
    sections: list[int],
    rounds: int,
    max_tokens: int,
    model_path: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The restart case at every size (rounds interleave sizes: load drifts hit them all)."""
    manuals = {k: load_manual(sections=k) for k in sections}
    runs: dict[int, list[dict[str, Any]]] = {k: [] for k in sections}
    for r in range(rounds):
        for k in sections:
            log(f"restart: {k} chapters, round {r + 1} of {rounds}")
            runs[k].append(restart_round(manuals[k], model_path, max_tokens, log))
    points = [restart_point(k, manuals[k], runs[k]) for k in sections]
    return {"rounds": rounds, "target_share": TARGET_SHARE, "points": points}


def load_restart_results(path: str | Path | None = None) -> dict[str, Any]:
    """The recorded restart case (``data/results/engine_restart.json``)."""
    return json.loads(Path(path or results_path(RESULTS_FILE)).read_text())


def restart_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The restart table: one row per size (docs/benchmarks.md and going further 05)."""
    return [
        {
            "chapters": p["sections"],
            "prefix tokens": p["prefix_tokens"],
            "cold TTFT s": f"{p['cold_ms'] / 1000:.2f}",
            "warm TTFT s": f"{p['warm_ms'] / 1000:.2f}",
            "restored TTFT s": f"{p['restored_ms'] / 1000:.2f}",
            "share of the warm saving kept": f"{p['share_kept']:.1%}",
            "state file MB": f"{p['state_bytes'] / 1e6:.1f}",
        }
        for p in results["restart"]["points"]
    ]


def restart_checks(results: dict[str, Any]) -> dict[str, bool]:
    """Each claim of the recorded restart case, checked against its raw rounds and the repo."""
    manual = load_manual()
    checks: dict[str, bool] = {}
    restart = results["restart"]
    for p in restart["points"]:
        part, raw, k = manual.leading(p["sections"]), p["raw"], p["sections"]
        checks[f"{k} chapters: part and prefix hashes match"] = (
            p["part_sha256"] == part.sha256 and p["prefix_sha256"] == system_prefix(part).sha256
        )
        medians = {key: _median([r[key] for r in raw]) for key in ("cold_ms", "restored_ms")}
        checks[f"{k} chapters: medians recomputed from {len(raw)} rounds"] = (
            len(raw) == restart["rounds"]
            and medians == {"cold_ms": p["cold_ms"], "restored_ms": p["restored_ms"]}
            and _median([r["warm_ms"] for r in raw]) == p["warm_ms"]
        )
        share = (p["cold_ms"] - p["restored_ms"]) / (p["cold_ms"] - p["warm_ms"])
        checks[f"{k} chapters: share kept = (cold - restored) / (cold - warm)"] = (
            abs(share - p["share_kept"]) < 1e-3
        )
        checks[f"{k} chapters: restored and same replies in every round"] = (
            p["restored_every_round"] and p["same_replies_every_round"]
        )
    return checks

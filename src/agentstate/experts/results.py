"""The committed benchmark results: load, check provenance, tabulate.

Notebook 05 and the README show figures from ``data/results/experts_benchmark.json``
(written by ``scripts/bench_experts.py``), not from a live run under nbval. The
provenance check ties the file to what is in the repository now: the engine
and model it names, the manual's hash, and each size's part and prefix hashes.
Change the manual or the instructions and the check fails until the benchmark
is re-run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentstate.datafiles import results_path
from agentstate.engine.model import MODEL_FILE
from agentstate.engine.quantize import FAST_MODEL_FILE
from agentstate.experts.manual import load_manual
from agentstate.experts.prompts import system_prefix

RESULTS_FILE = "experts_benchmark.json"


def load_results(path: str | Path | None = None) -> dict[str, Any]:
    """The recorded benchmark results (``data/results/experts_benchmark.json``)."""
    return json.loads(Path(path or results_path(RESULTS_FILE)).read_text())


def provenance_checks(results: dict[str, Any]) -> dict[str, bool]:
    """Each provenance claim, checked against the current repository."""
    prov = results["provenance"]
    manual = load_manual()
    checks = {
        "engine is llama-cpp-python": prov["engine"] == "llama-cpp-python",
        # the shipped Q4_1 file, or the Q4_0 that `agentstate engine quantize` makes from it
        f"model file is {prov['model_file']}": prov["model_file"] in (MODEL_FILE, FAST_MODEL_FILE),
        "model sha256 recorded": len(prov.get("model_sha256") or "") == 64,
        "manual sha256 matches data/manual": prov["manual_sha256"] == manual.sha256,
    }
    for size in results["sizes"]:
        part = manual.leading(size["sections"])
        checks[f"{size['sections']} sections: part and prefix hashes match"] = (
            size["part_sha256"] == part.sha256
            and size["prefix_sha256"] == system_prefix(part).sha256
        )
    for point in results.get("sweep", {}).get("points", []):
        part = manual.leading(point["sections"])
        checks[f"sweep {point['sections']} sections: part and prefix hashes match"] = (
            point["part_sha256"] == part.sha256
            and point["prefix_sha256"] == system_prefix(part).sha256
        )
    return checks


def _s(ms: float) -> str:
    """Milliseconds as seconds with two decimals (tables read better in seconds)."""
    return f"{ms / 1000:.2f}"


def summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per manual size: the headline medians, in seconds."""
    return [
        {
            "prefix tokens": s["prefix_tokens"],
            "cold TTFT s": _s(s["cold_ms"]),
            "warm TTFT s": _s(s["warm_ms"]),
            "floor TTFT s": _s(s["floor_ms"]),
            "cold/warm": f"{s['warm_cold_ratio']}x",
            "share of ideal saving": f"{s['saving_share']:.0%}",
        }
        for s in results["sizes"]
    ]


def sweep_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """TTFT against prefix size (the sweep): one row per size, in seconds."""
    return [
        {
            "chapters": p["sections"],
            "prefix tokens": p["prefix_tokens"],
            "cold TTFT s": _s(p["cold_ms"]),
            "warm TTFT s": _s(p["warm_ms"]),
            "floor TTFT s": _s(p["floor_ms"]),
            "share of ideal saving": f"{p['saving_share']:.1%}",
        }
        for p in results.get("sweep", {}).get("points", [])
    ]


def case_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per size and case: TTFT per expert (in routing order) and total, in seconds."""
    rows = []
    for s in results["sizes"]:
        for case, figures in s["cases"].items():
            ttft = list(figures["ttft_ms"].values())
            rows.append({"prefix tokens": s["prefix_tokens"], "case": case,
                         "prime call s": _s(figures["prime_ms"]) if "prime_ms" in figures else "",
                         **{f"TTFT {i + 1} s": _s(v) for i, v in enumerate(ttft)},
                         "total s": _s(figures["total_ms"])})  # fmt: skip
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Rows as a Markdown table (the README and notebook 05 show these)."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def mermaid_bars(results: dict[str, Any]) -> str:
    """A Mermaid bar chart (GitHub renders it) of median total latency per case, largest size."""
    size = results["sizes"][-1]
    cases = list(size["cases"])
    values = [round(size["cases"][c]["total_ms"] / 1000, 1) for c in cases]
    return "\n".join([
        "xychart-beta",
        f'    title "3 experts, {size["prefix_tokens"]}-token prefix: median total seconds"',
        "    x-axis [" + ", ".join(f'"{c}"' for c in cases) + "]",
        f'    y-axis "seconds" 0 --> {int(max(values)) + 5}',
        "    bar [" + ", ".join(str(v) for v in values) + "]",
    ])  # fmt: skip

"""The recorded benchmark as a picture: time to first token, cold against warm (notebook 05).

Drawn locally with matplotlib from ``data/results/experts_benchmark.json``
(``load_results()``), never from a live run, so the figure is the same on
every build: the same data, a fixed size and resolution, no date but the
recording's.
"""

from __future__ import annotations

from typing import Any

COLD = "cold: a clock line first (every expert)"
WARM = "warm: invariant prefix (2nd and 3rd expert)"
FLOOR = "floor: the same call without the manual"


def ttft_points(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The sweep's sizes, smallest first: prefix tokens and cold, warm and floor seconds."""
    points = sorted(results["sweep"]["points"], key=lambda p: p["prefix_tokens"])
    if not points:
        raise ValueError("the results hold no sweep points: run scripts/bench_experts.py")
    return [
        {
            "prefix tokens": p["prefix_tokens"],
            "cold s": round(p["cold_ms"] / 1000, 2),
            "warm s": round(p["warm_ms"] / 1000, 2),
            "floor s": round(p["floor_ms"] / 1000, 2),
            "cold / warm": round(p["cold_ms"] / p["warm_ms"], 1),
        }
        for p in points
    ]


def plot_ttft(results: dict[str, Any]) -> Any:
    """Cold, warm and floor time to first token by prefix size, as a matplotlib Figure.

    One line each, the cold / warm ratio written above each cold point, and the
    recording named in the title (model file, engine, cores, date). The figure
    is closed before it is returned, so a notebook shows it once (as the cell's
    value), and a script can ``savefig`` it.
    """
    import matplotlib.pyplot as plt

    rows = ttft_points(results)
    prov = results["provenance"]
    tokens = [r["prefix tokens"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=100)
    ax.plot(tokens, [r["cold s"] for r in rows], "o-", color="#c0392b", label=COLD)
    ax.plot(tokens, [r["warm s"] for r in rows], "o-", color="#1e8449", label=WARM)
    ax.plot(tokens, [r["floor s"] for r in rows], ":", color="#7f8c8d", label=FLOOR)
    for r in rows:
        ax.annotate(
            f"{r['cold / warm']:g}x",
            (r["prefix tokens"], r["cold s"]),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=9,
        )
    ax.set_xlabel("prefix tokens (instructions + the manual's first chapters)")
    ax.set_ylabel("time to first token, s (median)")
    ax.set_title(
        f"{prov['model_file']} on {prov['engine']} {prov['engine_version']}, "
        f"{prov['cores']} cores, recorded {prov['date']}",
        fontsize=10,
    )
    ax.set_ylim(0, max(r["cold s"] for r in rows) * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig

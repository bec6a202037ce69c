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


def _recorded(results: dict[str, Any] | None) -> dict[str, Any]:
    """``results``, or the recorded run (``load_results()``) when it is None."""
    if results is not None:
        return results
    from agentstate.experts.results import load_results

    return load_results()


def ttft_points(results: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The sweep's sizes, smallest first: prefix tokens and cold, warm and floor seconds.

    ``results`` defaults to the recorded run (``load_results()``), as do
    :func:`question_seconds` and :func:`plot_ttft`, so notebook 05 shows it in one import.
    """
    points = sorted(_recorded(results)["sweep"]["points"], key=lambda p: p["prefix_tokens"])
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


def question_seconds(
    results: dict[str, Any] | None = None, experts: int = 3
) -> list[dict[str, Any]]:
    """Seconds to first token summed over one question's expert calls, per prefix size.

    With a line that differs per call before the manual, every expert pays the cold time;
    with the invariant prefix the first pays cold and the others warm (the cache holds the
    manual by then). Computed from the recorded medians (``ttft_points``), so the figures
    are the recording's, never typed.
    """
    rows = []
    for p in ttft_points(results):
        busted = round(experts * p["cold s"], 2)
        invariant = round(p["cold s"] + (experts - 1) * p["warm s"], 2)
        rows.append(
            {
                "prefix tokens": p["prefix tokens"],
                "clock first, s": busted,
                "invariant, s": invariant,
                "faster": f"{busted / invariant:.1f}x",
            }
        )
    return rows


def plot_ttft(results: dict[str, Any] | None = None) -> Any:
    """The recorded benchmark in two panels, as a matplotlib Figure.

    Left, what a reader waits per question of three experts (``question_seconds``): the
    clock-first desk against the invariant one, the speed-up written above each point.
    Right, per call, on a log scale so that the warm line and the floor (the same call
    without the manual) stay apart and visible: cold, warm and floor time to first token,
    the cold / warm ratio above each cold point. The recording is named in the title (model
    file, engine, cores, date). The figure is closed before it is returned, so a notebook
    shows it once (as the cell's value), and a script can ``savefig`` it.
    """
    import matplotlib.pyplot as plt

    results = _recorded(results)
    rows, per_question = ttft_points(results), question_seconds(results)
    prov = results["provenance"]
    tokens = [r["prefix tokens"] for r in rows]
    fig, (ask, call) = plt.subplots(1, 2, figsize=(9.5, 4.6), dpi=100)
    at = range(len(per_question))
    busted = [q["clock first, s"] for q in per_question]
    invariant = [q["invariant, s"] for q in per_question]
    ask.bar([i - 0.2 for i in at], busted, 0.4, color="#c0392b", label="clock first: 3 cold calls")
    ask.bar(
        [i + 0.2 for i in at], invariant, 0.4, color="#1e8449", label="invariant: 1 cold + 2 warm"
    )
    for i, q in zip(at, per_question, strict=True):
        ask.annotate(
            q["faster"],
            (i, q["clock first, s"]),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize=9,
        )
    ask.set_xticks(list(at), [f"{t:,}" for t in tokens])
    ask.set_title("per question (3 experts): seconds and speed-up", fontsize=10)
    ask.set_ylabel("seconds to first token, summed")
    ask.set_ylim(0, max(busted) * 1.12)
    call.plot(tokens, [r["cold s"] for r in rows], "o-", color="#c0392b", label=COLD)
    call.plot(tokens, [r["warm s"] for r in rows], "o-", color="#1e8449", label=WARM)
    call.plot(
        tokens,
        [r["floor s"] for r in rows],
        "s--",
        color="#5d6d7e",
        label=FLOOR,
        markerfacecolor="white",
        zorder=3,
    )
    for r in rows:
        last = r is rows[-1]  # the rightmost label goes left of its point, inside the axes
        call.annotate(
            f"{r['cold / warm']:g}x",
            (r["prefix tokens"], r["cold s"]),
            textcoords="offset points",
            xytext=(-8, -6) if last else (6, -13),
            ha="right" if last else "left",
            va="top" if last else "baseline",
            fontsize=9,
        )
    call.set_yscale("log")
    call.set_ylim(0.1, max(r["cold s"] for r in rows) * 10)  # room for the legend above
    call.set_title("per call (log scale)", fontsize=10)
    call.set_ylabel("time to first token, s (median)")
    for ax in (ask, call):
        ax.set_xlabel("prefix tokens (the manual's first chapters)")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=9)
    fig.suptitle(
        f"{prov['model_file']} on {prov['engine']} {prov['engine_version']}, "
        f"{prov['cores']} cores, recorded {prov['date']}",
        fontsize=10,
    )
    fig.tight_layout()
    plt.close(fig)
    return fig


LAYOUT_COLOURS = {
    "reused": ("#d5f5e3", "#1e8449"),  # the cache serves it
    "differs": ("#fadbd8", "#c0392b"),  # differs per call: the calls part here
    "read again": ("#eaecee", "#7f8c8d"),  # after the first difference: read anew
}


def plot_prompt_layouts(system_bytes: int) -> Any:
    """Two expert prompts drawn part by part, one row per order, the manual in one column.

    The top row puts a clock line first, the bottom row the manual first. Each part is
    coloured by what a prefix cache does with it on the second and third expert's call:
    reused, differs per call (where the calls part), or read again (after the first
    difference). ``system_bytes`` labels the instructions + manual part. The manual
    sits in the same column in both rows, so the eye compares like with like (notebook 05).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    columns = [
        ("line 0", 1.6),
        ("system 1", 4.4),
        ("system 2", 1.5),
        ("history", 1.5),
        ("question", 1.5),
    ]
    manual = f"instructions + manual\n{system_bytes:,} bytes"
    rows: dict[str, list[tuple[str, str | None]]] = {
        "clock first": [
            ("Current time: ...", "differs"),
            (manual, "read again"),
            ("persona", "differs"),
            ("thread's history\n(state)", "read again"),
            ("question", "read again"),
        ],
        "manual first": [
            ("(nothing)", None),
            (manual, "reused"),
            ("persona", "differs"),
            ("thread's history\n(state)", "read again"),
            ("question", "read again"),
        ],
    }
    fig, ax = plt.subplots(figsize=(9.5, 2.8), dpi=100)
    for y, (name, parts) in zip((1.3, 0.0), rows.items(), strict=True):
        ax.text(-0.15, y + 0.45, name, ha="right", va="center", fontsize=10, weight="bold")
        x, parted = 0.0, False
        for (_, width), (label, kind) in zip(columns, parts, strict=True):
            if kind is None:
                ax.text(
                    x + width / 2,
                    y + 0.45,
                    label,
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="#7f8c8d",
                )
            else:
                face, edge = LAYOUT_COLOURS[kind]
                ax.add_patch(
                    Rectangle(
                        (x + 0.05, y),
                        width - 0.1,
                        0.9,
                        facecolor=face,
                        edgecolor=edge,
                        linewidth=1.5,
                    )
                )
                ax.text(x + width / 2, y + 0.45, label, ha="center", va="center", fontsize=9)
            if kind == "differs" and not parted:
                ax.text(
                    x + 0.05,
                    y + 0.95,
                    "▼ the calls part here",
                    ha="left",
                    va="bottom",
                    fontsize=9,
                    color="#c0392b",
                )
                parted = True
            x += width
    ax.set_xlim(-2.2, sum(w for _, w in columns) + 0.1)
    ax.set_ylim(-0.75, 2.5)
    ax.axis("off")
    ax.legend(
        handles=[Patch(facecolor=f, edgecolor=e, label=k) for k, (f, e) in LAYOUT_COLOURS.items()],
        loc="lower center",
        ncol=3,
        fontsize=9,
        frameon=False,
        bbox_to_anchor=(0.55, -0.02),
    )
    fig.tight_layout()
    plt.close(fig)
    return fig

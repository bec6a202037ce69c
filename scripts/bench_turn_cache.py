"""What the turn cache costs: one turn with and without it, same scripted work.

Each round invokes the stage 02 agent and the stage 03 turn-cached agent on
the same batch (N store_requirement calls plus the three readers in one
reply), alternating which goes first, and prints the median wall time per
turn and the median (and quartiles) of the per-round ratio, all measured in
this one run (machines here are noisy: read the quartiles before the ratio).
``--latency S`` adds the same seeded random tool latency (0..S seconds per
call) to both agents, so the time readers spend waiting for their batch's
writers is part of the measurement.

    .venv/bin/python scripts/bench_turn_cache.py [--rounds 30] [--fields 5 50] [--latency 0.005]
"""

from __future__ import annotations

import argparse
import statistics
import time

from agentstate.fixtures import label_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import build_reducer_agent, build_turn_cache_agent
from agentstate.simulation import ToolLatencyMiddleware

READERS = ("get_collected_requirements", "validate_manifest", "generate_rds_manifest")


def model(n_fields: int, rounds: int) -> ScriptedChatModel:
    batch = reply(*store_calls(label_fields(n_fields)), *(tool_call(r) for r in READERS))
    return ScriptedChatModel(script=[batch, reply(text="Done.")] * rounds)


def latency_for(seconds: float, seed: int) -> list[ToolLatencyMiddleware]:
    """The same seeded delays for both agents; none when ``seconds`` is 0."""
    return [ToolLatencyMiddleware(seconds, seed=seed)] if seconds else []


def turn_ms(agent) -> float:
    start = time.perf_counter()
    agent.invoke(user_turn())
    return (time.perf_counter() - start) * 1000


def interleaved_rounds(plain, cached, rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """ms per turn for each agent, one turn each per round, the order swapped every round."""
    samples: dict[str, list[float]] = {"plain": [], "cached": []}
    for i in range(rounds + warmup):
        order = [("plain", plain), ("cached", cached)]
        for name, agent in order if i % 2 == 0 else reversed(order):
            ms = turn_ms(agent)
            if i >= warmup:
                samples[name].append(ms)
    return samples


def summary(samples: dict[str, list[float]]) -> tuple[float, float, float, float, float]:
    """Both medians, then the median and quartiles of the per-round ratio cached/plain.

    Pairing the two turns of a round cancels most of the drift a shared
    machine adds; the quartiles say how much noise is left.
    """
    ratios = [c / p for p, c in zip(samples["plain"], samples["cached"], strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return statistics.median(samples["plain"]), statistics.median(samples["cached"]), median, q1, q3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--fields", type=int, nargs="+", default=[5, 50])
    parser.add_argument(
        "--latency",
        type=float,
        nargs="+",
        default=[0.0],
        help="max simulated seconds per tool call (one row per value)",
    )
    args = parser.parse_args()
    total = args.rounds + 2
    print(
        "| fields in the batch | tool latency (ms) | without cache (median ms) "
        "| with turn cache (median ms) | ratio (median of rounds) | ratio q1-q3 | rounds |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for latency in args.latency:
        for n in args.fields:
            plain = build_reducer_agent(model(n, total), middleware=latency_for(latency, n))
            cached = build_turn_cache_agent(model(n, total), middleware=latency_for(latency, n))
            without_ms, with_ms, ratio, q1, q3 = summary(
                interleaved_rounds(plain, cached, args.rounds)
            )
            shown = f"0..{latency * 1000:g}" if latency else "none"
            print(
                f"| {n} | {shown} | {without_ms:.1f} | {with_ms:.1f} | {ratio:.2f}x "
                f"| {q1:.2f}-{q3:.2f} | {args.rounds} |"
            )


if __name__ == "__main__":
    main()

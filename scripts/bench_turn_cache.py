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

``--never-writes`` prints a second table instead: the wall time of a turn in
which one of 5 writers never writes (a reviewer rejects it, a call limit
blocks it, it fails for good under ``ToolRetryMiddleware``), with the cache's
default 10 s reader timeout; run it with ``PYTHONPATH=<old checkout>/src`` for
the figures of an older cache.
"""

from __future__ import annotations

import argparse
import statistics
import time

from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agentstate.fixtures import label_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import build_reducer_agent, build_turn_cache_agent, rds_turn_cache
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


class FailLastStore(AgentMiddleware):
    """Raises for the last field's store_requirement call: a writer that fails for good."""

    def __init__(self, field_name: str) -> None:
        super().__init__()
        self.field_name = field_name

    def wrap_tool_call(self, request, handler):
        if request.tool_call["args"].get("field_name") == self.field_name:
            raise ConnectionError("backend down")
        return handler(request)


def never_writes_turn_ms(case: str) -> float:
    """ms for one turn (plus its resume, for a review) where the last of 5 writers never writes."""
    fields = label_fields(5)
    last = list(fields)[-1]
    batch = reply(*store_calls(fields), tool_call("get_collected_requirements"))
    model = ScriptedChatModel(script=[batch, reply(text="Done.")])
    cache = rds_turn_cache()  # the default 10 s reader timeout
    around = {
        "rejected by a reviewer (batched HITL)": [
            cache,
            HumanInTheLoopMiddleware({"store_requirement": True}),
        ],
        "blocked by ToolCallLimitMiddleware": [
            cache,
            ToolCallLimitMiddleware(tool_name="store_requirement", run_limit=4),
        ],
        "fails for good (ToolRetryMiddleware before the cache)": [
            ToolRetryMiddleware(max_retries=0),
            cache,
            FailLastStore(last),
        ],
    }[case]
    agent = build_reducer_agent(model, middleware=around, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": case}}
    start = time.perf_counter()
    agent.invoke(user_turn(), config)
    if agent.get_state(config).interrupts:
        decisions = [{"type": "approve"}] * 4 + [{"type": "reject"}]
        agent.invoke(Command(resume={"decisions": decisions}), config)
    return (time.perf_counter() - start) * 1000


def never_writes_table(rounds: int) -> None:
    print("| the writer that never writes | turn (median ms) | min-max ms | rounds |")
    print("|---|---:|---:|---:|")
    for case in (
        "rejected by a reviewer (batched HITL)",
        "blocked by ToolCallLimitMiddleware",
        "fails for good (ToolRetryMiddleware before the cache)",
    ):
        samples = [never_writes_turn_ms(case) for _ in range(rounds)]
        print(
            f"| {case} | {statistics.median(samples):.0f} "
            f"| {min(samples):.0f}-{max(samples):.0f} | {rounds} |"
        )


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
    parser.add_argument(
        "--never-writes",
        action="store_true",
        help="time turns where one writer never writes, instead of the cost table",
    )
    args = parser.parse_args()
    if args.never_writes:
        never_writes_table(args.rounds)
        return
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

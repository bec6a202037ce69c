"""What the turn cache costs: one turn with and without it, same scripted work.

Each round invokes the lesson 02 agent and the lesson 03 turn-cached agent on
the same batch (N store_requirement calls plus the three readers in one
reply), alternating which goes first, and prints the median wall time per
turn and the median (and quartiles) of the per-round ratio, all measured in
this one run (machines here are noisy: read the quartiles before the ratio).
``--latency S`` adds the same seeded random tool latency (0..S seconds per
call) to both agents, so the time readers spend waiting for their batch's
writers is part of the measurement.

    .venv/bin/python scripts/bench_turn_cache.py [--rounds 30] [--fields 5 50] [--latency 0.005]

``--never-writes`` times something else instead: a turn in which one of 5
writers never writes (a reviewer rejects it, a call limit blocks it, it fails
for good under ``ToolRetryMiddleware``), with the cache's default 10 s reader
timeout; ``--before COMMIT`` also times the cache of an older commit (its
``src`` exported with ``git archive`` and imported through ``PYTHONPATH`` in a
child process), recorded beside this checkout's figures.

The raw samples go to ``data/results/turn_cache_benchmark.json`` (or
``turn_cache_never_writes_benchmark.json``) with their provenance
(``scripts/bench_results.py``); ``scripts/bench_docs.py`` renders
docs/benchmarks.md's tables from them, and the same tables are printed here.

    .venv/bin/python scripts/bench_turn_cache.py --never-writes --rounds 5 --before aa83565
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench_docs import render
from bench_results import resolve, samples_at, start_provenance, write_results
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import agentstate
from agentstate.lessons.fixtures import label_fields, store_calls, user_turn
from agentstate.lessons.simulation import ToolLatencyMiddleware
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import build_reducer_agent, build_turn_cache_agent, rds_turn_cache

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
    samples: dict[str, list[float]] = {"plain_ms": [], "cached_ms": []}
    for i in range(rounds + warmup):
        order = [("plain_ms", plain), ("cached_ms", cached)]
        for name, agent in order if i % 2 == 0 else reversed(order):
            ms = turn_ms(agent)
            if i >= warmup:
                samples[name].append(ms)
    return samples


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


NEVER_WRITES = (
    "rejected by a reviewer (batched HITL)",
    "blocked by ToolCallLimitMiddleware",
    "fails for good (ToolRetryMiddleware before the cache)",
)


def never_writes_samples(rounds: int) -> dict[str, list[float]]:
    """ms per turn for each case, ``rounds`` turns each, with the ``agentstate`` imported here."""
    return {case: [never_writes_turn_ms(case) for _ in range(rounds)] for case in NEVER_WRITES}


def never_writes_at(commit: str, rounds: int) -> dict:
    """The same turns on the cache of ``commit``: its ``src`` and ``data`` exported, a child run."""
    args = ["--never-writes", "--rounds", str(rounds), "--samples-only"]
    full, samples = samples_at(commit, __file__, args)
    return {"code": commit, "commit": full, "rounds": rounds, "samples_ms": samples}


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument(
        "--before", metavar="COMMIT", help="--never-writes: also time the cache at COMMIT"
    )
    parser.add_argument("--before-rounds", type=int, default=2, help="rounds for --before")
    parser.add_argument("--out", type=Path, help="write the results here instead of data/results")
    parser.add_argument("--samples-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 4 and not args.never_writes:
        parser.error("--rounds must be at least 4 (quartiles of the per-round ratio)")
    if args.samples_only:  # the child run of never_writes_at: samples on stdout, nothing written
        print(json.dumps({"agentstate": agentstate.__file__, **never_writes_samples(args.rounds)}))
        return
    if args.before:
        resolve(args.before)  # before anything is timed
    provenance = start_provenance("bench_turn_cache.py", argv, [])
    if args.never_writes:
        runs = [
            {
                "code": "this checkout",
                "commit": provenance["git_commit"],
                "rounds": args.rounds,
                "samples_ms": never_writes_samples(args.rounds),
            }
        ]
        if args.before:
            runs.append(never_writes_at(args.before, args.before_rounds))
        name, data = "turn_cache_never_writes", {"runs": runs}
    else:
        rows = []
        for latency in args.latency:
            for n in args.fields:
                total = args.rounds + 2
                plain = build_reducer_agent(model(n, total), middleware=latency_for(latency, n))
                cached = build_turn_cache_agent(model(n, total), middleware=latency_for(latency, n))
                samples = interleaved_rounds(plain, cached, args.rounds)
                rows.append({"fields": n, "latency_s": latency, **samples})
        name, data = "turn_cache", {"rounds": args.rounds, "rows": rows}
    path = write_results(name, provenance, data, args.out)
    print(render(name, json.loads(path.read_text())))
    print(f"written {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Benchmark the doctor: ``diagnose`` per graph of the series, and what ``Watch`` adds to a turn.

- ``diagnose``: every broken and fixed builder of notebooks 01-06 (and the
  library defaults) is built once, after imports; then ``diagnose`` runs
  ``--repeat`` times on it and the median is printed (the issue asks for
  under 1 s per graph). The first call on a graph is printed too: it reads
  and parses the tools' source files, which later calls find in a cache.
- ``Watch``: one turn of an agent, alternately without a handler, with a
  handler that does nothing (what LangChain's callback machinery costs by
  itself) and with a watch (``report()`` included), ``--turns`` times each in
  one run; the ratio of the medians with and without is the overhead (the
  issue asks for under 10%). Two turns: lesson 03's fixed RDS agent (five parallel writers and a
  reader, scripted model) and lesson 05's experts with the timestamp before the
  manual (three model calls of about 110 k characters each, scripted model, so
  the prompt comparison is as large as it gets and the model costs nothing).

The raw times go to ``data/results/doctor_benchmark.json`` with their
provenance (``scripts/bench_results.py``); ``scripts/bench_docs.py`` renders
docs/doctor/README.md's "Speed" tables from it.

    python scripts/bench_doctor.py
    python scripts/bench_doctor.py --repeat 7 --turns 40
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_docs import render
from bench_results import start_provenance, write_results
from langchain_core.callbacks import BaseCallbackHandler

from agentstate import rds
from agentstate.doctor import Watch, diagnose
from agentstate.doctor.facts.library_defaults import LIBRARY_DEFAULTS
from agentstate.experts import ExpertsConfig, build_experts_graph, user_turn
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    AddNotesState,
    UniqueNotesState,
    build_notes_agent,
    reader_batch_model,
)
from agentstate.models import ScriptedChatModel, reply


def model() -> ScriptedChatModel:
    return ScriptedChatModel(script=[reply(text="ok")])


def graphs() -> dict[str, Callable[[], Any]]:
    """Every graph the doctor is benchmarked on, built lazily."""
    return {
        "01 file storage (broken)": lambda: rds.build_file_storage_agent(model()),
        "02 plain dict (broken)": lambda: rds.build_plain_dict_agent(model()),
        "02 reducer (fixed)": lambda: rds.build_reducer_agent(model()),
        "03 original cache (broken)": lambda: rds.build_original_cache_agent(model()),
        "03 naive cache (broken)": lambda: rds.build_naive_cache_agent(model()),
        "03 turn cache (fixed)": lambda: rds.build_turn_cache_agent(model()),
        "04 split schema (broken)": lambda: rds.build_split_schema_agent(model(), model()),
        "04 cache fix (broken)": lambda: rds.build_cache_fix_agent(model(), model()),
        "04 shared schema (fixed)": lambda: rds.build_shared_schema_agent(model(), model()),
        "04 operator.add list (broken)": lambda: build_notes_agent(AddNotesState),
        "04 append_unique list (fixed)": lambda: build_notes_agent(UniqueNotesState),
        "05 experts, timestamp first (broken)": lambda: build_experts_graph(
            ExpertsConfig(prefix_policy="timestamp_first")
        ),
        "05 experts, invariant (fixed)": lambda: build_experts_graph(),
        **LIBRARY_DEFAULTS,
    }


def bench_diagnose(repeat: int) -> list[dict[str, Any]]:
    print(f"diagnose, median of {repeat} runs after the first (seconds)")
    print(f"{'graph':<40} {'first':>7} {'median':>7}  codes")
    worst = 0.0
    records = []
    for name, build in graphs().items():
        graph = build()
        start = time.perf_counter()
        report = diagnose(graph, name)
        first = time.perf_counter() - start
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            diagnose(graph, name)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        worst = max(worst, median, first)
        print(f"{name:<40} {first:7.3f} {median:7.3f}  {', '.join(report.codes()) or '-'}")
        records.append({"graph": name, "first_s": first, "times_s": times,
                        "codes": list(report.codes())})  # fmt: skip
    print(f"slowest: {worst:.3f} s")
    return records


class NoOp(BaseCallbackHandler):
    """A handler that does nothing: what any callback costs LangChain and LangGraph."""

    run_inline = True


def rds_agent(turns: int) -> Any:
    """Lesson 03's fixed agent with a script for ``3 * turns`` turns of 5 writers and a reader."""
    return rds.build_turn_cache_agent(reader_batch_model(dict(POSTGRES_FIELDS), 3 * turns))


def experts_graph(turns: int) -> Any:
    """Lesson 05's experts, timestamp first, on a scripted model (the prompts are real)."""
    ticks = itertools.count()
    model = ScriptedChatModel(script=[reply(text="note")] * (12 * turns))
    config = ExpertsConfig(
        mode="llm",
        expert_model=model,
        prefix_policy="timestamp_first",
        clock=lambda: f"tick {next(ticks)}",
    )
    return build_experts_graph(config)


def bench_watch(turns: int) -> list[dict[str, Any]]:
    rds_turn = {"messages": [{"role": "user", "content": "store the fields"}]}
    question = user_turn("How do I report a lost card, and which fees and rules apply?")
    print(f"\nWatch overhead, {turns} turns without and {turns} with, alternating, one run")
    print("(no-op: the same turn with a handler that does nothing: LangChain's own callback cost)")
    print(f"{'turn':<44} {'without ms':>10} {'no-op':>7} {'with ms':>8} {'ratio':>6}  codes")
    records = []
    for name, graph, inputs, run_async in (
        ("03 turn cache: 5 writers + reader (sync)", rds_agent(turns), rds_turn, False),
        ("03 turn cache: 5 writers + reader (async)", rds_agent(turns), rds_turn, True),
        ("05 experts, timestamp first (sync)", experts_graph(turns), question, False),
    ):
        watch = Watch(graph)
        without: list[float] = []
        noop: list[float] = []
        with_watch: list[float] = []
        codes: list[str] = []
        for _ in range(turns):
            for timed, config in (
                (without, {}),
                (noop, {"callbacks": [NoOp()]}),
                (with_watch, {"callbacks": [watch]}),
            ):
                start = time.perf_counter()
                if run_async:
                    asyncio.run(graph.ainvoke(inputs, config))
                else:
                    graph.invoke(inputs, config)
                if timed is with_watch:
                    codes = watch.report().codes()
                    watch.reset()
                timed.append(time.perf_counter() - start)
        a, b = statistics.median(without) * 1000, statistics.median(with_watch) * 1000
        c = statistics.median(noop) * 1000
        print(f"{name:<44} {a:10.1f} {c:7.1f} {b:8.1f} {b / a:6.3f}  {', '.join(codes) or '-'}")
        records.append({"turn": name, "without_ms": [t * 1000 for t in without],
                        "noop_ms": [t * 1000 for t in noop],
                        "with_ms": [t * 1000 for t in with_watch], "codes": codes})  # fmt: skip
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="diagnose runs per graph")
    parser.add_argument("--turns", type=int, default=30, help="turns with and without Watch")
    parser.add_argument("--out", type=Path, help="write the results here instead of data/results")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.turns < 2:
        parser.error("--repeat must be at least 1 and --turns at least 2")
    provenance = start_provenance("bench_doctor.py", argv, ["deepagents"])
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    data = {
        "repeat": args.repeat,
        "turns": args.turns,
        "diagnose": bench_diagnose(args.repeat),
        "watch": bench_watch(args.turns),
    }
    path = write_results("doctor", provenance, data, args.out)
    print("\n" + render("doctor/diagnose", json.loads(path.read_text())))
    print("\n" + render("doctor/watch", json.loads(path.read_text())))
    print(f"written {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

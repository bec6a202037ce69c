"""The doctor on the corpus of real shapes (``tests/doctor_corpus``), and on the series' graphs.

For each corpus graph: its shape, the public project it follows (langchain-ai's
own or third-party), the verdict a scripted run proves (and how), and what the
doctor says (``diagnose``, plus ``Watch`` on a run where static analysis cannot
tell). Then precision and recall over (graph, hazard) pairs, the false errors
(error findings no run reproduces), for langchain-ai shapes and third-party
shapes separately, and the median ``diagnose`` time per graph. Then every graph of
the series (``tests/test_doctor_series.py``): its lesson's hazard, what the
doctor says, and its false errors.

    python scripts/doctor_corpus.py
    python scripts/doctor_corpus.py --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the corpus lives in the tests package

from agentstate.doctor import Report, diagnose  # noqa: E402

SHORT = {
    "unreduced-parallel-write": "parallel-write",
    "undeclared-key": "undeclared",
    "unseen-key-read": "unseen-read",
    "same-batch-read": "same-batch",
    "list-doubled-by-subagent": "doubled",
    "memory-in-react-loop": "memory-loop",
    "subagent-drops-key": "drops-key",
    "file-read-modify-write": "read-modify-write",
    "prefix-not-invariant": "prefix",
}


def said(report: Report, watched: Report | None) -> str:
    parts = [f"{f.severity} {SHORT.get(f.code, f.code)}" for f in report if f.severity != "info"]
    parts = list(dict.fromkeys(parts))
    if watched is not None:
        parts += [f"Watch: {f.severity} {SHORT.get(f.code, f.code)}" for f in watched]
    return "; ".join(parts) or "none"


def verdict(codes: frozenset[str] | set[str]) -> str:
    return ", ".join(SHORT.get(c, c) for c in sorted(codes)) or "none"


def timed(graph: Any, repeat: int) -> float:
    diagnose(graph)  # the first call reads the sources; later calls find them cached
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        diagnose(graph)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _rates(tp: int, fp: int, fn: int) -> tuple[float, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall


def corpus(repeat: int) -> int:
    from tests.doctor_corpus import CASES

    origins = sorted({c.origin for c in CASES})
    counts = ", ".join(f"{sum(c.origin == o for c in CASES)} {o}" for o in origins)
    print(f"## Corpus: {len(CASES)} graphs ({counts}), each verdict proven by a scripted run\n")
    head = ["#", "shape", "follows", "origin", "verdict (run)", "how the run proves it"]
    print("| " + " | ".join([*head, "doctor says", "ms"]) + " |")
    print("|--:|:--|:--|:--|:--|:--|:--|--:|")
    tally = {o: [0, 0, 0, 0] for o in origins}  # tp, fp, fn, false errors
    slowest = 0.0
    for number, case in enumerate(CASES, 1):
        proof = case.prove()
        graph = case.build()
        report = diagnose(graph)
        watched = case.watch() if case.watch is not None else None
        found = set(report.codes()) | (set(watched.codes()) if watched is not None else set())
        counts_of = tally[case.origin]
        counts_of[0] += len(found & case.expected)
        counts_of[1] += len(found - case.expected)
        counts_of[2] += len(case.expected - found)
        counts_of[3] += sum(1 for f in report.errors if f.code not in case.expected)
        ms = timed(graph, repeat) * 1000
        slowest = max(slowest, ms)
        mismatch = "" if proof.hazards == case.expected else " (RUN DISAGREES)"
        print(
            f"| {number} | {case.shape} | {case.follows} | {case.origin} "
            f"| {verdict(proof.hazards)}{mismatch} | {proof.how} | {said(report, watched)} "
            f"| {ms:.1f} |"
        )
    print()
    problems = 0
    for origin in origins:
        tp, fp, fn, false_errors = tally[origin]
        precision, recall = _rates(tp, fp, fn)
        graphs = sum(c.origin == origin for c in CASES)
        print(
            f"{origin} ({graphs} graphs): precision {precision:.2f} ({tp} of {tp + fp} reported "
            f"hazards reproduced by a run), recall {recall:.2f} ({tp} of {tp + fn} planted "
            f"hazards found), false errors {false_errors}"
        )
        problems += false_errors + fn
    print(f"slowest diagnose {slowest:.1f} ms (median of {repeat})")
    return problems


def series() -> int:
    from tests.test_doctor_series import FIXED, PAIRS

    print("\n## The series' graphs (their hazards proven by the lessons' own tests)\n")
    print("| graph | lesson's hazard | doctor says | false errors |")
    print("|:--|:--|:--|--:|")
    bad = 0
    rows: list[tuple[str, Any, set[str]]] = [
        (name, broken, {hazard}) for name, (broken, hazard, _) in PAIRS.items()
    ]
    rows += [(name, build, set()) for name, build in FIXED.items()]
    for name, build, expected in rows:
        report = diagnose(build())
        wrong = [f for f in report.errors if f.code not in expected]
        bad += len(wrong)
        print(f"| {name} | {verdict(expected)} | {said(report, None)} | {len(wrong)} |")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="diagnose runs per graph timed")
    args = parser.parse_args(argv)
    problems = corpus(args.repeat)
    problems += series()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

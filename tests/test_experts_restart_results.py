"""Issue 26: the recorded restart case belongs to this repository and docs show its figures.

``data/results/engine_restart.json`` (written by ``scripts/bench_experts.py``)
is checked against the manual and prompts here, and its medians and shares are
recomputed from the raw rounds. The restart table and its figures in
docs/benchmarks.md are a ``results:engine_restart`` block, checked with every
other block by ``tests/test_benchmark_docs.py``. No engine needed.
"""

import copy

import pytest

from agentstate.experts.manual import load_manual
from agentstate.experts.restart_benchmark import (
    TARGET_SHARE,
    load_restart_results,
    restart_checks,
    restart_point,
)

RESULTS = load_restart_results()


def test_the_recorded_restart_case_matches_the_repository_and_its_raw_rounds():
    checks = restart_checks(RESULTS)
    assert len(checks) == 4 * len(RESULTS["restart"]["points"]) and all(checks.values()), checks


def test_it_covers_every_size_of_the_sweep_and_meets_the_target():
    from agentstate.experts.benchmark import SWEEP_SECTIONS

    points = RESULTS["restart"]["points"]
    assert [p["sections"] for p in points] == list(SWEEP_SECTIONS)
    assert all(p["share_kept"] >= TARGET_SHARE for p in points), [p["share_kept"] for p in points]
    assert RESULTS["provenance"]["model_file"] == "SmolLM2-135M-Instruct.Q4_0.gguf"


def test_a_changed_round_or_manual_fails_the_check():
    stale = copy.deepcopy(RESULTS)
    stale["restart"]["points"][0]["raw"][0]["restored_ms"] += 5000.0
    stale["restart"]["points"][-1]["prefix_sha256"] = "0" * 64
    failed = [name for name, ok in restart_checks(stale).items() if not ok]
    points, rounds = stale["restart"]["points"], RESULTS["restart"]["rounds"]
    assert failed == [
        f"{points[0]['sections']} chapters: medians recomputed from {rounds} rounds",
        f"{points[-1]['sections']} chapters: part and prefix hashes match",
    ]


def test_a_point_takes_medians_and_the_share_of_the_warm_saving_kept():
    rounds = [
        {"cold_ms": c, "warm_ms": w, "restored_ms": r, "restored": True, "restore_s": 0.02,
         "state_bytes": 14_000_000, "same_replies": True}
        for c, w, r in ((2000.0, 300.0, 340.0), (2400.0, 280.0, 330.0), (2200.0, 500.0, 900.0))
    ]  # fmt: skip
    point = restart_point(1, load_manual(sections=1), rounds)
    assert (point["cold_ms"], point["warm_ms"], point["restored_ms"]) == (2200.0, 300.0, 340.0)
    assert point["share_kept"] == pytest.approx((2200 - 340) / (2200 - 300), abs=1e-3)
    assert point["restored_every_round"] and point["same_replies_every_round"]
    rounds[1]["same_replies"] = False
    assert restart_point(1, load_manual(sections=1), rounds)["same_replies_every_round"] is False

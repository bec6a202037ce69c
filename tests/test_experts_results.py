"""Stage 05: the committed benchmark results belong to this repository's manual and prompts."""

import copy

import pytest

from agentstate.experts.results import (
    case_rows,
    load_results,
    markdown_table,
    mermaid_bars,
    provenance_checks,
    summary_rows,
    sweep_rows,
)

RESULTS = load_results()


def test_provenance_matches_the_repository():
    checks = provenance_checks(RESULTS)
    assert checks and all(checks.values()), checks


def test_a_changed_manual_hash_fails_the_check():
    stale = copy.deepcopy(RESULTS)
    stale["provenance"]["manual_sha256"] = "0" * 64
    stale["sizes"][0]["prefix_sha256"] = "0" * 64
    failed = [name for name, ok in provenance_checks(stale).items() if not ok]
    assert "manual sha256 matches data/manual" in failed and len(failed) == 2


def test_figures_are_consistent_with_their_raw_runs():
    for size in RESULTS["sizes"]:
        assert size["invariant_prefix_identical"] is True
        rounds = size["raw"]["sequential"]
        assert len(rounds) == RESULTS["rounds"] and size["cases"].keys() == size["raw"].keys()
        # the floor is no lower bound of warm: the first no-manual call of a round reads the
        # instructions cold, so its median can sit above warm's (the share then reads > 100%)
        assert max(size["floor_ms"], size["warm_ms"]) < size["cold_ms"]
        expected = (size["cold_ms"] - size["warm_ms"]) / (size["cold_ms"] - size["floor_ms"])
        assert size["saving_share"] == pytest.approx(expected, abs=1e-3)
    for point in RESULTS["sweep"]["points"]:
        assert len(point["raw"]["sequential"]) == RESULTS["sweep"]["rounds"]
        assert max(point["floor_ms"], point["warm_ms"]) < point["cold_ms"]
        expected = (point["cold_ms"] - point["warm_ms"]) / (point["cold_ms"] - point["floor_ms"])
        assert point["saving_share"] == pytest.approx(expected, abs=1e-3)


def test_tables_and_chart_render():
    assert markdown_table(summary_rows(RESULTS)).count("\n") == len(RESULTS["sizes"]) + 1
    assert len(case_rows(RESULTS)) == 5 * len(RESULTS["sizes"])
    assert mermaid_bars(RESULTS).startswith("xychart-beta")


def _runs(cold, first, warm, floor):
    experts = ["technical_specialist", "compliance_auditor", "support_concierge"]
    run = lambda ttft: {"experts": experts, "ttft_ms": ttft, "total_ms": sum(ttft.values())}  # noqa: E731
    return {
        "cache_busted": [run(dict.fromkeys(experts, cold))],
        "sequential": [run({experts[0]: first, experts[1]: warm, experts[2]: warm + 2})],
        "no_manual": [run(dict.fromkeys(experts, floor))],
    }


def test_a_sweep_point_reports_cold_warm_floor_and_the_share_of_the_ideal_saving():
    from agentstate.experts.benchmark import sweep_point

    point = sweep_point(4, 2152, _runs(cold=9000.0, first=9100.0, warm=300.0, floor=200.0))
    assert (point["cold_ms"], point["warm_ms"], point["floor_ms"]) == (9000.0, 301.0, 200.0)
    assert point["saving_share"] == pytest.approx((9000 - 301) / (9000 - 200), abs=1e-3)
    assert point["warm_cold_ratio"] == pytest.approx(9000 / 301, abs=0.1)


def test_sweep_hashes_are_checked_and_tabulated():
    from agentstate.experts.benchmark import sweep_point
    from agentstate.experts.manual import load_manual
    from agentstate.experts.prompts import system_prefix

    part = load_manual(sections=2)
    point = sweep_point(2, 939, _runs(5000.0, 5000.0, 250.0, 200.0))
    good = {**point, "part_sha256": part.sha256, "prefix_sha256": system_prefix(part).sha256}
    document = {**copy.deepcopy(RESULTS), "sweep": {"points": [good, {**good, "sections": 4}]}}
    checks = provenance_checks(document)
    assert checks["sweep 2 sections: part and prefix hashes match"] is True
    assert checks["sweep 4 sections: part and prefix hashes match"] is False
    assert [row["chapters"] for row in sweep_rows(document)] == [2, 4]
    assert (
        sweep_rows(document)[0]["share of ideal saving"] == "98.9%"
    )  # (5000 - 251) / (5000 - 200)

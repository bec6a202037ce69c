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
        assert size["floor_ms"] <= size["warm_ms"] < size["cold_ms"]
        expected = (size["cold_ms"] - size["warm_ms"]) / (size["cold_ms"] - size["floor_ms"])
        assert size["saving_share"] == pytest.approx(expected, abs=1e-3)


def test_tables_and_chart_render():
    assert markdown_table(summary_rows(RESULTS)).count("\n") == len(RESULTS["sizes"]) + 1
    assert len(case_rows(RESULTS)) == 5 * len(RESULTS["sizes"])
    assert mermaid_bars(RESULTS).startswith("xychart-beta")

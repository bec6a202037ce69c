"""Going further 05 (the experts graph and the recorded benchmark): every claim its printed
tables make, checked in full here so the notebook reads as a lesson, not an audit.

The notebook's code cells run from its own source as a reader runs them (the engine cells
are left out: ``tests/test_engine_state_cache.py`` and ``tests/test_engine_restart.py`` check
the saved state against a real engine), then each test asserts one section's claim.
"""

from pathlib import Path
from statistics import median

import jupytext
import pytest

from agentstate.experts import merge_or_reset, provenance_checks
from agentstate.experts.restart_benchmark import load_restart_results, restart_checks

SOURCE = (
    Path(__file__).resolve().parents[1]
    / "notebooks"
    / "_src"
    / "going_further"
    / "05_benchmark_and_provenance.py"
)


@pytest.fixture(scope="module")
def page() -> dict:
    """The notebook's namespace after every code cell that needs no engine."""
    namespace: dict = {}
    for cell in jupytext.read(SOURCE).cells:
        if cell.cell_type != "code" or "EngineServer" in cell.source:
            continue
        exec(compile(cell.source, str(SOURCE), "exec", dont_inherit=True), namespace)
    return namespace


def test_every_expert_call_sent_the_same_system_message_1(page):
    state = page["state"]
    assert set(state["prefix_by_call"]) == set(page["EXPERTS"])
    assert set(state["prefix_by_call"].values()) == {state["prefix_sha256"]}


def test_the_rules_route_by_keywords_and_fall_back_to_the_concierge(page):
    from agentstate.experts import route_by_rules

    routes = [route_by_rules(q)["experts"] for q in page["questions"]]
    assert routes[-1] == ["support_concierge"]
    assert len(routes[2]) == 3  # the page's ALL3 question reaches every expert


def test_an_unusable_llm_reply_falls_back_to_the_rules_with_a_reason(page):
    routed = page["routed"]
    assert [r["mode"] for r in routed] == ["llm", "llm->rules", "llm->rules"]
    assert routed[0]["experts"] == ["compliance_auditor", "support_concierge"]
    assert all(r["reason"] for r in routed[1:])


def test_the_fan_out_needs_its_reducer(page):
    assert merge_or_reset({"a": "1"}, {"b": "2"}) == {"a": "1", "b": "2"}
    assert page["without_reducer"].startswith("InvalidUpdateError")


def test_super_steps_per_execution_mode_and_one_answer(page):
    by_mode = {m["execution"]: m for m in page["by_mode"]}
    assert [m["super-steps"] for m in by_mode.values()] == [6, 4, 5]
    assert all(m["same answer"] for m in by_mode.values())


def test_the_thread_file_holds_the_manuals_hash_never_its_text(page):
    turn2, db, manual = page["turn2"], page["db"], page["manual"]
    assert sum(m.type == "human" for m in turn2["messages"]) == 2
    assert page["file_contains"](db, manual.sha256.encode())
    assert not page["file_contains"](db, manual.data[5000:5200])


def test_the_recorded_run_matches_this_repository_and_its_raw_rounds(page):
    results = page["results"]
    checks = provenance_checks(results)
    assert checks and all(checks.values()), checks
    for size in results["sizes"]:
        cold = [t for r in size["raw"]["cache_busted"] for t in r["ttft_ms"].values()]
        assert median(cold) == size["cold_ms"]


def test_cold_rises_with_the_prefix_and_faster_than_a_straight_line(page):
    cold, tokens = page["lines"]["cold"], page["tokens"]
    assert all(a < b for a, b in zip(cold, cold[1:], strict=False))
    per_token = [c / t for c, t in zip(cold, tokens, strict=True)]
    assert per_token == sorted(per_token)  # so the page's extrapolation is, if anything, low


def test_parallel_is_faster_in_some_round_and_primed_beats_cold_past_the_smallest(page):
    results = page["results"]
    assert all(r["rounds parallel faster"] != "0 of 3" for r in page["rows"])
    slower = []
    for size in results["sizes"]:
        raw = size["raw"]["primed"]
        primed = [max(v for k, v in r["ttft_ms"].items() if k != "prime") for r in raw]
        slower.append(sum(p > size["cold_ms"] for p in primed))
    assert slower[0] > 0 and slower[1:] == [0] * (len(slower) - 1)


def test_the_recorded_restart_keeps_the_target_share_at_every_size():
    recorded = load_restart_results()
    assert all(restart_checks(recorded).values())
    target = recorded["restart"]["target_share"]
    assert all(p["share_kept"] >= target for p in recorded["restart"]["points"])

"""The doctor on a corpus of real shapes (``tests/doctor_corpus``): each verdict proven by a run.

For every graph: the scripted run reproduces exactly the declared hazards (or shows
none can happen); ``diagnose`` makes no error finding outside them; and every
declared hazard is found, statically or, where static analysis cannot tell, by
``Watch`` on a run.
"""

from __future__ import annotations

import pytest

from agentstate.doctor import diagnose
from tests.doctor_corpus import CASES, Case


def test_the_corpus_has_45_graphs_15_of_them_third_party_each_after_a_public_project():
    assert len(CASES) >= 45
    assert sum(1 for c in CASES if c.origin == "third-party") >= 15
    assert len({c.shape for c in CASES}) == len(CASES)
    assert all(c.follows for c in CASES)
    assert sum(1 for c in CASES if c.expected) >= 8  # planted hazards, not only clean graphs
    assert sum(1 for c in CASES if not c.expected) >= 8


@pytest.mark.parametrize("case", CASES, ids=[c.shape for c in CASES])
def test_a_run_proves_the_verdict_and_the_doctor_agrees(case: Case):
    proof = case.prove()
    assert proof.hazards == case.expected, proof.how
    report = diagnose(case.build())
    false_errors = [f for f in report.errors if f.code not in case.expected]
    assert false_errors == []
    found = set(report.codes())
    assert found <= case.expected  # no false warning either
    if case.watch is not None:
        found |= set(case.watch().codes())
    assert case.expected <= found


def test_watch_is_needed_only_where_static_analysis_cannot_tell():
    for case in CASES:
        if case.watch is None:
            continue
        static = diagnose(case.build())
        assert not case.expected <= set(static.codes())
        assert {f.severity for f in static} <= {"info"}  # said plainly, never an alarm

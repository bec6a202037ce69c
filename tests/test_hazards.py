"""The series' hazards as named reproductions (agentstate.hazards) and their version matrix.

At the tutorial's pins every reproduction must give the outcome the matrix
recorded for the ``pins`` set: an upgrade that changes one turns this red.
The page docs/hazards-by-version.md must be exactly what the data renders,
and every reproduction must appear in both. The verdicts come from runs, so
the tests also show that each verdict could have come out otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from agentstate.hazards import HAZARDS, hazard, installed_versions, run_all
from agentstate.hazards.table import render_page

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "results" / "hazards_by_version.json"
PAGE = ROOT / "docs" / "hazards-by-version.md"

pytestmark = pytest.mark.extras("deepagents")


def matrix() -> dict:
    return json.loads(DATA.read_text())


def ran_sets() -> list[dict]:
    return [s for s in matrix()["sets"] if "results" in s]


def test_the_page_is_what_the_data_renders():
    assert PAGE.read_text() == render_page(matrix())


def test_every_reproduction_ran_in_every_set_and_is_on_the_page():
    names = [h.name for h in HAZARDS]
    page = PAGE.read_text()
    for s in ran_sets():
        assert sorted(s["results"]) == sorted(names), s["name"]
    for name in names:
        assert f'<a id="{name}"></a>' in page
        assert f"### Runs of {name}" in page


def test_the_matrix_says_what_produced_it():
    p = matrix()["provenance"]
    assert p["git_dirty"] is False, "the committed matrix comes from committed code"
    assert p["command"].startswith("python scripts/hazards_by_version.py")
    assert p["cores"] >= 1 and p["cpu"]


def test_the_matrix_has_at_least_eight_version_sets_that_ran():
    assert len(ran_sets()) >= 8
    assert {"pins", "lowest", "newest"} <= {s["name"] for s in ran_sets()}


def test_at_the_pins_every_hazard_gives_what_the_matrix_recorded():
    (pins,) = [s for s in ran_sets() if s["name"] == "pins"]
    here = installed_versions()
    for lib in ("langgraph", "langchain", "langchain-core", "deepagents"):
        assert here[lib] == pins["versions"][lib], (
            f"{lib}: rerun scripts/hazards_by_version.py pins"
        )
    got = {r.hazard: r.outcome for r in run_all()}
    assert got == {name: r["outcome"] for name, r in pins["results"].items()}


def test_the_guard_arrived_with_deepagents_0_7_16_in_the_matrix():
    """builtin-parallel-edit: reproduced before the guard, refused from 0.7.16 on."""
    from packaging.version import Version

    for s in ran_sets():
        outcome = s["results"]["builtin-parallel-edit"]["outcome"]
        before = Version(s["versions"]["deepagents"]) < Version("0.7.16")
        assert outcome == ("reproduced" if before else "refused"), s["name"]


def test_a_fixed_layout_gives_the_fixed_verdict():
    """The verdict is measured: the manual first, and the two calls share all of it."""
    from agentstate.hazards.prompts import MANUAL, shared_prefix, system_prompts, ticking_clock

    clock = ticking_clock()
    first, second = system_prompts(lambda manual: f"{manual}\n{clock()}")
    assert shared_prefix(first, second) >= len(MANUAL)
    assert first != second


def test_a_merge_reducer_keeps_what_the_replace_reducer_loses():
    from langchain.agents import create_agent

    from agentstate.hazards.writes import FIELDS, USER, MergeState, field_writer, five_stores
    from agentstate.hazards.writes import one_reply as model

    state = create_agent(model(*five_stores()), [field_writer("notes")], state_schema=MergeState)
    assert state.invoke(USER)["notes"] == FIELDS


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="known: file-read-modify-write"):
        hazard("nope")


def test_a_missing_library_is_unavailable_not_a_crash(monkeypatch):
    real = metadata.version

    def no_deepagents(dist: str) -> str:
        if dist == "deepagents":
            raise metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(metadata, "version", no_deepagents)
    result = hazard("subagent-drops-key").run()
    assert (result.outcome, result.evidence) == ("unavailable", "deepagents is not installed")


def test_the_command_prints_one_line_per_hazard():
    done = subprocess.run(
        [sys.executable, "-m", "agentstate.hazards", "same-batch-read", "undeclared-key"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("langgraph ")
    assert [ln.split()[1:3] for ln in lines[1:]] == [
        ["same-batch-read", "reproduced"],
        ["undeclared-key", "reproduced"],
    ]
    bad = subprocess.run(
        [sys.executable, "-m", "agentstate.hazards", "nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown hazard 'nope'" in bad.stderr


def test_agentstate_hazards_json_is_what_a_run_here_shows():
    agentstate = Path(sys.executable).with_name("agentstate")
    done = subprocess.run(
        [str(agentstate), "hazards", "--json", "replace-reducer"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["versions"] == installed_versions()
    assert found["results"] == [hazard("replace-reducer").run().as_dict()]

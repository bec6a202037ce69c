"""docs/layout.md matches the tree, and the library imports nothing from the tutorial (issue 34).

The library is what a reader imports into their own agents (core, doctor,
hazards, models, tracing, persistence, private_files); the tutorial's stage
(``agentstate.lessons``) is what only the notebooks and their tests use. The
import graph is read from the source (tests/test_import_cycles.py), so nothing
is imported here.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_import_cycles import import_graph, reachable

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "agentstate"
LIBRARY = ("core", "doctor", "hazards", "models", "tracing", "persistence", "private_files")
STAGE = "agentstate.lessons"


def top_level() -> set[str]:
    found = {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    found |= {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return found


def test_the_map_names_every_top_level_folder_and_module_and_no_other():
    page = (ROOT / "docs" / "layout.md").read_text()
    tree = page.split("```", 2)[1]
    named = set(re.findall(r"^  (\S+)", tree, re.M)) - {"#"}
    assert named == top_level()


def test_the_library_imports_nothing_from_the_tutorials_stage():
    graph = import_graph(SRC, "agentstate")
    library = [
        m
        for m in graph
        if any(m == f"agentstate.{n}" or m.startswith(f"agentstate.{n}.") for n in LIBRARY)
    ]
    assert "agentstate.core.turn_cache" in library and "agentstate.doctor.report.cli" in library
    leaks = {m: sorted(r for r in reachable(graph, m) if r.startswith(STAGE)) for m in library}
    assert {m: r for m, r in leaks.items() if r} == {}


def test_the_tutorials_stage_is_where_the_lessons_import_it_from():
    sources = (ROOT / "notebooks" / "_src").rglob("*.py")
    used = {
        m for p in sources for m in re.findall(r"from (agentstate\.lessons\.\w+)", p.read_text())
    }
    assert {"agentstate.lessons.fixtures", "agentstate.lessons.display"} <= used


DOCTOR_PHASES = ("facts", "checks", "fix", "report")
# what each phase may import from the others: facts judge nothing, checks never import
# a fix (a fix may use its check), the report (config, loading, formats, CLI) runs them all
MAY_IMPORT = {
    "facts": {"facts"},
    "checks": {"facts", "checks", "report"},
    "fix": {"facts", "checks", "fix", "report"},
    "report": set(DOCTOR_PHASES),
}


def test_the_doctor_s_folders_are_its_phases_and_facts_judge_nothing():
    doctor = PACKAGE / "doctor"
    folders = {p.name for p in doctor.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(DOCTOR_PHASES)
    assert sorted(p.name for p in doctor.glob("*.py")) == ["__init__.py", "__main__.py", "watch.py"]
    graph = import_graph(SRC, "agentstate")
    crossing = {}
    for phase in DOCTOR_PHASES:
        prefix = f"agentstate.doctor.{phase}"
        for module in (m for m in graph if m == prefix or m.startswith(prefix + ".")):
            used = {m.split(".")[2] for m in graph[module] if m.startswith("agentstate.doctor.")}
            if used - MAY_IMPORT[phase] - {"__init__"}:
                crossing[module] = sorted(used - MAY_IMPORT[phase])
    assert crossing == {}
    page = (ROOT / "docs" / "layout.md").read_text()
    assert all(
        f"{phase}/" in page.split("doctor/", 1)[1].split("hazards/")[0] for phase in DOCTOR_PHASES
    )

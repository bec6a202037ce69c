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
    assert "agentstate.core.turn_cache" in library and "agentstate.doctor.cli" in library
    leaks = {m: sorted(r for r in reachable(graph, m) if r.startswith(STAGE)) for m in library}
    assert {m: r for m, r in leaks.items() if r} == {}


def test_the_tutorials_stage_is_where_the_lessons_import_it_from():
    sources = (ROOT / "notebooks" / "_src").rglob("*.py")
    used = {
        m for p in sources for m in re.findall(r"from (agentstate\.lessons\.\w+)", p.read_text())
    }
    assert {"agentstate.lessons.fixtures", "agentstate.lessons.display"} <= used

"""`make check-latest` (issue 36): its report says which notebook cells changed, read from nbval.

The run itself follows the package index, so it is not part of `make test`; what is
tested here is that its report counts a changed output as changed (a junit file as
nbval writes it, with one failed cell) and which pins it holds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_latest", ROOT / "scripts/check_latest.py")
check_latest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_latest)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="3">
<testcase classname="notebooks.01_file_based_storage.ipynb" name="Cell 0" time="0.1"/>
<testcase classname="notebooks.01_file_based_storage.ipynb" name="Cell 1" time="0.1">
<failure message="Cell outputs differ">mismatch</failure></testcase>
<testcase classname="notebooks.going_further.05_benchmark_and_provenance.ipynb" name="Cell 0"
 time="0.1"/>
</testsuite></testsuites>
"""


def test_a_changed_output_is_named_in_its_notebooks_line(tmp_path):
    junit = tmp_path / "nbval.xml"
    junit.write_text(JUNIT)
    lines, changed = check_latest.report(junit)
    assert lines == [
        "notebooks/01_file_based_storage.ipynb: 1 of 2 cells changed: cell 1",
        "notebooks/going_further/05_benchmark_and_provenance.ipynb: 0 of 1 cells changed",
    ]
    assert changed == 1


def test_the_series_libraries_float_and_every_other_pin_is_held():
    held = check_latest.held_pins()
    assert "nbval" in held and "jupyterlab" in held
    assert not any(check_latest.FLOATING.match(name) for name in held)
    for floating in ("langgraph", "langchain-core", "deepagents", "langsmith"):
        assert check_latest.FLOATING.match(floating)

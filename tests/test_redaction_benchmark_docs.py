"""docs/secrets.md's value-pass table is what ``scripts/bench_redaction.py`` recorded (issue 34).

The script records every sample of this checkout's run and of the release before
(``--before COMMIT``, a child run on that commit's ``src``) in
``data/results/redaction_benchmark.json``; ``scripts/bench_docs.py`` renders the
table, its ratios and the sentence under it from those samples. The generic checks
(stale blocks, provenance, a changed sample changes the block) are in
``tests/test_benchmark_docs.py``; these check what the redaction blocks compute.
"""

import copy
import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_docs  # noqa: E402
import bench_redaction  # noqa: E402
from bench_results import load_results  # noqa: E402


@pytest.fixture
def data():
    return copy.deepcopy(load_results("redaction"))


def rows(shown):
    """The table's rows as lists of cells, by their first cell."""
    lines = [line for line in shown.splitlines() if line.startswith("| ")][1:]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")]
                                              for line in lines)}  # fmt: skip


def test_the_recorded_file_holds_both_runs_with_their_code(data):
    now, before = data["runs"]
    assert now["code"] == "this checkout" and now["commit"] == data["provenance"]["git_commit"]
    assert before["commit"].startswith(before["code"]) and before["commit"] != now["commit"]
    assert "--before" in data["provenance"]["command"]
    for run in (now, before):
        assert len(run["load_average_before"]) == 3 and len(run["load_average_after"]) == 3
        assert all(len(r["samples_s"]) == run["rounds"]["rounds"] for r in run["new_value"])
        assert all(len(r["samples_s"]) == run["rounds"]["load"] for r in run["loading"])


def test_each_cell_is_the_median_of_its_samples_and_the_ratio_within_its_run(data):
    now = data["runs"][0]
    low, high = now["new_value"]
    shown = rows(bench_docs.render("redaction", data))
    median = {r["known"]: statistics.median(r["samples_s"]) for r in (low, high)}
    label = f"a reply that brings a new value, {high['known']:,} values known (ratio to "
    label += f"{low['known']:,})"
    ratio = bench_docs.times(median[high["known"]] / median[low["known"]])
    assert shown[label][1] == f"{bench_docs.duration(median[high['known']])} ({ratio})"
    low["samples_s"] = [s * 10 for s in low["samples_s"]]
    ratio = bench_docs.times(median[high["known"]] / (median[low["known"]] * 10))
    assert rows(bench_docs.render("redaction", data))[label][1].endswith(f"({ratio})")


def test_an_error_is_shown_as_such_and_the_sentence_follows_the_data(data):
    before, now = data["runs"][1], data["runs"][0]
    nested = next(r for r in before["hostile"] if r["case"] == "nested values")
    nested["error"], nested["samples_s"] = "RecursionError", []
    shown = bench_docs.render("redaction", data)
    row = next(cells for label, cells in rows(shown).items() if label.endswith("of one another"))
    assert row[0] == "`RecursionError`" and row[2] == ""
    for run in data["runs"]:  # every row faster now
        for part in ("value_pass", "new_value", "loading", "hostile"):
            for r in run[part]:
                r["samples_s"] = [1.0 if run is before else 0.5 for _ in r["samples_s"]]
    assert "Every row is faster than before." in bench_docs.render("redaction", data)
    now["loading"][0]["samples_s"] = [3.0 for _ in now["loading"][0]["samples_s"]]
    shown = bench_docs.render("redaction", data)
    values = now["loading"][0]["values"]
    assert f"Slower than before: loading {values:,} values, then one reply, 3.00x as long" in shown


def test_runs_that_measured_other_rows_are_refused(data):
    data["runs"][1]["new_value"][0]["known"] += 1
    with pytest.raises(ValueError, match="measured other rows"):
        bench_docs.render("redaction", data)


def test_the_encryption_sentence_is_the_paired_ratio_of_the_rounds(data):
    enc = data["runs"][0]["encryption"]
    ratio, q1, q3 = bench_docs.ratio_stats(enc["encrypted_s"], enc["plain_s"])
    shown = bench_docs.render("redaction/encryption", data)
    assert f"{ratio:.2f}x per round (q1-q3 {q1:.2f}-{q3:.2f})" in shown
    data["runs"][0]["encryption"] = None
    assert "did not time" in bench_docs.render("redaction/encryption", data)


def test_the_script_records_what_the_renderer_reads(tmp_path, capsys):
    out = tmp_path / "redaction.json"
    argv = ["--rounds", "2", "--load-rounds", "1", "--hostile-rounds", "1", "--add-sizes", "5",
            "10", "--load-sizes", "10", "20", "--out", str(out)]  # fmt: skip
    bench_redaction.main(argv)
    recorded = json.loads(out.read_text())
    (run,) = recorded["runs"]
    assert [r["known"] for r in run["new_value"]] == [5, 10]
    assert [len(r["samples_s"]) for r in run["hostile"]] == [1, 1, 1]
    assert len(run["encryption"]["plain_s"]) == 2
    assert rows(capsys.readouterr().out) == rows(bench_docs.render("redaction", recorded))


def test_an_unknown_before_commit_is_one_line_before_anything_is_timed(capsys):
    with pytest.raises(SystemExit, match="--before no-such-commit: not a commit"):
        bench_redaction.main(["--before", "no-such-commit", "--out", "/dev/null"])

"""Every performance figure in docs/ is rendered from its data file under data/results/.

``scripts/bench_docs.py`` renders each generated block (``<!-- results:NAME -->``)
from the raw samples a benchmark script recorded in
``data/results/<NAME>_benchmark.json`` (``engine_restart``:
``data/results/engine_restart.json``). These tests recompute every block from
its file and compare it with the docs, check that each file says what produced
it, and that no timing is typed by hand outside a block in the pages the
benchmarks feed. The engine's files (stage 05) record a provenance of their own,
checked against the repository by ``tests/test_experts_results.py`` and
``tests/test_engine_restart_results.py``.
"""

import copy
import re
import shutil
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_docs  # noqa: E402
from bench_results import RESULTS, load_results  # noqa: E402

from agentstate.experts.restart_benchmark import load_restart_results, restart_rows  # noqa: E402
from agentstate.experts.results import (  # noqa: E402
    case_rows,
    markdown_table,
    mermaid_bars,
    summary_rows,
    sweep_rows,
)

# hazards_by_version.json and doctor_fix.json are no benchmarks: docs/hazards-by-version.md
# and docs/doctor/fixes.md are rendered from them, and tests/test_hazards.py and
# tests/test_doctor_fix.py check those pages
NAMES = sorted(
    p.stem.removesuffix("_benchmark")
    for p in RESULTS.glob("*.json")
    if p.name not in ("hazards_by_version.json", "doctor_fix.json")
)
# the files scripts/bench_results.py writes (the engine's record their own provenance)
OWN = [n for n in NAMES if n not in ("experts", "engine_restart")]

# every page a figure can be on: the README, CONTRIBUTING.md and everything under docs/
PAGES = [str(p.relative_to(ROOT)) for p in bench_docs.doc_files()]
# a timing, rate, ratio, share or size: "18.2 ms", "3 s", "55 msg/s", "1.7x", "98%",
# "12.5 minutes", "136 MB", or "twice as fast"
FIGURE = re.compile(
    r"\d[\d,]*(?:\.\d+)?\s?(?:ms|s|msg/s|x|%|min|minutes?|hours?|[KMG]i?B)(?![\w/-])"
    r"|\b(?:twice|three times|half) as (?:fast|slow|long)\b"
)
# what is not a measurement (a setting, a limit, a target), and a figure another test
# recomputes from its data file: the words around it, the page, and why it may stay
NOT_TYPED_BY_HAND = {
    ("docs/benchmarks.md", "default 10 s reader timeout"): "a setting",
    ("docs/memory-server.md", "plus 10 s to open a session"): "a setting",
    ("docs/memory-server.md", "`retry_for`, 30 s by default"): "a setting",
    ("docs/memory-server.md", "sending a 48 MB header line"): "a test's input",
    ("docs/memory-server.md", "bounds its growth at 8 MB"): "a test's bound",
    ("docs/doctor/README.md", "over 1 MiB"): "a limit",
    ("CONTRIBUTING.md", "a main lesson in about 25 minutes"): "a target",
    ("CONTRIBUTING.md", 'text form, "0%| 0/200"'): "a frozen progress bar's text",
    ("CONTRIBUTING.md", "a saved bar frozen at 0%"): "a frozen progress bar's text",
    ("docs/doctor/README.md", "loading took longer than 120 s"): "a setting (--timeout)",
    ("docs/doctor/README.md", "with the same line 5 s later"): "a setting (the watchdog)",
    ("README.md", "question waits 2.3-2.9x less"): (
        "tests/test_lesson_05.py recomputes it from experts_benchmark.json"
    ),
    ("docs/doctor/prefix-not-invariant.md", "invariant prefix is 6.2-20.1x faster"): (
        "tests/test_doctor_docs.py recomputes it from experts_benchmark.json"
    ),
}


LESSON_TIME = re.compile(r"\| about \d+ min \|")


def blocks_in_docs() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in bench_docs.block_files():
        for match in bench_docs.BLOCK.finditer(path.read_text()):
            found.setdefault(match["name"], []).append(str(path.relative_to(ROOT)))
    return found


def test_every_block_in_the_docs_is_what_its_data_file_renders():
    assert blocks_in_docs(), "no results block in docs/"
    assert bench_docs.stale_blocks() == []


def test_every_data_file_is_shown_and_every_block_has_a_data_file():
    shown = {name.split("/")[0] for name in blocks_in_docs()}
    assert shown == set(NAMES)
    assert all(bench_docs.data_file(name).is_file() for name in shown)
    assert set(bench_docs.RENDERERS) == set(blocks_in_docs())


@pytest.mark.parametrize("name", OWN)
def test_each_data_file_says_what_produced_it(name):
    p = bench_docs.load_data(name)["provenance"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p["date"])
    assert isinstance(p["cores"], int) and p["cores"] >= 1 and p["cpu"]
    for load in (p["load_average_before"], p["load_average_after"]):
        assert len(load) == 3 and all(isinstance(x, float | int) and x >= 0 for x in load)
    assert re.fullmatch(r"3\.\d+\.\d+", p["python"]) and p["libraries"]["langgraph"]
    assert re.fullmatch(r"[0-9a-f]{40}", p["git_commit"])
    assert p["git_dirty"] is False, "the committed figures come from committed code"
    python, script, *_ = p["command"].split()
    assert python == "python" and (ROOT / script).is_file()
    assert name.startswith(Path(script).stem.removeprefix("bench_"))


def perturbed(data):
    """``data`` with every measured number scaled by 1, 2 or 3 in turn (provenance kept)."""
    data = copy.deepcopy(data)
    count = iter(range(10**9))

    def walk(value):
        if isinstance(value, dict):
            return {k: v if k == "provenance" else walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, float):
            return value * (1 + next(count) % 3)
        return value

    return walk(data)


@pytest.mark.parametrize("block", sorted(bench_docs.RENDERERS))
def test_a_changed_sample_changes_the_block(block):
    data = bench_docs.load_data(block.split("/")[0])
    assert bench_docs.render(block, perturbed(data)) != bench_docs.render(block, data)


def test_a_block_edited_by_hand_is_reported_stale(tmp_path, monkeypatch):
    page = tmp_path / "postgres.md"
    shutil.copy(ROOT / "docs/postgres.md", page)
    text = page.read_text()
    median = re.search(r"\| postgres \| (\d+\.\d) \|", text)
    assert median, "docs/postgres.md shows no Postgres median"
    page.write_text(text.replace(median[0], "| postgres | 1.0 |"))
    monkeypatch.setattr(bench_docs, "DOCS", tmp_path)
    monkeypatch.setattr(bench_docs, "ROOT", tmp_path)
    assert bench_docs.stale_blocks() == ["postgres.md: checkpointers"]


@pytest.mark.parametrize("page", PAGES)
def test_no_figure_is_typed_by_hand_outside_a_block(page):
    """Every figure in the README and docs/ is rendered from a data file (issue 34)."""
    text = " ".join(bench_docs.BLOCK.sub("", (ROOT / page).read_text()).split())
    for where, words in NOT_TYPED_BY_HAND:
        if where == page:
            assert words in text, f"{page} no longer says {words!r}: drop it from the list"
            text = text.replace(words, "")
    if page == "README.md":
        # each lesson's time: scripts/lesson_stats.py's estimate, which
        # tests/test_lesson_limits.py recomputes from the notebooks
        assert len(LESSON_TIME.findall(text)) == 6
        text = LESSON_TIME.sub("", text)
    assert FIGURE.findall(text) == []


def test_the_figure_pattern_catches_what_was_typed_by_hand():
    typed = (
        "took 12.5 minutes, about 4 of them compiling; ~5 min on 2 idle cores; 30-40 s at 16; "
        "136 MB at 1 chapter; the Q4_0 file prefills about twice as fast"
    )
    assert FIGURE.findall(typed) == [
        "12.5 minutes", "5 min", "40 s", "136 MB", "twice as fast",
    ]  # fmt: skip


def test_the_pages_cover_the_readme_and_every_doc():
    assert {"README.md", "CONTRIBUTING.md"} <= set(PAGES)
    assert {"docs/experts-and-engine.md", "docs/pins.md", "docs/doctor/README.md"} <= set(PAGES)
    assert len(PAGES) == 2 + len(list((ROOT / "docs").rglob("*.md")))


def test_the_first_make_test_is_rendered_in_contributing_not_before_the_lessons():
    """Its block moved out of the README (issue 42): the README leads with the lessons."""
    assert "<!-- results:make_test -->" in (ROOT / "CONTRIBUTING.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "results:make_test" not in readme and "| system packages |" not in readme
    assert readme.index("## The lessons") < readme.index("make test")


def test_steps_per_message_is_one_figure_computed_from_the_rounds():
    rounds = load_results("memory")["rounds"]
    median = statistics.median(r["steps_per_message"] for r in rounds)
    shown = set(re.findall(r"(\d+\.\d+) steps", (ROOT / "docs/benchmarks.md").read_text()))
    assert shown == {f"{median:.2f}"}


def test_the_figures_are_medians_and_paired_ratios_of_the_samples():
    assert bench_docs.ratio_stats([2.0, 4.0, 9.0, 8.0], [1.0, 2.0, 3.0, 4.0]) == (2.0, 2.0, 2.75)
    base = load_results("turn_cache")
    row = {"fields": 5, "latency_s": 0.0, "plain_ms": [100.0, 200.0, 300.0, 400.0]}
    row["cached_ms"] = [100.0, 200.0, 330.0, 440.0]
    shown = bench_docs.render("turn_cache", {**base, "rows": [row]})
    assert "| 5 | none | 250.0 | 265.0 | 1.05x | 1.00-1.10 | 4 |" in shown


def test_an_unknown_block_name_is_a_clear_error():
    with pytest.raises(KeyError, match="no renderer for results block 'memroy'"):
        bench_docs.render("memroy")


# --- stage 05: the experts' blocks ----------------------------------------------------------


def block_text(name):
    """The body of block ``name`` in docs/benchmarks.md."""
    text = (ROOT / "docs/benchmarks.md").read_text()
    (body,) = [m["body"] for m in bench_docs.BLOCK.finditer(text) if m["name"] == name]
    return " ".join(body.split())


def test_the_experts_blocks_hold_the_tables_of_the_engine_code():
    experts, restart = bench_docs.load_data("experts"), load_restart_results()
    assert markdown_table(summary_rows(experts)) in bench_docs.render("experts")
    assert markdown_table(case_rows(experts)) in bench_docs.render("experts/cases")
    assert mermaid_bars(experts) in bench_docs.render("experts/cases")
    assert markdown_table(sweep_rows(experts)) in bench_docs.render("experts/sweep")
    assert markdown_table(restart_rows(restart)) in bench_docs.render("engine_restart")
    assert "<!-- end -->" not in (ROOT / "docs/benchmarks.md").read_text()  # one marker style


def test_the_sweep_sentence_is_recomputed_from_the_data():
    points = bench_docs.load_data("experts")["sweep"]["points"]
    first, last = points[0], points[-1]
    read = [p["saving_share"] for p in points if p["floor_ms"] <= p["warm_ms"]]
    missed = [bench_docs.EXPERTS_TARGET - s for s in read if s < bench_docs.EXPERTS_TARGET]
    text = block_text("experts/sweep")
    assert f"from {first['cold_ms'] / 1000:.1f} s to {last['cold_ms'] / 1000:.1f} s;" in text
    assert f"warm from {first['warm_ms'] / 1000:.2f} s to {last['warm_ms'] / 1000:.2f} s" in text
    assert f"{min(read) * 100:.1f}-{max(read) * 100:.1f}% in the sweep" in text
    assert f"missed by {min(missed) * 100:.1f}-{max(missed) * 100:.1f} points" in text


def test_the_restart_sentence_is_recomputed_from_the_raw_rounds():
    points = load_restart_results()["restart"]["points"]
    rounds = [r for p in points for r in p["raw"]]
    restore = [r["restore_s"] * 1000 for r in rounds]
    save = [r["save_s"] * 1000 for r in rounds]
    gap = [(p["restored_ms"] - p["warm_ms"]) / 1000 for p in points]
    text = block_text("engine_restart")
    assert f"took {min(restore):.0f}-{max(restore):.0f} ms and saving it" in text
    assert f"saving it {min(save):.0f}-{max(save):.0f} ms" in text
    assert f"is {min(gap):+.2f} s to {max(gap):+.2f} s by size" in text
    kept = [p["share_kept"] for p in points]
    assert f"{min(kept) * 100:.1f}-{max(kept) * 100:.1f}% of the warm saving" in text


def test_a_missed_target_or_a_lost_prefix_changes_the_words():
    sweep = copy.deepcopy(bench_docs.load_data("experts"))
    sweep["sweep"]["points"][-1]["raw"]["sequential"][0]["prefix_hashes"].append("0" * 64)
    assert "not invariant in that run" in bench_docs.render("experts/sweep", sweep)
    restart = copy.deepcopy(load_restart_results())
    point = restart["restart"]["points"][0]
    point["share_kept"], point["same_replies_every_round"] = 0.5, False
    shown = bench_docs.render("engine_restart", restart)
    assert "is missed at 1 chapter:" in shown and "differed from the cold engine's" in shown

"""scripts/flake_hunt.py (issue 39 item 2): its command, its record and the rendered block.

The hunt itself runs the whole suite for an hour or more; these check the
parts that decide what it records: the pytest line comes from the Makefile
(with the asked worker count, the notebooks included, a subset in place of
the paths), failures are read by test id from pytest's JUnit report, runs
are appended (never replacing earlier ones), the busy processes end with the
run, and the CONTRIBUTING.md block tells a subset run from a whole-suite one.
"""

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_docs  # noqa: E402
import flake_hunt  # noqa: E402

from agentstate.memory.service.options import WRITE_DELAY_ENV  # noqa: E402


@pytest.mark.parametrize("workers", [1, 4, 8])
def test_the_command_is_make_tests_pytest_line_with_the_workers_asked(workers):
    env, argv = flake_hunt.pytest_command(workers)
    assert env == {"AGENTSTATE_ENGINE_THREADS": "1"}
    assert argv[0].endswith("pytest") and argv[argv.index("-n") + 1] == str(workers)
    assert "tests" in argv and "--nbval" in argv and "--dist" in argv
    notebooks = {p for p in argv if p.endswith(".ipynb")}
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").rglob("*.ipynb")}
    assert notebooks == {p for p in on_disk if ".ipynb_checkpoints" not in p}


def test_a_selection_replaces_the_suites_paths_and_keeps_its_options():
    _, whole = flake_hunt.pytest_command(4)
    _, subset = flake_hunt.pytest_command(4, ["tests/test_lesson_05.py"])
    assert subset[-1] == "tests/test_lesson_05.py" and "tests" not in subset
    assert not [p for p in subset if p.endswith(".ipynb")]
    options = [w for w in whole if w != "tests" and not w.endswith(".ipynb")]
    assert subset[:-1] == options


def test_a_makefile_without_the_pytest_line_is_a_clear_error(tmp_path):
    (tmp_path / "Makefile").write_text("test:\n\techo nothing\n\nother:\n\ttrue\n")
    with pytest.raises(SystemExit, match="no `\\$\\(TESTENV\\) \\$\\(BIN\\)/pytest"):
        flake_hunt.makefile_pytest_line(tmp_path / "Makefile")


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4">
<testcase classname="tests.test_lesson_05" name="test_ok" time="0.1"/>
<testcase classname="tests.test_lesson_05" name="test_order[a]" time="0.1">
  <failure message="assert">x</failure></testcase>
<testcase classname="tests.test_served" name="test_port" time="0.1">
  <error message="setup">y</error></testcase>
<testcase classname="tests.test_x" name="test_skip" time="0"><skipped message="s"/></testcase>
</testsuite></testsuites>
"""


def test_failures_are_read_by_test_id_from_the_junit_report(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(JUNIT)
    assert flake_hunt.failures(report) == [
        "tests/test_lesson_05.py::test_order[a]",
        "tests/test_served.py::test_port",
    ]
    assert flake_hunt.counts(report) == {"tests": 4, "failures": 1, "errors": 1, "skipped": 1}
    assert flake_hunt.failures(tmp_path / "missing.xml") == []


def run_record(n, scope="whole suite", failed=(), workers=4, duration=600.0):
    return {
        "run": n, "date": "2026-11-28T11:00:00+00:00", "git_commit": "a" * 40,
        "scope": scope, "selection": ["tests", "notebooks"] if scope == "whole suite"
        else ["tests/test_lesson_05.py"], "workers": workers, "busy_processes": 4, "cores": 2,
        "load_average": {"start": [4.5, 3.0, 2.0], "mid": [6.25, 4.0, 3.0], "end": None},
        "duration_s": duration, "exit_status": 1 if failed else 0, "tests": 1969,
        "skipped": 3, "failed": list(failed), "tail": "",
    }  # fmt: skip


def test_runs_are_appended_never_replaced(tmp_path):
    record = tmp_path / "flake_hunt.json"
    flake_hunt.append(record, {"command": "one"}, [run_record(1)])
    data = flake_hunt.append(record, {"command": "two"}, [run_record(2), run_record(3)])
    assert [r["run"] for r in data["runs"]] == [1, 2, 3]
    assert json.loads(record.read_text()) == data and data["provenance"] == {"command": "two"}


def test_the_block_tells_subset_runs_from_whole_suite_runs_and_names_failures():
    subset = bench_docs.render_flake_hunt({"runs": [run_record(1, "subset")]})
    assert "No whole-suite run is recorded yet" in subset
    assert "subset: tests/test_lesson_05.py" in subset and "4.5 / 6.2 / ?" in subset
    runs = [run_record(n) for n in range(1, 6)] + [run_record(6, failed=["tests/t.py::a"])]
    red = bench_docs.render_flake_hunt({"runs": runs})
    assert "The last 5 whole-suite run(s): 1 with a failure (tests/t.py::a)." in red
    green = bench_docs.render_flake_hunt({"runs": runs[:5]})
    assert "The last 5 whole-suite run(s): 0 with a failure." in green
    slower = copy.deepcopy(runs[:5])
    slower[-1]["duration_s"] = 1200.0
    assert "20.0 min" in bench_docs.render_flake_hunt({"runs": slower}) and "20.0 min" not in green


def test_a_slow_writer_run_gives_its_suite_the_delay_and_is_recorded_as_one(monkeypatch):
    """``--slow-writer 0.2``: the suite's processes (the memory servers it starts) see
    ``$AGENTSTATE_MEMORY_WRITE_DELAY=0.2``; the record and the block say so; a plain run's
    suite sees none (even when the hunt itself was started with one)."""
    monkeypatch.setenv(WRITE_DELAY_ENV, "7")
    shows = "import os, sys; print('delay', os.environ.get(sys.argv[1])); sys.exit(1)"
    suite = [sys.executable, "-c", shows, WRITE_DELAY_ENV]
    monkeypatch.setattr(flake_hunt, "pytest_command", lambda workers, select: ({}, suite))
    slow = flake_hunt.one_run(1, 1, 0, ["tests/t.py"], slow_writer=0.2)
    monkeypatch.delenv(WRITE_DELAY_ENV)
    plain = flake_hunt.one_run(2, 1, 0, ["tests/t.py"])
    assert "delay 0.2" in slow["tail"] and slow["slow_writer_s"] == 0.2
    assert "delay None" in plain["tail"] and plain["slow_writer_s"] == 0
    block = bench_docs.render_flake_hunt({"runs": [slow, plain]})
    assert "| subset: tests/t.py with a slow writer (0.2 s a write) |" in block
    assert "| subset: tests/t.py |" in block
    assert "run 1: subset with a slow writer (0.2 s a write), 1 worker(s)" in (
        flake_hunt.summary([slow, plain])
    )
    with pytest.raises(SystemExit):
        flake_hunt.main(["--slow-writer", "-0.1", "--out", "/nonexistent/r.json"])


def test_the_summary_counts_the_runs_with_a_failure():
    text = flake_hunt.summary([run_record(1), run_record(2, failed=["tests/t.py::a"])])
    assert text.splitlines()[-1] == "2 run(s), 1 with a failure"
    assert "run 2: whole suite, 4 worker(s), load 4.5/6.2/?, 600 s" in text


def test_the_busy_processes_spin_while_the_run_lasts_and_end_with_it():
    with flake_hunt.Busy(2) as busy:
        pids = [p.pid for p in busy.procs]
        assert all(p.poll() is None for p in busy.procs)
        assert all(Path(f"/proc/{pid}").exists() for pid in pids)
    assert all(p.returncode is not None for p in busy.procs)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert os.cpu_count()


def test_a_hunt_stopped_during_a_run_keeps_the_runs_that_ended(tmp_path, monkeypatch):
    """A hunt lasts hours: each run is written as it ends, not all at the end."""
    record = tmp_path / "flake_hunt.json"
    done = []

    def one_run(n, workers, busy, select, slow_writer):
        if done:
            raise KeyboardInterrupt  # stopped during the second run
        done.append(n)
        return run_record(n)

    monkeypatch.setattr(flake_hunt, "one_run", one_run)
    monkeypatch.setattr(flake_hunt, "installed_tree", lambda: (ROOT / "src").resolve())
    with pytest.raises(KeyboardInterrupt):
        flake_hunt.main(["--runs", "3", "--out", str(record)])
    assert [r["run"] for r in json.loads(record.read_text())["runs"]] == [1]


def test_a_venv_installed_from_another_tree_is_refused_before_any_run(
    tmp_path, monkeypatch, capsys
):
    """A clone sharing another clone's .venv ran that clone's code in every server it started."""
    monkeypatch.setattr(flake_hunt, "installed_tree", lambda: tmp_path / "other" / "src")
    monkeypatch.setattr(flake_hunt, "one_run", lambda *a: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as exited:
        flake_hunt.main(["--runs", "1", "--out", str(tmp_path / "r.json")])
    assert exited.value.code == 2 and "other/src" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_this_checkout_s_venv_is_installed_from_this_tree():
    assert flake_hunt.installed_tree() == (ROOT / "src").resolve()


def test_the_docs_are_rendered_after_each_run_into_the_record(tmp_path, monkeypatch):
    """A hunt writes its record into the tree it tests: each later run's check that the
    docs match their data failed until the docs followed the record after each run."""
    record = tmp_path / "flake_hunt.json"
    rendered_after = []
    monkeypatch.setattr(flake_hunt, "RECORD", record)
    monkeypatch.setattr(flake_hunt, "one_run", lambda n, *a: run_record(n))
    monkeypatch.setattr(flake_hunt, "installed_tree", lambda: (ROOT / "src").resolve())
    monkeypatch.setattr(
        flake_hunt,
        "rendered",
        lambda: rendered_after.append(len(json.loads(record.read_text())["runs"])),
    )
    flake_hunt.main(["--runs", "2", "--out", str(record)])
    assert rendered_after == [1, 2]  # once after each run was recorded
    rendered_after.clear()
    flake_hunt.main(["--runs", "1", "--out", str(tmp_path / "elsewhere.json")])
    assert rendered_after == []  # a record kept elsewhere leaves the docs alone


# A stand-in for the suite: it starts a child of its own (as pytest starts workers and servers),
# writes both pids, then waits; a hunt process runs one run of it beside 2 busy processes.
STAND_IN = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
open(sys.argv[1], "w").write(f"{child.pid}\\n")
time.sleep(600)
"""
HUNT = """\
import signal, sys
sys.path.insert(0, {scripts!r})
import flake_hunt
signal.signal(signal.SIGTERM, flake_hunt._stop)
flake_hunt.pytest_command = lambda workers, select: ({{}}, [sys.executable, {stand_in!r}, {pids!r}])
class Busy(flake_hunt.Busy):
    def __enter__(self):
        super().__enter__()
        open({busy!r}, "w").write(" ".join(str(p.pid) for p in self.procs))
        return self
flake_hunt.Busy = Busy
flake_hunt.one_run(1, 1, 2, None)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_hunt_killed_mid_run_leaves_no_process_behind(tmp_path):
    """``kill`` on a hunt (as when it is stopped to move to new code) stops the suite, what the
    suite started and the busy processes; before, all of them spun on after the hunt died."""
    stand_in, pids, busy = tmp_path / "suite.py", tmp_path / "pids", tmp_path / "busy"
    stand_in.write_text(STAND_IN.replace("sys.argv[1]", repr(str(pids))))
    code = HUNT.format(
        scripts=str(ROOT / "scripts"), stand_in=str(stand_in), pids=str(pids), busy=str(busy)
    )
    hunt = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (pids.is_file() and busy.is_file() and pids.read_text().endswith("\n")):
        assert time.monotonic() < deadline and hunt.poll() is None, "the stand-in never started"
        time.sleep(0.1)
    started = [int(p) for p in pids.read_text().split() + busy.read_text().split()]
    assert len(started) == 3 and all(_alive(p) for p in started)
    hunt.send_signal(signal.SIGTERM)
    assert hunt.wait(90) != 0
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in started if _alive(p)] == []

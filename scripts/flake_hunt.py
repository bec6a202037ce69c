"""Run `make test`'s pytest line again and again under CPU contention, and record each run.

A test that fails by chance (which thread finished first, a port taken, a
wait too short) shows up when the machine is busy and the worker count
changes. This script runs the suite ``--runs`` times (default 5), with busy
processes it starts and stops beside it (``--load``, default twice the cores,
so the load average is at least twice the cores) and the xdist worker count
cycling 1, 4, 8. Each run (worker count, load average at its start, middle
and end, duration, failures by test id, git commit) is appended to
``data/results/flake_hunt.json``, and the docs are re-rendered from it
(``scripts/bench_docs.py --write``: the ``results:flake_hunt`` block of
CONTRIBUTING.md), so the next run's check that the docs match their data holds
(issue 39).

The pytest line is `make test`'s own, read from the Makefile and expanded by
make (``WORKERS=n``), so the two never drift apart. ``--select`` replaces its
paths (``tests`` and the notebooks) with a subset; such runs are recorded as
subset runs and never count as whole-suite runs. ``--slow-writer S`` makes every
memory server the run starts wait S seconds before each queued write
(``$AGENTSTATE_MEMORY_WRITE_DELAY``): a test or cell that reads the store's
tables without ``await_consistency`` then fails every time, not by chance (the
store's load tests time out by design under it, so select what you hunt).

    .venv/bin/python scripts/flake_hunt.py                      # 5 whole-suite runs
    .venv/bin/python scripts/flake_hunt.py --runs 2 --select tests/test_lesson_05.py
    .venv/bin/python scripts/flake_hunt.py --slow-writer 0.2 --select tests/test_lesson_06.py
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import RESULTS, ROOT, _git, _load_average, start_provenance  # noqa: E402

from agentstate.memory.service.options import WRITE_DELAY_ENV  # noqa: E402

RECORD = RESULTS / "flake_hunt.json"
WORKER_CYCLE = (1, 4, 8)
# the line of the `test:` recipe that runs pytest (the one definition, in the Makefile)
PYTEST_RECIPE = re.compile(r"^\t(?P<line>\$\(TESTENV\) \$\(BIN\)/pytest [^;\n]*)", re.MULTILINE)


def makefile_pytest_line(makefile: Path = ROOT / "Makefile") -> str:
    """`make test`'s pytest command as written in the Makefile (variables unexpanded)."""
    target = re.search(r"^test:.*?(?=^\S|\Z)", makefile.read_text(), re.MULTILINE | re.DOTALL)
    match = PYTEST_RECIPE.search(target[0]) if target else None
    if match is None:
        raise SystemExit("error: no `$(TESTENV) $(BIN)/pytest ...` line in the Makefile's test:")
    return match["line"].strip()


def installed_tree(python: Path = ROOT / ".venv" / "bin" / "python") -> Path | None:
    """The ``src/`` the venv's ``agentstate`` comes from, as a process without PYTHONPATH sees it.

    The servers, CLIs and hooks the tests start import the package this way; a
    venv whose editable install points at another clone runs that clone's code
    in them, so the run would measure a mix of two trees (it did once).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-c", "import agentstate; print(agentstate.__file__)"],
        cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True,
    )  # fmt: skip
    return Path(done.stdout.strip()).resolve().parents[1] if done.returncode == 0 else None


def pytest_command(workers: int, select: list[str] | None = None) -> tuple[dict[str, str], list]:
    """The environment additions and argv of `make test`'s pytest line with ``WORKERS=workers``.

    make expands the line (its variables, its ``$(wildcard ...)``) and the shell its globs;
    ``select`` replaces the suite's paths (``tests`` and every notebook) with its own.
    """
    line = makefile_pytest_line()
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", f"WORKERS={workers}",
         "--eval", f"__flake_hunt_line: ; @echo {line}", "__flake_hunt_line"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    words = shlex.split(done.stdout.strip())
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if select:
        words = [w for w in words if w != "tests" and not w.endswith(".ipynb")] + select
    return env, words


def failures(junit: Path) -> list[str]:
    """The ids of the tests that failed or errored in a JUnit XML report, sorted."""
    if not junit.is_file():
        return []
    ids = set()
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            classname, name = case.get("classname", ""), case.get("name", "")
            module = classname.replace(".", "/") + ".py" if classname.startswith("tests") else ""
            ids.add(f"{module or classname}::{name}")
    return sorted(ids)


def counts(junit: Path) -> dict[str, int]:
    """How many tests ran, failed, errored and were skipped (from the JUnit report)."""
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    if junit.is_file():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for key in totals:
                totals[key] += int(suite.get(key, 0))
    return totals


class Busy:
    """``n`` busy processes (a spinning Python each), started and stopped by their pids."""

    def __init__(self, n: int) -> None:
        self.n, self.procs = n, []

    def __enter__(self) -> Busy:
        spin = "while True: pass"
        self.procs = [
            subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.DEVNULL)
            for _ in range(self.n)
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while a run lasts."""

    def __init__(self, every: float = 2.0) -> None:
        self.every, self.samples = every, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.monotonic()
        while not self.stop.wait(self.every):
            self.samples.append((time.monotonic() - start, _load_average()))

    def __enter__(self) -> LoadSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def at(self, seconds: float) -> list[float] | None:
        """The sample taken nearest to ``seconds`` after the start."""
        if not self.samples:
            return None
        return min(self.samples, key=lambda s: abs(s[0] - seconds))[1]


def suite_run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The suite in a process group of its own: a hunt stopped mid-run (Ctrl-C, ``kill``)
    interrupts pytest and everything it started (xdist workers, servers, kernels), so pytest
    tears its fixtures down, and kills what is left after a minute; nothing outlives the hunt."""
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate()
    except BaseException:
        for signum, patience in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(patience)
                break
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def one_run(
    n: int, workers: int, busy: int, select: list[str] | None, slow_writer: float = 0.0
) -> dict[str, Any]:
    """Run the suite once with ``workers`` beside ``busy`` busy processes; its record."""
    env, argv = pytest_command(workers, select)
    if slow_writer:
        env[WRITE_DELAY_ENV] = str(slow_writer)
    with tempfile.TemporaryDirectory(prefix="flake-hunt-") as folder:
        junit = Path(folder) / "junit.xml"
        with Busy(busy):
            time.sleep(1.0)  # the busy processes are running before the start is sampled
            start_load, started = _load_average(), time.monotonic()
            with LoadSampler() as sampler:
                done = suite_run(
                    [*argv, f"--junitxml={junit}", "-q", "-p", "no:cacheprovider"],
                    {**os.environ, **env},
                )
            duration = time.monotonic() - started
            end_load = _load_average()
        failed, totals = failures(junit), counts(junit)
    return {
        "run": n,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "HEAD"),
        "scope": "subset" if select else "whole suite",
        "selection": select or ["tests", "notebooks"],
        "workers": workers,
        "slow_writer_s": slow_writer,
        "busy_processes": busy,
        "cores": os.cpu_count(),
        "load_average": {"start": start_load, "mid": sampler.at(duration / 2), "end": end_load},
        "duration_s": round(duration, 1),
        "exit_status": done.returncode,
        "tests": totals["tests"],
        "skipped": totals["skipped"],
        "failed": failed,
        "tail": "" if done.returncode == 0 else done.stdout[-1500:],
    }


def append(record: Path, provenance: dict[str, Any], runs: list[dict[str, Any]]) -> dict:
    """The record with ``runs`` appended (earlier runs kept) and the latest provenance."""
    old = json.loads(record.read_text()) if record.is_file() else {"runs": []}
    data = {"provenance": provenance, "runs": [*old["runs"], *runs]}
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return data


def rendered() -> None:
    """Re-render the blocks of the docs drawn from ``data/results`` (CONTRIBUTING.md's
    ``results:flake_hunt`` among them), quietly."""
    import contextlib
    import io

    import bench_docs

    with contextlib.redirect_stdout(io.StringIO()):
        bench_docs.main(["--write"])


def slow_writer(run: dict[str, Any]) -> str:
    """`` with a slow writer (S s a write)`` for a run made with one, else nothing."""
    seconds = run.get("slow_writer_s") or 0  # runs recorded before the option have none
    return f" with a slow writer ({seconds:g} s a write)" if seconds else ""


def summary(runs: list[dict[str, Any]]) -> str:
    lines = []
    for r in runs:
        load = r["load_average"]
        shown = "/".join(f"{x[0]:.1f}" if x else "?" for x in load.values())
        lines.append(
            f"run {r['run']}: {r['scope']}{slow_writer(r)}, {r['workers']} worker(s), "
            f"load {shown}, "
            f"{r['duration_s']:.0f} s, {r['tests']} tests, "
            f"{len(r['failed'])} failed{': ' + ', '.join(r['failed']) if r['failed'] else ''}"
        )
    bad = sum(1 for r in runs if r["failed"] or r["exit_status"])
    lines.append(f"{len(runs)} run(s), {bad} with a failure")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cores = os.cpu_count() or 1
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    busy_help = f"busy processes beside each run (default twice the cores: {2 * cores})"
    parser.add_argument("--load", type=int, default=2 * cores, help=busy_help)
    cycle_help = "worker counts to cycle through (default 1 4 8)"
    parser.add_argument(
        "--workers", type=int, nargs="+", default=list(WORKER_CYCLE), help=cycle_help
    )
    parser.add_argument("--select", nargs="+", help="test paths or ids instead of the suite")
    parser.add_argument(
        "--slow-writer", type=float, default=0.0, metavar="SECONDS",
        help="memory servers wait SECONDS before each queued write (default 0)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RECORD, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.load < 0 or min(args.workers) < 1:
        parser.error("--runs and every --workers must be at least 1, --load at least 0")
    if not 0 <= args.slow_writer <= 60:  # also refuses nan
        parser.error(f"--slow-writer {args.slow_writer}: give seconds from 0 to 60")
    tree = installed_tree()
    if tree != (ROOT / "src").resolve():
        parser.error(
            f"the .venv's agentstate comes from {tree}, not from {ROOT / 'src'}: the processes "
            "the tests start would run that code; hunt in a clone with its own .venv "
            "(`make install` there)"
        )
    from tqdm import tqdm

    signal.signal(signal.SIGTERM, _stop)  # `kill` stops a hunt as Ctrl-C does: cleaned up

    provenance = start_provenance("flake_hunt.py", argv, ["pytest", "pytest-xdist"])
    start = len(json.loads(args.out.read_text())["runs"]) if args.out.is_file() else 0
    runs = []
    cycle = itertools.cycle(args.workers)
    for n in tqdm(range(start + 1, start + args.runs + 1), desc="flake hunt", unit="run"):
        run = one_run(n, next(cycle), args.load, args.select, args.slow_writer)
        runs.append(run)  # recorded as it ends: a hunt stopped later keeps its finished runs
        append(args.out, {**provenance, "load_average_after": _load_average()}, [run])
        if args.out == RECORD:  # the docs follow the record, so the next run's docs test holds
            rendered()
    print(summary(runs))
    print(f"recorded in {args.out}")
    return 1 if any(r["failed"] or r["exit_status"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())

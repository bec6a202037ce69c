"""The data files the benchmark scripts write under ``data/results/``, and their provenance.

Each ``scripts/bench_<name>.py`` records its raw samples in
``data/results/<name>_benchmark.json`` with what produced them (date, cores, load
average before and after, python and library versions, git commit, command line);
``scripts/bench_docs.py`` renders the docs' figures from these files, and
``tests/test_benchmark_docs.py`` checks that the docs say exactly that.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "data" / "results"


def results_path(name: str) -> Path:
    """``data/results/<name>_benchmark.json``."""
    return RESULTS / f"{name}_benchmark.json"


def load_results(name: str) -> dict[str, Any]:
    return json.loads(results_path(name).read_text())


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def _cpu() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    return next(names, "") or platform.processor()


def start_provenance(script: str, argv: list[str] | None, libraries: list[str]) -> dict[str, Any]:
    """What is about to produce the figures; :func:`write_results` adds the load after."""
    args = sys.argv[1:] if argv is None else argv
    versions = {}
    for name in ["langgraph", "langchain", "langchain-core", *libraries]:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    status = _git("status", "--porcelain", "--", "src", "scripts")
    return {
        "date": datetime.now(UTC).date().isoformat(),
        "cores": os.cpu_count(),
        "cpu": _cpu(),
        "python": platform.python_version(),
        "libraries": versions,
        "git_commit": _git("rev-parse", "HEAD"),
        # uncommitted changes to the code measured (src/, scripts/) when the run started
        "git_dirty": bool(status) if status is not None else None,
        "command": " ".join(["python", f"scripts/{script}", shlex.join(args)]).strip(),
        "load_average_before": _load_average(),
    }


def write_results(
    name: str, provenance: dict[str, Any], data: dict[str, Any], out: Path | None = None
) -> Path:
    """Write ``{"provenance": ..., **data}``, the load average after the run added; the path."""
    path = out or results_path(name)
    record = {"provenance": {**provenance, "load_average_after": _load_average()}, **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def resolve(commit: str) -> str:
    """The full hash of ``commit`` in this repository, or a one-line error."""
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"error: --before {commit}: not a commit of this repository")
    return done.stdout.strip()


def samples_at(commit: str, script: str, args: list[str]) -> tuple[str, dict[str, Any]]:
    """Run ``script`` with ``args`` on the code of ``commit``: the full hash and its samples.

    The commit's ``src`` and ``data`` are exported with ``git archive`` into a temporary
    folder and put first on ``PYTHONPATH`` of a child run of ``script``, which prints its
    samples as JSON with an ``"agentstate"`` entry saying where it imported the package
    from (checked, so a run never measures this checkout by mistake).
    """
    full = resolve(commit)
    with tempfile.TemporaryDirectory(prefix="bench-before-") as folder:
        archive = subprocess.run(
            ["git", "archive", full, "src", "data"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        child = subprocess.run(
            [sys.executable, script, *args],
            env={**os.environ, "PYTHONPATH": str(Path(folder) / "src")},
            capture_output=True, text=True,
        )  # fmt: skip
    if child.returncode:
        raise SystemExit(f"the run on {commit} failed:\n{child.stderr[-2000:]}")
    samples: dict[str, Any] = json.loads(child.stdout)
    if not samples.pop("agentstate").startswith(folder):
        raise SystemExit(f"the child run did not import agentstate from {commit}")
    return full, samples

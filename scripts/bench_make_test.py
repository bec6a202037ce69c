"""The first `make test` as a newcomer runs it: a fresh clone, an empty pip cache, timed by phase.

Clones the committed HEAD into a temporary folder, points ``PIP_CACHE_DIR`` at an
empty folder there (the machine's own pip cache is never touched), runs ``make
TARGETS`` (default ``test``) in the clone and reads the phase markers the
Makefile prints (``make-phase EPOCH NAME start|end``): the install, the engine's
compile, the checks, ``make ends``, the system packages, pytest. It writes
``data/results/make_test_benchmark.json``; ``scripts/bench_docs.py`` renders the
figure in CONTRIBUTING.md from it. A run of some targets only records the phases they ran
and says so.

    .venv/bin/python scripts/bench_make_test.py                      # the whole first make test
    .venv/bin/python scripts/bench_make_test.py -- -j3 checks .venv/engine-wheels/.built
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_results import ROOT, start_provenance, write_results

MARKER = re.compile(r"^make-phase (?P<t>\d+(?:\.\d+)?) (?P<name>[\w-]+) (?P<edge>start|end)$")
SUMMARY = re.compile(r"=+ (?P<line>\d+ passed.*) =+$")


def phases(lines: list[str], started: float) -> dict[str, dict[str, float]]:
    """{name: {"start": s, "end": s}} in seconds after ``started``, from the markers."""
    out: dict[str, dict[str, float]] = {}
    for line in lines:
        found = MARKER.match(line.strip())
        if found:
            out.setdefault(found["name"], {})[found["edge"]] = round(float(found["t"]) - started, 1)
    return out


def size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=["test"], help="make's arguments")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path printed)")
    args = parser.parse_args(argv)
    provenance = start_provenance("bench_make_test.py", argv, [])
    work = Path(tempfile.mkdtemp(prefix="first-make-test-"))
    clone, cache = work / "clone", work / "pip-cache"
    cache.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "PIP_CACHE_DIR": str(cache)}
    present = {p: Path(p).exists() for p in ("/usr/bin/chromium",)}
    present["postgres"] = bool(list(Path("/usr/lib/postgresql").glob("*/bin/postgres")))
    started = time.time()
    lines: list[str] = []
    with subprocess.Popen(
        ["make", *args.targets],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as make:
        assert make.stdout is not None
        for line in make.stdout:
            sys.stdout.write(line)
            lines.append(line)
    total = round(time.time() - started, 1)
    disk = {"venv": size(clone / ".venv"), "pip_cache": size(cache)}
    summaries = [m["line"] for line in lines if (m := SUMMARY.search(line.strip()))]
    data = {
        "targets": args.targets,
        "fresh_clone": True,
        "pip_cache": "empty",
        "system_packages_present_before": present,
        "exit_status": make.returncode,
        "total_s": total,
        "phases": phases(lines, started),
        "disk_bytes": disk,
        "ends": [line.strip() for line in lines if line.startswith("ends: ")],
        "pytest": summaries[-1] if summaries and "test" in args.targets else None,
    }
    path = write_results("make_test", provenance, data)
    print(f"wrote {path.relative_to(ROOT)}: {total / 60:.1f} min, exit {make.returncode}")
    if args.keep:
        print(f"the clone: {clone}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return make.returncode


if __name__ == "__main__":
    sys.exit(main())

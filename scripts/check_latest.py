"""`make check-latest`: the whole notebook series on the newest LangGraph, LangChain and deepagents.

The lessons' pins (constraints.txt) say what the series was written on; this asks what a
reader who installs today gets. A venv under ``.venv/latest`` is first built at
constraints.txt's pins, then the libraries the series is about (langgraph*, langchain*,
deepagents, langsmith) are upgraded to the newest releases that resolve, and whatever
else they need moves with them (pip's only-if-needed strategy: a held pin moves only
where a new release requires it, and the report names each one that moved); then strict
nbval runs every notebook (lessons, solutions, going further) as ``make test`` does, and
one line per notebook says how many cells' outputs changed and which. It is not part of
``make test``: it follows the index, so its answer changes when a release lands.

    .venv/bin/python scripts/check_latest.py            # build or refresh the venv, run, report
    .venv/bin/python scripts/check_latest.py --report-only JUNIT.xml

Exit status 0 when every output held, 1 when some changed (the report says
where), 2 when the venv could not be built.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv" / "latest"
FLOATING = re.compile(r"^(langgraph|langchain|deepagents|langsmith)")
"""The families that float: everything the series makes claims about."""
TRACKED = ("langgraph", "langchain", "langchain-core", "deepagents", "langgraph-prebuilt")


def held_pins() -> dict[str, str]:
    """constraints.txt's pins outside the floating families."""
    lines = (
        ln.split("#", 1)[0].strip() for ln in (ROOT / "constraints.txt").read_text().splitlines()
    )
    pairs = (ln.split("==", 1) for ln in lines if ln and not FLOATING.match(ln))
    return {name.lower(): version for name, version in pairs}


def moved(py: Path) -> list[str]:
    """Held pins the upgrade had to move, as ``name pin -> now``."""
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    now = json.loads(subprocess.run([str(py), "-c", code], text=True, capture_output=True).stdout)
    return [f"{n} {v} -> {now[n]}" for n, v in held_pins().items() if n in now and now[n] != v]


def pip(py: Path, *args: str, env: dict[str, str] | None = None) -> None:
    cmd = [str(py), "-m", "pip", "--disable-pip-version-check", "install", "-q", *args]
    done = subprocess.run(cmd, text=True, capture_output=True, env=env)
    if done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"check-latest: pip failed: {' / '.join(tail)}")


def build() -> Path:
    """The venv with the newest releases of the floating families (upgraded on every run)."""
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    floating = [
        ln.split("==")[0]
        for ln in (ROOT / "constraints.txt").read_text().splitlines()
        if FLOATING.match(ln.strip())
    ]
    env = {**os.environ, "CMAKE_ARGS": "-DLLAVA_BUILD=OFF " + os.environ.get("CMAKE_ARGS", "")}
    pip(py, "-c", str(ROOT / "constraints.txt"), "-e", f"{ROOT}[dev,engine]", env=env)
    pip(py, "--upgrade", *floating)
    return py


def versions(py: Path) -> str:
    code = (
        "from importlib.metadata import version as v; "
        f"print(', '.join(f'{{d}} {{v(d)}}' for d in {TRACKED!r}))"
    )
    return subprocess.run([str(py), "-c", code], text=True, capture_output=True).stdout.strip()


def notebooks() -> list[str]:
    found = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for sub in ("solutions", "going_further"):
        found += sorted((ROOT / "notebooks" / sub).glob("[0-9][0-9]_*.ipynb"))
    return [str(p.relative_to(ROOT)) for p in found]


def report(junit: Path) -> tuple[list[str], int]:
    """One line per notebook: cells whose outputs changed, from nbval's junit XML."""
    cells: dict[str, int] = defaultdict(int)
    changed: dict[str, list[str]] = defaultdict(list)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        nb = case.get("classname", "").removesuffix(".ipynb").replace(".", "/") + ".ipynb"
        cells[nb] += 1
        if case.find("failure") is not None or case.find("error") is not None:
            changed[nb].append(name.replace("Cell ", "cell "))
    lines = []
    for nb in sorted(cells):
        bad = changed.get(nb, [])
        where = f": {', '.join(bad)}" if bad else ""
        lines.append(f"{nb}: {len(bad)} of {cells[nb]} cells changed{where}")
    return lines, sum(len(v) for v in changed.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-only", type=Path, metavar="JUNIT", help="report a previous run")
    args = parser.parse_args()
    if args.report_only:
        lines, bad = report(args.report_only)
        print("\n".join(lines))
        return 1 if bad else 0
    started = time.monotonic()
    print(
        "check-latest: building .venv/latest (the newest langgraph, langchain, deepagents)",
        flush=True,
    )
    py = build()
    print(f"check-latest: {versions(py)}", flush=True)
    print(f"check-latest: pins moved by the upgrade: {', '.join(moved(py)) or 'none'}", flush=True)
    junit = VENV / "nbval.xml"
    nbval = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "notebooks/sanitize.cfg"]
    env = {**os.environ, "AGENTSTATE_ENGINE_THREADS": "1"}
    subprocess.run(
        [
            str(py),
            "-m",
            "pytest",
            "-q",
            "-n",
            "4",
            "--dist",
            "loadscope",
            "-p",
            "no:randomly",
            f"--junitxml={junit}",
            *nbval,
            *notebooks(),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    lines, bad = report(junit)
    print("\n".join(f"check-latest: {line}" for line in lines))
    print(f"check-latest: {bad} cells changed in all ({time.monotonic() - started:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Which releases each hazard lives in: the series' reproductions run across version sets.

For each version set below, a venv under ``.venv/hazards/<set>`` gets the
libraries the set asks for (pip resolves the rest within the package's own
ranges), then ``python -m agentstate.hazards --json`` runs every reproduction
of ``agentstate.hazards`` there, with this checkout's ``src`` on the path.
The outcomes, the versions pip resolved and the machine go to
``data/results/hazards_by_version.json``; ``docs/hazards-by-version.md`` is
rendered from it (``--write-docs``, also checked by tests/test_hazards.py).

A set whose Python is missing or whose requirements do not resolve is
skipped with one line saying why, and recorded as skipped. pip's cache makes
a rerun take minutes; a venv whose requirements did not change is reused.

    .venv/bin/python scripts/hazards_by_version.py                # every set, then the page
    .venv/bin/python scripts/hazards_by_version.py pins newest    # some sets (merged into the file)
    .venv/bin/python scripts/hazards_by_version.py --write-docs   # only re-render the page
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench_results import RESULTS, ROOT, start_provenance, write_results

DATA = RESULTS / "hazards_by_version.json"
PAGE = ROOT / "docs" / "hazards-by-version.md"
VENVS = ROOT / ".venv" / "hazards"
PIP = ["-m", "pip", "--disable-pip-version-check"]
LIBS = ("langgraph", "langchain", "langchain-core", "deepagents")


def pins() -> dict[str, str]:
    lines = (
        ln.split("#", 1)[0].strip() for ln in (ROOT / "constraints.txt").read_text().splitlines()
    )
    return dict(ln.split("==", 1) for ln in lines if ln)


def package_ranges() -> list[str]:
    """The core's ranges from pyproject.toml, and the deepagents extra's major line."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], "deepagents"]


@dataclass(frozen=True)
class VersionSet:
    name: str
    why: str
    asks: tuple[str, ...]
    """Requirements beyond the package's ranges (==, or a range)."""

    def requirements(self) -> list[str]:
        named = {a.split("=")[0].split("<")[0].split(">")[0] for a in self.asks}
        base = [
            r for r in package_ranges() if r.split(">")[0].split("<")[0].split("=")[0] not in named
        ]
        return [*base, *self.asks]


def version_sets() -> list[VersionSet]:
    p = pins()
    tutorial = tuple(f"{lib}=={p[lib]}" for lib in LIBS)
    sets = [
        VersionSet("pins", "the tutorial's pins (constraints.txt)", tutorial),
        VersionSet(
            "lowest",
            "the lowest the package allows (langgraph 1.2's oldest release)",
            ("langgraph==1.2.0", "langchain==1.3.0", "langchain-core==1.4.0", "pydantic==2.9.0"),
        ),
        VersionSet(
            "langgraph-1.2-newest",
            "langgraph 1.2's newest release, the rest at the pins",
            ("langgraph==1.2.24", *tutorial[1:]),
        ),
        VersionSet("newest", "the newest releases that resolve together", ()),
    ]
    for release, why in (
        ("0.2.8", "deepagents 0.2, newest release"),
        ("0.3.12", "deepagents 0.3, newest release"),
        ("0.4.12", "deepagents 0.4, newest release"),
        ("0.5.9", "deepagents 0.5, newest release"),
        ("0.6.12", "deepagents 0.6, newest release"),
        ("0.7.0", "deepagents 0.7, oldest release"),
        ("0.7.15", "deepagents 0.7.15, the last before its file-mutation guard"),
        ("0.7.16", "deepagents 0.7.16, the first with its file-mutation guard"),
        ("0.7.23", "deepagents 0.7.23, the last that hands back a list its subagent left alone"),
        ("0.7.24", "deepagents 0.7.24, the first whose task drops keys handed back unchanged"),
    ):
        sets.append(VersionSet(f"deepagents-{release}", why, (f"deepagents=={release}",)))
    return sets


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload]


def why_not(text: str) -> str:
    for marker in ("The conflict is caused by:", "ERROR: Could not find"):
        if marker in text:
            rest = text.split(marker, 1)[1].strip().splitlines()
            return (rest[0] if marker.endswith(":") else marker + " " + rest[0]).strip()[:200]
    return next((ln for ln in text.splitlines() if ln.startswith("ERROR")), "pip failed")[:200]


def build(vs: VersionSet, python: str, venvs: Path = VENVS) -> dict[str, object]:
    """The set's venv (reused when its requirements are unchanged), then its run."""
    started = time.monotonic()
    venv = venvs / vs.name
    asked = venv / "asked.txt"
    wanted = "\n".join(vs.requirements()) + "\n"
    py = venv / "bin" / "python"
    if not (py.exists() and asked.exists() and asked.read_text() == wanted):
        shutil.rmtree(venv, ignore_errors=True)
        made = run([python, "-m", "venv", str(venv)])
        if made.returncode:
            return {"skipped": f"no venv: {made.stderr.strip()[:200]}"}
        done = run([str(py), *PIP, "install", "-q", *vs.requirements()])
        if done.returncode:
            shutil.rmtree(venv, ignore_errors=True)
            return {"skipped": f"does not resolve: {why_not(done.stdout + done.stderr)}"}
        asked.write_text(wanted)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONWARNINGS": "ignore"}
    out = run([str(py), "-m", "agentstate.hazards", "--json"], env=env, cwd=ROOT)
    if out.returncode:
        return {
            "skipped": f"the reproductions did not run: {out.stderr.strip().splitlines()[-1][:200]}"
        }
    found = json.loads(out.stdout)
    python_version = run([str(py), "-c", "import platform; print(platform.python_version())"])
    return {
        "versions": {"python": python_version.stdout.strip(), **found["versions"]},
        "results": {
            r["hazard"]: {"outcome": r["outcome"], "evidence": r["evidence"]}
            for r in found["results"]
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", help="version sets to run (default: all)")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable))
    parser.add_argument("--jobs", type=int, default=2, help="sets built side by side")
    parser.add_argument("--write-docs", action="store_true", help="only re-render the page")
    parser.add_argument(
        "--venvs", type=Path, default=VENVS, help=f"where the sets' venvs go (default {VENVS})"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from agentstate.hazards.table import render_page

    if args.write_docs:
        PAGE.write_text(render_page(json.loads(DATA.read_text())))
        print(f"wrote {PAGE.relative_to(ROOT)}")
        return 0
    everything = version_sets()
    names = [vs.name for vs in everything]
    unknown = [s for s in args.sets if s not in names]
    if unknown:
        parser.error(f"unknown set {unknown[0]!r}; known: {', '.join(names)}")
    chosen = [vs for vs in everything if not args.sets or vs.name in args.sets]
    if not Path(args.python).exists():
        print(f"hazards: no Python at {args.python}; nothing run", file=sys.stderr)
        return 2
    data = json.loads(DATA.read_text()) if DATA.exists() and args.sets else {"sets": []}
    provenance = start_provenance("hazards_by_version.py", sys.argv[1:], ["deepagents"])
    rows = {s["name"]: s for s in data["sets"]}
    args.venvs.mkdir(parents=True, exist_ok=True)
    print(f"hazards: {len(chosen)} version sets, {args.jobs} at a time", flush=True)

    def one(vs: VersionSet) -> None:
        row = {
            "name": vs.name,
            "why": vs.why,
            "asked": list(vs.asks),
            **build(vs, args.python, args.venvs),
        }
        rows[vs.name] = row
        if "skipped" in row:
            print(f"hazards: {vs.name}: skipped: {row['skipped']}", flush=True)
            return
        v = row["versions"]
        hit = sum(r["outcome"] == "reproduced" for r in row["results"].values())
        print(
            f"hazards: {vs.name}: "
            + ", ".join(f"{k} {v[k]}" for k in LIBS)
            + f": {hit} of {len(row['results'])} reproduced ({row['seconds']:.0f} s)",
            flush=True,
        )

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, chosen))
    sets = [rows[n] for n in names if n in rows]
    write_results("hazards_by_version", provenance, {"sets": sets}, out=DATA)
    PAGE.write_text(render_page(json.loads(DATA.read_text())))
    print(f"hazards: wrote {DATA.relative_to(ROOT)} and {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

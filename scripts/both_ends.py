"""`make ends`: the core tested at both ends of its ranges, on every Python it claims, installed
as a reader would.

The ends: the LOWEST allowed versions on the oldest Python of PYTHONS (the Python
of .venv, or --python), and the NEWEST versions on each Python of PYTHONS that
this machine has (on PATH as ``python3.N``, or in ``pyenv versions``). The
classifiers in pyproject.toml list exactly PYTHONS (tests/test_packaging.py); a
Python of PYTHONS this machine lacks is skipped, and one line says which and why.

For each end, a fresh venv stands in for a reader's own project:

1. the reader's libraries first: the core's requirements (pyproject.toml) at
   their LOWEST allowed versions (each lower bound as ``==``; what they pull in
   resolves as pip likes), or at the NEWEST versions the index resolves;
2. then the package's wheel, as ``pip install <wheel>``: it must change none of
   the reader's versions and add nothing but itself (no extra);
3. ``agentstate doctor`` on the README's notes agent, as installed;
4. the core and doctor tests (CORE_TESTS) against the installed wheel, with
   ``AGENTSTATE_CORE_ONLY=1``: tests marked ``extras(...)`` skip, and
   tests/test_core_only.py checks that no extra's library is there at all.

Where a newer release exists on the index but does not resolve here, the
newest end says so in one line and tests the newest that resolves. pip's own
cache is reused; nothing is installed into .venv. Usage:
``python scripts/both_ends.py [lowest|newest ...] [--python PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
ENDS = ROOT / ".venv" / "ends"

CORE_TESTS = [
    "tests/test_core_only.py",
    "tests/test_core.py",
    "tests/test_turn_cache_middleware.py",
    "tests/test_scripted_model.py",
    "tests/test_anthropic_replay_wire.py",
    "tests/test_loopback.py",
    "tests/test_doctor_cli.py",
    "tests/test_doctor_docs.py",
]
"""The tests of the core and the doctor that import nothing beyond the core."""

PYTHONS = ("3.11", "3.12", "3.13")
"""The Pythons the core is tested on, oldest first: the classifiers of pyproject.toml."""

TOOLS = ("pytest", "pytest-timeout", "pytest-xdist")
"""What runs the tests, at the tutorial's versions (constraints.txt)."""

PIP = ["-m", "pip", "--disable-pip-version-check"]


def core_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def lower_bound(req: Requirement) -> str:
    (low,) = [s.version for s in req.specifier if s.operator == ">="]
    return low


def pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a constraints file (comments skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return dict(line.split("==", 1) for line in lines if line)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, **kwargs)


class EndFailed(Exception):
    """One end did not hold: what failed, in words."""


def check(cmd: list[str], **kwargs) -> str:
    done = run(cmd, **kwargs)
    if done.returncode != 0:
        raise EndFailed(f"failed: {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    return done.stdout


def freeze(python: Path) -> dict[str, str]:
    out = check([str(python), *PIP, "list", "--format=json"])
    return {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(out)}


def build_wheel(into: Path) -> Path:
    """The wheel, built by .venv's hatchling without an isolated env (no index needed)."""
    check([sys.executable, *PIP, "wheel", "-q", "--no-deps", "--no-build-isolation"]
          + ["-w", str(into), str(ROOT)])  # fmt: skip
    (wheel,) = into.glob("agentstate_langgraph-*.whl")
    return wheel


def newest_on_index(python: Path, req: Requirement) -> Version | None:
    """The newest release of ``req`` inside its range that the index lists."""
    out = run([str(python), *PIP, "index", "versions", req.name]).stdout
    found = re.search(r"Available versions: (.*)", out)
    versions = [Version(v) for v in found.group(1).split(", ")] if found else []
    inside = [v for v in versions if v in req.specifier and not v.is_prerelease]
    return max(inside, default=None)


def why_not(python: Path, name: str, version: Version) -> str:
    """pip's reason, in a few words, for not installing ``name==version`` here."""
    out = run([str(python), *PIP, "install", "--dry-run", f"{name}=={version}"])
    text = out.stdout + out.stderr
    lacks = re.search(r"satisfies the requirement (\S+) \(from ([^)]+)\)", text)
    if lacks:
        return f"{lacks.group(2)} needs {lacks.group(1)}, which the index here lacks"
    cause = re.search(r"The conflict is caused by:\n\s*(.+)", text)
    if cause:
        return cause.group(1).strip()
    return next((ln for ln in text.splitlines() if ln.startswith("ERROR")), "pip: no reason given")


WORKERS = 4
"""pytest workers across all ends at once (each end gets its share): more ends must not mean
more processes on the cores, or the core tests' own timings (a reader waits < 2 s) suffer."""


def end(name: str, python: str, wheel: Path, tools: dict[str, str], workers: int = 2) -> list[str]:
    """Build one end's venv, install as a reader would, test; the lines that report it.

    ``name`` is ``lowest``, ``newest``, or ``newest-3.N`` (the newest end on another Python).
    """
    started = time.monotonic()
    venv = ENDS / name
    shutil.rmtree(venv, ignore_errors=True)
    check([python, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    reqs = core_requirements()
    # 1. the reader's own libraries
    if name == "lowest":
        floor = venv / "lowest.txt"
        floor.write_text("".join(f"{r.name}=={lower_bound(r)}\n" for r in reqs))
        check([str(py), *PIP, "install", "-q", "-c", str(floor), *map(str, reqs)])
    else:
        check([str(py), *PIP, "install", "-q", *map(str, reqs)])
    reader = freeze(py)
    # 2. the wheel: nothing of the reader's changes, nothing but the wheel is added
    check([str(py), *PIP, "install", "-q", str(wheel)])
    after = freeze(py)
    changed = {k: (v, after.get(k)) for k, v in reader.items() if after.get(k) != v}
    added = sorted(set(after) - set(reader))
    if changed or added != ["agentstate-langgraph"]:
        raise EndFailed(f"installing the wheel changed {changed} and added {added}")
    tool_pins = venv / "tools.txt"
    tool_pins.write_text("".join(f"{t}=={tools[t]}\n" for t in TOOLS))
    check([str(py), *PIP, "install", "-q", "-c", str(tool_pins), *TOOLS])
    moved = {k: v for k, v in reader.items() if freeze(py).get(k) != v}
    if moved:
        raise EndFailed(f"the test tools changed the reader's libraries: {moved}")
    # 3. the command, as installed, on the README's notes agent
    with tempfile.TemporaryDirectory() as tmp:
        readme = (ROOT / "README.md").read_text().split("## Use it in your own agent", 1)[1]
        code = re.search(r"```python\n(.*?)```", readme, re.S)
        assert code is not None
        (Path(tmp) / "notes.py").write_text(code.group(1))
        doctor = run([str(venv / "bin" / "agentstate"), "doctor", "notes.py:agent"], cwd=tmp)
        first = (doctor.stdout.splitlines() or [""])[0]
        if (doctor.returncode, first) != (0, "notes.py:agent: no findings"):
            raise EndFailed(f"agentstate doctor: {doctor.stdout}{doctor.stderr}")
    # 4. the core and doctor tests against the installed wheel
    env = {**os.environ, "AGENTSTATE_CORE_ONLY": "1"}
    tests = run([str(py), "-m", "pytest", "-q", "-n", str(workers), "-p", "no:cacheprovider",
                 *CORE_TESTS], cwd=ROOT, env=env)  # fmt: skip
    tail = (tests.stdout.strip().splitlines() or [""])[-1]
    if tests.returncode != 0:
        raise EndFailed(f"the core tests failed\n{tests.stdout[-6000:]}{tests.stderr}")
    versions = {r.name: after[r.name] for r in reqs}
    python_version = check([str(py), "-c", "import platform; print(platform.python_version())"])
    lines = [
        f"ends: {name}: Python {python_version.strip()}, "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f": {tail.strip('= ')} ({time.monotonic() - started:.0f} s in all; "
        "installing the wheel changed none of them and added no extra)"
    ]
    if name == "newest":  # said once, on the first Python: the index is the same for all
        behind = [
            f"{r.name} {newest} is on the index but does not resolve here "
            f"({why_not(py, r.name, newest)})"
            for r in reqs
            if (newest := newest_on_index(py, r)) and newest > Version(versions[r.name])
        ]
        if behind:
            lines.append(f"ends: newest: {'; '.join(behind)}; tested the newest that resolves")
    return lines


def python_version(python: str) -> tuple[int, ...] | None:
    """(major, minor, micro) of an interpreter, or None if it does not run."""
    try:
        code = "import sys; sys.stdout.write('%d %d %d' % sys.version_info[:3])"  # Python 2 too
        done = run([python, "-c", code], timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tuple(map(int, done.stdout.split())) if done.returncode == 0 else None


def pyenv_pythons() -> list[str]:
    """The interpreters ``pyenv versions`` lists (none without pyenv)."""
    if shutil.which("pyenv") is None:
        return []
    root = run(["pyenv", "root"]).stdout.strip()
    names = run(["pyenv", "versions", "--bare"]).stdout.split()
    found = (Path(root) / "versions" / n / "bin" / "python" for n in names)
    return [str(p) for p in found if p.is_file()]


def find_pythons(first: str) -> tuple[dict[str, str], list[str]]:
    """{"3.N": interpreter} for each of PYTHONS found (``first`` for its own), and why the
    others, and any other Python found, are not tested: the words of the skip line."""
    candidates = [first, *(shutil.which(f"python{v}") or "" for v in PYTHONS), *pyenv_pythons()]
    found: dict[str, tuple[tuple[int, ...], str]] = {}
    others: dict[tuple[int, ...], str] = {}
    for python in dict.fromkeys(c for c in candidates if c):
        version = python_version(python)
        if version is None:
            continue
        minor = f"{version[0]}.{version[1]}"
        if minor not in PYTHONS:
            others[version] = python
            continue
        best = found.get(minor)
        # the Python asked for wins its minor; otherwise the newest patch release
        if best is None or (best[1] != first and (python == first or version > best[0])):
            found[minor] = (version, python)
    skipped = [
        f"Python {v} (no python{v} on PATH or in pyenv versions)" for v in PYTHONS if v not in found
    ]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    oldest = tuple(map(int, PYTHONS[0].split(".")))
    below = [".".join(map(str, v)) for v in sorted(others) if v[:2] < oldest]
    above = [".".join(map(str, v)) for v in sorted(others) if v[:2] > oldest]
    if below:
        skipped.append(f"Python {', '.join(below)} (below requires-python {requires})")
    if above:
        skipped.append(f"Python {', '.join(above)} (newer than the classifiers' {PYTHONS[-1]})")
    return {minor: python for minor, (_, python) in sorted(found.items())}, skipped


def plan(names: list[str], pythons: dict[str, str], first: str) -> dict[str, str]:
    """Each end's name and interpreter: lowest on ``first``, newest on every Python found."""
    ends = {"lowest": first} if "lowest" in names else {}
    if "newest" in names:
        first_minor = next((m for m, p in pythons.items() if p == first), None)
        for minor, python in pythons.items():
            ends["newest" if minor == first_minor else f"newest-{minor}"] = python
    return ends


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ends", nargs="*", help="lowest, newest or both (the default)")
    parser.add_argument(
        "--python",
        default=getattr(sys, "_base_executable", sys.executable),
        help="the Python of the lowest end (default: .venv's)",
    )
    args = parser.parse_args()
    if set(args.ends) - {"lowest", "newest"}:
        parser.error(f"an end is lowest or newest, not {' '.join(args.ends)}")
    tools = pins(ROOT / "constraints.txt")
    ENDS.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(args.ends)) or ["lowest", "newest"]
    pythons, skipped = find_pythons(args.python)
    ends = plan(names, pythons, args.python)
    print(
        f"ends: Pythons {', '.join(pythons)} found; skipped: {'; '.join(skipped) or 'none'}",
        flush=True,
    )
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))
        # all at once: most of an end is pip waiting on the index, the rest is tests
        with ThreadPoolExecutor(len(ends)) as pool:
            futures = {
                name: pool.submit(end, name, python, wheel, tools, max(1, WORKERS // len(ends)))
                for name, python in ends.items()
            }
        for name, future in futures.items():
            try:
                print("\n".join(future.result()))
            except EndFailed as error:
                print(f"ends: {name}: {error}")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""`make ends`: the core tested at both ends of its ranges, installed as a reader would.

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
``python scripts/both_ends.py [lowest|newest ...] [--python PATH] [--newest-python PATH]``.
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


def end(name: str, python: str, wheel: Path, tools: dict[str, str]) -> list[str]:
    """Build one end's venv, install as a reader would, test; the lines that report it."""
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
        if (doctor.returncode, doctor.stdout.strip()) != (0, "notes.py:agent: no findings"):
            raise EndFailed(f"agentstate doctor: {doctor.stdout}{doctor.stderr}")
    # 4. the core and doctor tests against the installed wheel
    env = {**os.environ, "AGENTSTATE_CORE_ONLY": "1"}
    tests = run([str(py), "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", *CORE_TESTS],
                cwd=ROOT, env=env)  # fmt: skip
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
    if name == "newest":
        behind = [
            f"{r.name} {newest} is on the index but does not resolve here "
            f"({why_not(py, r.name, newest)})"
            for r in reqs
            if (newest := newest_on_index(py, r)) and newest > Version(versions[r.name])
        ]
        if behind:
            lines.append(f"ends: newest: {'; '.join(behind)}; tested the newest that resolves")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ends", nargs="*", help="lowest, newest or both (the default)")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable))
    parser.add_argument("--newest-python", help="the Python of the newest end (default --python)")
    args = parser.parse_args()
    if set(args.ends) - {"lowest", "newest"}:
        parser.error(f"an end is lowest or newest, not {' '.join(args.ends)}")
    tools = pins(ROOT / "constraints.txt")
    ENDS.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(args.ends)) or ["lowest", "newest"]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))
        # both at once: most of an end is pip waiting on the index, the rest is tests
        with ThreadPoolExecutor(len(names)) as pool:
            futures = {
                name: pool.submit(
                    end,
                    name,
                    args.newest_python if name == "newest" and args.newest_python else args.python,
                    wheel,
                    tools,
                )
                for name in names
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

"""Project plumbing: ranges in pyproject.toml, the tutorial's exact set in constraints.txt.

A reader's project gets the ranges (docs/pins.md); the tutorial, its tests and
nbval run on exactly the pins of constraints.txt, which `make install` passes
to pip; environment.yml lists the same pins for conda users (issue 24).
"""

import ast
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from agentstate._extras import DIST, EXTRAS

ROOT = Path(__file__).resolve().parents[1]


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def constraints() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    lines = (
        ln.split("#", 1)[0].strip() for ln in (ROOT / "constraints.txt").read_text().splitlines()
    )
    pairs = [ln.split("==") for ln in lines if ln]
    assert all(len(p) == 2 for p in pairs), "constraints.txt: one `name==version` per line"
    return {canonicalize_name(name): v for name, v in pairs}


def requirements() -> list[Requirement]:
    """Every requirement of the core and of every extra, except the extras' references
    to each other (`agentstate-langgraph[...]`)."""
    spec = project()
    lines = spec["dependencies"] + [r for rs in spec["optional-dependencies"].values() for r in rs]
    return [Requirement(r) for r in lines if Requirement(r).name != DIST]


def extra_closure(extra: str) -> set[str]:
    """The canonical names an extra installs directly, following references to other extras."""
    extras = project()["optional-dependencies"]
    names: set[str] = set()
    for line in extras[extra]:
        req = Requirement(line)
        if req.name == DIST:
            for other in req.extras:
                names |= extra_closure(other)
        else:
            names.add(canonicalize_name(req.name))
    return names


def test_the_distribution_name_is_ours_and_the_import_name_stays():
    spec = project()
    assert spec["name"] == DIST == "agentstate-langgraph"  # `agentstate` is someone else's
    assert spec["scripts"] == {"agentstate": "agentstate.cli:main"}
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]["packages"] == ["src/agentstate"]
    for page in ("README.md", "docs/package.md"):
        assert f"pip install {DIST}" in (ROOT / page).read_text(), page


def test_every_requirement_is_a_range_up_to_the_next_major():
    """No pin in pyproject.toml: `>=` the oldest tested, `<` the next major (0.x: next minor)."""
    wrong = []
    for req in requirements():
        ops = {s.operator: Version(s.version) for s in req.specifier}
        if set(ops) != {">=", "<"}:
            wrong.append(f"{req}: want exactly >=low,<high")
            continue
        low, high = ops[">="], ops["<"]
        want = Version(f"0.{low.minor + 1}") if low.major == 0 else Version(f"{low.major + 1}")
        if high != want:
            wrong.append(f"{req}: upper bound {high}, want {want}")
    assert wrong == []


def test_the_core_needs_only_langgraph_and_langchain():
    names = {canonicalize_name(Requirement(r).name) for r in project()["dependencies"]}
    # pydantic: imported by the core directly; its floor is the oldest that runs LangChain's
    # own client (langsmith) at all (`make ends`); python-dotenv: the doctor reads
    # langgraph.json's "env" file as langgraph dev does, also where langgraph-cli is not
    # installed (a pre-commit hook's own environment); libcst: `agentstate doctor --fix`
    # edits the reader's files keeping their comments and formatting
    assert names == {
        "langgraph",
        "langchain",
        "langchain-core",
        "pydantic",
        "python-dotenv",
        "libcst",
    }


def test_no_ceiling_on_python():
    assert project()["requires-python"] == ">=3.11"


def test_constraints_pin_every_requirement_inside_its_range():
    pinned = constraints()
    outside = [
        f"{req.name}: pinned {pinned.get(canonicalize_name(req.name))}, range {req.specifier}"
        for req in requirements()
        if canonicalize_name(req.name) not in pinned
        or Version(pinned[canonicalize_name(req.name)]) not in req.specifier
    ]
    assert outside == []


def test_an_extras_lower_bound_is_the_tutorials_version():
    """The extras are tested on the tutorial's set only: their floors are its pins."""
    pinned = constraints()
    core = {Requirement(r).name for r in project()["dependencies"]}
    floors = {
        req.name: next(s.version for s in req.specifier if s.operator == ">=")
        for req in requirements()
        if req.name not in core
    }
    assert {n: v for n, v in floors.items() if pinned[canonicalize_name(n)] != v} == {}


def test_environment_yml_pins_exactly_the_constraints():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {}
    for line in pip_section:
        if line.startswith("-e"):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", line
        listed[canonicalize_name(req.name)] = spec.version
    assert listed == constraints()
    assert "-e .[dev,engine]" in pip_section
    assert "python=3.11" in env["dependencies"]


def test_the_extras_table_of_the_errors_agrees_with_pyproject():
    """agentstate._extras names, for each extra, modules that extra really installs."""
    extras = project()["optional-dependencies"]
    assert set(EXTRAS) == set(extras) - {"dev", "all"}
    assert extra_closure("all") >= set().union(*(extra_closure(e) for e in EXTRAS))
    assert extra_closure("dev") >= extra_closure("lessons")
    unowned = []
    for extra, modules in EXTRAS.items():
        owners = extra_closure(extra)
        for module in modules:
            spec = importlib.util.find_spec(module)
            if spec is None:  # not installed here (the engine before `make engine`)
                continue
            if not any(owns(dist, spec.origin) for dist in owners):
                unowned.append(f"{extra}: {module}")
    assert unowned == []


def owns(dist: str, origin: str | None) -> bool:
    try:
        found = distribution(dist)
    except PackageNotFoundError:
        return False
    return origin is not None and any(
        Path(found.locate_file(f)).resolve() == Path(origin).resolve() for f in found.files or []
    )


def test_the_lessons_run_on_exactly_the_constrained_set():
    """`make install` used constraints.txt: every pinned library installed here is at its pin."""
    off = {}
    for name, pin in constraints().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            continue  # the engine before `make engine`
        if installed != pin:
            off[name] = (installed, pin)
    assert off == {}
    taught = ("langgraph", "langchain", "langchain-core", "deepagents")
    assert all(version(name) == constraints()[name] for name in taught)


def test_make_install_passes_the_constraints_to_pip():
    makefile = (ROOT / "Makefile").read_text()
    assert "CONSTRAINTS := constraints.txt" in makefile
    installs = [ln for ln in makefile.splitlines() if "pip install" in ln and " -e " in ln]
    assert len(installs) >= 2 and all("-c $(CONSTRAINTS)" in ln for ln in installs), installs
    assert "$(STAMP): pyproject.toml $(CONSTRAINTS)" in makefile


def recipe(makefile: str, target: str) -> str:
    return makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_make_test_runs_both_ends():
    makefile = (ROOT / "Makefile").read_text()
    assert " checks " in recipe(makefile, "test")
    assert "scripts/both_ends.py" in recipe(makefile, "checks")


def test_make_test_compiles_the_engine_beside_the_install_and_the_checks():
    """The compile (most of the CPU) overlaps what waits on the index, apt and servers; the
    engine is installed from the wheel it built, after the checks, never during them."""
    makefile = (ROOT / "Makefile").read_text()
    test = recipe(makefile, "test")
    side_by_side = next(line for line in test.splitlines() if "-j3" in line)
    assert all(t in side_by_side for t in ("checks", "$(ENGINE_WHEELS)/.built", "system-packages"))
    assert test.index("-j3") < test.index("$(QUANT)") < test.index("pytest")
    wheel = recipe(makefile, "$(ENGINE_WHEELS)/.built")
    assert (
        "pip wheel" in wheel
        and "$(STAMP)" not in makefile.split("$(ENGINE_WHEELS)/.built:")[1].split("\n")[0]
    )
    assert "--find-links $(ENGINE_WHEELS)" in recipe(makefile, "$(ENGINE)")
    assert "checks: $(STAMP)" in makefile


def both_ends():
    spec = importlib.util.spec_from_file_location("both_ends", ROOT / "scripts" / "both_ends.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXTRA_MODULES = {module for modules in EXTRAS.values() for module in modules}

# What the core-only venvs of `make ends` lack: every part beyond the core and every library
# of an extra. A test module of CORE_TESTS imports none of them at its top level.
NOT_CORE = r"agentstate\.(rds|experts|memory|engine|persistence|servers\.postgres|lessons)\b"


def test_the_tests_make_ends_runs_import_only_the_core():
    ends = both_ends()
    offenders = []
    for path in ends.CORE_TESTS:
        tree = ast.parse((ROOT / path).read_text())
        for node in tree.body:  # module level only: a test marked extras(...) imports lazily
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                blocked = any(
                    name == m or name.startswith(m + ".") for ms in EXTRAS.values() for m in ms
                )
                if blocked or re.match(NOT_CORE, name):
                    offenders.append(f"{path}: {name}")
    assert offenders == []
    assert "tests/test_core_only.py" in ends.CORE_TESTS
    assert set(ends.TOOLS) <= set(constraints())


def test_the_classifiers_list_exactly_the_pythons_make_ends_tests():
    """The index shows the supported Pythons: exactly those `make ends` runs the tests on."""
    listed = [
        c.removeprefix("Programming Language :: Python :: ")
        for c in project()["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert listed == list(both_ends().PYTHONS)
    floor = project()["requires-python"].removeprefix(">=")
    assert both_ends().PYTHONS[0] == floor


def test_make_ends_finds_each_python_and_says_which_it_skipped(tmp_path, monkeypatch):
    ends = both_ends()
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    monkeypatch.setattr(ends, "PYTHONS", (here, "3.99"))
    monkeypatch.setattr(ends, "pyenv_pythons", lambda: [])
    found, skipped = ends.find_pythons(sys.executable)
    assert found == {here: sys.executable}
    assert skipped == ["Python 3.99 (no python3.99 on PATH or in pyenv versions)"]
    plan = ends.plan(
        ["lowest", "newest"], {here: sys.executable, "3.99": "/x/python"}, sys.executable
    )
    assert plan == {"lowest": sys.executable, "newest": sys.executable, "newest-3.99": "/x/python"}


@pytest.mark.parametrize("line", ["langgraph>=1.2.0,<2", "pydantic>=2.9.0,<3"])
def test_make_ends_takes_each_lower_bound(line):
    assert both_ends().lower_bound(Requirement(line)) == line.split(">=")[1].split(",")[0]


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme


def test_the_scopes_make_test_starts_first_exist():
    import conftest

    missing = [path for path in conftest.LONGEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"conftest.LONGEST_FIRST names files that are gone: {missing}"


def route_without_make() -> list[str]:
    """The README's commands for the lessons without make (its "Two commands" section)."""
    section = (ROOT / "README.md").read_text().split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"Without `make`.*?```bash\n(.*?)```", section, re.S)
    assert block, "the README's Two commands section shows no route without make"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines() if line]


def test_the_route_without_make_installs_the_tutorials_set_with_jupyter(tmp_path):
    """The README's route without make, run as written in a fresh venv, with the install as
    pip's dry run (the full install is 0.6 GB; `make install` does it for real): it resolves
    to exactly the pins of constraints.txt, and brings JupyterLab and its kernel."""
    venv, install, lab = route_without_make()
    assert venv == "python3 -m venv .venv && . .venv/bin/activate"
    assert install == 'pip install -c constraints.txt -e ".[lessons]"'
    assert lab == "jupyter lab notebooks/" and (ROOT / "notebooks").is_dir()
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / ".venv")], check=True)
    report = tmp_path / "report.json"
    python = tmp_path / ".venv" / "bin" / "python"
    words = install.split()[1:]  # pip's own words, as the activated venv's pip reads them
    words = [w.strip('"') for w in words]
    done = subprocess.run(
        [str(python), "-m", "pip", *words, "--dry-run", "--quiet", "--report", str(report)]
        + ["--disable-pip-version-check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert {"jupyterlab", "ipykernel"} <= set(chosen)
    pinned = constraints()
    off = {n: (v, pinned[n]) for n, v in chosen.items() if n in pinned and pinned[n] != v}
    assert off == {}
    assert chosen[DIST] == agentstate_version()


def agentstate_version() -> str:
    import agentstate

    return agentstate.__version__

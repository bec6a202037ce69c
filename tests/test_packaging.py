"""Project plumbing: pinned dependencies agree between pyproject.toml and environment.yml."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_pins_exactly_what_pyproject_pins():
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    declared = set(project["dependencies"]) | {d for deps in extras.values() for d in deps}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pinned = {d for d in pip_section if not d.startswith("-e")}
    assert pinned == declared
    assert f"-e .[{','.join(sorted(extras))}]" in pip_section


def test_every_dependency_is_pinned_to_one_version():
    project = pyproject()["project"]
    deps = project["dependencies"] + [
        d for ds in project["optional-dependencies"].values() for d in ds
    ]
    loose = [d for d in deps if not re.fullmatch(r"[A-Za-z0-9_.\-]+(\[[a-z,]+\])?==[\w.]+", d)]
    assert loose == []


def test_python_version_agrees():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert pyproject()["project"]["requires-python"] == ">=3.11,<3.12"


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme


def test_the_scopes_make_test_starts_first_exist():
    import conftest

    missing = [path for path in conftest.LONGEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"conftest.LONGEST_FIRST names files that are gone: {missing}"


def test_the_libraries_the_lessons_teach_are_installed_at_their_pins():
    """The lessons state library behaviour of these exact versions (they no longer print them)."""
    from importlib.metadata import version

    project = pyproject()["project"]
    pins = dict(d.split("==") for d in project["dependencies"] if "==" in d)
    taught = ("langgraph", "langchain", "langchain-core", "deepagents")
    assert {name: version(name) for name in taught} == {name: pins[name] for name in taught}

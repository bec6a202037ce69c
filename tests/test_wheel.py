"""The wheel a reader installs: our name, ranges not pins, one extra per part, the data files,
the licence, one version, and a page for the package index that works away from the repository."""

import ast
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # the pinned hatchling of the dev set builds it: no isolated build env, so no package index
    into = tmp_path_factory.mktemp("wheel")
    build = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(into)]
    subprocess.run([sys.executable, "-m", *build, str(ROOT)], check=True, capture_output=True)
    (found,) = into.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    into = tmp_path_factory.mktemp("sdist")
    build = ["hatchling", "build", "-t", "sdist", "-d", str(into)]
    subprocess.run([sys.executable, "-m", *build], check=True, capture_output=True, cwd=ROOT)
    (found,) = into.glob("*.tar.gz")
    return found


@pytest.fixture(scope="module")
def metadata(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(name).decode())


def requires(metadata) -> tuple[list[Requirement], dict[str, set[str]]]:
    """The core's Requires-Dist, and per extra the requirements it adds (as strings)."""
    core, extras = [], {}
    for line in metadata.get_all("Requires-Dist"):
        req = Requirement(line)
        marker = str(req.marker) if req.marker else ""
        if not marker:
            core.append(req)
            continue
        extra = marker.split("extra == ", 1)[1].strip("'\"")
        req.marker = None
        extras.setdefault(extra, set()).add(str(req))
    return core, extras


def source_version() -> str:
    """agentstate.__version__ as written in src/agentstate/__init__.py (the one source)."""
    tree = ast.parse((ROOT / "src/agentstate/__init__.py").read_text())
    (value,) = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    return value


def test_the_wheel_contains_the_package_and_its_data(wheel):
    assert wheel.name.startswith(f"agentstate_langgraph-{source_version()}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "agentstate/rds/validator.py" in names
    # PEP 561: without the marker a user's type checker treats every agentstate import as Any
    assert "agentstate/py.typed" in names


def test_the_wheel_carries_what_the_package_reads_and_no_benchmark_results(wheel):
    """data/ but results/: the recorded benchmarks stay with the repository (issue 34)."""
    shipped = {
        n.removeprefix("agentstate/data/")
        for n in zipfile.ZipFile(wheel).namelist()
        if n.startswith("agentstate/data/")
    }
    data = ROOT / "data"
    in_repo = {str(p.relative_to(data)) for p in data.rglob("*") if p.is_file()}
    assert shipped == {n for n in in_repo if not n.startswith("results/")}
    assert any(n.startswith("results/") for n in in_repo)


def test_the_version_has_one_source(metadata):
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "src/agentstate/__init__.py"
    assert metadata["Version"] == source_version()


LICENSE_TEXT = (ROOT / "LICENSE").read_text()


def test_the_licence_is_in_the_repository_the_wheel_and_the_sdist(wheel, sdist, metadata):
    assert LICENSE_TEXT.startswith("MIT License\n\nCopyright (c) ")
    assert "The agentstate authors" in LICENSE_TEXT.splitlines()[2]
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(name).decode() == LICENSE_TEXT
    with tarfile.open(sdist) as archive:
        (member,) = [m for m in archive.getmembers() if m.name.endswith("/LICENSE")]
        assert archive.extractfile(member).read().decode() == LICENSE_TEXT
    # PEP 639 (Metadata 2.4): an SPDX expression and the file, not the old free-text field
    assert metadata["Metadata-Version"] == "2.4"
    assert (metadata["License-Expression"], metadata["License-File"]) == ("MIT", "LICENSE")
    assert metadata["License"] is None
    assert not [c for c in metadata.get_all("Classifier") if c.startswith("License ::")]


def test_the_sdist_carries_the_lessons_and_the_project_files(sdist):
    """The long description sends a reader to the sdist for the notebooks: they are there."""
    with tarfile.open(sdist) as archive:
        names = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    wanted = {"README.md", "CHANGELOG.md", "SECURITY.md", "constraints.txt", "Makefile"}
    assert wanted <= names
    assert "notebooks/01_file_based_storage.ipynb" in names
    assert "data/results/experts_benchmark.json" in names
    assert not {n for n in names if n == ".git" or n.startswith((".git/", ".venv/"))}


def test_the_classifiers_say_typed(metadata):
    assert "Typing :: Typed" in metadata.get_all("Classifier")


# a Markdown link or image, or an HTML href/src: its target
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|(?:href|src)\s*=\s*[\"']([^\"']+)")


def test_the_index_page_has_no_link_that_is_dead_away_from_the_repository(metadata):
    """What the package index shows (the METADATA body): absolute links only, none into
    the source tree; the README's relative links were dead there (issue 34)."""
    page = metadata.get_payload()
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert page.startswith("# agentstate\n")
    targets = [a or b for a, b in LINK.findall(page)]
    assert [t for t in targets if not t.startswith("https://")] == []
    assert "agentstate doctor --explain CODE" in page


def test_the_index_pages_example_runs(metadata):
    """The example on the index page, as a reader copies it: it runs and its asserts hold."""
    (code,) = re.findall(r"```python\n(.*?)```", metadata.get_payload(), re.S)[:1]
    namespace: dict = {}
    exec(compile(code, "METADATA", "exec"), namespace)
    assert namespace["state"]["notes"] == {"milk": "...", "eggs": "...", "tea": "..."}


def test_the_metadata_names_our_distribution_and_no_python_ceiling(metadata):
    assert metadata["Name"] == "agentstate-langgraph"
    assert metadata["Requires-Python"] == ">=3.11"


def test_the_core_requires_ranges_of_langgraph_and_langchain_only(metadata):
    core, _ = requires(metadata)
    names = {canonicalize_name(r.name) for r in core}
    # python-dotenv: the doctor reads langgraph.json's .env; libcst: `agentstate doctor --fix`
    assert names == {
        "langgraph",
        "langchain",
        "langchain-core",
        "pydantic",
        "python-dotenv",
        "libcst",
    }
    pinned = [str(r) for r in core if any(s.operator in ("==", "===") for s in r.specifier)]
    assert pinned == []
    assert all({s.operator for s in r.specifier} == {">=", "<"} for r in core), core


def test_every_extra_is_there_with_its_requirements(metadata):
    """Each extra of pyproject.toml, its references to other extras spelled out."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]

    def closure(extra: str) -> set[str]:
        out = set()
        for line in extras[extra]:
            req = Requirement(line)
            if req.name == "agentstate-langgraph":
                out |= set().union(*(closure(e) for e in req.extras))
            else:
                out.add(str(req))
        return out

    _, declared = requires(metadata)
    assert set(metadata.get_all("Provides-Extra")) == set(extras)
    assert {e: declared.get(e, set()) for e in extras} == {e: closure(e) for e in extras}
    assert "deepagents<0.8,>=0.7.32" in declared["deepagents"]
    assert not any("==" in r for reqs in declared.values() for r in reqs)


def test_recorded_results_are_read_from_a_checkout_only(tmp_path, monkeypatch):
    """Installed from the wheel there is no data/results: the readers say where they are."""
    from agentstate.lessons import datafiles

    assert datafiles.results_path("experts_benchmark.json") == (
        ROOT / "data/results/experts_benchmark.json"
    )
    # the wheel's own data/ (an installed package) never answers for results/
    (tmp_path / "data" / "results").mkdir(parents=True)
    (tmp_path / "data" / "results" / "experts_benchmark.json").write_text("{}")
    monkeypatch.setattr(datafiles, "_PACKAGED", tmp_path / "data")
    monkeypatch.setattr(datafiles, "_CHECKOUT", tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError, match="not in the wheel; they come with the project's"):
        datafiles.results_path("experts_benchmark.json")

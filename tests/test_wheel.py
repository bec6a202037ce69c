"""The wheel a reader installs: our name, ranges not pins, one extra per part, the data files."""

import subprocess
import sys
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


def test_the_wheel_contains_the_package_and_its_data(wheel):
    assert wheel.name.startswith("agentstate_langgraph-0.1.0-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "agentstate/rds/validator.py" in names
    assert "agentstate/data/aws_rds_instance_spec.yaml" in names
    # PEP 561: without the marker a user's type checker treats every agentstate import as Any
    assert "agentstate/py.typed" in names


def test_the_metadata_names_our_distribution_and_no_python_ceiling(metadata):
    assert metadata["Name"] == "agentstate-langgraph"
    assert metadata["Requires-Python"] == ">=3.11"


def test_the_core_requires_ranges_of_langgraph_and_langchain_only(metadata):
    core, _ = requires(metadata)
    names = {canonicalize_name(r.name) for r in core}
    assert names == {"langgraph", "langchain", "langchain-core", "pydantic"}
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

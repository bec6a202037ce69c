"""``.pre-commit-hooks.yaml``: the doctor as a pre-commit hook, checked by pre-commit itself.

pre-commit's own schema validates the manifest; then pre-commit runs the hook
on a git repository of a broken and a fixed graph, as a reader's
``.pre-commit-config.yaml`` would (``language: system`` here, so the hook runs
this environment's ``agentstate`` instead of installing the package anew).
Both skip, with the reason, where the ``pre-commit`` package is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
README = ROOT / "docs" / "doctor" / "README.md"

AGENT = """
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class Plain(TypedDict):
    docs: list


class Reduced(TypedDict):
    docs: Annotated[list, operator.add]


def build(schema):
    b = StateGraph(schema)
    b.add_node("a", lambda s: {"docs": ["a"]})
    b.add_node("b", lambda s: {"docs": ["b"]})
    b.add_edge(START, "a")
    b.add_edge(START, "b")  # a and b run in one step and both write docs
    b.add_edge(["a", "b"], END)
    return b.compile()


graph = build(GRAPH_SCHEMA)
"""


def hook() -> dict:
    (only,) = yaml.safe_load(MANIFEST.read_text())
    return only


def test_the_manifest_is_the_doctor_run_once_with_the_user_s_args():
    h = hook()
    assert (h["id"], h["entry"], h["language"]) == (
        "agentstate-doctor",
        "agentstate doctor",
        "python",
    )
    assert h["pass_filenames"] is False and "args" not in h  # the reader names the targets
    script = Path(sys.executable).with_name("agentstate")
    assert script.is_file()  # what `entry` runs: the package's console script


def test_pre_commit_accepts_the_manifest():
    clientlib = pytest.importorskip(
        "pre_commit.clientlib", reason="pre-commit is not installed (a dev dependency)"
    )
    (loaded,) = clientlib.load_manifest(str(MANIFEST))
    assert loaded["id"] == "agentstate-doctor" and loaded["pass_filenames"] is False


def readme_configs() -> list[dict]:
    page = README.read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```yaml\n")[1:]]
    return [yaml.safe_load(b) for b in blocks if "agentstate-doctor" in b]


def test_the_readme_shows_the_config_snippet_for_this_hook():
    """The remote hook with no args (the nearest langgraph.json) and what the graphs import;
    the local one with the manifest's own file pattern."""
    remote, local = readme_configs()
    (repo,) = remote["repos"]
    (entry,) = repo["hooks"]
    assert entry["id"] == hook()["id"] and "args" not in entry
    assert entry["additional_dependencies"]
    ((local_entry,),) = [r["hooks"] for r in local["repos"]]
    assert local["repos"][0]["repo"] == "local"
    for key in ("entry", "pass_filenames", "files"):
        assert local_entry[key] == hook()[key], key


@pytest.mark.parametrize(
    ("path", "runs"),
    [
        ("agent.py", True),
        ("langgraph.json", True),
        ("pyproject.toml", True),
        ("sub/pyproject.toml", True),
        (".env", True),
        ("sub/.env.local", True),
        ("README.md", False),
        ("notes.txt", False),
        ("environment.yml", False),
    ],
)
def test_the_hook_reruns_when_a_configuration_file_changes(path, runs):
    """Before: `types_or: [python, json]`, so a change to pyproject.toml or .env alone (the
    doctor's configuration, the graphs' env) never reran it."""
    clientlib = pytest.importorskip(
        "pre_commit.clientlib", reason="pre-commit is not installed (a dev dependency)"
    )
    (loaded,) = clientlib.load_manifest(str(MANIFEST))
    assert "types_or" not in hook() and loaded["types"] == ["file"]
    assert bool(re.search(loaded["files"], path)) is runs


def run_hook(repo: Path, schema: str, agent: str = AGENT) -> subprocess.CompletedProcess[str]:
    (repo / "agent.py").write_text(textwrap.dedent(agent).replace("GRAPH_SCHEMA", schema))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home"),
    }
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_pre_commit_runs_the_hook_and_fails_on_an_error_finding(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (a dev dependency)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    local = {**hook(), "language": "system"}  # no args: the nearest langgraph.json
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (repo / "langgraph.json").write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}}))
    broken = run_hook(repo, "Plain")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "agentstate doctor" in broken.stdout and "Failed" in broken.stdout
    assert "unreduced-parallel-write" in broken.stdout
    fixed = run_hook(repo, "Reduced")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "Passed" in fixed.stdout


def hooked_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    local = {**hook(), "language": "system"}  # no args: the nearest langgraph.json
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (repo / "langgraph.json").write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}}))
    return repo


def test_pre_commit_passes_once_the_finding_is_suppressed_on_its_key(tmp_path):
    """The team's way out of a finding it accepts: a comment on the key's declaration."""
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (a dev dependency)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = hooked_repo(tmp_path)
    suppressed = AGENT.replace(
        "class Plain(TypedDict):\n    docs: list\n",
        "class Plain(TypedDict):\n    docs: list  # agentstate: ignore[unreduced-parallel-write]\n",
    )
    assert suppressed != AGENT
    done = run_hook(repo, "Plain", suppressed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout
    bare = run_hook(repo, "Plain")  # the control: the same graph without the comment
    assert bare.returncode == 1 and "unreduced-parallel-write" in bare.stdout


def test_pre_commit_passes_once_pyproject_ignores_the_code_and_fails_on_a_typo(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (a dev dependency)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = hooked_repo(tmp_path)
    (repo / "pyproject.toml").write_text(
        '[tool.agentstate.doctor]\nignore = ["unreduced-parallel-write"]\n'
    )
    ignored = run_hook(repo, "Plain")
    assert ignored.returncode == 0, ignored.stdout + ignored.stderr
    assert "Passed" in ignored.stdout
    (repo / "pyproject.toml").write_text(
        '[tool.agentstate.doctor]\nignore = ["unreduced-paralel-write"]\n'
    )
    typo = run_hook(repo, "Plain")
    assert typo.returncode == 1 and "exit code: 2" in typo.stdout, typo.stdout + typo.stderr
    assert (
        "agentstate doctor: error: pyproject.toml [tool.agentstate.doctor] 'ignore': unknown "
        "code 'unreduced-paralel-write'" in typo.stdout
    )


def test_pre_commit_reruns_the_hook_on_a_changed_env_file_alone(tmp_path):
    """Only `.env` changes (the graph reads its key at import): the hook runs, and fails on
    the key's absence the moment the file loses it."""
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (a dev dependency)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = hooked_repo(tmp_path)
    (repo / "langgraph.json").write_text(
        json.dumps({"graphs": {"agent": "./agent.py:graph"}, "env": ".env"})
    )
    needs_key = AGENT.replace("graph = build(", "import os\nos.environ['TEAM_KEY']\ngraph = build(")
    (repo / ".env").write_text("TEAM_KEY=sk-test\n")
    passed = run_hook(repo, "Reduced", needs_key)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    (repo / ".env").write_text("OTHER=1\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home"),
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--files", ".env", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Skipped" not in done.stdout, done.stdout
    assert done.returncode == 1 and "KeyError: 'TEAM_KEY'" in done.stdout, done.stdout

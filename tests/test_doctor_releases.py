"""The doctor beside the version matrix (issue 36 item 4): a hazard a release ended is
reported only on the releases that still have it, with the boundary the matrix recorded.

``agentstate.doctor.facts.releases`` holds each boundary; here it is checked against
data/results/hazards_by_version.json (the last set that reproduced, the first that
refused), both sides are diagnosed with the version lookup patched, and, where the
matrix's venvs exist (only where ``scripts/hazards_by_version.py`` ran; never in CI), a
real deepagents 0.7.15 and 0.7.16 run the reproduction and the doctor side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from agentstate.doctor import diagnose
from agentstate.doctor.facts import releases
from agentstate.doctor.facts.releases import BOUNDARIES, BUILTIN_PARALLEL_EDIT, release
from agentstate.hazards import hazard as hazard_named
from agentstate.models import ScriptedChatModel, reply

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "results" / "hazards_by_version.json"
PAGE = ROOT / "docs" / "hazards-by-version.md"
VENVS = ROOT / ".venv" / "hazards"
"""Where scripts/hazards_by_version.py builds its venvs."""

pytestmark = pytest.mark.extras("deepagents")


def ran_sets() -> list[dict[str, Any]]:
    return [s for s in json.loads(DATA.read_text())["sets"] if "results" in s]


def outcomes(hazard: str, distribution: str) -> dict[str, set[Version]]:
    """The releases of ``distribution`` the matrix ran ``hazard`` on, by outcome."""
    found: dict[str, set[Version]] = {}
    for vs in ran_sets():
        result = vs["results"].get(hazard)
        if result is not None:
            found.setdefault(result["outcome"], set()).add(Version(vs["versions"][distribution]))
    return found


@pytest.mark.parametrize("hazard", sorted(BOUNDARIES))
def test_each_boundary_is_the_one_the_matrix_recorded(hazard: str):
    boundary = BOUNDARIES[hazard]
    seen = outcomes(hazard, boundary.distribution)
    reproduced, changed = seen.get("reproduced", set()), seen.get(boundary.outcome, set())
    assert reproduced and changed, seen
    assert set(seen) == {"reproduced", boundary.outcome}, seen  # no third outcome in between
    # the release alone decides: every release that reproduced is older than every one that did not
    assert max(reproduced) < min(changed)
    assert str(max(reproduced)) == boundary.last_reproduced
    assert str(min(changed)) == boundary.first_changed
    assert f'<a id="{hazard}"></a>' in PAGE.read_text()  # the row a finding links
    assert hazard_named(hazard).code == boundary.code  # the page names the doctor's code


def test_every_hazard_a_release_ended_has_a_boundary():
    ended = {
        name
        for vs in ran_sets()
        for name, result in vs["results"].items()
        if result["outcome"] in ("refused", "fixed")
    }
    assert ended == set(BOUNDARIES)


def test_the_release_is_read_from_metadata_without_importing_the_library():
    code = (
        "import sys; from agentstate.doctor.facts.releases import installed_version; "
        "print(installed_version('deepagents'), 'deepagents' in sys.modules, "
        "installed_version('no-such-distribution-here'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == [metadata.version("deepagents"), "False", "None"]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("0.7.15", "0.7.16"),
        ("0.7.16rc1", "0.7.16"),
        ("0.7.16.dev0", "0.7.16"),
        ("0.6.3", "0.7.0"),
        ("0.7.9", "0.7.10"),
        ("0.7.16", "0.7.16.post1"),
    ],
)
def test_releases_compare_as_pip_orders_them(older: str, newer: str):
    assert Version(older) < Version(newer)  # the premise
    assert release(older) <= release(newer)
    assert release(older) < release(newer) or Version(newer).is_postrelease
    assert release("0.7.16.0") == release("0.7.16")


# --- both sides of deepagents 0.7.16, the version lookup patched -----------------------------


def deep_agent(**kwargs: Any) -> Any:
    from deepagents import create_deep_agent

    return create_deep_agent(ScriptedChatModel(script=[reply(text="ok")]), **kwargs)


def on(monkeypatch: pytest.MonkeyPatch, version: str | None) -> list[str]:
    """The doctor's lookup patched to answer ``version``; returns what it is asked."""
    asked: list[str] = []

    def installed(distribution: str) -> str | None:
        asked.append(distribution)
        return version

    monkeypatch.setattr(releases, "installed_version", installed)
    return asked


def test_deepagents_own_file_tools_before_the_guard_are_an_error(monkeypatch: pytest.MonkeyPatch):
    asked = on(monkeypatch, BUILTIN_PARALLEL_EDIT.last_reproduced)
    report = diagnose(deep_agent(), "deep")
    assert set(asked) == {"deepagents"}
    assert [(f.code, f.severity, f.subject) for f in report] == [
        ("file-read-modify-write", "error", "edit_file"),
        ("file-read-modify-write", "error", "general-purpose:edit_file"),
    ]
    message = report.findings[0].message
    assert "deepagents 0.7.15 (installed)" in message
    assert "`edit_file`, `write_file` and `delete`" in message
    assert "deepagents 0.7.16 and later refuse" in message
    assert "docs/hazards-by-version.md#builtin-parallel-edit" in message
    assert report.findings[0].file is None  # the library's code is not the reader's line


def test_deepagents_own_file_tools_from_the_guard_on_are_clean(monkeypatch: pytest.MonkeyPatch):
    on(monkeypatch, BUILTIN_PARALLEL_EDIT.first_changed)
    assert diagnose(deep_agent()).findings == []
    on(monkeypatch, "0.7.32")
    assert diagnose(deep_agent()).findings == []


def test_an_unknown_release_is_info_not_an_alarm(monkeypatch: pytest.MonkeyPatch):
    on(monkeypatch, None)
    report = diagnose(deep_agent())
    assert report.codes() == []
    assert [(f.code, f.severity, f.subject) for f in report] == [
        ("file-read-modify-write", "info", "edit_file"),
        ("file-read-modify-write", "info", "general-purpose:edit_file"),
    ]
    assert "cannot tell" in report.findings[0].message


def test_a_tool_of_the_readers_named_like_deepagents_is_not_the_librarys(
    monkeypatch: pytest.MonkeyPatch,
):
    from langchain_core.tools import tool

    @tool
    def write_file(file_path: str, content: str) -> str:
        """Write a file of the reader's own (one path per call, nothing read)."""
        return f"wrote {file_path}"

    from langchain.agents import create_agent

    on(monkeypatch, BUILTIN_PARALLEL_EDIT.last_reproduced)
    agent = create_agent(ScriptedChatModel(script=[reply(text="ok")]), tools=[write_file])
    assert diagnose(agent).findings == []


# --- the real releases, where the matrix ran --------------------------------------------------

PROBE = """
import json
from importlib import metadata
from agentstate.doctor import diagnose
from agentstate.hazards.files import builtin_edits_of_one_file
from agentstate.models import ScriptedChatModel, reply
from deepagents import create_deep_agent

agent = create_deep_agent(ScriptedChatModel(script=[reply(text="ok")]))
result = builtin_edits_of_one_file()
print(json.dumps({
    "deepagents": metadata.version("deepagents"),
    "run": [result.outcome, result.evidence],
    "doctor": [[f.code, f.severity, f.subject, f.message] for f in diagnose(agent)],
}))
"""


def probe(venv: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize(
    ("release_", "outcome", "codes"),
    [
        (BUILTIN_PARALLEL_EDIT.last_reproduced, "reproduced", ["file-read-modify-write"]),
        (BUILTIN_PARALLEL_EDIT.first_changed, "refused", []),
    ],
)
def test_a_real_release_each_side_loses_or_refuses_as_the_doctor_says(
    release_: str, outcome: str, codes: list[str]
):
    venv = VENVS / f"deepagents-{release_}"
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"{venv} exists only where scripts/hazards_by_version.py ran")
    seen = probe(venv)
    assert seen["deepagents"] == release_
    assert seen["run"][0] == outcome, seen["run"]
    assert sorted({c for c, severity, *_ in seen["doctor"] if severity == "error"}) == codes
    if codes:
        assert f"deepagents {release_} (installed)" in seen["doctor"][0][3]

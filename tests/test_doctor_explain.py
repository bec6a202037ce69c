"""``agentstate doctor --explain CODE``: each code's page, printed from the installed package.

The pages are ``docs/doctor/*.md``; the wheel carries the same files as package data
(``agentstate/doctor/pages/``), so a reader with only the wheel reads what the docs say. The
wheel is built here and its pages compared with the docs, and ``--explain`` is run from the
unpacked wheel, away from this checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agentstate.doctor.report.config import known_codes
from agentstate.doctor.report.explain import CHECKOUT, reference, resolved

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "doctor"


def doctor(*args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "doctor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    into = tmp_path_factory.mktemp("wheel")
    build = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(into)]
    subprocess.run([sys.executable, "-m", *build, str(ROOT)], check=True, capture_output=True)
    (found,) = into.glob("*.whl")
    return found


def test_every_code_has_a_page_in_the_docs():
    assert CHECKOUT == DOCS
    pages = sorted(p.stem for p in DOCS.glob("*.md") if p.stem not in ("README", "fixes"))
    assert pages == sorted(known_codes())  # README: the index; fixes: what --fix writes


def test_the_wheel_s_pages_are_the_docs_pages_byte_for_byte(wheel):
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            Path(n).name: archive.read(n)
            for n in archive.namelist()
            if n.startswith("agentstate/doctor/pages/")
        }
    assert shipped == {p.name: p.read_bytes() for p in DOCS.glob("*.md")}


def test_explain_prints_the_page_from_the_wheel_alone(wheel, tmp_path):
    """Unpacked away from the checkout: the pages can only come from the package's data."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    where = doctor("--explain", "same-batch-read", cwd=tmp_path, env=env)
    shipped = tmp_path / "site" / "agentstate" / "doctor" / "pages" / "same-batch-read.md"
    page = resolved((DOCS / "same-batch-read.md").read_text(), shipped)
    assert (where.returncode, where.stdout, where.stderr) == (0, page.rstrip("\n") + "\n", "")
    # a notebook the wheel does not carry: its path in agentstate's repository
    assert "](notebooks/03_same_turn_visibility.ipynb)" in where.stdout
    origin = subprocess.run(
        [sys.executable, "-c", "import agentstate; print(agentstate.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert origin.stdout.startswith(str(tmp_path / "site"))  # not this checkout's


@pytest.mark.parametrize("code", known_codes())
def test_explain_prints_each_code_s_page(code, tmp_path):
    done = doctor("--explain", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"# `{code}` (")
    page = DOCS / f"{code}.md"
    assert done.stdout == resolved(page.read_text(), page).rstrip("\n") + "\n"
    assert "](../" not in done.stdout and "](#" not in done.stdout


def test_explain_s_links_resolve_in_a_terminal(tmp_path):
    """Before: `[Notebook 02](../../notebooks/02_state_reducer.ipynb)`, a path relative to a
    page the reader never sees; now an absolute path that exists."""
    done = doctor("--explain", "unreduced-parallel-write", cwd=tmp_path)
    targets = [t for t in re.findall(r"\]\(([^)]+)\)", done.stdout) if not t.startswith("http")]
    assert targets, done.stdout
    for target in targets:
        assert Path(target.partition("#")[0]).is_file(), target
    assert f"]({ROOT / 'notebooks' / '02_state_reducer.ipynb'})" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--explain", "no-such-code"], "--explain: unknown code 'no-such-code' (known: "),
        (["--explain", "../README"], "--explain: unknown code '../README'"),
        (["--explain", "undeclared-key", "agent.py:graph"], "--explain CODE takes no target"),
        ([], "no target given, and no langgraph.json or [tool.agentstate.doctor] 'graphs' in "),
    ],
)
def test_explain_and_a_missing_target_are_one_line_errors(tmp_path, args, message):
    done = doctor(*args, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"agentstate doctor: error: {message}")


def test_the_reference_is_the_command_not_a_repository_path():
    assert reference("undeclared-key") == "agentstate doctor --explain undeclared-key"

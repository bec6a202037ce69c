"""Issue 43 item 1: every Python block of README.md and docs/ runs as written.

Each ```` ```python ```` block is written to a file of its own in an empty
temporary folder and run there by a fresh interpreter (this one, with this
test's ``PYTHONPATH``), so a block is complete or it fails: its imports and
every object it uses must be in it. Any error, or more than ``TIMEOUT``
seconds, fails the block's own test, whose id and message name the page and
the block number (``docs/package.md block 2``).

A block that needs a server says so in its first line, and the test starts
one (once for the module, shared by every block that needs it) and hands it
over by environment variable, as a reader would export it:

- ``# needs: memory-server``: ``agentstate memory serve --transport http``
  over a fresh SQLite file; ``AGENTSTATE_MEMORY_URL`` is its ``/mcp`` URL.
- ``# needs: postgres``: a real PostgreSQL server (``agentstate.servers.postgres``);
  ``AGENTSTATE_POSTGRES_URL`` is the URL of a fresh database on it.
- ``# needs: engine``: the local llama.cpp engine; ``AGENTSTATE_LLM_BASE_URL``
  is its ``/v1`` URL (skipped, saying so, where the engine is not installed).
- ``# needs: langgraph-dev``: ``make serve``'s server of every graph in
  ``langgraph.json``; ``AGENTSTATE_SERVE_URL`` is its URL.

Shell blocks are not run here. The count and the command are in the
closing note of issue 43: ``pytest tests/test_docs_blocks.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0  # seconds a block may run: the slowest (a real agent, a server round trip) take ~10
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
NEEDS = re.compile(r"#\s*needs:\s*([a-z, -]+)")
SERVICES = {
    "memory-server": "AGENTSTATE_MEMORY_URL",
    "postgres": "AGENTSTATE_POSTGRES_URL",
    "engine": "AGENTSTATE_LLM_BASE_URL",
    "langgraph-dev": "AGENTSTATE_SERVE_URL",
}
# set by nobody but a block's own need: a reader's own endpoint must not leak into a block
CLEARED = ("AGENTSTATE_LLM_", "AGENTSTATE_MEMORY_", "AGENTSTATE_POSTGRES_", "AGENTSTATE_SERVE_")


@dataclass(frozen=True)
class Block:
    """One ```` ```python ```` block: its page (relative to the root), number and code."""

    page: str
    number: int
    code: str

    @property
    def needs(self) -> tuple[str, ...]:
        """What the first line says the block needs running (``# needs: a, b``)."""
        first = self.code.lstrip("\n").split("\n", 1)[0]
        found = NEEDS.match(first.strip())
        return tuple(n.strip() for n in found[1].split(",") if n.strip()) if found else ()

    def __str__(self) -> str:
        return f"{self.page} block {self.number}"


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks(root: Path = ROOT) -> list[Block]:
    """Every Python block of the pages, numbered from 1 on each page."""
    found = []
    for page in pages(root):
        text = page.read_text(encoding="utf-8")
        for number, code in enumerate(FENCE.findall(text), start=1):
            found.append(Block(page.relative_to(root).as_posix(), number, code))
    return found


def block_env(services: dict[str, str]) -> dict[str, str]:
    """This test's environment without a reader's endpoints, plus the services a block needs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p
    )
    env.update(services)
    return env


def run_block(block: Block, folder: Path, services: dict[str, str] | None = None) -> None:
    """Run ``block`` as a file in the empty ``folder``; AssertionError naming it on any failure."""
    assert not any(folder.iterdir()), f"{folder} is not empty"  # nothing but the block
    script = folder / "block.py"
    script.write_text(block.code, encoding="utf-8")
    (folder / "tmp").mkdir()  # the block's temporary files: its own, left for the test to read
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=folder,
            env={**block_env(services or {}), "TMPDIR": str(folder / "tmp")},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{block} ran longer than {TIMEOUT:g} s") from None
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise AssertionError(f"{block} failed (exit {done.returncode}):\n{tail}")


# --- the services a block may need, started once for the module and only if needed ---


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory) -> Iterator[str]:
    from agentstate.memory.service.process import ServerProcess

    db = tmp_path_factory.mktemp("docs-memory") / "memory.sqlite"
    with ServerProcess(db) as server:
        yield server.url


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    from agentstate.servers.postgres import PostgresNotInstalledError, PostgresServer

    try:
        server = PostgresServer()
    except PostgresNotInstalledError as err:
        pytest.skip(f"PostgreSQL is not installed here: {err}")
    with server:
        yield server.create_database("docs_blocks")


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    from agentstate.engine.model import engine_installed
    from agentstate.engine.server import EngineServer

    if not engine_installed():
        pytest.skip("engine not installed: run `make engine`")
    with EngineServer() as server:
        yield server.base_url


@pytest.fixture(scope="module")
def langgraph_dev(tmp_path_factory, memory_server) -> Iterator[str]:
    from tests.test_served import DevServer

    server = DevServer(tmp_path_factory.mktemp("docs-langgraph-dev"), memory_server)
    try:
        server.wait_ready()
        yield server.url
    finally:
        server.stop()


FIXTURES = {
    "memory-server": "memory_server",
    "postgres": "postgres",
    "engine": "engine",
    "langgraph-dev": "langgraph_dev",
}
ALL = blocks()


@pytest.mark.parametrize("block", ALL, ids=[f"{b.page}#{b.number}" for b in ALL])
def test_the_block_runs_as_written(block, tmp_path, request):
    unknown = [n for n in block.needs if n not in SERVICES]
    assert unknown == [], f"{block}: unknown `# needs:` {unknown}; known: {sorted(SERVICES)}"
    services = {SERVICES[n]: request.getfixturevalue(FIXTURES[n]) for n in block.needs}
    folder = tmp_path / "block"
    folder.mkdir()
    run_block(block, folder, services)


# --- issue 43 item 2: the secret round trip's checkpoint holds no plain value ---

SECRET_PAGES = ("docs/secrets.md", "README.md")


def secret_block(page: str) -> Block:
    (found,) = [b for b in ALL if b.page == page and "SecretRedactionMiddleware(store" in b.code]
    return found


@pytest.mark.parametrize("page", SECRET_PAGES)
def test_the_secret_round_trip_leaves_no_plain_value_in_its_checkpoint(page, tmp_path):
    import sqlite3

    block = secret_block(page)
    password = re.search(r'^PASSWORD = "([^"]+)"', block.code, re.M)[1]
    run_block(block, tmp_path)
    (db,) = (tmp_path / "tmp").glob("*/threads.sqlite")
    with sqlite3.connect(db) as conn:  # the run was checkpointed: something to search
        assert conn.execute("select count(*) from checkpoints").fetchone()[0] >= 4
    files = [db, *db.parent.glob("threads.sqlite-*")]
    assert not [f.name for f in files if password.encode() in f.read_bytes()]
    assert any(b"$secret:password-" in f.read_bytes() for f in files)  # the references are


def test_the_secret_round_trip_fails_without_the_middleware(tmp_path):
    """The block's own checks catch a plain value: without the middleware it fails."""
    block = secret_block("docs/secrets.md")
    line = re.search(r"^\s*middleware=\[SecretRedactionMiddleware.*\n", block.code, re.M)[0]
    bare = Block(block.page, block.number, block.code.replace(line, ""))
    with pytest.raises(AssertionError, match=r"docs/secrets.md block \d+ failed"):
        run_block(bare, tmp_path)


# --- the test of the test ---


def test_every_page_with_python_is_read_and_every_block_found():
    """The pages the issue names are there, and a block count per page matches the fences."""
    counted = {b.page for b in ALL}
    assert {"README.md", "docs/long-description.md", "docs/package.md"} <= counted
    for page in pages():
        text = page.read_text(encoding="utf-8")
        opened = len(re.findall(r"^```python", text, re.M))
        assert opened == sum(b.page == page.relative_to(ROOT).as_posix() for b in ALL), page


def test_a_broken_block_in_a_copy_fails_naming_its_page_and_block(tmp_path):
    """A copy of a real page with one name of its second block misspelt: that block fails."""
    copy = tmp_path / "copy"
    (copy / "docs").mkdir(parents=True)
    (copy / "README.md").write_text((ROOT / "README.md").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "long-description.md").read_text(encoding="utf-8")
    good = FENCE.findall(page)[1]
    assert "diagnose(" in good
    (copy / "docs" / "long-description.md").write_text(
        page.replace(good, good.replace("diagnose(", "diagnoze(", 1))
    )
    found = {str(b): b for b in blocks(copy)}
    broken = found["docs/long-description.md block 2"]
    (tmp_path / "run").mkdir()
    with pytest.raises(AssertionError, match=r"docs/long-description.md block 2 failed") as err:
        run_block(broken, tmp_path / "run")
    assert "NameError: name 'diagnoze' is not defined" in str(err.value)


def test_a_block_that_hangs_is_stopped_and_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "TIMEOUT", 2.0)
    (tmp_path / "run").mkdir()
    hangs = Block("docs/x.md", 3, "import time\ntime.sleep(60)\n")
    with pytest.raises(AssertionError, match=r"docs/x.md block 3 ran longer than 2 s"):
        run_block(hangs, tmp_path / "run")


def test_a_need_is_read_from_the_first_line_only():
    assert Block("p", 1, "# needs: memory-server, postgres\nx = 1\n").needs == (
        "memory-server",
        "postgres",
    )
    assert Block("p", 1, "x = 1\n# needs: postgres\n").needs == ()


NEEDS_CHECKS = {  # a block of each kind a page may hold: the service is there and answers
    "postgres": "import os, psycopg\n"
    "with psycopg.connect(os.environ['AGENTSTATE_POSTGRES_URL']) as conn:\n"
    "    assert conn.execute('select 1').fetchone() == (1,)\n",
    "memory-server": "import os, httpx\n"
    "url = os.environ['AGENTSTATE_MEMORY_URL']\n"
    "assert url.endswith('/mcp') and httpx.get(url.removesuffix('/mcp') + '/health').status_code\n",
    "engine": "import os, httpx\n"
    "assert httpx.get(os.environ['AGENTSTATE_LLM_BASE_URL'] + '/models').status_code == 200\n",
}


@pytest.mark.parametrize("need", sorted(NEEDS_CHECKS))
def test_a_block_gets_what_its_first_line_says_it_needs(need, tmp_path, request):
    block = Block("docs/x.md", 1, f"# needs: {need}\n" + NEEDS_CHECKS[need])
    assert block.needs == (need,)
    services = {SERVICES[need]: request.getfixturevalue(FIXTURES[need])}
    run_block(block, tmp_path, services)

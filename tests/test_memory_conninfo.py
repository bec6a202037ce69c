"""Issue 40 items 2 and 7: Postgres connection strings parsed as libpq parses them.

A password anywhere libpq would read one (``user:pw@``, ``?password=``, a
``password=`` pair; ``sslpassword`` too) is refused on the ``agentstate memory
serve --db`` command line in one line that does not print it, and no message
(redaction, an unreachable database) shows it. A password holding ``@``,
``/``, ``#`` or ``:``, percent-encoded in the URL, is decoded once: the memory
server process the client starts (``ServerProcess``, password by
``PGPASSWORD``) and the checkpointer both connect to a real Postgres with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import quote

import pytest

from agentstate.memory.client import MemoryClient
from agentstate.memory.service.process import ServerProcess, free_port
from agentstate.memory.service.sql_store import StoreUnavailableError
from agentstate.memory.service.targets import (
    check_postgres_url,
    is_postgres,
    redact,
    split_password,
)
from agentstate.servers.postgres import PostgresServer

pytestmark = [pytest.mark.extras("memory", "persistence")]
SECRET = "Sw0rdf1sh-q"
WEIRD = "p@ss/w#rd:%x?y&z w"  # every character a URL gives a meaning to, and a space

FORMS = {
    "userinfo": f"postgresql://app:{SECRET}@127.0.0.1:5432/memory",
    "query": f"postgresql://app@127.0.0.1:5432/memory?password={SECRET}",
    "query, second": f"postgresql://app@127.0.0.1/memory?sslmode=disable&password={SECRET}",
    "key=value": f"host=127.0.0.1 port=5432 user=app password={SECRET} dbname=memory",
    "key=value, quoted": f"host=127.0.0.1 dbname=memory password='{SECRET} x'",
    "sslpassword": f"postgresql://app@127.0.0.1/memory?sslpassword={SECRET}",
    "encoded": f"postgresql://app:{quote(SECRET + '@/#', safe='')}@127.0.0.1/memory",
    "unencoded @": f"postgresql://app:{SECRET}@x@127.0.0.1/memory",
    "unencoded /": f"postgresql://app:ab/{SECRET}@127.0.0.1:5432/memory",
    "unencoded #": f"postgresql://app:{SECRET}#x@127.0.0.1/memory",
    "bare %": f"postgresql://app:{SECRET}%zz@127.0.0.1/memory",
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.parametrize("form", list(FORMS))
def test_a_password_in_any_form_is_refused_and_never_shown(form):
    db = FORMS[form]
    assert is_postgres(db)
    with pytest.raises(ValueError) as refused:
        check_postgres_url(db)
    assert SECRET not in str(refused.value) and SECRET[:6] not in str(refused.value)
    assert "\n" not in str(refused.value)
    assert SECRET[:6] not in redact(db)


@pytest.mark.parametrize("form", ["userinfo", "query", "key=value", "unencoded /"])
def test_the_command_line_refuses_it_in_one_line_without_printing_it(form):
    env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"}
    done = subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", "--db", FORMS[form],
         "--transport", "http", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-1500:]
    assert lines[0].startswith("agentstate memory serve: error: --db"), lines
    assert SECRET[:6] not in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_the_password_is_decoded_once_and_taken_out_of_the_string():
    url = f"postgresql://app:{quote(WEIRD, safe='')}@127.0.0.1:5432/memory?sslmode=disable"
    rest, password = split_password(url)
    assert password == WEIRD
    assert "password" not in rest and "sslmode=disable" in rest and "dbname=memory" in rest
    kv, password = split_password(f"host=h dbname=d password='{SECRET} x'")
    assert password == f"{SECRET} x" and SECRET not in kv


def test_an_unreachable_database_is_reported_without_the_query_password():
    from agentstate.memory.service.store_postgres import PostgresMemoryStore

    url = f"postgresql://app@127.0.0.1:{free_port()}/memory?password={SECRET}"
    with pytest.raises(StoreUnavailableError) as unavailable:
        PostgresMemoryStore(url, connect_timeout=1)
    assert "cannot reach the memory database postgresql://app@127.0.0.1:" in str(unavailable.value)
    assert SECRET not in str(unavailable.value)


@pytest.fixture(scope="module")
def weird_postgres():
    """A real Postgres whose password holds @ / # : % ? & and a space."""
    with PostgresServer(password=WEIRD) as server:
        yield server


@pytest.mark.anyio
async def test_a_percent_encoded_password_reaches_every_process_that_connects(
    weird_postgres, tmp_path, monkeypatch
):
    """The URL holds the password percent-encoded; the replica process gets it decoded (by
    ``PGPASSWORD``) and serves; the checkpointer connects with the same URL."""
    from agentstate.persistence import postgres_checkpointer

    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    url = weird_postgres.create_database("weird")
    assert quote(WEIRD, safe="") in url
    with ServerProcess(url, log_path=tmp_path / "replica.log") as replica:
        assert SECRET not in " ".join(replica.command())
        assert "w#rd" not in " ".join(replica.command())
        async with MemoryClient(replica.url, retry_for=5) as client:
            assert await client.call("create_memory", vault_id="v", memory_id="m") == "created"
    with postgres_checkpointer(url) as saver:
        assert list(saver.list(None)) == []


@pytest.mark.parametrize(
    ("form", "message"),
    [("unencoded @", "percent-encoded"), ("unencoded /", "percent-encoded"),
     ("bare %", "invalid percent-encoded token")],
)  # fmt: skip
def test_the_checkpointer_target_never_shows_a_piece_of_an_unencoded_password(form, message):
    """``postgres_target`` names user@host:port/db in the checkpointer's messages; with an
    unencoded ``@`` or ``/`` libpq reads part of the password as the host or database, and
    its error for a bare ``%`` quotes the password."""
    from agentstate.persistence import postgres_target

    with pytest.raises(ValueError, match=message) as refused:
        postgres_target(FORMS[form])
    assert SECRET[:6] not in str(refused.value)

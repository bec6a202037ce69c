"""Issue 25, secrets: docs/secrets.md's free-text table, each form covered or not, tested.

A free-text argument (``note(text=...)``, a ``task`` description) is searched
by the key rules of ``core.redaction_text``. Before the fix ``**Password**:
x`` and `` `password`: x `` stayed plain (the rule needed ``:`` right after
the name), and so did the forms the docs did not claim: env-style names
other than ``*password*`` (``DB_PASS=x``, ``MYSQL_PWD=x``), ``{"auth":
{"pass": x}}``, ``Authorization: Bearer x``, ``postgres://user:x@host``,
``<password>x</password>``, ``pwd: x`` and "the password for admin is x".
The forms left uncovered are tested too: the key rules leave them, and the
value pass replaces them once the value is known for the thread.
"""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.messages import AIMessage

from agentstate.core import SecretStore
from agentstate.models import reply, tool_call
from tests.secret_providers import redaction

VALUE = "Vex-5512-Hollow"
COVERED = {
    "markdown bold key": f"Created the user.\n**Password**: {VALUE}",
    "markdown bold key and colon": f"**Password:** {VALUE}",
    "markdown code key": f"`password`: {VALUE}",
    "markdown italic key": f"*db_password*: {VALUE}",
    "env-style DB_PASS": f"DB_HOST=db1\nDB_PASS={VALUE}\nDB_PORT=5432",
    "env-style MYSQL_PWD": f"export MYSQL_PWD={VALUE}",
    "env-style PGPASSWORD": f"PGPASSWORD={VALUE} psql -h db1",
    "camel-case dbPass": f"dbPass: {VALUE}",
    "pwd": f"user: admin, pwd: {VALUE}",
    "pw": f"pw = {VALUE}",
    "nested auth/pass JSON": json.dumps({"auth": {"user": "admin", "pass": VALUE}}),
    "Authorization header": f"Authorization: Bearer {VALUE}",
    "URL password": f"connect with postgres://admin:{VALUE}@db1:5432/app",
    "XML element": f"<user>admin</user><password>{VALUE}</password>",
    "password for one word is": f"The password for admin is {VALUE}",
    "command-line flag": f"mysql --password={VALUE} -h db1",
    "token is": f"Your token is {VALUE}",
}
# Forms the key rules do not read; the value pass catches them once the value is known.
UNCOVERED = {
    "no separator": f"password {VALUE}",
    "several words before is": f"the password for the admin account is {VALUE}",
    "value before the name": f"use {VALUE} as the password",
    "a bare Bearer token": f"send Bearer {VALUE} along",
    "a name that is not secret-looking": f"auth: {VALUE}",
    "a short flag": f"mysql -p {VALUE}",
}
# Names that look like a secret name but are not one: their values stay.
NOT_SECRET = {
    "compass": "compass: north",
    "passenger": "passenger: 3 adults",
    "bypass": "bypass = true",
    "PASSENGERS": "PASSENGERS=12",
    "passed": "tests passed: 41",
}


def hidden(text: str, store: SecretStore, thread: str | None = None) -> str:
    message = reply(tool_call("note", text=text))
    middleware = redaction(store)
    clean = middleware.rewrite(message, thread=thread) if thread else middleware.rewrite(message)
    return clean.tool_calls[0]["args"]["text"]


def refs_in(text: str) -> list[str]:
    return re.findall(r"\$secret:[\w./-]+-[0-9a-f]{24}", text)


@pytest.mark.parametrize("text", list(COVERED.values()), ids=list(COVERED))
def test_a_covered_form_hides_the_value_and_keeps_the_rest(text):
    store = SecretStore()
    clean = hidden(text, store)
    assert VALUE not in clean, clean
    (ref,) = refs_in(clean)
    assert VALUE in store.resolve(ref)
    assert len(store.resolve(ref)) <= len(VALUE) + len("Bearer ")  # the value, not the line
    for word in ("admin", "db1", "psql"):  # what sat around the value is still there
        if word in text.replace(VALUE, ""):
            assert word in clean, clean


@pytest.mark.parametrize("text", list(UNCOVERED.values()), ids=list(UNCOVERED))
def test_an_uncovered_form_is_left_by_the_key_rules_and_caught_once_known(text):
    store = SecretStore()
    assert hidden(text, store, thread="a") == text  # the key rules do not read this form
    first = redaction(store).rewrite(
        reply(tool_call("connect", host="db1", password=VALUE)), thread="a"
    )
    ref = first.tool_calls[0]["args"]["password"]
    assert hidden(text, store, thread="a") == text.replace(VALUE, ref)  # now known: replaced
    assert hidden(text, store, thread="b") == text  # known only to its own thread


@pytest.mark.parametrize("text", list(NOT_SECRET.values()), ids=list(NOT_SECRET))
def test_a_name_that_only_contains_pass_is_not_a_secret(text):
    store = SecretStore()
    assert hidden(text, store) == text and len(store) == 0


def test_a_markdown_key_in_a_task_description_of_the_rds_agent():
    """The RDS redaction (``text_args={"task": ["description"]}``) reads the same forms."""
    from agentstate.rds import COLLECTOR, rds_redaction

    store = SecretStore()
    message = AIMessage(
        content="",
        tool_calls=[
            {
                "name": "task",
                "id": "t1",
                "args": {"description": f"- engine: postgres\n- **Password**: {VALUE}"}
                | {"subagent_type": COLLECTOR},
            }
        ],
    )
    clean = rds_redaction(store).rewrite(message).tool_calls[0]["args"]["description"]
    assert VALUE not in clean and "engine: postgres" in clean
    (ref,) = refs_in(clean)
    assert store.resolve(ref) == VALUE and ref.startswith("$secret:rds-master-Password-")

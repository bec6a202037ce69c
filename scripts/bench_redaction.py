"""What the secrets defences cost: the value pass per reply, and encrypted checkpoints per turn.

The value pass searches every string of a reply for every value its thread
holds; this times one rewrite of a typical reply (text, a free-text call,
an unwatched call) with 0 to 1,000 values known for the thread. Then (issue
33) what a reply that brings a new value costs with 1,000 and 10,000 values
known, what loading 10,000 and 50,000 values costs (puts, then the first
reply), 600 values that are prefixes of one another, and a 40 KB free-text
argument starting with ``[`` and broken 40 KB arguments. Then one lesson 02
turn on a SQLite file, plain and with ``encrypt=True`` (AES, a random key),
the order alternated every round.

Only public API, so the same script times an older release: ``--before
COMMIT`` exports that commit's ``src`` with ``git archive`` and runs this
script on it in a child process (``PYTHONPATH``), with fewer rounds
(``--before-rounds``, ``--before-load-rounds``, ``--before-hostile-rounds``:
the old code takes seconds where the new takes milliseconds), and without the
SQLite turns. Both runs land in ``data/results/redaction_benchmark.json``,
every sample of every round, each run naming the commit it measured and the
load average around it (``scripts/bench_results.py``);
``scripts/bench_docs.py`` renders docs/secrets.md's table from that file, and
the same table is printed here.

    .venv/bin/python scripts/bench_redaction.py --before 569601a
    .venv/bin/python scripts/bench_redaction.py --rounds 5 --no-encryption --out /tmp/r.json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench_results import resolve, samples_at, start_provenance, write_results
from langchain_core.messages import AIMessage

import agentstate
from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.persistence import sqlite_checkpointer
from agentstate.rds import build_reducer_agent

try:  # this checkout
    from agentstate.lessons.fixtures import label_fields, store_calls, user_turn
    from agentstate.persistence.encryption import KEY_VAR
except ImportError:  # an older release measured with --before, from before issue 34's move
    from agentstate.checkpoint_encryption import KEY_VAR
    from agentstate.fixtures import label_fields, store_calls, user_turn

REPLY = AIMessage(
    content=[{"type": "text", "text": "Here is the plan. " * 40}],
    tool_calls=[
        {"name": "note", "args": {"text": "engine: postgres, size 20 " * 20}, "id": "c1"},
        {"name": "lookup", "args": {"query": "x" * 200}, "id": "c2"},
    ],
)
KNOWN = (0, 10, 100, 1000)  # values known for the typical reply
NESTED = 600  # values that are prefixes of one another


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def value_pass(rounds: int) -> list[dict[str, Any]]:
    """Seconds per rewrite of :data:`REPLY` (no new value) with each count of :data:`KNOWN`."""
    store = SecretStore()
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    held, rows = 0, []
    for known in KNOWN:
        for i in range(held, known):
            store.put("password", f"Known-Value-{i}-x", thread="t")
        held = known
        middleware.rewrite(REPLY, thread="t")  # the values searched once already, as in a thread
        samples = [timed(partial(middleware.rewrite, REPLY, thread="t")) for _ in range(rounds)]
        rows.append({"known": known, "samples_s": samples})
    return rows


def loaded(count: int, thread: str = "t") -> tuple[SecretStore, SecretRedactionMiddleware]:
    store = SecretStore()
    for i in range(count):
        store.put("password", f"Known-Value-{i}-x", thread=thread)
    return store, SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})


def new_value(rounds: int, sizes: list[int]) -> list[dict[str, Any]]:
    """Seconds per reply that brings a new value (``connect(password=...)``), ``n`` known."""
    rows = []
    for size in sizes:
        _, middleware = loaded(size)
        middleware.rewrite(REPLY, thread="t")  # the known values searched once already
        samples = []
        for i in range(rounds):
            brings = AIMessage(
                content=REPLY.content,
                tool_calls=[tool_call("connect", host="db1", password=f"Fresh-{i}-{size}-y")],
            )
            samples.append(timed(partial(middleware.rewrite, brings, thread="t")))
        rows.append({"known": size, "samples_s": samples})
    return rows


def load_and_reply(count: int) -> None:
    loaded(count)[1].rewrite(REPLY, thread="t")


def loading(rounds: int, sizes: list[int]) -> list[dict[str, Any]]:
    """Seconds to put ``n`` values in one thread, then the first reply (which searches them)."""
    return [
        {
            "values": size,
            "samples_s": [timed(partial(load_and_reply, size)) for _ in range(rounds)],
        }
        for size in sizes
    ]


def hostile(rounds: int) -> list[dict[str, Any]]:
    """600 nested values; a 40 KB text argument starting with ``[``; broken 40 KB arguments.

    A case that raises ``RecursionError`` (the old value pass on nested values) records the
    error and the rounds timed before it.
    """
    store = SecretStore()
    base = "Q" + "7f3a" * 200
    for n in range(5, 5 + NESTED):
        store.put("token", base[:n], thread="t")
    middleware = SecretRedactionMiddleware(
        store, secret_args={"connect": ["password"]}, text_args={"task": ["description"]}
    )
    text = f"one: {base[: 4 + NESTED]} two: {base[:5]} " + base[:300] * 20
    nested = AIMessage(content=text)
    description = "[" + ("Create the orders db, then the users db. " * 1000)[:39_960]
    bracket = AIMessage(content="", tool_calls=[tool_call("task", description=description)])
    arguments = '{"host": "db1" "note": "' + "x" * 40_000 + '", "password": "Vex-5512-Hollow"}'
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {"type": "invalid_tool_call", "name": "connect", "args": arguments, "id": "c1"}
        ],
    )
    fresh = SecretRedactionMiddleware(  # no value known: the key rules' parsing alone
        SecretStore(), secret_args={"connect": ["password"]}, text_args={"task": ["description"]}
    )
    rows = []
    for case, message, chars, rewriter, values in [
        ("nested values", nested, len(text), middleware, NESTED),
        ("description starting with [", bracket, len(description), fresh, 0),
        ("broken arguments", broken, len(arguments), fresh, 0),
    ]:
        samples: list[float] = []
        error = None
        for _ in range(rounds):
            try:
                samples.append(timed(partial(rewriter.rewrite, message, thread="t")))
            except RecursionError:
                error = "RecursionError"
                break
        rows.append(
            {"case": case, "chars": chars, "values": values, "error": error, "samples_s": samples}
        )
    return rows


def turn(db: Path, encrypt: bool) -> float:
    model = ScriptedChatModel(script=[reply(*store_calls(label_fields(5))), reply(text="Done.")])
    start = time.perf_counter()
    with sqlite_checkpointer(db, encrypt=encrypt) as saver:
        agent = build_reducer_agent(model, checkpointer=saver)
        agent.invoke(user_turn(), {"configurable": {"thread_id": db.name}})
    return time.perf_counter() - start


def encryption(rounds: int) -> dict[str, Any]:
    """Seconds per lesson 02 turn, plain and encrypted, paired by round (order alternated)."""
    os.environ.setdefault(KEY_VAR, secrets.token_hex(16))
    plain, encrypted = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            order = [False, True] if i % 2 == 0 else [True, False]
            took = {flag: turn(Path(tmp) / f"r{i}-{flag}.sqlite", flag) for flag in order}
            plain.append(took[False])
            encrypted.append(took[True])
    return {"fields": 5, "plain_s": plain, "encrypted_s": encrypted}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every sample of one run, with the ``agentstate`` imported here."""
    hostile_rounds = args.hostile_rounds or min(args.rounds, 5)
    before = load_average()
    samples = {
        "rounds": {"rounds": args.rounds, "load": args.load_rounds, "hostile": hostile_rounds},
        "value_pass": value_pass(args.rounds),
        "new_value": new_value(args.rounds, args.add_sizes),
        "loading": loading(args.load_rounds, args.load_sizes),
        "hostile": hostile(hostile_rounds),
        "encryption": None if args.no_encryption else encryption(args.rounds),
    }
    return {"load_average_before": before, "load_average_after": load_average(), **samples}


def measure_at(commit: str, args: argparse.Namespace) -> dict[str, Any]:
    """The same measurements on the code of ``commit``: its ``src`` exported, a child run."""
    child_args = [
        "--rounds", str(args.before_rounds),
        "--load-rounds", str(args.before_load_rounds),
        "--hostile-rounds", str(args.before_hostile_rounds),
        "--add-sizes", *map(str, args.add_sizes),
        "--load-sizes", *map(str, args.load_sizes),
        "--no-encryption", "--samples-only",
    ]  # fmt: skip
    full, samples = samples_at(commit, __file__, child_args)
    return {"code": commit, "commit": full, **samples}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--load-rounds", type=int, default=3, help="rounds of each loading")
    parser.add_argument("--hostile-rounds", type=int, help="rounds of each hostile case (5)")
    parser.add_argument("--add-sizes", type=int, nargs=2, default=[1000, 10_000])
    parser.add_argument("--load-sizes", type=int, nargs=2, default=[10_000, 50_000])
    parser.add_argument("--no-encryption", action="store_true", help="skip the SQLite turns")
    parser.add_argument("--before", metavar="COMMIT", help="also measure the code at COMMIT")
    parser.add_argument("--before-rounds", type=int, default=5)
    parser.add_argument("--before-load-rounds", type=int, default=1)
    parser.add_argument("--before-hostile-rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the results here instead of data/results")
    parser.add_argument("--samples-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    counts = ["rounds", "load_rounds", "hostile_rounds", "before_rounds", "before_load_rounds"]
    counts += ["before_hostile_rounds"]
    for name in counts:
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.rounds < 2 and not args.no_encryption:
        parser.error("--rounds must be at least 2 for the SQLite turns (quartiles of the ratio)")
    if args.samples_only:  # the child run of measure_at: samples on stdout, nothing written
        print(json.dumps({"agentstate": agentstate.__file__, **measure(args)}))
        return
    if args.before:
        resolve(args.before)  # before anything is timed
    provenance = start_provenance("bench_redaction.py", argv, [])
    runs = [{"code": "this checkout", "commit": provenance["git_commit"], **measure(args)}]
    if args.before:
        print(f"measuring {args.before} in a child process ...", file=sys.stderr)
        runs.append(measure_at(args.before, args))
    path = write_results("redaction", provenance, {"runs": runs}, args.out)
    from bench_docs import render  # here: the child run on older code never needs it

    data = json.loads(path.read_text())
    print(render("redaction", data))
    if data["runs"][0]["encryption"]:
        print(render("redaction/encryption", data))
    print(f"written {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

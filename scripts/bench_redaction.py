"""What the secrets defences cost: the value pass per reply, and encrypted checkpoints per turn.

The value pass searches every string of a reply for every value its thread
holds; this times one rewrite of a typical reply (text, a free-text call,
an unwatched call) with 0 to 1,000 values known for the thread. Then (issue
33) what a reply that brings a new value costs with 1,000 and 10,000 values
known, what loading 10,000 and 50,000 values costs (puts, then the first
reply), 600 values that are prefixes of one another, and a 40 KB free-text
argument starting with ``[`` and broken 40 KB arguments; each a median, each
pair's ratio measured in the same run. Then one stage 02 turn on a SQLite
file, plain and with ``encrypt=True`` (AES, a random key), the order
alternated every round, and the median ratio. Only public API: the same
script runs against an older checkout (``PYTHONPATH=<checkout>/src``).

    .venv/bin/python scripts/bench_redaction.py [--rounds 30] [--load-rounds 3]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.lessons.fixtures import label_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.persistence import sqlite_checkpointer
from agentstate.persistence.encryption import KEY_VAR
from agentstate.rds import build_reducer_agent

REPLY = AIMessage(
    content=[{"type": "text", "text": "Here is the plan. " * 40}],
    tool_calls=[
        {"name": "note", "args": {"text": "engine: postgres, size 20 " * 20}, "id": "c1"},
        {"name": "lookup", "args": {"query": "x" * 200}, "id": "c2"},
    ],
)


def value_pass(rounds: int) -> None:
    store = SecretStore()
    middleware = SecretRedactionMiddleware(store, text_args={"note": ["text"]})
    held = 0
    for known in (0, 10, 100, 1000):
        for i in range(held, known):
            store.put("password", f"Known-Value-{i}-x", thread="t")
        held = known
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            middleware.rewrite(REPLY, thread="t")
            times.append(time.perf_counter() - start)
        median = statistics.median(times) * 1000
        print(f"value pass, {known:5d} values known: {median:6.2f} ms/reply")


def loaded(count: int, thread: str = "t") -> tuple[SecretStore, SecretRedactionMiddleware]:
    store = SecretStore()
    for i in range(count):
        store.put("password", f"Known-Value-{i}-x", thread=thread)
    return store, SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})


def new_value(rounds: int, sizes: list[int]) -> None:
    """A reply that brings a new value (``connect(password=...)``), with ``n`` values known."""
    medians = {}
    for size in sizes:
        store, middleware = loaded(size)
        middleware.rewrite(REPLY, thread="t")  # the known values searched once already
        times = []
        for i in range(rounds):
            brings = AIMessage(
                content=REPLY.content,
                tool_calls=[tool_call("connect", host="db1", password=f"Fresh-{i}-{size}-y")],
            )
            start = time.perf_counter()
            middleware.rewrite(brings, thread="t")
            times.append(time.perf_counter() - start)
        medians[size] = statistics.median(times)
        print(f"a reply with a new value, {size:6d} known: {medians[size] * 1000:8.2f} ms")
    low, high = sizes[0], sizes[-1]
    ratio = medians[high] / medians[low]
    print(f"  ratio {high}/{low} known: {ratio:6.2f} (values x{high // low})")


def loading(rounds: int, sizes: list[int]) -> None:
    """``n`` values put in one thread, then the first reply (which searches all of them)."""
    medians = {}
    for size in sizes:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            _, middleware = loaded(size)
            middleware.rewrite(REPLY, thread="t")
            times.append(time.perf_counter() - start)
        medians[size] = statistics.median(times)
        print(f"loading {size:6d} values, then one reply: {medians[size]:7.2f} s")
    low, high = sizes[0], sizes[-1]
    ratio = medians[high] / medians[low]
    print(f"  ratio {high}/{low} values: {ratio:6.2f} (values x{high // low})")


def hostile(rounds: int) -> None:
    """600 nested values; a 40 KB text argument starting with ``[``; broken 40 KB arguments."""
    store = SecretStore()
    base = "Q" + "7f3a" * 200
    for n in range(5, 605):
        store.put("token", base[:n], thread="t")
    middleware = SecretRedactionMiddleware(
        store, secret_args={"connect": ["password"]}, text_args={"task": ["description"]}
    )
    nested = AIMessage(content=f"one: {base[:604]} two: {base[:5]} " + base[:300] * 20)
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
    for label, message, rewriter in [
        ("600 nested values, a 12 KB reply", nested, middleware),
        ("a 40 KB task description starting with '['", bracket, fresh),
        ("broken 40 KB arguments of a watched tool", broken, fresh),
    ]:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            try:
                rewriter.rewrite(message, thread="t")
            except RecursionError:
                print(f"{label}: RecursionError")
                break
            times.append(time.perf_counter() - start)
        if times:
            print(f"{label}: {statistics.median(times) * 1000:8.2f} ms/rewrite")


def turn(db: Path, encrypt: bool) -> float:
    model = ScriptedChatModel(script=[reply(*store_calls(label_fields(5))), reply(text="Done.")])
    start = time.perf_counter()
    with sqlite_checkpointer(db, encrypt=encrypt) as saver:
        agent = build_reducer_agent(model, checkpointer=saver)
        agent.invoke(user_turn(), {"configurable": {"thread_id": db.name}})
    return time.perf_counter() - start


def encryption(rounds: int) -> None:
    os.environ.setdefault(KEY_VAR, secrets.token_hex(16))
    plain, encrypted, ratios = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            order = [False, True] if i % 2 == 0 else [True, False]
            took = {flag: turn(Path(tmp) / f"r{i}-{flag}.sqlite", flag) for flag in order}
            plain.append(took[False])
            encrypted.append(took[True])
            ratios.append(took[True] / took[False])
    print(f"stage 02 turn, plain SQLite:     {statistics.median(plain) * 1000:6.1f} ms")
    print(f"stage 02 turn, encrypted SQLite: {statistics.median(encrypted) * 1000:6.1f} ms")
    print(f"median ratio encrypted/plain:    {statistics.median(ratios):6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--load-rounds", type=int, default=3, help="rounds of each loading")
    parser.add_argument("--add-sizes", type=int, nargs=2, default=[1000, 10_000])
    parser.add_argument("--load-sizes", type=int, nargs=2, default=[10_000, 50_000])
    parser.add_argument("--no-encryption", action="store_true", help="skip the SQLite turns")
    args = parser.parse_args()
    value_pass(args.rounds)
    new_value(args.rounds, args.add_sizes)
    loading(args.load_rounds, args.load_sizes)
    hostile(min(args.rounds, 5))
    if not args.no_encryption:
        encryption(args.rounds)


if __name__ == "__main__":
    main()

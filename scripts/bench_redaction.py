"""What the secrets defences cost: the value pass per reply, and encrypted checkpoints per turn.

The value pass searches every string of a reply for every value its thread
holds; this times one rewrite of a typical reply (text, a free-text call,
an unwatched call) with 0 to 1,000 values known for the thread. Then one
stage 02 turn on a SQLite file, plain and with ``encrypt=True`` (AES, a
random key), the order alternated every round, and the median ratio.

    .venv/bin/python scripts/bench_redaction.py [--rounds 30]
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

from agentstate.checkpoint_encryption import KEY_VAR
from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.fixtures import label_fields, store_calls, user_turn
from agentstate.models import ScriptedChatModel, reply
from agentstate.persistence import sqlite_checkpointer
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
    for known in (0, 10, 100, 1000):
        while len(store.known("t")) < known:
            store.put("password", f"Known-Value-{len(store.known('t'))}-x", thread="t")
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            middleware.rewrite(REPLY, thread="t")
            times.append(time.perf_counter() - start)
        median = statistics.median(times) * 1000
        print(f"value pass, {known:5d} values known: {median:6.2f} ms/reply")


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
    rounds = parser.parse_args().rounds
    value_pass(rounds)
    encryption(rounds)


if __name__ == "__main__":
    main()

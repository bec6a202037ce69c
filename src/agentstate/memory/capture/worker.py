"""A capture process that can be killed and restarted (notebook 06, the crash test).

``python -m agentstate.memory.capture.worker --url URL --checkpoints PATH --conversation NAME``
replays a conversation through the tool-only graph with a SQLite checkpointer
(``checkpoints.async_capture_checkpointer``: a 0600 file, WAL). ``--url`` given
several times names the replicas of a fleet; the client fails over between them,
and the worker prints how many times before ``done``.
Started again on the same checkpoint file, it first finishes any turn the
killed process left half done (``CaptureRun.resume``), then sends only the
events the checkpoints do not show as handled. It prints ``sent <thread>
<position>`` after each event and ``done`` at the end. A missing server, a
wrong token, an unknown conversation or a bad checkpoint path (a missing
folder, a folder, a symlink, a FIFO) end in one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agentstate.memory.service.options import OneLineParser, start_hint
from agentstate.private_files import NotOwnFileError, check_db_path, check_own_file
from agentstate.servers.loopback import url_open


def conversation_of(name: str):
    """``synthetic:N`` or a name in data/conversations (``FileNotFoundError`` if unknown)."""
    from agentstate.memory.capture.conversations import load, synthetic

    return synthetic(int(name.split(":")[1])) if name.startswith("synthetic:") else load(name)


def preflight(args: argparse.Namespace):
    """The conversation to send, after the checks that need no graph or MCP import.

    Raises what ``main`` turns into one line (seconds sooner than a failed
    start): a bad checkpoint path, an unknown conversation, no server when
    told not to wait for one.
    """
    check_db_path(args.checkpoints)
    check_own_file(args.checkpoints, "the checkpoint file")  # a FIFO or a symlink: refused
    conversation = conversation_of(args.conversation)
    if args.retry_for <= 0 and not any(url_open(url) for url in args.url):
        raise ConnectionError(start_hint(args.url[0]))
    return conversation


async def run(args: argparse.Namespace, conversation) -> int:
    """Resume what the checkpoints show half done, then send the events not yet handled."""
    from agentstate.memory.capture.checkpoints import async_capture_checkpointer
    from agentstate.memory.capture.observer import CaptureRun
    from agentstate.memory.capture.policy import CapturePolicy, policy_model
    from agentstate.memory.client import MemoryClient

    async with (
        async_capture_checkpointer(args.checkpoints) as saver,
        MemoryClient(args.url, retry_for=args.retry_for) as client,
    ):
        capture = CaptureRun(
            client,
            policy_model(CapturePolicy(), "policy"),
            await client.tools(),
            run=args.run,
            checkpointer=saver,
        )
        handled = {}
        for thread in conversation.threads:
            note = await capture.resume(thread)
            handled[thread] = await capture.position(thread)
            print(f"thread {thread}: {note}, {handled[thread]} events handled", flush=True)
        for event in conversation.events:
            if event.position < handled[event.thread]:
                continue
            await capture.send(event)
            print(f"sent {event.thread} {event.position}", flush=True)
            if args.pace:
                await asyncio.sleep(args.pace)
        if len(args.url) > 1:
            print(f"replicas: failed over {client.stats['failovers']} time(s)", flush=True)
    print("done", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see the module docstring)."""
    parser = OneLineParser(
        prog="python -m agentstate.memory.capture.worker", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--url",
        required=True,
        action="append",
        help="the memory server, e.g. http://127.0.0.1:8765/mcp; repeat it for the replicas of "
        "a fleet (one Postgres database): a call fails over to the next one that answers",
    )
    parser.add_argument("--checkpoints", required=True, help="SQLite file for the checkpointer")
    parser.add_argument(
        "--conversation", default="solo_travel", help="a name in data/conversations, or synthetic:N"
    )
    parser.add_argument("--run", default="worker", help="memory ids are <run>.<thread>")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between events")
    parser.add_argument(
        "--retry-for", type=float, default=30.0, help="seconds to wait for a missing server"
    )
    args = parser.parse_args(argv)
    try:
        conversation = preflight(args)
    except (
        ConnectionError,
        FileNotFoundError,
        IsADirectoryError,
        NotOwnFileError,
        ValueError,
    ) as exc:
        parser.error(str(exc))  # one line, exit status 2
    from agentstate.memory.client import (
        MemoryAccessDenied,
        MemoryServerUnavailable,
        MemoryToolError,
    )

    try:
        return asyncio.run(run(args, conversation))
    except (
        MemoryServerUnavailable,
        MemoryAccessDenied,
        MemoryToolError,
        FileNotFoundError,
        IsADirectoryError,
        NotOwnFileError,
        ValueError,
    ) as exc:
        parser.error(str(exc))  # one line, exit status 2
    return 2  # pragma: no cover - parser.error exits


if __name__ == "__main__":
    # see memory/service/server.py: ~3 s less; a None entry makes that import fail, on purpose
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    sys.exit(main())

"""``agentstate engine start|stop|status|serve``: the local llama.cpp server for stage 05.

``start`` launches a detached server on 127.0.0.1 (free port) and prints the
``AGENTSTATE_LLM_BASE_URL`` to export; ``stop`` ends exactly that process;
``serve`` runs in the foreground until Ctrl-C. Without the engine installed,
each says to run ``make engine``. Notebook 05 uses the same server.
"""

from __future__ import annotations

import argparse
import json
import time

from agentstate.engine.model import (
    EngineNotInstalledError,
    engine_installed,
    engine_version,
    locate_model,
)
from agentstate.engine.server import (
    EngineServer,
    EngineStartError,
    answers,
    read_state,
    start_detached,
    state_file,
    stop_detached,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("engine", help="the local llama.cpp server (stage 05)")
    sub = parser.add_subparsers(dest="action", required=True)
    start = sub.add_parser("start", help="start a detached server on 127.0.0.1")
    serve = sub.add_parser("serve", help="run the server in the foreground until Ctrl-C")
    for p in (start, serve):
        p.add_argument("--port", type=int, default=None, help="default: a free port")
        p.add_argument("--threads", type=int, default=2, help="n_threads and n_threads_batch")
    start.set_defaults(func=_start)
    serve.set_defaults(func=_serve)
    sub.add_parser("stop", help="stop the server that `start` launched").set_defaults(func=_stop)
    status = sub.add_parser("status", help="installed? running? where?")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_status)


def _start(args: argparse.Namespace) -> int:
    try:
        record = start_detached(port=args.port, threads=args.threads)
    except (EngineNotInstalledError, EngineStartError) as err:
        print(f"error: {err}")
        return 2
    verb = "already running" if record["reused"] else "started"
    print(f"llama.cpp server {verb}: pid {record['pid']}, {record['base_url']}")
    print(f"export AGENTSTATE_LLM_BASE_URL={record['base_url']}")
    print("stop it with: agentstate engine stop")
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        server = EngineServer(port=args.port, threads=args.threads).start()
    except (EngineNotInstalledError, EngineStartError) as err:
        print(f"error: {err}")
        return 2
    print(f"serving {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _stop(args: argparse.Namespace) -> int:
    record = stop_detached()
    if record is None:
        print(f"no server recorded in {state_file()}; nothing to stop")
        return 0
    print(f"stopped pid {record['pid']} ({record['base_url']})")
    return 0


def _status(args: argparse.Namespace) -> int:
    installed = engine_installed()
    record = read_state()
    running = bool(record and answers(record["base_url"]))
    info = {
        "installed": installed,
        "engine": f"llama-cpp-python {engine_version()}" if installed else None,
        "model": str(locate_model()) if installed else None,
        "running": running,
        "base_url": record["base_url"] if running else None,
    }
    if args.json:
        print(json.dumps(info, indent=2))
    elif not installed:
        print("engine not installed: run `make engine`")
    else:
        print(f"{info['engine']}, model {info['model']}")
        print(
            f"running at {info['base_url']}" if running else "not running: agentstate engine start"
        )
    return 0

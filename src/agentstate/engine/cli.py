"""``agentstate engine start|stop|status|serve|quantize``: the local llama.cpp server (lesson 05).

``start`` launches a detached server on 127.0.0.1 (free port) and prints the
``AGENTSTATE_LLM_BASE_URL`` to export; ``stop`` ends exactly that process;
``serve`` runs in the foreground until Ctrl-C; ``quantize`` makes the faster
Q4_0 model the server uses (``make engine`` runs it); ``status`` also says
whether the running engine restored a saved prefix state. ``prime``,
``states`` and ``remove`` (:mod:`agentstate.engine.cli_states`) manage those
states. Without the engine installed, each says how to install it (``make
engine``, or the pip commands). Notebook 05 uses the same server.
"""

from __future__ import annotations

import argparse
import json

from agentstate.engine import cli_states
from agentstate.engine.model import engine_installed, engine_version, install_hint, locate_model
from agentstate.engine.prefix_client import RESTORE_HELP, engine_state
from agentstate.engine.quantize import build_fast_model, default_model, fast_model_path
from agentstate.engine.server import (
    EngineServer,
    answers,
    read_state,
    start_detached,
    state_file,
    stop_detached,
)
from agentstate.servers.loopback import LoopbackServerError, port_argument, serve_until_interrupted


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``agentstate engine ...`` to the top-level parser."""
    parser = subparsers.add_parser("engine", help="the local llama.cpp server (lesson 05)")
    sub = parser.add_subparsers(dest="action", required=True)
    start = sub.add_parser("start", help="start a detached server on 127.0.0.1")
    serve = sub.add_parser("serve", help="run the server in the foreground until Ctrl-C")
    for p in (start, serve):
        p.add_argument("--port", type=port_argument, default=None, help="default: a free port")
        p.add_argument(
            "--threads",
            type=_threads,
            default=None,
            help="n_threads and n_threads_batch (default: $AGENTSTATE_ENGINE_THREADS or 2)",
        )
        p.add_argument("--restore", type=_restore, default="auto", help=RESTORE_HELP)
    start.set_defaults(func=_start)
    serve.set_defaults(func=_serve)
    sub.add_parser("stop", help="stop the server that `start` launched").set_defaults(func=_stop)
    quantize = sub.add_parser("quantize", help="make the faster Q4_0 model from the shipped GGUF")
    quantize.add_argument("--force", action="store_true", help="rebuild even if it verifies")
    quantize.set_defaults(func=_quantize)
    status = sub.add_parser("status", help="installed? running? where?")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_status)
    cli_states.register(sub)


def _threads(text: str) -> int:
    """argparse type: a positive thread count (one line, exit 2, for anything else)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive thread count: {text!r}")
    return int(text)


def _restore(text: str) -> str:
    """argparse type: auto, none, or a prefix sha256 (64 hex digits)."""
    hexdigits = set("0123456789abcdef")
    if text in ("auto", "none") or (len(text) == 64 and set(text) <= hexdigits):
        return text
    raise argparse.ArgumentTypeError(f"--restore takes auto, none or a prefix sha256, not {text!r}")


def _start(args: argparse.Namespace) -> int:
    try:
        record = start_detached(port=args.port, threads=args.threads, restore=args.restore)
    except LoopbackServerError as err:
        print(f"error: {err}")
        return 2
    verb = "already running" if record["reused"] else "started"
    print(f"llama.cpp server {verb}: pid {record['pid']}, {record['base_url']}")
    print(f"export AGENTSTATE_LLM_BASE_URL={record['base_url']}")
    print("stop it with: agentstate engine stop")
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        server = EngineServer(port=args.port, threads=args.threads, restore=args.restore).start()
    except LoopbackServerError as err:
        print(f"error: {err}")
        return 2
    print(f"serving {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        serve_until_interrupted(lambda: server.running)
    finally:
        server.stop()
    return 0


def _stop(args: argparse.Namespace) -> int:
    try:
        record = stop_detached()
    except LoopbackServerError as err:
        print(f"error: {err}")
        return 2
    if record is None:
        print(f"no server recorded in {state_file()}; nothing to stop")
    elif record["stopped"]:
        print(f"stopped pid {record['pid']} ({record['base_url']})")
    else:
        print(f"nothing stopped: pid {record['pid']} no longer runs the llama.cpp server that "
              f"`agentstate engine start` launched; forgot the stale record")  # fmt: skip
    return 0


def _quantize(args: argparse.Namespace) -> int:
    try:
        manifest = build_fast_model(force=args.force)
    except LoopbackServerError as err:
        print(f"error: {err}")
        return 2
    print(f"{manifest['type']} model ready: {fast_model_path()} "
          f"({manifest['bytes'] / 1e6:.0f} MB, sha256 {manifest['sha256'][:12]}...)")  # fmt: skip
    return 0


def _served_model() -> str:
    try:
        return str(default_model())
    except LoopbackServerError as err:
        return f"not ready: {err}"


def _status(args: argparse.Namespace) -> int:
    installed = engine_installed()
    try:
        record = read_state()
    except LoopbackServerError as err:
        print(f"error: {err}")
        return 2
    running = bool(record and answers(record["base_url"]))
    prefix_state = _prefix_state(record["base_url"]) if record and running else None
    info = {
        "installed": installed,
        "engine": f"llama-cpp-python {engine_version()}" if installed else None,
        "model": _served_model() if installed else None,
        "shipped_model": str(locate_model()) if installed else None,
        "running": running,
        "base_url": record["base_url"] if record and running else None,
        "restored": None if prefix_state is None else prefix_state.get("restored"),
        "prefix_state": prefix_state,
    }
    if args.json:
        print(json.dumps(info, indent=2))
    elif not installed:
        print(f"engine not installed: {install_hint()}")
    else:
        print(f"{info['engine']}, model {info['model']}")
        print(
            f"running at {info['base_url']}" if running else "not running: agentstate engine start"
        )
        if prefix_state is not None:
            print(f"at start: {prefix_state.get('start') or 'unknown'}")
            held = prefix_state.get("prefix")
            if held:
                print(f"primed prefix: {held['label'] or '-'} ({held['tokens']} tokens, "
                      f"sha256 {held['sha256'][:12]}...)")  # fmt: skip
    return 0


def _prefix_state(base_url: str) -> dict | None:
    """The running engine's ``/agentstate/state`` (None if it has no such route)."""
    try:
        return engine_state(base_url)
    except LoopbackServerError:
        return None

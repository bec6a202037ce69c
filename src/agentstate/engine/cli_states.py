"""``agentstate engine prime|states|remove``: the saved prefix states, for an operator.

``prime`` asks the running engine to hold a prefix (the text of system
message 1 that the engine's callers share, read from a file or stdin) and
save its state, so a restart, a deploy or a second replica starts warm; the
engine does not know what the text is (``agentstate experts prime
--sections N`` primes the experts' manual). ``states`` lists what is saved,
its size and what it is valid for (model file, versions, context and KV
settings), and names in one line each file it skipped; ``remove`` deletes
states by key, the stale ones, or all. Registered by
:mod:`agentstate.engine.cli`; taught in notebook 05 (its going-further page).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentstate.engine.prefix_client import PRIME_TIMEOUT, prime, primed_lines
from agentstate.engine.server import read_state
from agentstate.engine.state_files import KEY, SavedState, remove_state, scan, states_dir
from agentstate.engine.state_files import stale_reason as _stale
from agentstate.private_files import read_small_file
from agentstate.servers.loopback import LoopbackServerError

PREFIX_LIMIT = 16 * 1024 * 1024  # bytes: far more than any context holds


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``prime``, ``states`` and ``remove`` under ``agentstate engine``."""
    p = sub.add_parser("prime", help="hold a prefix on the running engine and save its state")
    p.add_argument("--file", help="the prefix: a UTF-8 file of system message 1 (-: stdin)")
    p.add_argument("--label", help="a name shown by `states` (default: the file's name)")
    add_prime_options(p)
    p.add_argument("--sections", help=argparse.SUPPRESS)  # moved: agentstate experts prime
    p.set_defaults(func=_prime)
    s = sub.add_parser("states", help="list saved prefix states: size, what they are valid for")
    s.add_argument("--dir", type=Path, help=f"default: {states_dir()}")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_states)
    r = sub.add_parser("remove", help="remove saved prefix states")
    r.add_argument("keys", nargs="*", help="keys as `states` lists them (a unique start will do)")
    which = r.add_mutually_exclusive_group()
    which.add_argument("--stale", action="store_true", help="those no engine here can use")
    which.add_argument("--all", action="store_true")
    r.add_argument("--dir", type=Path, help=f"default: {states_dir()}")
    r.set_defaults(func=_remove)


def add_prime_options(parser: argparse.ArgumentParser) -> None:
    """``--base-url``, ``--no-save``, ``--timeout``, ``--json``: shared with ``experts prime``."""
    parser.add_argument("--base-url", help="default: the engine `agentstate engine start` recorded")
    parser.add_argument("--no-save", action="store_true", help="prime only, write no state")
    parser.add_argument("--timeout", type=float, default=PRIME_TIMEOUT, help="seconds to wait")
    parser.add_argument("--json", action="store_true")


def _running_base_url() -> str:
    record = read_state()
    if record is None:
        raise LoopbackServerError("no engine is running: start one with `agentstate engine start`")
    return record["base_url"]


def prime_and_report(args: argparse.Namespace, text: str, label: str) -> int:
    """Prime ``text`` on the engine ``args`` name and print what it did (0), or why not (2)."""
    try:
        base_url = args.base_url or _running_base_url()
        done = prime(base_url, text, label, save=not args.no_save, timeout=args.timeout)
    except LoopbackServerError as err:
        print(f"error: {err}")
        return 2
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        print("\n".join(primed_lines(done, label)))
    return 0


def _read_prefix(name: str) -> str:
    if name == "-":
        data = sys.stdin.buffer.read(PREFIX_LIMIT + 1)
        if len(data) > PREFIX_LIMIT:
            raise ValueError(f"the prefix on stdin is larger than {PREFIX_LIMIT} bytes")
    else:
        data = read_small_file(name, PREFIX_LIMIT, what="prefix file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"the prefix in {name} is not UTF-8 text ({err.reason})") from None
    if not text.strip():
        raise ValueError(f"the prefix in {name} is empty")
    return text


def _prime(args: argparse.Namespace) -> int:
    if args.file is None or args.sections is not None:
        experts = f"agentstate experts prime --sections {args.sections or 'N'}"
        print("error: name the prefix to prime: --file PATH (its text is system message 1; - "
              f"reads stdin); the experts' manual is primed with `{experts}`")  # fmt: skip
        return 2
    try:
        text = _read_prefix(args.file)
    except (OSError, ValueError) as err:
        print(f"error: {err}")
        return 2
    label = args.label
    if label is None:
        label = "stdin" if args.file == "-" else Path(args.file).name
    return prime_and_report(args, text, label)


def _row(state: SavedState) -> dict[str, Any]:
    m, valid = state.manifest, state.manifest["valid_for"]
    return {
        "key": state.key,
        "label": m.get("label", ""),
        "tokens": m["n_tokens"],
        "MB": round(state.size / 1e6, 1),
        "model": f"{m.get('model_file')} {str(valid.get('model_sha256'))[:12]}",
        "n_ctx": m.get("n_ctx"),
        "kv": f"k{valid.get('type_k')}/v{valid.get('type_v')}"
        + (" flash" if valid.get("flash_attn") else ""),
        "engine": f"llama-cpp-python {valid.get('llama_cpp_python')}, {valid.get('llama_cpp')}",
        "used": state.last_used,
        "stale": _stale(state, _installed_versions()) or "",
    }


def _installed_versions() -> dict[str, str] | None:
    try:
        from agentstate.engine.state_cache import engine_versions

        return engine_versions()
    except (ImportError, OSError):  # no engine installed: versions are not compared
        return None


def _states(args: argparse.Namespace) -> int:
    folder = args.dir or states_dir()
    found = scan(folder)
    rows = [_row(s) for s in found.states]
    if args.json:
        print(json.dumps({"dir": str(folder), "states": rows, "skipped": found.skipped}, indent=2))
        return 0
    for line in found.skipped:
        print(f"skipped {line}")
    if not rows:
        print(f"no saved prefix states in {folder}")
        return 0
    total = sum(r["MB"] for r in rows)
    print(f"{len(rows)} saved prefix state(s) in {folder}, {total:.1f} MB:")
    for r in rows:
        print(f"{r['key']}  {r['label'] or '-'}  {r['tokens']} tokens  {r['MB']} MB  "
              f"valid for {r['model']}, n_ctx >= {r['tokens']} (saved at {r['n_ctx']}), "
              f"KV {r['kv']}, {r['engine']}; used {r['used']}"
              + (f"  STALE: {r['stale']}" if r["stale"] else ""))  # fmt: skip
    return 0


def _remove(args: argparse.Namespace) -> int:
    folder = args.dir or states_dir()
    states = scan(folder).states
    if args.all:
        chosen = states
    elif args.stale:
        versions = _installed_versions()
        chosen = [s for s in states if _stale(s, versions)]
    elif args.keys:
        chosen = []
        for key in args.keys:
            if not key or not KEY.fullmatch(key.ljust(16, "0")):  # '' starts every key
                print(f"error: {key!r} is not the start of a key (1 to 16 hex digits, as "
                      f"`agentstate engine states` lists them); nothing removed")  # fmt: skip
                return 2
            match = [s for s in states if s.key.startswith(key)]
            if len(match) != 1:
                what = "no saved state" if not match else f"{len(match)} saved states"
                print(f"error: {what} in {folder} with a key starting {key!r}; nothing removed")
                return 2
            chosen += match
    else:
        print("error: name the keys to remove, or --stale, or --all")
        return 2
    busy = [s.key for s in chosen if not remove_state(s)]
    kept = f"; {', '.join(busy)} busy (an engine is writing it), kept" if busy else ""
    print(f"removed {len(chosen) - len(busy)} state(s) from {folder}{kept}")
    return 1 if busy else 0

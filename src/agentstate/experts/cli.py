"""``agentstate experts manual-stats|prime|run`` (lesson 05).

``prime`` hands the experts' own prefix (system message 1 over the first N
chapters) to the running engine, which holds it and saves its state (the
engine primes whatever prefix it is given: ``agentstate engine prime
--file``). ``run`` answers one query; with ``--checkpoint-db`` and ``--thread-id`` the
thread lives in a SQLite file and grows across runs (the manual never does).
Errors (bad input, no endpoint, an unreachable, failing or hanging server, a
prompt longer than the engine's context) print one line that says what to do,
and exit 2. The system is taught in notebook 05.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from agentstate.engine.cli_states import add_prime_options, prime_and_report
from agentstate.experts.budget import ContextTooSmallError, check_fits
from agentstate.experts.checkpoints import memory_checkpointer, sqlite_checkpointer
from agentstate.experts.graph import build_experts_graph, user_turn
from agentstate.experts.llm import DEFAULT_TIMEOUT, ModelEndpointError
from agentstate.experts.manual import load_manual
from agentstate.experts.prompts import system_prefix
from agentstate.experts.settings import make_config


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``agentstate experts ...`` to the top-level parser."""
    parser = subparsers.add_parser("experts", help="prefix-cached experts (lesson 05)")
    sub = parser.add_subparsers(dest="action", required=True)

    stats = sub.add_parser("manual-stats", help="bytes, tokens (if known) and hashes")
    stats.add_argument("--sections", type=int, help="a leading part: the first N chapters")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=_manual_stats)

    prime = sub.add_parser("prime", help="prime the experts' prefix on the engine and save it")
    prime.add_argument("--sections", type=_chapters, default=1, help="leading chapters (default 1)")
    add_prime_options(prime)
    prime.set_defaults(func=_prime)

    run = sub.add_parser("run", help="answer one query with 1-3 experts")
    run.add_argument("--input", required=True, help="the question")
    run.add_argument("--thread-id", help="thread to continue (default: a one-off thread)")
    run.add_argument("--checkpoint-db", help="SQLite file that keeps threads across runs")
    run.add_argument("--mode", choices=["stub", "llm"], default="stub")
    run.add_argument("--router", choices=["rules", "llm"], default="rules")
    run.add_argument("--execution", choices=["sequential", "parallel", "primed"],
                     default="sequential")  # fmt: skip
    run.add_argument("--sections", type=int, help="use the first N chapters of the manual")
    run.add_argument("--max-tokens", type=int, default=64, help="reply length per call (llm)")
    run.add_argument("--base-url", help="OpenAI-compatible endpoint (else AGENTSTATE_LLM_BASE_URL)")
    run.add_argument(
        "--timeout",
        type=_positive,
        default=DEFAULT_TIMEOUT,
        help=f"seconds to wait for the endpoint (default {DEFAULT_TIMEOUT:.0f})",
    )
    run.add_argument(
        "--context-tokens",
        type=int,
        help="the endpoint's context window; default: AGENTSTATE_LLM_CONTEXT, or "
        "the one `agentstate engine start` recorded for this URL",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--show-metrics", action="store_true", help="TTFT and latency per call")
    run.set_defaults(func=_run)


def _chapters(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number of chapters: {text!r}")
    return int(text)


def _prime(args: argparse.Namespace) -> int:
    try:
        manual = load_manual(sections=args.sections)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}")
        return 2
    return prime_and_report(args, system_prefix(manual).text, manual.name)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _context_tokens(args: argparse.Namespace, base_url: str | None) -> int | None:
    """The endpoint's context: the flag, the environment, or the local engine's record."""
    if args.context_tokens:
        return args.context_tokens
    configured = os.environ.get("AGENTSTATE_LLM_CONTEXT", "").strip()
    if configured:
        if not configured.isdigit():
            raise ValueError(
                f"AGENTSTATE_LLM_CONTEXT must be a number of tokens, got {configured!r}"
            )
        return int(configured)
    from agentstate.engine.server import read_state

    try:
        record = read_state()
    except RuntimeError:
        return None
    if record and base_url and record["base_url"].rstrip("/") == base_url.rstrip("/"):
        return record.get("n_ctx")
    return None


def _manual_stats(args: argparse.Namespace) -> int:
    try:
        manual = load_manual(sections=args.sections)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}")
        return 2
    from agentstate.engine import count_tokens

    prefix = system_prefix(manual)
    info = {**manual.stats(), "tokens": count_tokens(manual.text),
            "prefix_bytes": prefix.size, "prefix_tokens": count_tokens(prefix.text),
            "prefix_sha256": prefix.sha256}  # fmt: skip
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        shown = "unknown (install the engine tokenizer: make engine)" if value is None else value
        print(f"{key:>14}: {shown}")
    return 0


def _check_checkpoint_db(path: str) -> None:
    """Refuse a folder or a file that is not a readable SQLite database, changing nothing.

    Opening it for real would create it 0600, tighten its mode and add SQLite's
    side files, so an existing file is probed read-only and immutable first.
    """
    from agentstate.private_files import check_db_path

    db = check_db_path(path)  # FileNotFoundError / IsADirectoryError, naming the path
    if not db.exists() or db.stat().st_size == 0:
        return
    probe = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        raise ValueError(
            f"--checkpoint-db {db} is not a SQLite database ({err}); pass a new file name "
            "or one an earlier run created"
        ) from None
    finally:
        probe.close()


def _result(state: dict[str, Any], thread_id: str | None) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "experts": state["route"]["experts"],
        "route": state["route"],
        "response": state["response"],
        "turns": sum(1 for m in state["messages"] if m.type == "human"),
        "manual_sha256": state["manual_sha256"],
        "prefix_sha256": state["prefix_sha256"],
        "ttft_ms": state.get("ttft_ms", {}),
        "latency_ms": state.get("latency_ms", {}),
    }


def _run(args: argparse.Namespace) -> int:
    if not args.input.strip():
        print("error: --input is empty; pass the question to answer")
        return 2
    if args.checkpoint_db and not args.thread_id:
        print("error: --checkpoint-db needs --thread-id (the thread to create or continue)")
        return 2
    try:
        config = make_config(mode=args.mode, router=args.router, execution=args.execution,
                             sections=args.sections, max_tokens=args.max_tokens,
                             base_url=args.base_url, timeout=args.timeout)  # fmt: skip
        if args.mode == "llm":
            base_url = config.expert_model.openai_api_base  # type: ignore[union-attr]
            context = _context_tokens(args, base_url)
            if context:
                check_fits(config.manual, args.input, args.max_tokens, context)
    except (ValueError, FileNotFoundError, ContextTooSmallError) as err:
        print(f"error: {err}")
        return 2
    with ExitStack() as stack:
        checkpointer: BaseCheckpointSaver | None = None
        if args.checkpoint_db:
            try:
                _check_checkpoint_db(args.checkpoint_db)
                checkpointer = stack.enter_context(sqlite_checkpointer(args.checkpoint_db))
            except (OSError, ValueError) as err:
                print(f"error: {err}")
                return 2
            except sqlite3.DatabaseError as err:  # a damaged file with a SQLite header
                print(f"error: --checkpoint-db {Path(args.checkpoint_db)} cannot be used ({err})")
                return 2
        elif args.thread_id:
            checkpointer = memory_checkpointer()
        graph = build_experts_graph(config, checkpointer=checkpointer)
        run_config = {"configurable": {"thread_id": args.thread_id}} if checkpointer else None
        try:
            state = graph.invoke(user_turn(args.input), run_config)
        except ModelEndpointError as err:
            print(f"error: {err}")
            return 2
    result = _result(state, args.thread_id)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(result["response"])
    print(f"\nexperts: {', '.join(result['experts'])}  (router: {state['route']['mode']})")
    if args.thread_id:
        print(f"thread {args.thread_id}: {result['turns']} turn(s)")
    if args.show_metrics:
        if not result["ttft_ms"]:
            print("metrics: none in stub mode (use --mode llm)")
        for call, ttft in result["ttft_ms"].items():
            print(f"{call:>22}: TTFT {ttft:8.1f} ms  latency {result['latency_ms'][call]:8.1f} ms")
    return 0

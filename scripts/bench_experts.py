"""Benchmark lesson 05's prefix caching on the real local engine and record the results.

Starts llama.cpp's server on 127.0.0.1 (or uses --base-url), runs the same
3-expert query cache-busted, sequential, parallel, primed and without the
manual, at each manual size, several rounds, and prints the medians as
Markdown tables plus a Mermaid bar chart; then a sweep over prefix size (cold,
warm and floor TTFT at 1, 2, 4, 8, 16 chapters, those that fit the context).
Writes data/results/experts_benchmark.json with provenance (engine, model file
and sha256 and what it was made from, manual hashes, cores, load, date).
Then the restart case at the sweep's sizes (cold, warm, and restored from a
saved state after an engine restart; the share of the warm saving kept;
:mod:`agentstate.experts.restart_benchmark`, where the experts prime the
engine with their own prefix), written to data/results/engine_restart.json.
The server runs the Q4_0 model made by ``agentstate engine quantize``
(``--model shipped``: the Q4_1 file as shipped).

    .venv/bin/python scripts/bench_experts.py       # sizes 1 2 4, 3 rounds; sweep 1 2 4 8 16
    .venv/bin/python scripts/bench_experts.py --sections 1 --rounds 1 --sweep 1 2 \
        --restart 1 --out /tmp/quick.json --restart-out /tmp/quick_restart.json  # a short check
    .venv/bin/python scripts/bench_experts.py --restart-only   # the restart case alone
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from agentstate.engine import EngineServer, LoopbackServerError, default_model, locate_model
from agentstate.engine.server import MEASURED_THREADS
from agentstate.experts.benchmark import (
    QUERY,
    SWEEP_SECTIONS,
    provenance,
    run_benchmark,
)
from agentstate.experts.restart_benchmark import (
    TARGET_SHARE,
    restart_rows,
    run_restart,
)
from agentstate.experts.results import (
    case_rows,
    markdown_table,
    mermaid_bars,
    summary_rows,
    sweep_rows,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "data" / "results" / "experts_benchmark.json"
DEFAULT_RESTART_OUT = ROOT / "data" / "results" / "engine_restart.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        type=int,
        nargs="+",
        default=[1, 2, 4],
        help="manual sizes: leading chapters (default 1 2 4)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--sweep",
        type=int,
        nargs="*",
        default=list(SWEEP_SECTIONS),
        help="prefix sizes for the sweep (chapters); none: no sweep",
    )
    parser.add_argument("--sweep-rounds", type=int, help="rounds per sweep size (default --rounds)")
    parser.add_argument(
        "--model",
        choices=["fast", "shipped"],
        default="fast",
        help="fast: the Q4_0 made by `agentstate engine quantize`; shipped: Q4_1",
    )
    parser.add_argument("--max-tokens", type=int, default=32, help="reply length per expert")
    parser.add_argument("--base-url", help="use a running server instead of starting one")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--restart",
        type=int,
        nargs="*",
        help="sizes for the restart case (chapters; default: the sweep's); none: no restart case",
    )
    parser.add_argument("--restart-rounds", type=int, help="rounds per size (default --rounds)")
    parser.add_argument("--restart-only", action="store_true", help="run the restart case alone")
    parser.add_argument("--restart-out", type=Path, default=DEFAULT_RESTART_OUT)
    args = parser.parse_args(argv)  # fmt: skip
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    command = "python scripts/bench_experts.py " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )
    sweep = {"sweep": args.sweep, "sweep_rounds": args.sweep_rounds}
    restart_sizes = args.sweep if args.restart is None else args.restart
    if args.restart_only:
        return restart_case(args, restart_sizes, command.strip())
    try:
        if args.base_url:
            results = run_benchmark(args.base_url, args.sections, args.rounds, args.max_tokens,
                                    command.strip(), **sweep)  # fmt: skip
        else:
            model = default_model() if args.model == "fast" else locate_model()
            with EngineServer(model_path=model, threads=MEASURED_THREADS) as server:
                results = run_benchmark(server.base_url, args.sections, args.rounds,
                                        args.max_tokens, command.strip(), **sweep,
                                        n_ctx=server.n_ctx, model_path=model)  # fmt: skip
    except LoopbackServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the server was stopped on the way out; nothing written
        print(f"interrupted: {args.out} left unchanged", file=sys.stderr)
        return 130
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown_table(summary_rows(results)))
    print()
    print(markdown_table(case_rows(results)))
    print()
    print("```mermaid\n" + mermaid_bars(results) + "\n```")
    if sweep_rows(results):
        print()
        print(markdown_table(sweep_rows(results)))
    print(f"\nwritten {args.out}", file=sys.stderr)
    if args.base_url and restart_sizes:
        print("restart case skipped: it restarts the engine, so it cannot use --base-url",
              file=sys.stderr)  # fmt: skip
        return 0
    return restart_case(args, restart_sizes, command.strip()) if restart_sizes else 0


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def restart_case(args: argparse.Namespace, sizes: list[int], command: str) -> int:
    """Cold, warm and restored at each size; the share of the warm saving kept."""
    try:
        model = default_model() if args.model == "fast" else locate_model()
        document = {
            "provenance": provenance(command, model),
            "query": QUERY,
            "max_tokens": args.max_tokens,
            "restart": run_restart(
                sizes, args.restart_rounds or args.rounds, args.max_tokens, model, log
            ),  # fmt: skip
        }
    except LoopbackServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: {args.restart_out} left unchanged", file=sys.stderr)
        return 130
    args.restart_out.parent.mkdir(parents=True, exist_ok=True)
    args.restart_out.write_text(json.dumps(document, indent=1) + "\n")
    print()
    print(markdown_table(restart_rows(document)))
    points = document["restart"]["points"]
    missed = [p["sections"] for p in points if p["share_kept"] < TARGET_SHARE]
    print(f"\nshare of the warm saving kept after a restart: target {TARGET_SHARE:.0%}, "
          + (f"missed at {missed} chapters" if missed else "met at every size"))  # fmt: skip
    print(f"written {args.restart_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

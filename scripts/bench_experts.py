"""Benchmark stage 05's prefix caching on the real local engine and record the results.

Starts llama.cpp's server on 127.0.0.1 (or uses --base-url), runs the same
3-expert query cache-busted, sequential, parallel, primed and without the
manual, at each manual size, several rounds, and prints the medians as
Markdown tables plus a Mermaid bar chart; then a sweep over prefix size (cold,
warm and floor TTFT at 1, 2, 4, 8, 16 chapters, those that fit the context).
Writes data/results/experts_benchmark.json with provenance (engine, model file
and sha256 and what it was made from, manual hashes, cores, load, date).
The server runs the Q4_0 model made by ``agentstate engine quantize``
(``--model shipped``: the Q4_1 file as shipped).

    .venv/bin/python scripts/bench_experts.py       # sizes 1 2 4, 3 rounds; sweep 1 2 4 8 16
    .venv/bin/python scripts/bench_experts.py --sections 1 --rounds 1 --sweep 1 2 \
        --out /tmp/quick.json                       # a short check
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from agentstate.engine import EngineServer, LoopbackServerError, default_model, locate_model
from agentstate.engine.server import MEASURED_THREADS
from agentstate.experts.benchmark import SWEEP_SECTIONS, run_benchmark
from agentstate.experts.results import (
    case_rows,
    markdown_table,
    mermaid_bars,
    summary_rows,
    sweep_rows,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "data" / "results" / "experts_benchmark.json"


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
    args = parser.parse_args(argv)  # fmt: skip
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    command = "python scripts/bench_experts.py " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )
    sweep = {"sweep": args.sweep, "sweep_rounds": args.sweep_rounds}
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
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``agentstate hazards``: which hazards of notebooks 01-06 live in the versions installed here.

Prints one line per hazard (its lesson, the outcome of a run here, the
evidence) under the versions of the libraries that decide it; ``--json``
prints ``{"versions": ..., "results": [...]}`` (scripts/hazards_by_version.py
reads it). Exit status 0 whatever the outcomes: a hazard that reproduces is
information, not a failure. Also ``python -m agentstate.hazards``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

HELP = "which of the series' hazards live in the libraries installed here (lessons 01-06)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments, on its own parser or on ``agentstate hazards``."""
    parser.add_argument("names", nargs="*", metavar="NAME", help="hazards to run (default: all)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(func=run, error=parser.error)


def register(subparsers: Any) -> None:
    """Add ``hazards`` to the ``agentstate`` command."""
    parser = subparsers.add_parser(
        "hazards",
        help=HELP,
        description="Run each hazard's reproduction (a scripted model, the real libraries) and "
        "say whether it is reproduced, refused or fixed in the versions installed here.",
    )
    add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the hazards named (or all) and print what each run showed; exit status 0."""
    from agentstate.hazards.registry import HAZARDS, installed_versions, results_json, run_all

    known = {h.name for h in HAZARDS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        args.error(f"unknown hazard {unknown[0]!r}; known: {', '.join(sorted(known))}")
    versions = installed_versions()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an old release's deprecation notes are not results
        results = run_all(args.names or None)
    if args.json:
        json.dump({"versions": versions, "results": results_json(results)}, sys.stdout, indent=1)
        print()
        return 0
    print(", ".join(f"{k} {v}" for k, v in versions.items()))
    lessons = {h.name: h.lesson for h in HAZARDS}
    width = max(len(r.hazard) for r in results)
    for r in results:
        print(f"{lessons[r.hazard]}  {r.hazard:<{width}}  {r.outcome:<11} {r.evidence}")
    return 0

"""``python -m agentstate.hazards``: the same as ``agentstate hazards`` (notebooks 01-06)."""

from __future__ import annotations

import argparse
import sys

from agentstate.hazards.cli import HELP, add_arguments, run


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` as ``agentstate hazards`` does and run it."""
    parser = argparse.ArgumentParser(prog="python -m agentstate.hazards", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

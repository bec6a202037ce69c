"""``python -m agentstate.doctor TARGET``: ``agentstate doctor TARGET`` (notebooks 01-06)."""

import sys

from agentstate.doctor.report.cli import main

if __name__ == "__main__":
    sys.exit(main())

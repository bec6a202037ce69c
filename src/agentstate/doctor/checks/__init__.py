"""One module per doctor code; each ``check(facts)`` returns its findings (notebooks 01-06).

:data:`CHECKS` runs in the order of the series. A check looks at one graph
(the agent, or one of its subagents); :func:`agentstate.doctor.diagnose`
runs every check on the agent and on each subagent.
"""

from __future__ import annotations

from collections.abc import Callable

from agentstate.doctor.checks import (
    file_read_modify_write,
    list_doubled_by_subagent,
    memory_in_react_loop,
    not_inspected,
    same_batch_read,
    subagent_drops_key,
    undeclared_key,
    unreduced_parallel_write,
    unseen_key_read,
)
from agentstate.doctor.facts.graph_facts import GraphFacts
from agentstate.doctor.report.findings import Finding

Check = Callable[[GraphFacts], list[Finding]]

CHECKS: dict[str, Check] = {
    "file-read-modify-write": file_read_modify_write.check,
    "unreduced-parallel-write": unreduced_parallel_write.check,
    "undeclared-key": undeclared_key.check,
    "unseen-key-read": unseen_key_read.check,
    "same-batch-read": same_batch_read.check,
    "subagent-drops-key": subagent_drops_key.check,
    "list-doubled-by-subagent": list_doubled_by_subagent.check,
    "memory-in-react-loop": memory_in_react_loop.check,
    "not-inspected": not_inspected.check,
}

__all__ = ["CHECKS", "Check"]

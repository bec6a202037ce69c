"""``list-doubled-by-subagent`` (notebook 04): a concatenated list key a subagent declares.

The subagent receives the parent's list, returns the whole list when it
changed it, and the parent's ``operator.add`` appends it again:
``['pre', 'pre', 'new']``. ``append_unique`` (or a merge by id) is idempotent.
"""

from __future__ import annotations

from agentstate.doctor.findings import Finding, finding
from agentstate.doctor.graph_facts import EXCLUDED_BY_TASK, GraphFacts

CODE = "list-doubled-by-subagent"


def check(facts: GraphFacts) -> list[Finding]:
    """An error per key both sides declare whose parent reducer concatenates."""
    parent = facts.parent
    if parent is None:
        return []
    out: list[Finding] = []
    for key in sorted(set(facts.channels) & set(parent.channels) - EXCLUDED_BY_TASK):
        channel = parent.channels[key]
        if channel.concatenates:
            reducer = getattr(channel.reducer, "__name__", "a concatenation")
            out.append(
                finding(
                    CODE,
                    f"{facts.name}:{key}",
                    f"`{key}` is reduced by `{reducer}` and subagent `{facts.name}` declares it: "
                    "the subagent returns the whole list and the parent appends it again "
                    "(['pre', 'pre', 'new']). Use `append_unique` or merge by id.",
                )
            )
    return out

"""``list-doubled-by-subagent`` (notebook 04): a concatenated key a subagent or subgraph hands back.

A subgraph returns its whole state, not what it changed: the part it received
from the parent comes back with it, and the parent's ``operator.add`` appends
it again (``['pre', 'pre', 'new']``, a topic string ``"TT"``). That holds for
a deepagents subagent that declares the key (``task`` returns it when it
changed) and for any compiled graph used as a node, started by an edge or by
``Send`` with the key in its payload. ``append_unique`` (or a merge by id) is
idempotent; an output schema without the key keeps it home.
"""

from __future__ import annotations

from agentstate.doctor.findings import Finding, finding
from agentstate.doctor.fixes import declared_at, doubling_fix
from agentstate.doctor.graph_facts import EXCLUDED_BY_TASK, GraphFacts
from agentstate.doctor.subgraphs import handed_back

CODE = "list-doubled-by-subagent"


def _reducer(facts: GraphFacts, key: str) -> str:
    channel = facts.channels[key]
    return getattr(channel.reducer, "__name__", "a concatenation")


def _subagent(facts: GraphFacts) -> list[Finding]:
    parent = facts.parent
    if parent is None or facts.kind != "subagent":
        return []
    out: list[Finding] = []
    for key in sorted(set(facts.channels) & set(parent.channels) - EXCLUDED_BY_TASK):
        if parent.channels[key].concatenates:
            writers = sorted(t.name for t in facts.tools.values() if key in t.code.writes)
            file, line = facts.where_tool(writers[0]) if writers else (None, None)
            out.append(
                finding(
                    CODE,
                    f"{facts.prefix()}{key}",
                    f"`{key}` is reduced by `{_reducer(parent, key)}` and subagent "
                    f"`{facts.name}` declares it: the subagent returns the whole list and the "
                    f"parent appends it again (['pre', 'pre', 'new']). "
                    f"{doubling_fix(parent.key_kind(key))}",
                    file=file,
                    line=line,
                )
            )
    return out


def _subgraph_nodes(facts: GraphFacts) -> list[Finding]:
    out: list[Finding] = []
    for node in sorted(facts.nested):
        for key in sorted(handed_back(facts, node)):
            if not facts.channels[key].concatenates:
                continue
            kind = facts.key_kind(key)
            file, line = declared_at(facts.graph, key)
            example = "'TT'" if kind == "str" else "['pre', 'pre', 'new']"
            out.append(
                finding(
                    CODE,
                    f"{facts.prefix()}{node} > {key}",
                    f"`{key}` is reduced by `{_reducer(facts, key)}` and node `{node}` runs a "
                    f"subgraph that is given `{key}` and returns it with its whole state: the "
                    f"parent appends what it handed down again ({example}). {doubling_fix(kind)}",
                    file=file,
                    line=line,
                )
            )
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """An error per concatenated key a subagent declares or a subgraph node hands back."""
    return _subagent(facts) + _subgraph_nodes(facts)

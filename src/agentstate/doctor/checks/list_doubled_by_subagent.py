"""``list-doubled-by-subagent`` (notebook 04): a concatenated key a subagent or subgraph hands back.

A subgraph returns its whole state, not what it changed: the part it received
from the parent comes back with it, and the parent's ``operator.add`` appends
it again (``['pre', 'pre', 'new']``, a topic string ``"TT"``). That holds for
a deepagents subagent that declares the key (``task`` returns it when it
changed) and for any compiled graph used as a node, started by an edge or by
``Send`` with the key in its payload; and for a plain node ``Send`` starts
with an item of the list, that returns the item into the list another node
filled (``{"q": [state["q"]]}``: ``q1, q2, q1, q2``). ``append_unique`` (or a
merge by id) is idempotent; an output schema without the key keeps it home.
"""

from __future__ import annotations

from agentstate.doctor.findings import Finding, finding, they
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


def _send_workers(facts: GraphFacts) -> list[Finding]:
    """A node ``Send`` starts with a key of a concatenated list in its payload, that returns the
    item it was given into that list, which another node fills: the item comes back twice."""
    out: list[Finding] = []
    for name, node in sorted(facts.nodes.items()):
        if node.code is None or node.subgraph:
            continue
        payloads = facts.steps.sends(name)
        if not payloads:
            continue
        for key in sorted(node.code.echoes):
            channel = facts.channels.get(key)
            if channel is None or not channel.concatenates:
                continue
            if not any(keys is None or key in keys for keys in payloads):
                continue
            fillers = sorted(
                other
                for other, facts_of in facts.nodes.items()
                if other != name and facts_of.code is not None and key in facts_of.code.writes
            )
            if not fillers:
                continue
            kind = facts.key_kind(key)
            out.append(
                finding(
                    CODE,
                    f"{facts.prefix()}{name} > {key}",
                    f"`{key}` is reduced by `{_reducer(facts, key)}`, which "
                    f"{they(fillers, 'fills', 'fill')}; node `{name}` is started by `Send` "
                    f"with an item of `{key}` and returns it into `{key}`: every item comes back "
                    f"once more (['q1', 'q2', 'q1', 'q2']). Return the results under another "
                    f"key, or {doubling_fix(kind)[0].lower()}{doubling_fix(kind)[1:]}",
                    file=node.file,
                    line=node.line,
                )
            )
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """An error per concatenated key a subagent declares, a subgraph node hands back, or a
    ``Send`` worker returns its item into."""
    return _subagent(facts) + _subgraph_nodes(facts) + _send_workers(facts)

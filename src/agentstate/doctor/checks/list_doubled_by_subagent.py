"""``list-doubled-by-subagent`` (notebook 04): a concatenated key a subagent or subgraph hands back.

A subgraph returns its whole state, not what it changed: the part it received
from the parent comes back with it, and the parent's ``operator.add`` appends
it again (``['pre', 'pre', 'new']``, a topic string ``"TT"``). That holds for a
deepagents subagent that writes the key (a tool or node of its own, or the
general-purpose subagent's copy of the parent's tools): from deepagents 0.7.24
``task`` drops a key handed back unchanged, before it every subagent that
declares the key hands it back (:data:`.releases.LIST_RETURNED_UNCHANGED`). It
holds for any compiled graph used as a node, started by an edge or by ``Send``
with the key in its payload; and for a plain node ``Send`` starts with an item
of the list, that returns the item into the list another node filled
(``{"q": [state["q"]]}``: ``q1, q2, q1, q2``). ``append_unique`` (or a merge by
id) is idempotent; an output schema without the key keeps it home.
"""

from __future__ import annotations

from agentstate.doctor.facts import releases
from agentstate.doctor.facts.graph_facts import EXCLUDED_BY_TASK, GraphFacts
from agentstate.doctor.facts.key_kinds import declared_at, doubling_fix
from agentstate.doctor.facts.subgraphs import handed_back, writes
from agentstate.doctor.report.findings import Finding, finding, listed, they

CODE = "list-doubled-by-subagent"
UNCHANGED = releases.LIST_RETURNED_UNCHANGED


def _reducer(facts: GraphFacts, key: str) -> str:
    channel = facts.channels[key]
    return getattr(channel.reducer, "__name__", "a concatenation")


def _writers(facts: GraphFacts, key: str) -> tuple[list[str], list[str]]:
    """The subagent's tools and nodes that write ``key``, and those whose code the doctor could
    not read (they may)."""
    writers: list[str] = []
    blind: list[str] = []
    for tool in sorted(facts.tools.values(), key=lambda t: t.name):
        if key in tool.code.writes:
            writers.append(tool.name)
        elif not tool.library and not tool.code.analysed:
            blind.append(tool.name)
    for name, node in sorted(facts.nodes.items()):
        if node.subgraph:
            if key in writes(facts, name):
                writers.append(name)
        elif node.code is not None:
            if key in node.code.writes:
                writers.append(name)
            elif not node.code.analysed:
                blind.append(name)
    return writers, blind


def _drops_unchanged() -> tuple[bool | None, str | None]:
    """Whether the installed deepagents' ``task`` drops a key handed back unchanged (None: the
    release cannot be read), and that release."""
    installed = releases.installed_version(UNCHANGED.distribution)
    if installed is None:
        return None, None
    try:
        return not UNCHANGED.applies(installed), installed
    except ValueError:
        return None, installed


def _subagent(facts: GraphFacts) -> list[Finding]:
    parent = facts.parent
    if parent is None or facts.kind != "subagent":
        return []
    out: list[Finding] = []
    drops, installed = _drops_unchanged()
    for key in sorted(set(facts.channels) & set(parent.channels) - EXCLUDED_BY_TASK):
        if not parent.channels[key].concatenates:
            continue
        writers, blind = _writers(facts, key)
        file, line = facts.where_tool(writers[0]) if writers else (None, None)
        if file is None:
            file, line = facts.where_node(writers[0]) if writers else (None, None)
        if file is None:
            file, line = facts.where_declared()
        subject = f"{facts.prefix()}{key}"
        fix = doubling_fix(parent.key_kind(key))
        reducer = _reducer(parent, key)
        if writers:
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{key}` is reduced by `{reducer}` and subagent `{facts.name}` writes it "
                    f"({listed(writers)}): the subagent returns the whole list, the part it was "
                    f"given included, and the parent appends it again (['pre', 'pre', 'new']). "
                    f"{fix}",
                    file=file,
                    line=line,
                )
            )
        elif drops is False:
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{key}` is reduced by `{reducer}` and subagent `{facts.name}` declares it: "
                    f"{UNCHANGED.distribution} {installed} (installed) hands back every key a "
                    f"subagent declares, written or not, and the parent appends the list again "
                    f"(['pre', 'pre']). {UNCHANGED.distribution} {UNCHANGED.first_changed} and "
                    f"later drop a key handed back unchanged (pip install "
                    f"'{UNCHANGED.distribution}>={UNCHANGED.first_changed}'); which releases: "
                    f"{UNCHANGED.page}. {fix}",
                    file=file,
                    line=line,
                )
            )
        elif blind or drops is None:
            why = (
                f"the code of {listed(blind)} cannot be read"
                if blind
                else f"the installed {UNCHANGED.distribution} release cannot be read"
            )
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{key}` is reduced by `{reducer}` and subagent `{facts.name}` declares it; "
                    f"{why}, so the doctor cannot tell whether the subagent hands the list back "
                    f"changed (the parent appends it again) or unchanged (dropped by `task` from "
                    f"{UNCHANGED.distribution} {UNCHANGED.first_changed} on); see "
                    f"{UNCHANGED.page}.",
                    severity="info",
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
                    file=facts.where_node(name)[0],
                    line=facts.where_node(name)[1],
                )
            )
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """An error per concatenated key a subagent declares, a subgraph node hands back, or a
    ``Send`` worker returns its item into."""
    return _subagent(facts) + _subgraph_nodes(facts) + _send_workers(facts)

"""``unreduced-parallel-write`` (notebook 02): parallel writers of a key that has no reducer.

The tools of one reply run as one super-step, so two ``Command`` updates of a
plain key raise ``InvalidUpdateError`` after the tools ran; the same holds for
a node that ``Send`` starts several times, two nodes one step starts together
(:mod:`agentstate.doctor.facts.steps`), and two subgraph nodes that hand back the
same key. The ends of a router are alternatives, not a fan-out. Where only an
outcome the doctor could not read puts two writers in one step, the finding
is a warning that says why. LangChain's own ``write_todos`` (recognised by
its code, not its name) is skipped: ``TodoListMiddleware`` rejects parallel
calls of it itself.
"""

from __future__ import annotations

import itertools

from agentstate.doctor.facts.graph_facts import GraphFacts, ToolFacts, task_writes
from agentstate.doctor.facts.key_kinds import declared_at, reducer_fix
from agentstate.doctor.facts.steps import Share
from agentstate.doctor.facts.subgraphs import writes
from agentstate.doctor.report.findings import Finding, finding, info, listed, they

CODE = "unreduced-parallel-write"


def _plain(facts: GraphFacts, key: str) -> bool:
    channel = facts.channels.get(key)
    return channel is not None and channel.kind == "plain"


def _guarded(tool: ToolFacts) -> bool:
    """deepagents' and LangChain's own ``write_todos``: its middleware refuses parallel calls."""
    return tool.library and tool.name == "write_todos"


def _tools_in_parallel(facts: GraphFacts) -> tuple[bool, str | None]:
    """Whether a model's reply drives the ToolNode, or ``Send`` starts it several times; and,
    when only models bound to one tool call per reply drive it, the setting that says so."""
    runners = facts.runners_in_loops()
    parallel, settings = False, []
    for node in facts.tool_nodes:
        repeat = facts.steps.repeated(node)
        if repeat is not None and repeat.sure:
            return True, None
        if node in runners:
            parallel = True
            settings.append(facts.one_call_for(node))
    if parallel and settings and all(settings):
        return True, settings[0]
    return parallel, None


def _tool_findings(facts: GraphFacts) -> list[Finding]:
    writers: dict[str, list[str]] = {}
    for tool in facts.tools.values():
        if _guarded(tool):
            continue
        keys = set(tool.code.writes)
        if tool.name == "task" and tool.library:
            keys |= task_writes(facts)
        for key in facts.channels_written(keys):
            if _plain(facts, key):
                writers.setdefault(key, []).append(tool.name)
    parallel, one_call = _tools_in_parallel(facts)
    out: list[Finding] = []
    for key, names in sorted(writers.items()):
        names = sorted(names)
        file, line = facts.where_tool(names[0])
        subject = f"{facts.prefix()}{key}"
        if one_call is not None:
            out.append(
                info(
                    CODE,
                    subject,
                    f"`{key}` has no reducer and {they(names, 'writes', 'write')} it through "
                    f"`Command`, but the model makes one tool call per reply ({one_call}), so "
                    "two of those writes never share a step. Drop that setting and they can: "
                    f"{reducer_fix(facts.key_kind(key))}",
                )
            )
        elif parallel:
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{key}` has no reducer and {they(names, 'writes', 'write')} it through "
                    f"`Command`; the model may call {'it' if len(names) == 1 else 'them'} "
                    "several times in one reply, and two writes in one step raise "
                    f"InvalidUpdateError. {reducer_fix(facts.key_kind(key))}",
                    file=file,
                    line=line,
                )
            )
        else:
            out.append(
                info(
                    CODE,
                    subject,
                    f"`{key}` has no reducer and {they(names, 'writes', 'write')} it; the "
                    "doctor cannot tell whether this graph ever runs two of those calls in one "
                    "step.",
                )
            )
    return out


def _node_finding(
    facts: GraphFacts, key: str, nodes: list[str], share: Share, repeat: bool
) -> Finding:
    fix = reducer_fix(facts.key_kind(key))
    file, line = facts.where_node(nodes[0])
    if file is None:  # a subgraph node has no function: point at the key's declaration
        file, line = declared_at(facts.graph, key)
    if repeat:
        what = f"node `{nodes[0]}` writes `{key}`, which has no reducer, and"
        how = f"{share.why}" if share.sure else "it may run several times in one step"
    else:
        what = f"nodes {listed(nodes)} both write `{key}`, which has no reducer, and"
        how = f"{share.why}" if share.sure else "they may run in one step"
    if share.sure:
        message = f"{what} {how}: InvalidUpdateError. {fix}"
        return finding(CODE, f"{facts.prefix()}{key}", message, file=file, line=line)
    message = (
        f"{what} {how}; the doctor cannot tell, because {share.why}. If they do, the run "
        f"raises InvalidUpdateError. {fix}"
    )
    return finding(
        CODE, f"{facts.prefix()}{key}", message, severity="warning", file=file, line=line
    )


def _node_findings(facts: GraphFacts) -> list[Finding]:
    by_key: dict[str, list[str]] = {}
    for node in sorted(facts.nodes):
        for key in facts.channels_written(writes(facts, node)):
            if _plain(facts, key):
                by_key.setdefault(key, []).append(node)
    out: list[Finding] = []
    for key, nodes in sorted(by_key.items()):
        best: tuple[Share, list[str], bool] | None = None  # the first step a run meets
        for node in nodes:
            share = facts.steps.repeated(node)
            if share is not None and share.before(best[0] if best else None):
                best = (share, [node], True)
        for a, b in itertools.combinations(nodes, 2):
            share = facts.steps.together(a, b)
            if share is not None and share.before(best[0] if best else None):
                best = (share, [a, b], False)
        if best is not None:
            out.append(_node_finding(facts, key, best[1], best[0], best[2]))
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """Errors for plain keys with writers that share a step; warnings where the doctor cannot
    tell; info when tool calls may not be parallel."""
    return _tool_findings(facts) + _node_findings(facts)

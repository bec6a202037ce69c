"""``unreduced-parallel-write`` (notebook 02): parallel writers of a key that has no reducer.

The tools of one reply run as one super-step, so two ``Command`` updates of a
plain key raise ``InvalidUpdateError`` after the tools ran; the same holds for
a node that ``Send`` starts several times, or two nodes one edge starts
together. ``write_todos`` is skipped: LangChain's ``TodoListMiddleware``
rejects parallel calls of it itself.
"""

from __future__ import annotations

from agentstate.doctor.findings import Finding, finding, info
from agentstate.doctor.graph_facts import GraphFacts, task_writes

CODE = "unreduced-parallel-write"
GUARDED = frozenset({"write_todos"})
FIX = "Declare it with a reducer, e.g. `Annotated[NotRequired[dict], merge_fields]`."


def _plain(facts: GraphFacts, key: str) -> bool:
    channel = facts.channels.get(key)
    return channel is not None and channel.kind == "plain"


def check(facts: GraphFacts) -> list[Finding]:
    """Errors for plain keys with parallel writers; info when calls may not be parallel."""
    writers: dict[str, list[str]] = {}
    for tool in facts.tools.values():
        if tool.library and tool.name in GUARDED:
            continue
        keys = set(tool.code.writes)
        if tool.name == "task":
            keys |= task_writes(facts)
        for key in keys:
            if _plain(facts, key):
                writers.setdefault(key, []).append(tool.name)
    parallel = facts.react_loop or any(t in facts.send_targets for t in facts.tool_nodes)
    out: list[Finding] = []
    for key, names in sorted(writers.items()):
        tools = ", ".join(f"`{n}`" for n in sorted(names))
        subject = f"{facts.prefix()}{key}"
        if parallel:
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{key}` has no reducer and {tools} write it through `Command`; the model "
                    "may call them in parallel, and two writes in one step raise "
                    f"InvalidUpdateError. {FIX}",
                )
            )
        else:
            out.append(
                info(
                    CODE,
                    subject,
                    f"`{key}` has no reducer and {tools} write it; the doctor cannot tell "
                    "whether this graph ever runs two of those calls in one step.",
                )
            )
    for name in sorted(facts.send_targets):
        node = facts.nodes.get(name)
        if node is None or node.code is None:
            continue
        for key in sorted(k for k in node.code.writes if _plain(facts, k)):
            out.append(
                finding(
                    CODE,
                    f"{facts.prefix()}{key}",
                    f"node `{name}` writes `{key}`, which has no reducer, and a conditional "
                    f"edge may `Send` to it several times in one step: InvalidUpdateError. {FIX}",
                )
            )
    for group in facts.siblings:
        by_key: dict[str, list[str]] = {}
        for name in sorted(group):
            node = facts.nodes.get(name)
            for key in node.code.writes if node is not None and node.code is not None else ():
                if _plain(facts, key):
                    by_key.setdefault(key, []).append(name)
        for key, names in sorted(by_key.items()):
            if len(names) > 1:
                out.append(
                    finding(
                        CODE,
                        f"{facts.prefix()}{key}",
                        f"nodes {', '.join(f'`{n}`' for n in names)} run in one step and both "
                        f"write `{key}`, which has no reducer: InvalidUpdateError. {FIX}",
                    )
                )
    return out

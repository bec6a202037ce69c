"""``subagent-drops-key`` (notebook 04): a subagent's tools write a key its schema lacks.

deepagents' ``task`` tool returns only keys the subagent declares, so the
write never reaches the parent: no error, the parent sees nothing.
"""

from __future__ import annotations

from agentstate.doctor.facts.graph_facts import GraphFacts
from agentstate.doctor.report.findings import Finding, finding

CODE = "subagent-drops-key"


def check(facts: GraphFacts) -> list[Finding]:
    """An error per (subagent, key) written by its tools and not declared by it."""
    parent = facts.parent
    if parent is None or facts.kind != "subagent":
        return []
    out: list[Finding] = []
    missing: dict[str, list[str]] = {}
    for tool in facts.tools.values():
        if tool.library:
            continue
        for key in tool.code.writes:
            if not facts.declares(key):
                missing.setdefault(key, []).append(tool.name)
    for key, tools in sorted(missing.items()):
        tools = sorted(tools)
        where = "the parent declares it" if parent.declares(key) else "the parent lacks it too"
        file, line = facts.where_tool(tools[0])
        out.append(
            finding(
                CODE,
                f"{facts.prefix()}{key}",
                f"subagent `{facts.name}`'s {', '.join(f'`{t}`' for t in tools)} "
                f"write `{key}`, which its state schema lacks ({where}): the write is dropped "
                "and the parent never sees it. Pass `create_deep_agent(..., state_schema=S)` "
                "or add `SharedStateMiddleware(S)` to the subagent.",
                file=file,
                line=line,
            )
        )
    return out

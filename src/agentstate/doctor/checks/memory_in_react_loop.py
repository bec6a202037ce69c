"""``memory-in-react-loop`` (notebook 06): long-term memory written by a model in a ReAct loop.

Whatever the model calls runs, so the store gets agent-authored text,
duplicates and wrong roles; the rules live only in the prompt. A tool-only
graph whose code decides what is written (notebook 06's capture graph) is
the fix. A memory tool is recognised by name (``add_entry``, ``put_context``,
``save_memory``...) or by writing LangGraph's store (``store.put``,
``runtime.store.aput``); without a ``ToolNode``, a node of the user's that
runs the model's tool calls and writes the store is the same hazard.
"""

from __future__ import annotations

import re

from agentstate.doctor.findings import Finding, finding, info
from agentstate.doctor.graph_facts import GraphFacts

CODE = "memory-in-react-loop"
MEMORY_TOOL = re.compile(
    r"^(add|save|store|put|write|upsert|insert|remember|append)_?"
    r"(entry|entries|memory|memories|context|fact|facts|to_memory)$"
    r"|^(remember|manage_memory|memorize)$"
)
ADVICE = "Let code decide the writes: a tool-only graph with a guard."


def is_memory_tool(name: str) -> bool:
    """True for tool names that write long-term memory."""
    return bool(MEMORY_TOOL.match(name))


def _tools(facts: GraphFacts) -> list[Finding]:
    names = sorted(
        t.name for t in facts.tools.values() if is_memory_tool(t.name) or t.code.store_writes
    )
    loop = any(node in facts.runners_in_loops() for node in facts.tool_nodes)
    out: list[Finding] = []
    for name in names:
        subject = f"{facts.prefix()}{name}"
        if loop:
            file, line = facts.where_tool(name)
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{name}` writes long-term memory and a model drives it in a ReAct loop: "
                    "whatever the model calls is stored (its own text, duplicates, wrong "
                    f"roles). {ADVICE}",
                    file=file,
                    line=line,
                )
            )
        else:
            out.append(
                info(
                    CODE,
                    subject,
                    f"`{name}` writes long-term memory from a ToolNode of a custom graph; "
                    "check that code, not the model, decides what is written.",
                )
            )
    return out


def _runner_nodes(facts: GraphFacts) -> list[Finding]:
    out: list[Finding] = []
    for name in sorted(facts.runners_in_loops() - set(facts.tool_nodes)):
        node = facts.nodes.get(name)
        if node is None or node.code is None or not node.code.store_writes:
            continue
        out.append(
            finding(
                CODE,
                f"{facts.prefix()}{name}",
                f"node `{name}` runs the model's tool calls and writes them to the store in a "
                "ReAct loop: whatever the model calls is stored (its own text, duplicates). "
                f"{ADVICE}",
                file=node.file,
                line=node.line,
            )
        )
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """A warning per memory tool (or tool-running node writing the store) in a ReAct loop; info
    for a memory tool in a custom graph's ToolNode that no model drives."""
    return _tools(facts) + _runner_nodes(facts)

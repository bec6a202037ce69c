"""``memory-in-react-loop`` (notebook 06): long-term memory written by a model in a ReAct loop.

Whatever the model calls runs, so the store gets agent-authored text,
duplicates and wrong roles; the rules live only in the prompt. A tool-only
graph whose code decides what is written (notebook 06's capture graph) is
the fix. A memory tool is recognised by name (``add_entry``, ``put_context``,
``save_memory``...) or by writing LangGraph's store.
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


def is_memory_tool(name: str) -> bool:
    """True for tool names that write long-term memory."""
    return bool(MEMORY_TOOL.match(name))


def check(facts: GraphFacts) -> list[Finding]:
    """A warning per memory tool in a ReAct loop; info for one in a custom graph's ToolNode."""
    names = sorted(
        t.name for t in facts.tools.values() if is_memory_tool(t.name) or t.code.store_writes
    )
    out: list[Finding] = []
    for name in names:
        subject = f"{facts.prefix()}{name}"
        if facts.react_loop:
            out.append(
                finding(
                    CODE,
                    subject,
                    f"`{name}` writes long-term memory and a model drives it in a ReAct loop: "
                    "whatever the model calls is stored (its own text, duplicates, wrong "
                    "roles). Let code decide the writes: a tool-only graph with a guard.",
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

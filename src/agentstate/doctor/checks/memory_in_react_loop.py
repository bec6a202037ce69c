"""``memory-in-react-loop`` (notebook 06): long-term memory written by a model in a ReAct loop.

Whatever the model calls runs, so the store gets agent-authored text,
duplicates and wrong roles; the rules live only in the prompt. A tool-only
graph whose code decides what is written (notebook 06's capture graph) is
the fix. A memory tool is recognised by name (``add_entry``, ``put_context``,
``save_memory``...) where its code cannot be read, or by writing LangGraph's
store with its own arguments (``store.put``, ``runtime.store.aput``); a store
write of something the model did not choose (a cached OAuth token) is not
memory, nor is a tool that only updates the graph's state. Without a
``ToolNode``, a node of the user's that writes to the store what a model node
decided (the reply's tool calls, or an action it names in another key, as a
MemGPT-style loop does), in a cycle with it, is the same hazard.
"""

from __future__ import annotations

import re

from agentstate.doctor.facts.graph_facts import GraphFacts, ToolFacts
from agentstate.doctor.report.findings import Finding, finding, info

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


def is_memory(tool: ToolFacts) -> bool:
    """A tool that writes long-term memory the model chose.

    Read from its code: a store write of its own arguments (followed into helpers). A
    store write of something else (a cached token) is memory only under a memory tool's
    name, where the doctor may have lost the argument on its way. By its name alone when
    its code is not the user's (an MCP tool) or shows no write at all; a tool whose code
    only updates the graph's state is not long-term memory, whatever its name.
    """
    code = tool.code
    if code.memory_writes:
        return True
    if not is_memory_tool(tool.name):
        return False
    state_only = (
        not tool.library
        and code.analysed
        and not code.store_writes
        and bool(code.writes - {"messages"})
    )
    return not state_only


def _tools(facts: GraphFacts) -> list[Finding]:
    names = sorted(t.name for t in facts.tools.values() if is_memory(t))
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


def _actors(facts: GraphFacts) -> dict[str, str]:
    """Nodes that write to the store what a model node's reply decided, in a cycle with it:
    the reply's tool calls (a node of the user's running them), or an action the model node
    writes to another key (a MemGPT-style loop). Node -> the model node."""
    found: dict[str, str] = {}
    for model, runner in facts.loops:
        found.setdefault(runner, model)
    for model in sorted(facts.model_nodes):
        written = facts.nodes[model].code
        keys = (written.writes - {"messages"}) if written is not None else set()
        for actor in sorted(facts.steps.successors.get(model, set())):
            node = facts.nodes.get(actor)
            if node is None or node.code is None or actor == model:
                continue
            if keys & node.code.reads and facts.leads_back(actor, model):
                found.setdefault(actor, model)
    return found


def _runner_nodes(facts: GraphFacts) -> list[Finding]:
    out: list[Finding] = []
    for name, model in sorted(_actors(facts).items()):
        if name in facts.tool_nodes:
            continue
        node = facts.nodes.get(name)
        if node is None or node.code is None or not node.code.memory_writes:
            continue
        out.append(
            finding(
                CODE,
                f"{facts.prefix()}{name}",
                f"node `{name}` writes to the store what model node `{model}` decided (its "
                "tool calls or the action it named), in a loop: whatever the model asks for "
                f"is stored (its own text, duplicates). {ADVICE}",
                file=facts.where_node(name)[0],
                line=facts.where_node(name)[1],
            )
        )
    return out


def check(facts: GraphFacts) -> list[Finding]:
    """A warning per memory tool (or tool-running node writing the store) in a ReAct loop; info
    for a memory tool in a custom graph's ToolNode that no model drives."""
    return _tools(facts) + _runner_nodes(facts)

"""``unseen-key-read`` (notebook 02): a router or a node reads a key whose value it never sees.

The mirror of ``undeclared-key``: there a write goes nowhere, here a read finds
nothing. Two ways, both certain from the graph alone:

- no node, tool or subgraph writes the key and the caller cannot give it (it
  is not declared, or not in the input schema): ``state.get("revisions_count",
  0)`` is ``0`` forever while the node writes ``plan_revision_count``, and the
  loop the router guards ends only at the recursion limit;
- the reader's input schema (what LangGraph infers from its state parameter's
  type, or was given) is narrower and lacks the key: LangGraph hands a router
  or a node only that schema's keys, so ``state.get("max_research_loops")`` is
  ``None`` even when the input set it.

The first is checked only where every writer's code is known (no library node,
no key written under a name built at run time), and only for what the function
itself reads (a helper's ``state`` may be another dict). A node started by
``Send`` reads its payload, not the state, and is left alone; so is a key of a
node's own typed schema that the graph's state lacks (a payload's key).
"""

from __future__ import annotations

from collections.abc import Iterator

from agentstate.doctor.facts.code_source import is_library
from agentstate.doctor.facts.graph_facts import GraphFacts
from agentstate.doctor.facts.key_kinds import schema_hints
from agentstate.doctor.facts.locate import function_of, locate
from agentstate.doctor.facts.subgraphs import io_keys, writes
from agentstate.doctor.facts.tool_facts import CodeFacts, function_facts
from agentstate.doctor.report.findings import Finding, finding

CODE = "unseen-key-read"


def _readers(facts: GraphFacts) -> Iterator[tuple[str, object, CodeFacts, object]]:
    """(label, function, what it reads, the schema LangGraph hands it) of each router and each
    node of the user's."""
    builder = facts.graph.builder
    for source, branches in sorted(builder.branches.items()):
        for branch in branches.values():
            fn = getattr(branch.path, "func", None) or getattr(branch.path, "afunc", None)
            plain = function_of(fn)
            if fn is None or plain is None or is_library(plain):
                continue
            label = f"router `{plain.__name__}` (after `{source}`)"
            yield label, fn, function_facts(fn, node=True), branch.input_schema
    for name, node in sorted(facts.nodes.items()):
        if node.code is None or node.subgraph:
            continue
        if facts.steps.sends(name):
            continue  # a Send payload is its state: not the graph's keys
        spec = builder.nodes[name]
        fn = getattr(spec.runnable, "func", None) or getattr(spec.runnable, "afunc", None)
        yield f"node `{name}`", fn, node.code, spec.input_schema


def _schema_keys(schema: object, state_schema: object) -> tuple[str, set[str]] | None:
    """The name and keys of the schema a reader is handed, when it is not the graph's state
    (None: the whole state, or a schema the doctor cannot read)."""
    if schema is None or schema is state_schema or not isinstance(schema, type):
        return None
    keys = set(schema_hints(schema))
    return (schema.__name__, keys) if keys else None


def _writers_known(facts: GraphFacts) -> bool:
    """True when every node's and tool's writes are read from code (nothing unknown)."""
    for name, node in facts.nodes.items():
        if name in facts.tool_nodes or node.subgraph:
            continue
        if node.code is None or not node.code.analysed:
            return False
        if any(d.startswith("writes") for d in node.code.dynamic):
            return False
    return all(
        t.code.analysed and not any(d.startswith("writes") for d in t.code.dynamic)
        for t in facts.tools.values()
    )


def _written(facts: GraphFacts) -> set[str]:
    keys: set[str] = set()
    for name in facts.nodes:
        keys |= writes(facts, name)
    for tool in facts.tools.values():
        keys |= tool.code.writes
    return keys


def check(facts: GraphFacts) -> list[Finding]:
    """An error per (reader, key) whose value the reader can never see."""
    if facts.kind == "subagent" or facts.root:
        return []
    inputs, _ = io_keys(facts.graph)
    known = _writers_known(facts)
    written = _written(facts) | inputs
    out: list[Finding] = []
    state_schema = facts.graph.builder.state_schema
    state_keys = set(schema_hints(state_schema))
    for label, fn, code, handed in _readers(facts):
        reads = code.own_reads - code.state_sets
        schema = _schema_keys(handed, state_schema)
        own = schema[1] - state_keys if schema is not None else set()
        file, line = locate(fn)
        for key in sorted(reads):
            if schema is not None and key not in schema[1]:
                why = (
                    f"its input schema is `{schema[0]}`, which lacks `{key}`: "
                    f"LangGraph hands it only that schema's keys, so it never sees `{key}`"
                )
                if facts.declares(key):
                    why += " even when the graph holds it"
                fix = f"Type the parameter with the graph's state, or add `{key}` to `{schema[0]}`."
            elif known and key not in written and key not in own:  # own: a Send payload's
                where = "not declared" if not facts.declares(key) else "not an input key"
                why = (
                    f"no node, tool or subgraph writes `{key}` and the caller cannot give it "
                    f"({where}), so the read always finds nothing (its default, or KeyError)"
                )
                fix = "Read the key its writer writes, or write this one."
            else:
                continue
            out.append(
                finding(
                    CODE,
                    f"{facts.prefix()}{key}",
                    f"{label} reads `{key}`, but {why}. {fix}",
                    file=file,
                    line=line,
                )
            )
    return out

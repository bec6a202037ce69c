"""``same-batch-read`` (notebook 03): a tool reads a key that other tools of the agent write.

In the writers' batch the reader sees the state from before it, whatever
order the calls finish in; the next model step sees everything. A
``TurnCacheMiddleware`` whose writers, readers and key cover the pair closes
the gap. ``messages`` is never a concern and ``files`` is left to
``file-read-modify-write`` (every deep agent has ``read_file`` and
``write_file``). A pair of the libraries' own tools is left alone (recognised
by their code, not their names): a user's own ``write_todos``/``read_todos``
pair is checked like any other.
"""

from __future__ import annotations

from agentstate.core.turn_cache import TurnCacheMiddleware
from agentstate.doctor.facts.graph_facts import GraphFacts, task_writes
from agentstate.doctor.report.findings import Finding, finding, info, listed, they

CODE = "same-batch-read"
IGNORED = frozenset({"messages", "files"})


def _covered(facts: GraphFacts, writer: str, reader: str, key: str) -> bool:
    for cache in facts.middleware_of(TurnCacheMiddleware):
        assert isinstance(cache, TurnCacheMiddleware)
        if cache.key == key and writer in cache.writers and reader in cache.readers:
            return True
    return False


def blind_pairs(facts: GraphFacts) -> dict[tuple[str, str], list[str]]:
    """(reader, key) -> the writers of ``key`` in the same agent that no turn cache covers."""
    writers: dict[str, set[str]] = {}
    for tool in facts.tools.values():
        for key in tool.code.writes - IGNORED:
            writers.setdefault(key, set()).add(tool.name)
    pairs: dict[tuple[str, str], list[str]] = {}
    for reader in facts.tools.values():
        for key in reader.code.reads - IGNORED:
            blind = sorted(
                w
                for w in writers.get(key, set())
                if w != reader.name
                and not (reader.library and facts.tools[w].library)
                and not _covered(facts, w, reader.name, key)
            )
            if blind:
                pairs[(reader.name, key)] = blind
    return pairs


def _one_call(facts: GraphFacts) -> str | None:
    """The setting that keeps every tool batch of this graph to one call (None if none does):
    each tool node is driven only by models bound to one tool call per reply."""
    settings = [
        facts.one_call_for(node) if facts.steps.repeated(node) is None else None
        for node in facts.tool_nodes
    ]
    return settings[0] if settings and all(settings) else None


def check(facts: GraphFacts) -> list[Finding]:
    """A warning per key whose readers share a batch with uncovered writers; info for ``task``.

    In a subagent, a pair the parent already reports is not repeated, and a pair
    the parent's turn cache covers is ``info``: deepagents' general-purpose
    subagent copies the parent's tools but not its ``TurnCacheMiddleware``.
    """
    if not facts.tool_nodes:
        return []
    parent = facts.parent
    pairs = blind_pairs(facts)
    parent_pairs = blind_pairs(parent) if parent is not None else {}
    warn: dict[str, dict[str, list[str]]] = {}
    note: dict[str, dict[str, list[str]]] = {}
    for (reader, key), writers in pairs.items():
        if parent is not None and (reader, key) in parent_pairs:
            continue  # the parent's finding says it
        bucket = note if parent is not None and reader in parent.tools else warn
        bucket.setdefault(key, {})[reader] = writers
    out: list[Finding] = []
    one_call = _one_call(facts)
    for key, readers in sorted(warn.items()):
        writers = sorted({w for ws in readers.values() for w in ws})
        if one_call is not None:
            out.append(
                info(
                    CODE,
                    f"{facts.prefix()}{key}",
                    f"{they(sorted(readers), 'reads', 'read')} `{key}`, which "
                    f"{they(writers, 'writes', 'write')}, but the model makes one tool call per "
                    f"reply ({one_call}), so a reader never shares its writers' batch.",
                )
            )
            continue
        out.append(
            finding(
                CODE,
                f"{facts.prefix()}{key}",
                f"{they(sorted(readers), 'reads', 'read')} `{key}`, which "
                f"{they(writers, 'writes', 'write')}; called in the writers' batch a reader "
                "sees the state from before it. Add "
                f"`TurnCacheMiddleware(writers={writers}, readers={sorted(readers)}, "
                f"key='{key}')`.",
                file=facts.where_tool(sorted(readers)[0])[0],
                line=facts.where_tool(sorted(readers)[0])[1],
            )
        )
    for key, readers in sorted(note.items()):
        out.append(
            info(
                CODE,
                f"{facts.prefix()}{key}",
                f"subagent `{facts.name}` has {listed(sorted(readers))} and the writers of `{key}` "
                "without the turn cache that covers them in the parent: add it to the "
                "subagent's middleware if the subagent reads in the writers' batch.",
            )
        )
    for tool in sorted(facts.tools.values(), key=lambda t: t.name):
        dynamic = [d for d in tool.code.dynamic if d.startswith("reads")]
        if dynamic and not tool.library:
            out.append(
                info(
                    CODE,
                    f"{facts.prefix()}{tool.name}",
                    f"`{tool.name}` {dynamic[0]}; the doctor cannot tell whether its writers "
                    "share its batch.",
                )
            )
    delegated = task_writes(facts) - IGNORED if "task" in facts.tools else set()
    for key in sorted(delegated):
        readers_of = sorted(
            t.name for t in facts.tools.values()
            if key in t.code.reads and not _covered(facts, "task", t.name, key)
        )  # fmt: skip
        if readers_of:
            out.append(
                info(
                    CODE,
                    f"{facts.prefix()}{key}",
                    f"{they(readers_of, 'reads', 'read')} `{key}`, which a subagent may write "
                    "through `task`; in the batch of that `task` call a reader sees the state "
                    "from before it (the next step sees it).",
                )
            )
    return out

"""``file-read-modify-write`` (notebook 01): a tool reads a file and writes the same path.

Parallel calls each read the file from before their batch and write the whole
file back: one write survives (the last call of the reply). Only a read that
runs before the write counts (deepagents' ``files`` are written when the tool
returns, so every read of them does; a file on disk or a backend's written and
then read back is no read-modify-write), and a read in a helper counts where
the helper is called, with what the tool hands it. That holds for
deepagents' ``files`` state, a deepagents backend, and a plain file on disk
(``open(p)`` or ``p.open()``/``p.read_text()``, then ``open(p, "w")`` or
``p.write_text(...)``: LangGraph's hierarchical agent teams' ``edit_document``);
a path is compared as its code, so ``WORKING_DIRECTORY / file_name`` read and
written by one call is one path. An append (``"a"``) keeps every write.

deepagents' own ``write_file``/``edit_file``/``delete`` lose parallel mutations of
one path before deepagents 0.7.16 and refuse them from 0.7.16 on (the matrix,
:mod:`agentstate.doctor.facts.releases`): they are reported with the installed release
below it, and skipped from it on.
"""

from __future__ import annotations

from agentstate.doctor.facts import releases
from agentstate.doctor.facts.code_source import tool_functions, top_package
from agentstate.doctor.facts.graph_facts import GraphFacts, ToolFacts
from agentstate.doctor.report.findings import Finding, finding, info, listed

CODE = "file-read-modify-write"
GUARD = releases.BUILTIN_PARALLEL_EDIT


def _runtime(path: str) -> bool:
    return path.startswith("<expr")


def check(facts: GraphFacts) -> list[Finding]:
    """One error per (tool, path) read and written back; info where paths are run-time values;
    one error for the library's own file tools where the installed release lacks its guard."""
    out: list[Finding] = []
    for tool in facts.tools.values():
        if tool.library:
            continue
        code = tool.code
        for where, pairs in (
            ("files state", {(r, w) for r in code.file_reads for w in code.file_writes}),
            ("backend", code.pairs("backend")),
            ("disk", code.pairs("disk")),
        ):
            both = {r for r, w in pairs if r == w}
            for path in sorted(both):
                shown = path if not _runtime(path) else f"{path[6:-1]} (one run-time path)"
                out.append(
                    finding(
                        CODE,
                        f"{facts.prefix()}{tool.name}:{path if not _runtime(path) else shown}",
                        f"`{tool.name}` reads {shown} from the {where} and writes it back: "
                        "parallel calls each read the old file and only one write survives. "
                        "Keep the data in a state key with a merging reducer, or one file "
                        "per item.",
                        file=facts.where_tool(tool.name)[0],
                        line=facts.where_tool(tool.name)[1],
                    )
                )
            reads, writes = {r for r, _ in pairs}, {w for _, w in pairs}
            if pairs and not both and any(_runtime(p) for p in reads | writes):
                out.append(
                    info(
                        CODE,
                        f"{facts.prefix()}{tool.name}",
                        f"`{tool.name}` reads and writes {where} paths built at run time "
                        f"(reads {', '.join(sorted(reads))}; writes {', '.join(sorted(writes))}); "
                        "the doctor cannot tell whether they are the same path.",
                    )
                )
    out.extend(_library_file_tools(facts))
    return out


def _guarded(tool: ToolFacts) -> bool:
    """One of the file tools the library's guard covers, the library's own (by its code)."""
    functions = tool_functions(tool.tool)
    return (
        tool.library
        and tool.name in GUARD.tools
        and bool(functions)
        and all(top_package(getattr(fn, "__func__", fn)) == "deepagents" for fn in functions)
    )


def _library_file_tools(facts: GraphFacts) -> list[Finding]:
    """deepagents' own file tools, on a release before the one that refuses parallel mutations."""
    names = [n for n in GUARD.tools if n in facts.tools and _guarded(facts.tools[n])]
    if not names:
        return []
    installed = releases.installed_version(GUARD.distribution)
    subject = f"{facts.prefix()}{names[0]}"
    try:
        applies = installed is None or GUARD.applies(installed)
        known = installed is not None
    except ValueError:  # a release string with no release number in it
        applies, known = True, False
    if not applies:
        return []
    if not known:
        return [
            info(
                CODE,
                subject,
                f"the graph uses {GUARD.distribution}'s own {listed(names)}, but the installed "
                f"{GUARD.distribution} release cannot be read ({installed or 'no metadata'}), so "
                f"the doctor cannot tell whether they lose parallel changes of one path (before "
                f"{GUARD.first_changed}) or refuse them; see {GUARD.page}.",
            )
        ]
    how = (
        "each `edit_file` reads the file as it was before the reply and writes it back whole"
        if "edit_file" in names
        else "each call replaces the whole file"
    )
    return [
        finding(
            CODE,
            subject,
            f"{GUARD.distribution} {installed} (installed) runs {listed(names)} calls of one "
            f"reply on one path side by side: {how}, so one change survives while every call "
            f"reports success. {GUARD.distribution} {GUARD.first_changed} and later refuse the "
            f"second change of a path in one reply (pip install '{GUARD.distribution}"
            f">={GUARD.first_changed}'); which releases: {GUARD.page}.",
        )
    ]

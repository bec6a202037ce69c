"""``file-read-modify-write`` (notebook 01): a custom tool reads a file and writes the same path.

Parallel calls each read the file from before their batch and write the whole
file back: one write survives (the last call of the reply). That holds for
deepagents' ``files`` state, a deepagents backend, and a plain file on disk
(``open(p)`` or ``p.open()``/``p.read_text()``, then ``open(p, "w")`` or
``p.write_text(...)``: LangGraph's hierarchical agent teams' ``edit_document``);
a path is compared as its code, so ``WORKING_DIRECTORY / file_name`` read and
written by one call is one path. An append (``"a"``) keeps every write.
deepagents 0.7.32's own ``write_file``/``edit_file``/``delete`` refuse a second
mutation of one path in one reply, so only the user's own tools are checked.
"""

from __future__ import annotations

from agentstate.doctor.findings import Finding, finding, info
from agentstate.doctor.graph_facts import GraphFacts

CODE = "file-read-modify-write"


def _runtime(path: str) -> bool:
    return path.startswith("<expr")


def check(facts: GraphFacts) -> list[Finding]:
    """One error per (tool, path) read and written back; info where paths are run-time values."""
    out: list[Finding] = []
    for tool in facts.tools.values():
        if tool.library:
            continue
        code = tool.code
        for where, reads, writes in (
            ("files state", code.file_reads, code.file_writes),
            ("backend", code.backend_reads, code.backend_writes),
            ("disk", code.disk_reads, code.disk_writes),
        ):
            both = reads & writes
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
                        file=tool.file,
                        line=tool.line,
                    )
                )
            if reads and writes and not both and any(_runtime(p) for p in reads | writes):
                out.append(
                    info(
                        CODE,
                        f"{facts.prefix()}{tool.name}",
                        f"`{tool.name}` reads and writes {where} paths built at run time "
                        f"(reads {', '.join(sorted(reads))}; writes {', '.join(sorted(writes))}); "
                        "the doctor cannot tell whether they are the same path.",
                    )
                )
    return out

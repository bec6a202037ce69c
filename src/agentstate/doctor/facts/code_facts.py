"""What one function (and the helpers it calls) reads and writes: the scan's result.

A plain record the checks read (``CodeFacts``), kept apart from the scan that fills
it (:mod:`.scan`) so a check imports what it reads without the walk. Its ordered
``accesses`` tell a read-modify-write of one path from a file written then read
back (notebook 04); its keys serve the state checks of notebooks 01-03.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Position = tuple[int, ...]
"""Where an access runs: ``(line, column)`` of the call's end (arguments run before the
call), a helper's own positions appended to its call's."""
Access = tuple[Position, str, str, bool]
"""``(position, "disk" or "backend", path, written)``: one read or whole write of a path."""
Role = tuple[str, str, str]
"""``(parameter, role, value)``: what a helper's parameter is given at one call: ``state``,
``files``, ``backend``, ``store``, or ``path`` (the caller's path, as its code)."""


@dataclass
class CodeFacts:
    """What one function (and the helpers it calls) reads and writes."""

    writes: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)
    file_reads: set[str] = field(default_factory=set)
    """Paths of ``files`` read: a literal path, or ``<expr ...>`` for a run-time path."""
    file_writes: set[str] = field(default_factory=set)
    backend_reads: set[str] = field(default_factory=set)
    backend_writes: set[str] = field(default_factory=set)
    store_writes: bool = False
    """Writes LangGraph's long-term store (``store.put``/``runtime.store.aput``)."""
    memory_writes: bool = False
    """Writes the store with what the model chose: a tool's own arguments, or (in a node)
    what it read from the state, such as the reply's tool calls."""
    disk_reads: set[str] = field(default_factory=set)
    """Paths read from disk (``open(p)``, ``p.open()``, ``p.read_text()``), as their code."""
    disk_writes: set[str] = field(default_factory=set)
    """Paths written whole to disk (``open(p, "w")``, ``p.write_text(...)``), as their code."""
    echoes: set[str] = field(default_factory=set)
    """Keys a node returns with the value it was given under the same key in them
    (``{"q": [state["q"]]}``): a ``Send`` worker handing its item back."""
    accesses: list[Access] = field(default_factory=list)
    """Backend and disk reads and whole writes in the order they run (helpers' at their call)."""
    pairs_apart: set[tuple[str, str, str]] = field(default_factory=set)
    """``(where, read path, written path)`` of :meth:`pairs` in another function of the same
    tool (its sync and async functions are separate runs: their orders do not interleave)."""
    own_reads: set[str] = field(default_factory=set)
    """The keys the function's own body reads (``reads`` adds its helpers'): a helper's
    ``state`` may be another dict."""
    state_sets: set[str] = field(default_factory=set)
    """Keys the function sets on the state object it was given (``state["k"] = v``)."""
    dynamic: list[str] = field(default_factory=list)
    """What could not be told (a key or path built at run time, an unreadable source)."""
    unread: set[str] = field(default_factory=set)
    """The functions (its own or a helper's) whose source could not be read, each with why
    (:func:`unreadable`): what they do is not checked."""
    analysed: bool = True

    def merge(self, other: CodeFacts, at: Position | None = ()) -> None:
        """Add what a helper does to what its caller does: its accesses run at ``at`` (``()``:
        where they are; ``None``: apart, another function of the same tool)."""
        if at is None:
            self.pairs_apart |= {
                (where, read, written)
                for where in ("disk", "backend")
                for read, written in other.pairs(where)
            }
        else:
            self.accesses.extend((at + pos, w, p, write) for pos, w, p, write in other.accesses)
            self.pairs_apart |= other.pairs_apart
        self.writes |= other.writes
        self.reads |= other.reads
        self.file_reads |= other.file_reads
        self.file_writes |= other.file_writes
        self.backend_reads |= other.backend_reads
        self.backend_writes |= other.backend_writes
        self.store_writes = self.store_writes or other.store_writes
        self.memory_writes = self.memory_writes or other.memory_writes
        self.disk_reads |= other.disk_reads
        self.disk_writes |= other.disk_writes
        self.echoes |= other.echoes
        self.state_sets |= other.state_sets
        self.dynamic.extend(d for d in other.dynamic if d not in self.dynamic)
        self.unread |= other.unread

    def pairs(self, where: str) -> set[tuple[str, str]]:
        """``(read path, written path)`` of every ``where`` (``disk`` or ``backend``) read that
        runs before a write: a read-modify-write where the two paths are one. A path written
        and then read back is no pair."""
        read: set[str] = set()
        found: set[tuple[str, str]] = set()
        for _, w, path, written in sorted(self.accesses):
            if w != where:
                continue
            if written:
                found |= {(r, path) for r in read}
            else:
                read.add(path)
        return found | {(r, p) for w, r, p in self.pairs_apart if w == where}


Memo = dict[tuple[int, int, bool, frozenset[str], frozenset[Role]], CodeFacts]

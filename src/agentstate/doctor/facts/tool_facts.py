"""What a tool (or a graph node) reads and writes, read from its own source with ``ast``.

The doctor never runs a tool: it parses the function behind it and the helpers
it calls (closure variables, globals, methods of the objects it closes over,
as the RDS tools of notebooks 01-04 call their storage), and collects

- the state keys written through ``Command(update={...})`` (and, for a graph
  node, through the dict it returns), following a name or a helper's return
  value to the dict literal that builds it;
- the state keys read as ``state[...]``, ``state.get(...)`` or
  ``runtime.state[...]`` (an injected ``state`` parameter counts too);
- the paths of deepagents' ``files`` it reads and writes, and the paths it
  reads and writes through a backend (``backend.read``/``backend.write``) or
  on disk, so a read-modify-write of one path can be told apart from two
  paths; backend and disk accesses are kept in the order they run, so a file
  written and then read back is not a read-modify-write.

A helper is followed with what its caller hands it: a parameter given the
state, deepagents' ``files``, a backend, the store or a path is that, in the
helper, as it is in the caller. A node's return is followed into the helper
that builds it, called or awaited (``return await self.helper(state)``,
``{**await helper(state)}``, the helpers of an ``asyncio.gather``).

Reading the function's source (the ``def`` behind a tool, a lambda, a method,
the names it sees) is :mod:`.code_source`; the walk is :mod:`.scan`, each kind of
fact its own reader (``reads_*``); this module is the entry point and its cache.
A key or path built at run time is recorded as *dynamic*: the checks say so
as ``info``, never as an alarm. Taught in notebooks 01-04 (and used for 06).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable

from langchain_core.tools import BaseTool

from agentstate.doctor.facts.code_facts import CodeFacts, Memo
from agentstate.doctor.facts.code_source import tool_functions, unwrap
from agentstate.doctor.facts.reads_files import backend_protocol
from agentstate.doctor.facts.scan import Scanner

__all__ = ["CodeFacts", "Memo", "backend_protocol", "function_facts", "tool_facts"]


_FACTS_CACHE: dict[tuple[object, ...], tuple[CodeFacts, tuple[object, ...]]] = {}
"""Scans by :func:`_cache_key`, each with what its key names by identity (kept alive, so
an identity is never reused for another object while the entry exists)."""
_CACHE_LIMIT = 4096
_VALUES = (str, int, float, bool, type(None))


def _cache_key(fn: types.FunctionType, bound: object, node: bool) -> tuple[object, ...]:
    """What a scan depends on: the code, and what it closes over and is bound to.

    Plain values count by value, functions by identity (a helper is followed),
    other objects by type (their methods are followed through the class): so
    the same tool built again for another graph is read once.
    """

    def part(value: object) -> object:
        if isinstance(value, _VALUES):
            return value
        if isinstance(value, types.FunctionType | types.MethodType | functools.partial):
            return id(value)
        return type(value)

    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(part(cell.cell_contents))
        except ValueError:
            cells.append(None)
    return (fn.__code__, node, part(bound), *cells)


def _cells(fn: types.FunctionType) -> list[object]:
    out: list[object] = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            continue
    return out


def function_facts(
    fn: Callable[..., object], *, node: bool = False, memo: Memo | None = None
) -> CodeFacts:
    """What ``fn`` reads and writes; ``node=True`` also counts the dict it returns as writes.

    ``memo`` shares helper scans between the tools of one graph; a scan is also
    kept across graphs for the same code over the same kind of closure.
    """
    plain, bound = unwrap(fn)
    if plain is None:
        facts = CodeFacts(analysed=False)
        facts.dynamic.append(f"{getattr(fn, '__name__', fn)!s}: not a Python function")
        facts.unread.add(f"`{getattr(fn, '__name__', type(fn).__name__)}` (not a Python function)")
        return facts
    key = _cache_key(plain, bound, node)
    entry = _FACTS_CACHE.get(key)
    if entry is not None:
        cached = entry[0]
    else:
        scanner = Scanner(
            plain,
            bound,
            node_mode=node,
            depth=0,
            seen={plain.__code__},
            memo={} if memo is None else memo,
        )
        cached = scanner.scan()
        if len(_FACTS_CACHE) >= _CACHE_LIMIT:
            _FACTS_CACHE.clear()
        _FACTS_CACHE[key] = (cached, (plain, bound, *_cells(plain)))
    copy = CodeFacts(analysed=cached.analysed)
    copy.merge(cached)
    copy.own_reads = set(cached.own_reads)
    return copy


def tool_facts(tool: BaseTool, memo: Memo | None = None) -> CodeFacts:
    """What a tool reads and writes (its sync and async functions together)."""
    facts = CodeFacts()
    functions = tool_functions(tool)
    if not functions:
        facts.analysed = False
        facts.dynamic.append(f"{tool.name}: no Python function found behind the tool")
        facts.unread.add(f"`{tool.name}` (no Python function behind the tool)")
    for fn in functions:
        found = function_facts(fn, memo=memo)
        facts.merge(found, at=None if len(functions) > 1 else ())
    return facts

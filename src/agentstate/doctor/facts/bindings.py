"""Where the reader's code declares a subagent and binds tools whose code is not the reader's.

A finding lands on a line of the reader's project: a tool of the reader's on its
``def``, but a tool from MCP (``langchain_mcp_adapters``) or any package in
site-packages on the line of the graph that binds it (the ``tools=`` of
``create_agent``/``create_deep_agent``, ``ToolNode([...])`` or ``bind_tools``),
and a deepagents subagent on its spec (the dict literal with its ``"name"``), or,
for the general-purpose subagent deepagents adds itself, on the
``create_deep_agent`` call. The compiled graph does not record where it was built,
so the reader's source files are searched: those of the graph's own functions
(nodes, tools, middleware, state schemas) and a module that holds the graph as a
global. Used by every check that reports a tool or a subagent (notebooks 01-06).
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agentstate.doctor.facts import sources
from agentstate.doctor.facts.locate import NOWHERE, Place

BINDERS = frozenset(
    {"create_agent", "create_deep_agent", "create_react_agent", "ToolNode", "bind_tools"}
)
"""Calls that bind tools to a graph or a model."""
LOADERS = frozenset({"get_tools", "load_mcp_tools", "aget_tools"})
"""Calls that fetch tools from elsewhere (MCP): the binder near one binds what it returns."""

_PACKAGES = tuple(
    {str(Path(sysconfig.get_path(k)).resolve()) for k in ("purelib", "platlib", "stdlib")}
    | {str(Path(__file__).resolve().parents[2])}  # this package, even installed editable
)


@functools.lru_cache(maxsize=8192)
def installed(file: str | None) -> bool:
    """True for a file of an installed package (site-packages, dist-packages, the standard
    library), not the reader's."""
    if not file:
        return False
    parts = Path(file).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    try:
        resolved = str(Path(file).resolve())
    except OSError:
        return False
    return any(resolved.startswith(p + os.sep) for p in _PACKAGES)


def own_file(obj: object) -> str | None:
    """The readable source file of the reader's object (a function, class or module), else None."""
    target = inspect.unwrap(obj) if callable(obj) else obj
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    file: str | None = code.co_filename if code is not None else None
    if file is None:
        try:
            file = inspect.getsourcefile(target)  # type: ignore[arg-type]
        except (TypeError, OSError):
            return None
    if not file or file.startswith("<") or installed(file) or not sources.readable(file):
        return None
    return os.path.abspath(file)


@functools.lru_cache(maxsize=256)
def _tree(file: str, stamp: float | str) -> ast.Module | None:
    text = sources.read(file)
    try:
        return ast.parse(text, file) if text is not None else None
    except (SyntaxError, ValueError):
        return None


def tree(file: str) -> ast.Module | None:
    """``file`` parsed (once per modification time), None when it cannot be."""
    try:
        return _tree(file, sources.stamp(file))
    except OSError:
        return None


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def global_binding(*graphs: object) -> tuple[str, ast.Call] | None:
    """``(file, call)`` of ``name = <call>`` in a loaded module of the reader's holding one of
    ``graphs`` (``graph = create_agent(...)`` that ``langgraph.json`` names)."""
    wanted = {id(g) for g in graphs}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.endswith(".py") or installed(file):
            continue
        names = [k for k, v in list(getattr(module, "__dict__", {}).items()) if id(v) in wanted]
        if not names or not os.path.isfile(file):
            continue
        parsed = tree(file)
        if parsed is None:
            continue
        for node in parsed.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                    return os.path.abspath(file), node.value
    return None


def _tools_line(call: ast.Call) -> int:
    """The line of a binder call's tools (its ``tools=`` or second argument), else the call's."""
    for kw in call.keywords:
        if kw.arg == "tools":
            return kw.value.lineno
    if _name(call.func) in ("ToolNode", "bind_tools") and call.args:
        return call.args[0].lineno
    if len(call.args) > 1:
        return call.args[1].lineno
    return call.lineno


def _scopes(module: ast.Module) -> Iterator[ast.AST]:
    """The module, then every function in it: a binder and a loader meet in one of them."""
    yield module
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _calls(scope: ast.AST, names: frozenset[str]) -> list[ast.Call]:
    found: list[ast.Call] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # its own scope
        if isinstance(node, ast.Call) and _name(node.func) in names:
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda c: (c.lineno, c.col_offset))


@dataclass(frozen=True)
class _Index:
    """What one source file declares, read once per modification time."""

    binders: tuple[tuple[str, int, bool], ...]
    """``(call name, line of its tools, a scope that also loads tools from MCP)``."""
    specs: dict[str, tuple[int, int]]
    """Subagent name -> ``(0 with a "description" else 1, line of its "name")``."""


@functools.lru_cache(maxsize=256)
def _indexed(file: str, stamp: float | str) -> _Index | None:
    parsed = tree(file)
    if parsed is None:
        return None
    binders: list[tuple[str, int, bool]] = []
    for scope in _scopes(parsed):
        calls = _calls(scope, BINDERS)
        loads = bool(calls) and bool(_calls(scope, LOADERS))
        binders += [(_name(c.func), _tools_line(c), loads) for c in calls]
    specs: dict[str, tuple[int, int]] = {}
    for node in ast.walk(parsed):
        fields: dict[str, ast.expr] = {}
        if isinstance(node, ast.Dict):
            fields = {
                k.value: v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
        elif isinstance(node, ast.Call):
            fields = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        given = fields.get("name")
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            found = (0 if "description" in fields else 1, given.lineno)
            specs[given.value] = min(specs.get(given.value, found), found)
    return _Index(tuple(binders), specs)


def index(file: str) -> _Index | None:
    """What ``file`` declares (None when it cannot be read)."""
    try:
        return _indexed(file, sources.stamp(file))
    except OSError:
        return None


def binder(
    files: Iterable[str], graphs: tuple[object, ...], prefer: frozenset[str] = BINDERS
) -> Place:
    """Where the reader's code binds the graph's tools.

    The module global holding the graph (``graphs``: as given and compiled) when a binder
    call builds it, else a binder call of ``files`` (and that module's) in a scope that also
    loads tools from MCP, else the only binder call of ``prefer`` there is; ``(None, None)``
    when none can be told.
    """
    files = set(files)
    found = global_binding(*graphs)
    if found is not None:
        if _name(found[1].func) in prefer:  # graph = create_agent(model, tools)
            return found[0], _tools_line(found[1])
        files.add(found[0])  # graph = asyncio.run(make_graph()): search its module
    with_loader: list[tuple[str, int]] = []
    every: list[tuple[str, int]] = []
    for file in sorted(files):
        known = index(file)
        for name, line, loads in known.binders if known is not None else ():
            if name in prefer:
                every.append((file, line))
                if loads:
                    with_loader.append((file, line))
    chosen = with_loader or (every if len(every) == 1 else [])
    return chosen[0] if chosen else NOWHERE


def subagent_spec(files: Iterable[str], name: str) -> Place:
    """Where a subagent called ``name`` is declared: a dict literal whose ``"name"`` is it (one
    with a ``"description"`` first), or a ``SubAgent(name=...)``/``CompiledSubAgent`` call."""
    best: tuple[int, str, int] | None = None
    for file in sorted(set(files)):
        known = index(file)
        if known is None or name not in known.specs:
            continue
        rank, line = known.specs[name]
        if best is None or (rank, file, line) < best:
            best = (rank, file, line)
    return (best[1], best[2]) if best is not None else NOWHERE

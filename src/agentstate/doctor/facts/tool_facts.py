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
the names it sees) is :mod:`.code_source`; this module walks what it read.
A key or path built at run time is recorded as *dynamic*: the checks say so
as ``info``, never as an alarm. Taught in notebooks 01-04 (and used for 06).
"""

from __future__ import annotations

import ast
import asyncio
import copy
import functools
import inspect
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from agentstate._extras import missing
from agentstate.doctor.facts.code_source import (
    expr_text,
    function_ast,
    is_library,
    is_stdlib,
    namespace,
    own_returns,
    tool_functions,
    unreadable,
    unwrap,
)

INJECTED_NAMES = frozenset(
    {"self", "cls", "runtime", "config", "store", "state", "tool_call_id", "run_manager",
     "callbacks"}
)  # fmt: skip
INJECTED_TYPES = ("Injected", "ToolRuntime", "Runtime", "RunnableConfig", "Store", "Callback")
"""What marks a tool parameter as the runtime's, not the model's."""

BACKEND_READS = frozenset({"read", "aread", "download_files", "adownload_files"})
BACKEND_WRITES = frozenset({"write", "awrite", "edit", "aedit", "upload_files", "aupload_files"})
MAX_DEPTH = 5

Position = tuple[int, ...]
"""Where an access runs: ``(line, column)`` of the call's end (arguments run before the
call), a helper's own positions appended to its call's."""
Access = tuple[Position, str, str, bool]
"""``(position, "disk" or "backend", path, written)``: one read or whole write of a path."""
Role = tuple[str, str, str]
"""``(parameter, role, value)``: what a helper's parameter is given at one call: ``state``,
``files``, ``backend``, ``store``, or ``path`` (the caller's path, as its code)."""


@functools.cache
def backend_protocol() -> type | None:
    """deepagents' ``BackendProtocol``; ``None`` without the ``deepagents`` extra (no backends)."""
    if missing("deepagents"):
        return None
    from deepagents.backends.protocol import BackendProtocol

    return BackendProtocol


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


class _Scanner:
    """One function's scan; helpers get their own scanner and are merged in."""

    def __init__(
        self,
        fn: types.FunctionType,
        bound: object,
        *,
        node_mode: bool,
        depth: int,
        seen: set[types.CodeType],
        memo: Memo,
        seeds: frozenset[str] | None = None,
        roles: frozenset[Role] = frozenset(),
    ) -> None:
        self.fn = fn
        self.seeds = seeds
        self.roles = roles
        self.bound = bound
        self.node_mode = node_mode
        self.depth = depth
        self.seen = seen
        self.memo = memo
        self.names = namespace(fn)
        self.facts = CodeFacts()
        self.tree = function_ast(fn)
        self.assigns: dict[str, list[ast.expr]] = {}
        self.loop_values: dict[str, list[ast.expr]] = {}
        """What a loop variable or an unpacked name is taken from (for what the model chose)."""
        self.item_keys: dict[str, list[ast.expr]] = {}
        self.state_names: set[str] = {"state"}
        self.file_names: set[str] = set()
        self.own_returns: set[int] = set()
        self.backend_names: set[str] = {"backend"}
        self.store_names: set[str] = {"store"}
        self.chosen: set[str] = set()
        """Names holding what the model chose (a tool's arguments, a node's state)."""
        self.given_paths: dict[str, ast.expr] = {}
        """Parameters handed a path by the caller: the caller's code for it."""
        self.given_consts: dict[str, str] = {}
        """Parameters handed a string the caller's code surely is."""

    # --- entry ---

    def scan(self) -> CodeFacts:
        if self.tree is None:
            self.facts.analysed = False
            self.facts.dynamic.append(f"{self.fn.__qualname__}: source not available")
            self.facts.unread.add(unreadable(self.fn))
            return self.facts
        self._params()
        self._collect_assigns()
        self._spread_choice()
        self.own_returns = {id(r) for r in own_returns(self.tree)}
        for node in ast.walk(self.tree):
            self._visit(node)
        return self.facts

    def _params(self) -> None:
        assert self.tree is not None
        positional = [*self.tree.args.posonlyargs, *self.tree.args.args]
        if self.bound is not None and positional:
            positional = positional[1:]  # self
        if self.node_mode and self.depth == 0 and positional:
            self.state_names.add(positional[0].arg)  # a node's first parameter is its state
        if self.seeds is not None:
            self.chosen |= self.seeds
        elif self.node_mode:
            self.chosen |= self.state_names
        else:  # a tool: what the model passes, not what the runtime injects
            self.chosen |= {
                a.arg
                for a in [*positional, *self.tree.args.kwonlyargs]
                if a.arg not in INJECTED_NAMES
                and not any(
                    word in (ast.unparse(a.annotation) if a.annotation is not None else "")
                    for word in INJECTED_TYPES
                )
            }
        self._take_roles()
        for arg in [*self.tree.args.args, *self.tree.args.kwonlyargs]:
            note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if "InjectedState" in note:
                self.state_names.add(arg.arg)
            if "Backend" in note:
                self.backend_names.add(arg.arg)
            if "Store" in note:  # store: BaseStore, Annotated[BaseStore, InjectedStore()]
                self.store_names.add(arg.arg)

    def _take_roles(self) -> None:
        """What the caller handed this helper's parameters (:meth:`_helper_roles`)."""
        names = {
            "state": self.state_names,
            "files": self.file_names,
            "backend": self.backend_names,
            "store": self.store_names,
        }
        for param, role, value in self.roles:
            if role in names:
                names[role].add(param)
            elif role == "const":
                self.given_consts[param] = value
            elif role == "path":
                try:
                    self.given_paths[param] = ast.parse(value, mode="eval").body
                except SyntaxError:
                    continue

    def _collect_assigns(self) -> None:
        assert self.tree is not None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                for target in ast.walk(node.target):
                    if isinstance(target, ast.Name):
                        self.loop_values.setdefault(target.id, []).append(node.iter)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._assign(target, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._assign(node.target, node.value)
            elif isinstance(node, ast.NamedExpr):
                self._assign(node.target, node.value)
        # names bound to the state, to its files or to a backend
        for name, values in self.assigns.items():
            for value in values:
                if self._is_state(value):
                    self.state_names.add(name)
                if self._is_files(value):
                    self.file_names.add(name)
                if isinstance(value, ast.Attribute) and "backend" in value.attr:
                    self.backend_names.add(name)
                if self._is_store(value):
                    self.store_names.add(name)

    def _assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Tuple | ast.List):  # a, b = x, y / a, b = pair
            pairs = (
                zip(target.elts, value.elts, strict=True)
                if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)
                else ((element, value) for element in target.elts)
            )
            for element, part in pairs:
                for inner in ast.walk(element):
                    if isinstance(inner, ast.Name):
                        self.loop_values.setdefault(inner.id, []).append(part)
            return
        if isinstance(target, ast.Name):
            self.assigns.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.item_keys.setdefault(target.value.id, []).append(target.slice)
            if target.value.id in self.state_names:
                key = self._const(target.slice)
                if key is not None:
                    self.facts.state_sets.add(key)

    def _spread_choice(self) -> None:
        """Names assigned (or looped over) from what the model chose are chosen too."""
        sources = {
            name: [*self.assigns.get(name, []), *self.loop_values.get(name, [])]
            for name in {*self.assigns, *self.loop_values}
        }
        changed = True
        while changed:
            changed = False
            for name, values in sources.items():
                if name not in self.chosen and any(self._chosen(v) for v in values):
                    self.chosen.add(name)
                    changed = True

    def _chosen(self, node: ast.AST) -> bool:
        """True when ``node`` uses a name holding what the model chose."""
        return any(isinstance(n, ast.Name) and n.id in self.chosen for n in ast.walk(node))

    def _helper_seeds(
        self, call: ast.Call, fn: types.FunctionType, bound: object
    ) -> frozenset[str]:
        """The helper's parameters that receive what the model chose at this call."""
        tree = function_ast(fn)
        if tree is None:
            return frozenset()
        positional = [a.arg for a in [*tree.args.posonlyargs, *tree.args.args]]
        if bound is not None and positional:
            positional = positional[1:]
        named = positional + [a.arg for a in tree.args.kwonlyargs]
        seeds: set[str] = set()
        given: set[str] = set()
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                if self._chosen(arg.value):
                    seeds |= set(positional[index:])
                break
            if index < len(positional):
                given.add(positional[index])
                if self._chosen(arg):
                    seeds.add(positional[index])
        for kw in call.keywords:
            if kw.arg is not None:
                given.add(kw.arg)
                if self._chosen(kw.value):
                    seeds.add(kw.arg)
        for kw in call.keywords:
            if kw.arg is None and self._chosen(kw.value):  # **tc["args"]
                seeds |= set(named) - given
        return frozenset(seeds)

    def _helper_roles(
        self, call: ast.Call, fn: types.FunctionType, bound: object
    ) -> frozenset[Role]:
        """What each of the helper's parameters is given at this call: the state, the files,
        a backend, the store, a string constant, and every argument's code as a path."""
        tree = function_ast(fn)
        if tree is None:
            return frozenset()
        positional = [a.arg for a in [*tree.args.posonlyargs, *tree.args.args]]
        if bound is not None and positional:
            positional = positional[1:]
        named = {*positional, *(a.arg for a in tree.args.kwonlyargs)}
        pairs: list[tuple[str, ast.expr]] = []
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred) or index >= len(positional):
                break
            pairs.append((positional[index], arg))
        pairs += [(kw.arg, kw.value) for kw in call.keywords if kw.arg in named]
        roles: set[Role] = set()
        for param, arg in pairs:
            if self._is_files(arg):
                roles.add((param, "files", ""))
            elif self._is_state(arg):
                roles.add((param, "state", ""))
            if self._is_store(arg):
                roles.add((param, "store", ""))
            if isinstance(arg, ast.Name | ast.Attribute) and self._is_backend(arg):
                roles.add((param, "backend", ""))
            const = self._const(arg)
            if const is not None:
                roles.add((param, "const", const))
            roles.add((param, "path", ast.unparse(self._rendered(self._followed(arg)))))
        return frozenset(roles)

    def _followed(self, node: ast.expr, hops: int = 0) -> ast.expr:
        """A local name followed to the one value it is given (a path built once, then used)."""
        if isinstance(node, ast.Name) and hops < 4 and node.id not in self.given_paths:
            values = self.assigns.get(node.id, [])
            if len(values) == 1:
                return self._followed(values[0], hops + 1)
        return node

    def _rendered(self, node: ast.expr) -> ast.expr:
        """``node`` with every parameter the caller handed a path replaced by the caller's code,
        so a helper's path and its caller's compare as one."""
        if not self.given_paths:
            return node
        given = self.given_paths

        class Swap(ast.NodeTransformer):
            def visit_Name(self, name: ast.Name) -> ast.AST:
                return given.get(name.id, name)

        swapped: ast.expr = Swap().visit(copy.deepcopy(node))
        return swapped

    # --- what an expression is ---

    def _is_state(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.state_names
        return isinstance(node, ast.Attribute) and node.attr == "state"

    def _state_key(self, node: ast.expr) -> ast.expr | None:
        """The key expression of ``state[k]`` / ``state.get(k)``, else None."""
        if isinstance(node, ast.Subscript) and self._is_state(node.value):
            return node.slice
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and self._is_state(node.func.value)
            and node.args
        ):
            return node.args[0]
        return None

    def _is_files(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name) and node.id in self.file_names:
            return True
        if isinstance(node, ast.BoolOp):  # state.get("files") or {}
            return any(self._is_files(v) for v in node.values)
        key = self._state_key(node)
        return key is not None and self._const(key) == "files"

    def _const(self, node: ast.expr) -> str | None:
        """A string the expression surely is: a literal, or a name bound to one."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.assigns:
                values = {self._const(v) for v in self.assigns[node.id]}
                return values.pop() if len(values) == 1 else None
            if node.id in self.given_consts:
                return self.given_consts[node.id]
            value = self.names.get(node.id)
            return value if isinstance(value, str) else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = self._resolve_name(node.value.id)
            value = getattr(owner, node.attr, None) if owner is not None else None
            return value if isinstance(value, str) else None
        return None

    def _path(self, node: ast.expr) -> str:
        const = self._const(node)
        return const if const is not None else expr_text(self._rendered(node))

    def _resolve_name(self, name: str) -> object:
        if name == "self" and self.bound is not None:
            return self.bound
        if name in self.assigns:
            return None
        return self.names.get(name)

    def _callee(self, func: ast.expr) -> tuple[types.FunctionType | None, object]:
        target: object = None
        if isinstance(func, ast.Name):
            target = self._resolve_name(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = self._resolve_name(func.value.id)
            if owner is not None and not isinstance(owner, types.ModuleType | str | int):
                try:
                    target = inspect.getattr_static(owner, func.attr)
                except AttributeError:
                    target = None
                if isinstance(target, staticmethod | classmethod):
                    target = getattr(owner, func.attr, None)
                elif isinstance(target, types.FunctionType) and not isinstance(owner, type):
                    target = types.MethodType(target, owner)
            elif isinstance(owner, types.ModuleType):
                target = getattr(owner, func.attr, None)
        if target is None or isinstance(target, type):
            return None, None
        fn, bound = unwrap(target)
        if fn is None or is_stdlib(fn):
            return None, None
        if is_library(fn):  # a library's own helpers: not the user's hazard, not followed
            return None, None
        return fn, bound

    def _sub(
        self,
        fn: types.FunctionType,
        bound: object,
        *,
        node_mode: bool,
        seeds: frozenset[str] = frozenset(),
        roles: frozenset[Role] = frozenset(),
    ) -> CodeFacts | None:
        """What a helper does, scanned once per (function, bound object, mode, chosen params,
        what its parameters are given)."""
        key = (id(fn), id(bound), node_mode, seeds, roles)
        if key in self.memo:
            return self.memo[key]
        if self.depth >= MAX_DEPTH or fn.__code__ in self.seen:
            return None
        self.seen.add(fn.__code__)
        scanner = _Scanner(
            fn,
            bound,
            node_mode=node_mode,
            depth=self.depth + 1,
            seen=self.seen,
            memo=self.memo,
            seeds=seeds,
            roles=roles,
        )
        facts = scanner.scan()
        self.seen.discard(fn.__code__)
        self.memo[key] = facts
        return facts

    # --- visiting ---

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.expr):
            key = self._state_key(node)
            if key is not None:
                name = self._const(key)
                if name is None:
                    self.facts.dynamic.append(
                        f"reads a state key built at run time: {expr_text(key)}"
                    )
                else:
                    self.facts.reads.add(name)
                    self.facts.own_reads.add(name)
        if isinstance(node, ast.Subscript) and self._is_files(node.value):
            self.facts.file_reads.add(self._path(node.slice))
        if isinstance(node, ast.Call):
            self._call(node)
        if (
            self.node_mode
            and isinstance(node, ast.Return)
            and node.value is not None
            and id(node) in self.own_returns  # not a nested helper's or lambda's return
        ):
            if isinstance(node.value, ast.Dict | ast.Name | ast.Call | ast.Await):
                self._update(node.value, returned=True)

    def _call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "Command":
            if any(kw.arg == "graph" for kw in node.keywords):
                return  # Command(graph=Command.PARENT, ...): the parent's write, not this graph's
            for kw in node.keywords:
                if kw.arg == "update":
                    self._update(kw.value)
            return
        if isinstance(func, ast.Attribute):
            if func.attr == "get" and self._is_files(func.value) and node.args:
                self.facts.file_reads.add(self._path(node.args[0]))
            owner = func.value
            if func.attr in ("put", "aput") and self._is_store(owner):
                self.facts.store_writes = True
                values = [*node.args, *(kw.value for kw in node.keywords)]
                if any(self._chosen(v) for v in values):
                    self.facts.memory_writes = True
            self._disk(node, func)
            if isinstance(owner, ast.Name | ast.Attribute) and self._is_backend(owner):
                if func.attr in BACKEND_READS and node.args:
                    self._access(node, "backend", self._path(node.args[0]), written=False)
                if func.attr in BACKEND_WRITES and node.args:
                    self._access(node, "backend", self._path(node.args[0]), written=True)
        if isinstance(func, ast.Name) and func.id == "open" and node.args:
            self._disk_open(node, node.args[0], 1)
        files_args = [a for a in node.args if self._is_files(a)]
        if files_args:
            others = [a for a in node.args if not self._is_files(a)]
            if others:
                self.facts.file_reads.add(self._path(others[0]))
        fn, bound = self._callee(func)
        if fn is not None:
            helper = self._sub(
                fn,
                bound,
                node_mode=False,
                seeds=self._helper_seeds(node, fn, bound),
                roles=self._helper_roles(node, fn, bound),
            )
            if helper is not None:
                line = node.end_lineno if node.end_lineno is not None else node.lineno
                column = node.end_col_offset if node.end_col_offset is not None else 0
                self.facts.merge(helper, at=(line, column))

    def _disk_path(self, node: ast.expr) -> str:
        """A disk path as its code, a local name followed to the one value it is given."""
        node = self._followed(node)
        const = self._const(node)
        return const if const is not None else expr_text(self._rendered(node))

    def _access(self, call: ast.Call, where: str, path: str, *, written: bool) -> None:
        """Record a read or a whole write of ``path`` where ``call`` runs (its end)."""
        line = call.end_lineno if call.end_lineno is not None else call.lineno
        column = call.end_col_offset if call.end_col_offset is not None else call.col_offset
        self.facts.accesses.append(((line, column), where, path, written))
        facts = self.facts
        if where == "disk":
            (facts.disk_writes if written else facts.disk_reads).add(path)
        else:
            (facts.backend_writes if written else facts.backend_reads).add(path)

    def _disk_open(self, call: ast.Call, path: ast.expr, mode_at: int) -> None:
        """``open(path, mode)`` / ``path.open(mode)``: a read, or a whole-file write."""
        mode: ast.expr | None = call.args[mode_at] if len(call.args) > mode_at else None
        for kw in call.keywords:
            if kw.arg == "mode":
                mode = kw.value
        text = "r" if mode is None else self._const(mode)
        if text is None:
            return  # a mode chosen at run time: not told
        if "w" in text or "+" in text:
            self._access(call, "disk", self._disk_path(path), written=True)
        elif "r" in text or text in ("", "b", "t"):
            self._access(call, "disk", self._disk_path(path), written=False)

    def _disk(self, call: ast.Call, func: ast.Attribute) -> None:
        """``pathlib``'s ``read_text``/``write_text``/``open`` on a path of the user's."""
        owner = func.value
        if isinstance(owner, ast.Name):
            resolved = self._resolve_name(owner.id)
            if isinstance(resolved, types.ModuleType | type) or owner.id in ("self", "cls"):
                return  # Image.open(...), os.open(...): not a path
        if func.attr in ("read_text", "read_bytes"):
            self._access(call, "disk", self._disk_path(owner), written=False)
        elif func.attr in ("write_text", "write_bytes"):
            self._access(call, "disk", self._disk_path(owner), written=True)
        elif func.attr == "open":
            self._disk_open(call, owner, 0)

    def _is_store(self, node: ast.expr) -> bool:
        """LangGraph's store: ``store``, ``runtime.store``, ``get_store()``, a store param."""
        if isinstance(node, ast.Name):
            return node.id in self.store_names
        if isinstance(node, ast.Attribute):
            return node.attr == "store"
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            return name == "get_store"
        return False

    def _is_backend(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            if node.id in self.backend_names or "backend" in node.id.lower():
                return True
            return _is_backend_object(self._resolve_name(node.id))
        return isinstance(node, ast.Attribute) and "backend" in node.attr.lower()

    # --- what an update writes ---

    def _update(self, node: ast.expr, *, returned: bool = False, hops: int = 0) -> None:
        """Record the keys that ``node`` (a Command update or a node's return) writes."""
        if hops > 4:
            return
        if isinstance(node, ast.Await):  # ``await helper(state)``: what the helper returns
            self._update(node.value, returned=returned, hops=hops)
            return
        if isinstance(node, ast.Call) and self._is_gather(node):
            for part in self._gathered(node):
                self._update(part, returned=returned, hops=hops + 1)
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:  # {**other}
                    self._update(value, returned=returned, hops=hops + 1)
                    continue
                name = self._const(key)
                if name is None:
                    self.facts.dynamic.append(
                        f"writes a state key built at run time: {expr_text(key)}"
                    )
                    continue
                self.facts.writes.add(name)
                if name == "files":
                    self._file_writes(value)
                if returned and self.node_mode and self._gives_back(value, name):
                    self.facts.echoes.add(name)
        elif isinstance(node, ast.Name):
            values = self.assigns.get(node.id) or [
                v for v in self.loop_values.get(node.id, []) if self._awaits_gather(v)
            ]  # ``a, b = await asyncio.gather(...)``: each name is one of the helpers' returns
            if not values:
                if not returned:
                    self.facts.dynamic.append(f"writes an update built elsewhere: {node.id}")
                return
            for value in values:
                self._update(value, returned=returned, hops=hops + 1)
            for key in self.item_keys.get(node.id, []):
                name = self._const(key)
                if name is not None:
                    self.facts.writes.add(name)
        elif isinstance(node, ast.Call):
            fn, bound = self._callee(node.func)
            if fn is None:
                if not returned and not self._is_dict_call(node):
                    self.facts.dynamic.append(f"writes what {ast.unparse(node.func)}() returns")
                elif self._is_dict_call(node):
                    for kw in node.keywords:
                        if kw.arg is not None:
                            self.facts.writes.add(kw.arg)
                return
            returned_facts = self._sub(fn, bound, node_mode=True)
            if returned_facts is not None:
                self.facts.writes |= returned_facts.writes
                self.facts.file_writes |= returned_facts.file_writes
        elif isinstance(node, ast.IfExp):
            self._update(node.body, returned=returned, hops=hops + 1)
            self._update(node.orelse, returned=returned, hops=hops + 1)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            values = self.assigns.get(node.value.id, [])
            if values and all(self._awaits_gather(v) for v in values):  # results[0]
                self._update(node.value, returned=returned, hops=hops + 1)

    def _is_gather(self, call: ast.Call) -> bool:
        """``asyncio.gather(...)`` (or ``gather`` imported from asyncio)."""
        func = call.func
        if isinstance(func, ast.Attribute):
            return (
                func.attr == "gather"
                and isinstance(func.value, ast.Name)
                and (self._resolve_name(func.value.id) is asyncio)
            )
        return isinstance(func, ast.Name) and self._resolve_name(func.id) is asyncio.gather

    def _awaits_gather(self, node: ast.expr) -> bool:
        inner = node.value if isinstance(node, ast.Await) else node
        return isinstance(inner, ast.Call) and self._is_gather(inner)

    @staticmethod
    def _gathered(call: ast.Call) -> list[ast.expr]:
        """The awaitables a ``gather`` call runs: its arguments, a starred list's items or a
        comprehension's element."""
        parts: list[ast.expr] = []
        for arg in call.args:
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            if isinstance(inner, ast.List | ast.Tuple):
                parts.extend(inner.elts)
            elif isinstance(inner, ast.ListComp | ast.GeneratorExp):
                parts.append(inner.elt)
            elif not isinstance(arg, ast.Starred):
                parts.append(inner)
        return parts

    def _gives_back(self, value: ast.expr, key: str) -> bool:
        """True when ``value`` holds what the state gave under ``key`` (``[state["q"]]``)."""
        for node in ast.walk(value):
            if isinstance(node, ast.expr):
                read = self._state_key(node)
                if read is not None and self._const(read) == key:
                    return True
        return False

    @staticmethod
    def _is_dict_call(node: ast.Call) -> bool:
        return isinstance(node.func, ast.Name) and node.func.id == "dict"

    def _file_writes(self, value: ast.expr) -> None:
        if isinstance(value, ast.Dict):
            for key in value.keys:
                if key is not None:
                    self.facts.file_writes.add(self._path(key))
                else:
                    self.facts.file_writes.add("<expr **...>")
        else:
            self.facts.file_writes.add(expr_text(value))


def _is_backend_object(value: object) -> bool:
    """A deepagents backend (none can exist when deepagents was never imported)."""
    if value is None or "deepagents" not in sys.modules:
        return False
    protocol = backend_protocol()
    return protocol is not None and isinstance(value, protocol)


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
        scanner = _Scanner(
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

"""What a scan of one function holds, and what every reader of it asks (notebooks 01-04).

The function's names, its assignments, what its caller handed its parameters; the
string an expression surely is (``_const``), a path as its code, the helper a call
reaches and that helper's own scan (``_sub``). The readers (``reads_*``) are mixins
of this base, so each sees these without importing the others; :mod:`.scan` puts
them together.
"""

from __future__ import annotations

import abc
import ast
import copy
import inspect
import types

from agentstate.doctor.facts.code_facts import CodeFacts, Memo, Role
from agentstate.doctor.facts.code_source import (
    expr_text,
    function_ast,
    is_library,
    is_stdlib,
    namespace,
    unwrap,
)

MAX_DEPTH = 5


class ScanBase(abc.ABC):
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

    @abc.abstractmethod
    def scan(self) -> CodeFacts:
        """Walk the function (:class:`.scan.Scanner`)."""

    def _chosen(self, node: ast.AST) -> bool:
        """True when ``node`` uses a name holding what the model chose."""
        return any(isinstance(n, ast.Name) and n.id in self.chosen for n in ast.walk(node))

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
        scanner = type(self)(
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

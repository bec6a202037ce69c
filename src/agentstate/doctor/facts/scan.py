"""The walk over one function's code: its parameters, names, helpers and calls (notebooks 01-04).

Each kind of fact is its own reader (``reads_state``, ``reads_files``,
``reads_disk``, ``reads_store``, ``reads_gather``, ``reads_updates``), all mixins
of :class:`.scan_base.ScanBase`; this module puts them together in one
``Scanner``: what each parameter is (the model's choice, the state, a backend),
then every node of the function's tree, helpers followed with what they are given.
"""

from __future__ import annotations

import ast
import types

from agentstate.doctor.facts.code_facts import CodeFacts, Role
from agentstate.doctor.facts.code_source import expr_text, function_ast, own_returns, unreadable
from agentstate.doctor.facts.reads_disk import ReadsDisk
from agentstate.doctor.facts.reads_files import BACKEND_READS, BACKEND_WRITES
from agentstate.doctor.facts.reads_store import ReadsStore
from agentstate.doctor.facts.reads_updates import ReadsUpdates

INJECTED_NAMES = frozenset(
    {"self", "cls", "runtime", "config", "store", "state", "tool_call_id", "run_manager",
     "callbacks"}
)  # fmt: skip
INJECTED_TYPES = ("Injected", "ToolRuntime", "Runtime", "RunnableConfig", "Store", "Callback")
"""What marks a tool parameter as the runtime's, not the model's."""


class Scanner(ReadsUpdates, ReadsDisk, ReadsStore):
    """One function's scan: every reader over the function's tree."""

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

    def _helper_seeds(
        self, call: ast.Call, fn: types.FunctionType, bound: object
    ) -> frozenset[str]:
        """The helper's parameters that receive what the model chose at this call."""
        params = _parameters(fn, bound)
        if params is None:
            return frozenset()
        positional, keyword_only = params
        named = positional + keyword_only
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
        params = _parameters(fn, bound)
        if params is None:
            return frozenset()
        positional, keyword_only = params
        named = {*positional, *keyword_only}
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


def _parameters(fn: types.FunctionType, bound: object) -> tuple[list[str], list[str]] | None:
    """A helper's positional parameters (``self`` dropped when it is bound) and its
    keyword-only ones, or None when its code cannot be read."""
    tree = function_ast(fn)
    if tree is None:
        return None
    positional = [a.arg for a in [*tree.args.posonlyargs, *tree.args.args]]
    if bound is not None and positional:
        positional = positional[1:]
    return positional, [a.arg for a in tree.args.kwonlyargs]

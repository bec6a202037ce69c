"""What a conditional edge's function (or a node's ``Command(goto=...)``) can start (notebook 02).

A router that returns one name picks one of its ends: the ends are
alternatives and never share a super-step. One that returns a list of names
or ``Send`` objects starts them all in the next step, and a ``Send`` in a loop
starts its node once per item. The doctor reads the function's own returns
(``ast`` of its source), following local names, module constants, ``if``
expressions, lists built with ``append`` and helpers it calls; the edge's
path map (``{True: "a", False: "b"}``) maps what it returns to nodes, and its
return annotation (``Literal[...]``, ``list[Send]``) decides what the code
does not show. What it cannot read is an outcome with a ``doubt``: the checks
make a warning of it, never an error.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from agentstate.doctor.facts.code_source import function_ast, is_library, namespace
from agentstate.doctor.facts.locate import function_of
from agentstate.doctor.facts.names import code_names

END = "__end__"
MAX_ALTERNATIVES = 16
MAX_DEPTH = 3

KeyKind = Callable[[str], str]
"""The declared kind of a state key (``list``, ``str``...), for ``return state["next"]``."""


@dataclass(frozen=True)
class Outcome:
    """What one return of a router (or one ``Command(goto=...)``) starts in the next step."""

    named: frozenset[str] = frozenset()
    """Nodes started by name (once each, however often named)."""
    sent: tuple[tuple[str, frozenset[str] | None], ...] = ()
    """Nodes given to one ``Send`` each, with the keys of its payload (None: unknown)."""
    many: tuple[tuple[str, frozenset[str] | None], ...] = ()
    """Nodes ``Send``-ed in a loop (once per item, so possibly several times), with payload keys."""
    doubt: str | None = None
    """Why the doctor cannot tell that these nodes start together (None: read from the code)."""

    def nodes(self) -> frozenset[str]:
        """Every node this outcome starts."""
        return self.named | {n for n, _ in (*self.sent, *self.many)}


@dataclass(frozen=True)
class _Draft:
    """One possible return value before the path map turns it into nodes."""

    labels: tuple[Hashable, ...] = ()
    sent: tuple[tuple[str, frozenset[str] | None], ...] = ()
    many: tuple[tuple[str, frozenset[str] | None], ...] = ()
    any_one: bool = False
    """One value the doctor cannot name: any single end."""
    doubt: str | None = None
    """Maybe several values the doctor cannot name."""


def _merge(parts: list[_Draft], why: str) -> _Draft:
    """The drafts of a list's elements as one draft: everything in the list starts together."""
    doubts = [p.doubt for p in parts if p.doubt]
    if any(p.any_one for p in parts):
        doubts.append(why)
    return _Draft(
        labels=tuple(label for p in parts for label in p.labels),
        sent=tuple(s for p in parts for s in p.sent),
        many=tuple(m for p in parts for m in p.many),
        doubt=doubts[0] if doubts else None,
    )


def _annotation(tree: ast.FunctionDef | ast.AsyncFunctionDef, fn: types.FunctionType) -> str:
    """``single``, ``multi`` or ``""`` from the return annotation."""
    text = ast.unparse(tree.returns) if tree.returns is not None else ""
    if not text:
        note = fn.__annotations__.get("return")
        text = note if isinstance(note, str) else (repr(note) if note is not None else "")
    if not text:
        return ""
    if any(word in text for word in ("list", "List", "Sequence", "Send", "tuple", "Iterable")):
        return "multi"
    if any(word in text for word in ("Literal", "str", "bool", "int")):
        return "single"
    return ""


def _returns(body: Iterable[ast.stmt]) -> list[ast.expr]:
    """The returned expressions of a function body, nested functions and classes left out."""
    found: list[ast.expr] = []
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _is_send(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "Send") or (
        isinstance(func, ast.Attribute) and func.attr == "Send"
    )


def _is_command(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "Command") or (
        isinstance(func, ast.Attribute) and func.attr == "Command"
    )


_PARSED: dict[
    types.CodeType,
    tuple[dict[str, list[ast.expr]], dict[str, list[tuple[ast.expr, bool]]], list[ast.expr]],
] = {}
"""What a function's source assigns, grows and returns, parsed once per code object."""


@dataclass
class _Reader:
    """Reads what one function returns, as drafts."""

    fn: types.FunctionType
    key_kind: KeyKind | None
    depth: int = 0
    tree: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    names: dict[str, object] = field(default_factory=dict)
    assigns: dict[str, list[ast.expr]] = field(default_factory=dict)
    grown: dict[str, list[tuple[ast.expr, bool]]] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    shape: str = ""
    returns: list[ast.expr] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tree = function_ast(self.fn)
        if self.tree is None:
            return
        self.names = namespace(self.fn)
        self.shape = _annotation(self.tree, self.fn)
        args = self.tree.args
        self.params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        parsed = _PARSED.get(self.fn.__code__)
        if parsed is None:
            self._collect(self.tree.body, in_loop=False)
            parsed = (self.assigns, self.grown, _returns(self.tree.body))
            if len(_PARSED) >= 4096:
                _PARSED.clear()
            _PARSED[self.fn.__code__] = parsed
        self.assigns, self.grown, self.returns = parsed

    @property
    def label(self) -> str:
        return f"`{self.fn.__name__}`"

    def _collect(self, body: Iterable[ast.AST], *, in_loop: bool) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            loop = in_loop or isinstance(
                node, ast.For | ast.AsyncFor | ast.While | ast.comprehension
            )
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigns.setdefault(target.id, []).append(node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    self.assigns.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.grown.setdefault(node.target.id, []).append((node.value, loop))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.attr in ("append", "extend", "insert")
                and node.args
            ):
                item = node.args[-1]
                value = item if node.func.attr == "extend" else ast.List(elts=[item])
                self.grown.setdefault(node.func.value.id, []).append((value, loop))
            self._collect(ast.iter_child_nodes(node), in_loop=loop)

    # --- the drafts of an expression ---

    def returned(self) -> list[_Draft]:
        """Every draft of every return of the function (one doubt if it cannot be read)."""
        if self.tree is None:
            return [_Draft(doubt=f"the source of {self.label} is not available")]
        drafts: list[_Draft] = []
        for expr in self.returns:
            drafts.extend(self.value(expr, 0))
        if self.shape == "multi":
            drafts = [
                _Draft(doubt=f"{self.label} returns a value annotated as several")
                if d.any_one
                else d
                for d in drafts
            ]
        return drafts[:MAX_ALTERNATIVES] or [_Draft(any_one=True)]

    def value(self, expr: ast.expr, hops: int) -> list[_Draft]:
        if hops > 6:
            return [_Draft(doubt=f"{self.label} builds its return through too many names")]
        if isinstance(expr, ast.Constant):
            return [_Draft(labels=(expr.value,))]
        if isinstance(expr, ast.IfExp):
            return self.value(expr.body, hops + 1) + self.value(expr.orelse, hops + 1)
        if isinstance(expr, ast.Await):
            return self.value(expr.value, hops + 1)
        if isinstance(expr, ast.Name):
            return self._name(expr.id, hops)
        if isinstance(expr, ast.Attribute):
            return [self._attribute(expr)]
        if isinstance(expr, ast.Subscript):
            return [self._subscript(expr)]
        if isinstance(expr, ast.List | ast.Tuple | ast.Set):
            return [self._sequence(expr.elts, hops)]
        if isinstance(expr, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return [self._comprehension(expr.elt)]
        if isinstance(expr, ast.Call):
            return self._call(expr, hops)
        if isinstance(expr, ast.Starred):
            return [_Draft(doubt=f"{self.label} returns an unpacked list built at run time")]
        return [_Draft(any_one=True)]  # a comparison, a bool, an f-string: one value

    def _name(self, name: str, hops: int) -> list[_Draft]:
        if name in self.assigns or name in self.grown:
            drafts: list[_Draft] = []
            for value in self.assigns.get(name, []):
                drafts.extend(self.value(value, hops + 1))
            grown = self.grown.get(name, [])
            if grown:
                parts = list(drafts)
                for value, in_loop in grown:
                    for part in self.value(value, hops + 1):
                        if in_loop and part.sent:
                            part = _Draft(
                                labels=part.labels,
                                many=part.many + part.sent,
                                doubt=part.doubt,
                            )
                        parts.append(part)
                return [_merge(parts, f"{self.label} appends names built at run time")]
            return drafts or [_Draft(any_one=True)]
        if name in self.params:
            return [_Draft(any_one=True)]
        bound = self.names.get(name)
        if isinstance(bound, str | bool | int) or bound is None:
            return [_Draft(labels=(bound,))]
        if isinstance(bound, list | tuple) and all(isinstance(v, str) for v in bound):
            return [_Draft(labels=tuple(bound))]
        return [_Draft(any_one=True)]

    def _attribute(self, expr: ast.Attribute) -> _Draft:
        if isinstance(expr.value, ast.Name) and expr.value.id not in self.params:
            owner = self.names.get(expr.value.id)
            value = getattr(owner, expr.attr, None) if owner is not None else None
            if isinstance(value, str):
                return _Draft(labels=(value,))
        return _Draft(any_one=True)

    def _subscript(self, expr: ast.Subscript) -> _Draft:
        key = expr.slice
        if (
            self.key_kind is not None
            and isinstance(expr.value, ast.Name)
            and expr.value.id in self.params
            and isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and self.key_kind(key.value) in ("list", "messages")
        ):
            return _Draft(doubt=f"{self.label} returns state key `{key.value}`, a list")
        return _Draft(any_one=True)

    def _sequence(self, elements: list[ast.expr], hops: int) -> _Draft:
        parts: list[_Draft] = []
        for element in elements:
            options = self.value(element, hops + 1)
            if len(options) == 1:
                parts.append(options[0])
            else:  # an element that is one of several values: any of them, with the rest
                parts.append(_merge(options, ""))
        return _merge(parts, f"{self.label} returns a list with a name built at run time")

    def _comprehension(self, element: ast.expr) -> _Draft:
        if isinstance(element, ast.Call) and _is_send(element.func):
            node = self._send_target(element)
            if node is not None:
                return _Draft(many=((node, self._payload(element)),))
            return _Draft(doubt=f"{self.label} Sends to nodes chosen at run time")
        if isinstance(element, ast.Constant):
            return _Draft(labels=(element.value,))
        return _Draft(doubt=f"{self.label} returns a list of names built at run time")

    def _send_target(self, call: ast.Call) -> str | None:
        target = call.args[0] if call.args else None
        for kw in call.keywords:
            if kw.arg == "node":
                target = kw.value
        if target is None:
            return None
        drafts = self.value(target, 5)
        labels = {lab for d in drafts for lab in d.labels if isinstance(lab, str)}
        if len(labels) == 1 and not any(d.any_one or d.doubt for d in drafts):
            return labels.pop()
        return None

    def _payload(self, call: ast.Call) -> frozenset[str] | None:
        arg = call.args[1] if len(call.args) > 1 else None
        for kw in call.keywords:
            if kw.arg == "arg":
                arg = kw.value
        if isinstance(arg, ast.Name) and arg.id in self.assigns:
            values = self.assigns[arg.id]
            arg = values[0] if len(values) == 1 else None
        if isinstance(arg, ast.Dict) and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in arg.keys
        ):
            return frozenset(str(k.value) for k in arg.keys if isinstance(k, ast.Constant))
        return None

    def _call(self, call: ast.Call, hops: int) -> list[_Draft]:
        if _is_send(call.func):
            node = self._send_target(call)
            if node is None:
                return [_Draft(doubt=f"{self.label} Sends to a node chosen at run time")]
            return [_Draft(sent=((node, self._payload(call)),))]
        if isinstance(call.func, ast.Name) and call.func.id in ("list", "tuple", "sorted"):
            if call.args:
                return [_merge(self.value(call.args[0], hops + 1), "")]
        callee = self._callee(call.func)
        if callee is not None and self.depth < MAX_DEPTH:
            inner = _Reader(callee, self.key_kind, depth=self.depth + 1)
            return inner.returned()
        return [_Draft(any_one=True)]

    def _callee(self, func: ast.expr) -> types.FunctionType | None:
        target: object = None
        if isinstance(func, ast.Name) and func.id not in self.params:
            target = self.names.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = self.names.get(func.value.id)
            if isinstance(owner, types.ModuleType):
                target = getattr(owner, func.attr, None)
        fn = function_of(target) if callable(target) and not isinstance(target, type) else None
        if fn is None or is_library(fn) or fn.__module__ in ("builtins",):
            return None
        return fn

    # --- Command(goto=...) in a node ---

    def gotos(self) -> list[list[_Draft]] | None:
        """The drafts of each returned ``Command``'s ``goto`` (None if it returns no Command)."""
        if self.tree is None:
            return None
        found: list[list[_Draft]] = []
        commands = 0
        for expr in self.returns:
            if isinstance(expr, ast.Name) and len(self.assigns.get(expr.id, [])) == 1:
                expr = self.assigns[expr.id][0]
            if not (isinstance(expr, ast.Call) and _is_command(expr.func)):
                found.append([_Draft()])
                continue
            commands += 1
            keywords = {kw.arg: kw.value for kw in expr.keywords if kw.arg}
            if "graph" in keywords or "goto" not in keywords:
                found.append([_Draft()])  # the parent's step, or no routing at all
                continue
            found.append(self.value(keywords["goto"], 0))
        return found if commands else None


def _outcomes(
    drafts: list[_Draft], ends: dict[Hashable, str] | None, nodes: set[str]
) -> list[Outcome]:
    """Drafts mapped through the path map to the nodes they start."""
    targets = sorted(set(ends.values()) if ends is not None else nodes)
    targets = [t for t in targets if t in nodes]

    def node_of(label: Hashable) -> str | None:
        if ends is not None:
            try:
                mapped = ends.get(label)
            except TypeError:  # an unhashable label
                mapped = None
            if mapped is not None:
                return mapped if mapped in nodes else None
        return label if isinstance(label, str) and label in nodes else None

    out: list[Outcome] = []
    for draft in drafts:
        named = frozenset(n for n in map(node_of, draft.labels) if n is not None)
        sent = tuple((n, keys) for n, keys in draft.sent if n in nodes)
        many = tuple((n, keys) for n, keys in draft.many if n in nodes)
        if draft.any_one:
            out.extend(Outcome(named=frozenset({t})) for t in targets)
        elif draft.doubt:
            out.extend(Outcome(named=frozenset({t})) for t in targets)
            together = named | frozenset(targets) if ends is not None else named
            out.append(Outcome(named=together, sent=sent, many=many, doubt=draft.doubt))
        else:
            out.append(Outcome(named=named, sent=sent, many=many))
    return list(dict.fromkeys(out)) or [Outcome()]


def branch_outcomes(
    path: object, ends: dict[Hashable, str] | None, nodes: set[str], key_kind: KeyKind | None
) -> list[Outcome]:
    """What a conditional edge (its ``path`` runnable and path map ``ends``) can start."""
    fn = function_of(path)
    if fn is None or is_library(fn):
        # LangGraph's and LangChain's own routers pick one end (``tools_condition``) or
        # Send the model's tool calls to the tools node: tool-level writes, checked apart.
        targets = sorted(set(ends.values()) if ends is not None else nodes)
        return [Outcome(named=frozenset({t})) for t in targets if t in nodes] or [Outcome()]
    return _outcomes(_Reader(fn, key_kind).returned(), ends, nodes)


def goto_outcomes(
    node_fn: object, declared: Iterable[str], nodes: set[str], key_kind: KeyKind | None
) -> list[Outcome] | None:
    """What a node's ``Command(goto=...)`` returns can start (None if it returns no Command)."""
    fn = function_of(node_fn)
    declared = [d for d in declared if d in nodes]
    if fn is None or is_library(fn):
        if declared:
            return [Outcome(named=frozenset({d})) for d in declared] + [Outcome()]
        return None
    if "Command" not in code_names(fn):
        gotos = None
    else:
        gotos = _Reader(fn, key_kind).gotos()
    if gotos is None:
        if declared:  # destinations declared, returned through a helper the doctor cannot see
            return [Outcome(named=frozenset({d})) for d in declared] + [Outcome()]
        return None
    out: list[Outcome] = []
    for drafts in gotos:
        out.extend(_outcomes(drafts, None, nodes))
    return list(dict.fromkeys(out))

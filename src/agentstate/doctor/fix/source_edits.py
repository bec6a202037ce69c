"""Edits to a state schema's source with libcst: a reducer on a key (or swapped), a key declared.

Each edit keeps the file as its author wrote it (comments, blank lines, quotes,
the order of the body) and touches only the key's line, plus the imports the
new text needs, added once where the file keeps its imports
(:mod:`agentstate.doctor.fix.imports`).
Every function returns the new source, or the same source when there is
nothing to do, so a second run changes nothing. ``agentstate doctor --fix``
(:mod:`agentstate.doctor.fix.apply`) writes what they return; the fixes are
the ones notebooks 02 and 04 write by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from agentstate.doctor.fix.imports import Name, add_imports, spelling

SchemaKind = Literal["typeddict", "pydantic", "dataclass", "class"]
"""How a schema declares its keys: ``TypedDict`` (``AgentState`` too), a pydantic model, a
dataclass, or another class with annotations."""


class EditError(ValueError):
    """The edit cannot be made on this source; the message is the line to print."""


OPERATOR = Name("operator")
ANNOTATED = Name("typing", "Annotated")
NOT_REQUIRED = Name("typing", "NotRequired")
ANY = Name("typing", "Any")
_TYPING_TWINS = ("typing_extensions",)


def _spelling(module: cst.Module, wanted: Name) -> tuple[str, Name | None]:
    """How ``wanted`` is written here, and the import to add (None when the file has it)."""
    text, missing = spelling(module, wanted, _TYPING_TWINS)
    if not missing:
        return text, None
    if wanted.module == "typing" and text == wanted.attr and _uses_only_extensions(module):
        return text, Name("typing_extensions", wanted.attr)
    return text, wanted if text == (wanted.attr or wanted.module) else Name(wanted.module)


def _uses_only_extensions(module: cst.Module) -> bool:
    """True when the file takes its typing names from ``typing_extensions``, not ``typing``."""
    code = module.code
    return "from typing_extensions import" in code and "from typing import" not in code


def _annotation_parts(node: cst.BaseExpression) -> tuple[str, list[cst.SubscriptElement]] | None:
    """``("Annotated", elements)`` when ``node`` is ``Annotated[...]`` (or ``typing.Annotated``)."""
    if not isinstance(node, cst.Subscript):
        return None
    value = node.value
    name = value.attr.value if isinstance(value, cst.Attribute) else getattr(value, "value", None)
    if name != "Annotated":
        return None
    return "Annotated", list(node.slice)


class _ClassFinder(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[tuple[int, cst.ClassDef]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.name.value == self.name:
            start = self.get_metadata(PositionProvider, node).start.line
            self.found.append((start, node))


def _find_class(wrapper: MetadataWrapper, name: str, line: int | None) -> cst.ClassDef:
    finder = _ClassFinder(name)
    wrapper.visit(finder)
    if not finder.found:
        raise EditError(f"class `{name}` is not defined in this file")
    if line is None or len(finder.found) == 1:
        return finder.found[0][1]
    # inspect gives the line of the first decorator, libcst the same: the nearest wins
    return min(finder.found, key=lambda item: abs(item[0] - line))[1]


def _key_line(body: cst.BaseSuite, key: str) -> cst.SimpleStatementLine | None:
    for stmt in body.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            target = getattr(small, "target", None)
            if isinstance(small, cst.AnnAssign) and isinstance(target, cst.Name):
                if target.value == key:
                    return stmt
    return None


class Replace(cst.CSTTransformer):
    """Puts ``new`` where ``old`` was (the one statement or class an edit rewrites)."""

    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        self.old, self.new = old, new

    def on_leave(self, original_node: Any, updated_node: Any) -> Any:
        return self.new if original_node is self.old else updated_node


def parse(source: str) -> cst.Module:
    """``source`` as a libcst module; a file that does not parse is an :class:`EditError`."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise EditError(f"the file does not parse (line {exc.raw_line}): left as it is") from None


def _own_key(
    source: str, class_name: str, class_line: int | None, key: str
) -> tuple[cst.Module, cst.SimpleStatementLine, cst.AnnAssign]:
    """The parsed file, and the ``key: ...`` line of ``class_name``'s own body."""
    module = parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    cls = _find_class(wrapper, class_name, class_line)
    stmt = _key_line(cls.body, key)
    if stmt is None:
        raise EditError(f"`{class_name}` does not declare `{key}` itself (an inherited key?)")
    ann = stmt.body[0]
    assert isinstance(ann, cst.AnnAssign)
    return module, stmt, ann


def _reducer_spelling(module: cst.Module, reducer: Name, member: str) -> tuple[str, Name | None]:
    """How the file names ``reducer`` (``operator.add`` for a module's member), and its import."""
    text, imp = _spelling(module, reducer)
    return (f"{text}.{member}" if reducer.attr is None else text), imp


def _annotated_as(ann: cst.AnnAssign, new_ann: cst.BaseExpression) -> cst.AnnAssign:
    return ann.with_changes(annotation=ann.annotation.with_changes(annotation=new_ann))


def add_reducer(
    source: str, class_name: str, class_line: int | None, key: str, reducer: Name, member: str
) -> str:
    """``key: T`` in ``class_name`` becomes ``key: Annotated[T, reducer]``.

    ``member`` is the attribute of a module import (``add`` of ``operator``); an
    ``Annotated[T, meta]`` key keeps its metadata and gets the reducer last, where
    LangGraph looks for it. A key that already ends in a callable reducer is left.
    """
    module, stmt, ann = _own_key(source, class_name, class_line, key)
    annotated, annotated_import = _spelling(module, ANNOTATED)
    reducer_text, reducer_import = _reducer_spelling(module, reducer, member)
    element = cst.SubscriptElement(cst.Index(cst.parse_expression(reducer_text)))
    parts = _annotation_parts(ann.annotation.annotation)
    if parts is not None:
        elements = parts[1]
        if len(elements) > 1 and cst.Module([]).code_for_node(elements[-1].slice).strip() in (
            reducer_text,
        ):
            return source  # already there: a second --fix changes nothing
        last = elements[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        sub = ann.annotation.annotation
        assert isinstance(sub, cst.Subscript)
        new_ann: cst.BaseExpression = sub.with_changes(slice=[*elements[:-1], last, element])
        needed = [n for n in (reducer_import,) if n is not None]
    else:
        inner = cst.SubscriptElement(
            cst.Index(ann.annotation.annotation),
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
        )
        new_ann = cst.Subscript(cst.parse_expression(annotated), slice=[inner, element])
        needed = [n for n in (annotated_import, reducer_import) if n is not None]
    new_stmt = stmt.with_changes(body=[_annotated_as(ann, new_ann)])
    edited = module.visit(Replace(stmt, new_stmt))
    return add_imports(edited, needed).code


def declare_key(
    source: str,
    class_name: str,
    class_line: int | None,
    key: str,
    type_text: str,
    kind: SchemaKind,
    type_import: Name | None = None,
) -> str:
    """Add ``key`` to ``class_name``'s body, after its last annotated key.

    A ``TypedDict`` gets ``key: NotRequired[T]`` (an input without the key stays
    valid), a pydantic model or a dataclass ``key: T | None = None`` (a default, so
    no caller breaks and no field order rule is broken). A class that declares the
    key already is left as it is.
    """
    module = parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    cls = _find_class(wrapper, class_name, class_line)
    if _key_line(cls.body, key) is not None:
        return source
    needed: list[Name] = [type_import] if type_import is not None else []
    if kind == "typeddict":
        spelled, imp = _spelling(module, NOT_REQUIRED)
        text = f"{key}: {spelled}[{type_text}]"
        needed += [imp] if imp is not None else []
    elif kind in ("pydantic", "dataclass"):
        optional = type_text if type_text == "Any" else f"{type_text} | None"
        text = f"{key}: {optional} = None"
    else:
        text = f"{key}: {type_text}"
    if type_text == "Any":
        spelled, imp = _spelling(module, ANY)
        text = text.replace("Any", spelled, 1)
        needed += [imp] if imp is not None else []
    line = cst.parse_statement(text + "\n")
    if not isinstance(cls.body, cst.IndentedBlock):
        raise EditError(f"`{class_name}`'s body is on its class line: left as it is")
    body = list(cls.body.body)
    last = max(
        (i for i, s in enumerate(body) if _is_annotation(s)),
        default=_after_docstring(body),
    )
    if last < 0:
        body.insert(0, line)
    else:
        body.insert(last + 1, line)
    body = [s for s in body if not _is_pass(s)] if len(body) > 1 else body
    new_cls = cls.with_changes(body=cls.body.with_changes(body=body))
    edited = module.visit(Replace(cls, new_cls))
    return add_imports(edited, needed).code


def _is_annotation(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.AnnAssign)
    )


def _is_pass(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Pass)
    )


def _after_docstring(body: list[cst.BaseStatement]) -> int:
    """The index of the class docstring (``-1`` when there is none)."""
    if body and isinstance(body[0], cst.SimpleStatementLine):
        first = body[0].body[0]
        if isinstance(first, cst.Expr) and isinstance(
            first.value, cst.SimpleString | cst.ConcatenatedString
        ):
            return 0
    return -1


def swap_reducer(
    source: str,
    class_name: str,
    class_line: int | None,
    key: str,
    reducer: Name,
    member: str = "",
) -> str:
    """``key: Annotated[T, old]`` in ``class_name`` becomes ``key: Annotated[T, reducer]``.

    The reducer LangGraph uses is the annotation's last element; it is replaced, and an
    import only the old reducer used (``import operator``) is removed, so the file still
    passes ``ruff check``. Left as it is when the key has the new reducer already.
    """
    module, stmt, ann = _own_key(source, class_name, class_line, key)
    parts = _annotation_parts(ann.annotation.annotation)
    if parts is None or len(parts[1]) < 2:
        raise EditError(f"`{class_name}.{key}` has no `Annotated[..., reducer]` to replace")
    elements = parts[1]
    text, imp = _reducer_spelling(module, reducer, member)
    old = elements[-1]
    if cst.Module([]).code_for_node(old.slice).strip() == text:
        return source  # already there: a second --fix changes nothing
    new_last = old.with_changes(slice=cst.Index(cst.parse_expression(text)))
    sub = ann.annotation.annotation
    assert isinstance(sub, cst.Subscript)
    new_ann = sub.with_changes(slice=[*elements[:-1], new_last])
    new_stmt = stmt.with_changes(body=[_annotated_as(ann, new_ann)])
    gone = _root_name(old.slice)
    edited = module.visit(Replace(stmt, new_stmt))
    edited = add_imports(edited, [imp] if imp is not None else [])
    return (_drop_unused(edited, gone) if gone else edited).code


def _root_name(node: cst.BaseSlice) -> str | None:
    """``operator`` for ``operator.add``, ``add`` for ``add``: the name an import brings."""
    if not isinstance(node, cst.Index):
        return None
    value = node.value
    while isinstance(value, cst.Attribute):
        value = value.value
    return value.value if isinstance(value, cst.Name) else None


class _Uses(cst.CSTVisitor):
    """Every name read outside the import statements."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _drop_unused(module: cst.Module, name: str) -> cst.Module:
    """``module`` without the import of ``name`` when nothing else uses it (top level only)."""
    uses = _Uses()
    module.visit(uses)
    if name in uses.names:
        return module
    body: list[Any] = []
    carried: Sequence[cst.EmptyLine] = ()
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if isinstance(small, cst.Import | cst.ImportFrom) and not isinstance(
            small.names, cst.ImportStar
        ):
            kept = [a for a in small.names if _bound(a) != name]
            if not kept:  # the statement goes; its blank lines and comments stay
                carried = stmt.leading_lines
                continue
            if len(kept) != len(small.names):
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                stmt = stmt.with_changes(body=[small.with_changes(names=kept)])
        if carried and not stmt.leading_lines:
            stmt = stmt.with_changes(leading_lines=carried)
        carried = ()
        body.append(stmt)
    return module.with_changes(body=body)


def _bound(alias: cst.ImportAlias) -> str:
    """The name an import alias binds (``import a.b`` binds ``a``)."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    node: cst.BaseExpression = alias.name
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""

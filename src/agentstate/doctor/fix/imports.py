"""The imports a fix needs, added once where the file keeps its imports, in isort's order.

A fix that writes ``Annotated[list[str], operator.add]`` needs ``Annotated`` and
``operator``. An existing ``from typing import TypedDict`` grows a name (the names
kept sorted as isort and ruff sort them: constants, classes, then the rest); a
new statement joins its section (the standard library, then third-party),
plain ``import x`` lines before ``from x import y`` ones, each group sorted by
module, so a file that passed ``ruff check`` (rule ``I``) still does. Used by
:mod:`agentstate.doctor.fix.source_edits` (the fixes of notebooks 02 and 04).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import libcst as cst

Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement
"""A statement of a module's body."""


@dataclass(frozen=True)
class Name:
    """A name the new text uses and the import that brings it: ``operator.add`` needs
    ``import operator``; ``add_messages`` needs ``from langgraph.graph.message import ...``."""

    module: str
    attr: str | None = None
    """``None``: the module itself is imported (``import operator``)."""


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _section(module: str) -> int:
    """0 ``__future__``, 1 the standard library, 2 everything else (third-party, the project)."""
    top = module.split(".")[0]
    if top == "__future__":
        return 0
    return 1 if top in sys.stdlib_module_names else 2


def _statement(stmt: Statement) -> cst.Import | cst.ImportFrom | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Import | cst.ImportFrom):
            return small
    return None


def _module_of(imp: cst.Import | cst.ImportFrom) -> str:
    if isinstance(imp, cst.ImportFrom):
        return ("." * len(imp.relative)) + (_dotted(imp.module) if imp.module else "")
    return _dotted(imp.names[0].name)


def _order(imp: cst.Import | cst.ImportFrom) -> tuple[int, int, str]:
    module = _module_of(imp)
    return (_section(module), isinstance(imp, cst.ImportFrom), module.lower())


def _name_order(name: str) -> tuple[int, str]:
    """isort's ``order-by-type``: CONSTANTS, then Classes, then everything else."""
    if name.isupper() and len(name) > 1:
        return 0, name
    if name[:1].isupper():
        return 1, name
    return 2, name.lower()


def _imported(body: list[Statement]) -> tuple[set[str], dict[str, str]]:
    """Modules imported whole (``import x``) and ``{local name: "module.attr"}``."""
    whole: set[str] = set()
    names: dict[str, str] = {}
    for stmt in body:
        imp = _statement(stmt)
        if isinstance(imp, cst.Import):
            for alias in imp.names:
                if alias.asname is None:
                    whole.add(_dotted(alias.name))
        elif isinstance(imp, cst.ImportFrom) and not isinstance(imp.names, cst.ImportStar):
            module = _module_of(imp)
            for alias in imp.names:
                local = alias.asname.name if alias.asname else alias.name
                names[_dotted(local)] = f"{module}.{_dotted(alias.name)}"
    return whole, names


def spelling(module: cst.Module, wanted: Name, aliases: tuple[str, ...] = ()) -> tuple[str, bool]:
    """How ``wanted`` is written in this file, and whether its import must be added.

    ``aliases`` are other modules that export the same name (``typing_extensions`` for
    ``typing``'s): a file that already imports the name from one of them keeps it.
    """
    whole, names = _imported(list(module.body))
    if wanted.attr is None:
        return wanted.module, wanted.module not in whole
    homes = {f"{m}.{wanted.attr}" for m in (wanted.module, *aliases)}
    for local, full in names.items():
        if full in homes:
            return local, False
    if wanted.attr in names:  # the name means something else here: qualify it
        return f"{wanted.module}.{wanted.attr}", wanted.module not in whole
    return wanted.attr, True


def _grow(imp: cst.ImportFrom, attr: str) -> cst.ImportFrom:
    assert not isinstance(imp.names, cst.ImportStar)
    present = [_dotted(a.name) for a in imp.names]
    if attr in present:
        return imp
    aliases = [*imp.names, cst.ImportAlias(cst.Name(attr))]
    aliases.sort(key=lambda a: _name_order(_dotted(a.name)))
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    multiline = imp.lpar is not None and "\n" in cst.Module([]).code_for_node(imp)
    if multiline:
        return imp.with_changes(names=[a.with_changes(comma=imp.names[0].comma) for a in aliases])
    fixed = [a.with_changes(comma=comma) for a in aliases[:-1]]
    fixed.append(aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT))
    return imp.with_changes(names=fixed)


def add_imports(module: cst.Module, needed: list[Name]) -> cst.Module:
    """``module`` with each of ``needed`` imported once, placed as isort would place it."""
    body = list(module.body)
    for name in needed:
        whole, names = _imported(body)
        if name.attr is None and name.module in whole:
            continue
        if name.attr is not None and f"{name.module}.{name.attr}" in names.values():
            continue
        if name.attr is not None and _grow_existing(body, name):
            continue
        _insert(body, name)
    return module.with_changes(body=body)


def _grow_existing(body: list[Statement], name: Name) -> bool:
    assert name.attr is not None
    for i, stmt in enumerate(body):
        imp = _statement(stmt)
        if (
            isinstance(imp, cst.ImportFrom)
            and not imp.relative
            and not isinstance(imp.names, cst.ImportStar)
            and _module_of(imp) == name.module
        ):
            assert isinstance(stmt, cst.SimpleStatementLine)
            body[i] = stmt.with_changes(body=[_grow(imp, name.attr)])
            return True
    return False


def _new_statement(name: Name) -> cst.SimpleStatementLine:
    text = (
        f"import {name.module}" if name.attr is None else (f"from {name.module} import {name.attr}")
    )
    stmt = cst.parse_statement(text + "\n")
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def _header_end(body: list[Statement]) -> int:
    """The index after the module docstring (0 when there is none)."""
    if body and isinstance(body[0], cst.SimpleStatementLine):
        first = body[0].body[0]
        if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString):
            return 1
    return 0


def _insert(body: list[Statement], name: Name) -> None:
    new = _new_statement(name)
    imp = _statement(new)
    assert imp is not None
    key = _order(imp)
    top = [(i, _statement(s)) for i, s in enumerate(body)]
    imports = [(i, s) for i, s in top if s is not None and i < _first_code(body)]
    same = [(i, s) for i, s in imports if _section(_module_of(s)) == key[0]]
    top_name = name.module.split(".")[0]
    kin = [(i, s) for i, s in same if _module_of(s).split(".")[0] == top_name]
    same = kin or same  # beside the package's own imports (a project's first-party block)
    blank = cst.EmptyLine()
    if same:
        after = [i for i, s in same if _order(s) < key]
        if after:
            at = max(after) + 1
            body.insert(at, new)
        else:
            at = same[0][0]
            first = body[at]
            # the new line takes the section's first line's leading blank lines and comments
            body[at] = first.with_changes(leading_lines=[])
            body.insert(at, new.with_changes(leading_lines=first.leading_lines))
        return
    before = [i for i, s in imports if _section(_module_of(s)) < key[0]]
    if before:
        at = max(before) + 1
        body.insert(at, new.with_changes(leading_lines=[blank]))
        return
    later = [i for i, s in imports if _section(_module_of(s)) > key[0]]
    if later:
        at = later[0]
        first = body[at]
        body[at] = first.with_changes(leading_lines=[blank])
        body.insert(at, new.with_changes(leading_lines=first.leading_lines))
        return
    at = _header_end(body)
    body.insert(at, new.with_changes(leading_lines=[blank] if at else []))
    if at + 1 < len(body):
        follower = body[at + 1]
        if not follower.leading_lines:
            body[at + 1] = follower.with_changes(leading_lines=[blank])


def _first_code(body: list[Statement]) -> int:
    """The index of the first statement that is neither the docstring nor an import."""
    for i, stmt in enumerate(body):
        if i == 0 and _header_end(body) == 1:
            continue
        if _statement(stmt) is None:
            return i
    return len(body)

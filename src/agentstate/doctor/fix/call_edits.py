"""Edits to the call that builds an agent, with libcst: a keyword argument, an item of a list.

``create_deep_agent(...)`` gets ``state_schema=S`` (notebook 04: one schema for
the parent and its subagents); ``create_agent(...)`` gets a middleware appended
to its ``middleware=[...]`` (notebook 03: the turn cache). The call is the one
whose lines hold the line the doctor located (:mod:`agentstate.doctor.facts.bindings`);
the argument is written in the call's own layout (one per line with a trailing
comma, or all on one line), and the imports the new text needs are added once
(:mod:`agentstate.doctor.fix.imports`). Each edit returns the source unchanged
when the argument is already there, so a second ``--fix`` changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from agentstate.doctor.fix.imports import Name, add_imports
from agentstate.doctor.fix.source_edits import EditError, Replace, parse


def _called(node: cst.Call) -> str:
    func = node.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


class _CallFinder(cst.CSTVisitor):
    """Every call of one of ``names``, in source order, with its first and last line."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.found: list[tuple[int, int, cst.Call]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if _called(node) in self.names:
            span = self.get_metadata(PositionProvider, node)
            self.found.append((span.start.line, span.end.line, node))


def _calls(module: cst.Module, names: frozenset[str]) -> list[tuple[int, int, cst.Call]]:
    finder = _CallFinder(names)
    MetadataWrapper(module, unsafe_skip_copy=True).visit(finder)
    return finder.found


def call_index(source: str, called: frozenset[str], line: int) -> int:
    """Which call of ``called`` (0 for the first in the file) holds ``line``: the innermost.

    The edits find the call by this number, not by its line, so an earlier fix of the same
    file that adds lines (an import) does not move it.
    """
    found = _calls(parse(source), called)
    holding = [(end - start, i) for i, (start, end, _) in enumerate(found) if start <= line <= end]
    if not holding:
        shown = " or ".join(f"`{n}(...)`" for n in sorted(called))
        raise EditError(f"no {shown} call holds line {line}")
    return min(holding)[1]


def _find_call(module: cst.Module, names: frozenset[str], at: int) -> cst.Call:
    found = _calls(module, names)
    if at >= len(found):
        raise EditError(f"the file no longer has the call the doctor found ({', '.join(names)})")
    return found[at][2]


def _keyword(call: cst.Call, keyword: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    return None


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _append(
    items: Sequence[Any], new: Any, opening: cst.BaseParenthesizableWhitespace
) -> list[Any]:
    """``items`` with ``new`` last, laid out as they are: one per line when a line break follows
    the opening bracket (``opening``), else on one line."""
    if not items:
        return [new]
    last = items[-1]
    if _broken(opening):
        between = cst.Comma(whitespace_after=opening)
        return [*items[:-1], last.with_changes(comma=between), new.with_changes(comma=last.comma)]
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [*items[:-1], last.with_changes(comma=comma), new]


def _broken(opening: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(opening, cst.ParenthesizedWhitespace)


def _item_indent(opening: cst.BaseParenthesizableWhitespace) -> int | None:
    """The column (inside its block) of items laid out one per line, else None."""
    if isinstance(opening, cst.ParenthesizedWhitespace):
        return len(opening.last_line.value)
    return None


def line_width(file: str) -> int:
    """The line length ruff checks ``file`` with: ``line-length`` of the nearest ``ruff.toml``,
    ``.ruff.toml`` or ``pyproject.toml`` (``[tool.ruff]``), else ruff's default, 88."""
    import tomllib
    from pathlib import Path

    for folder in Path(file).resolve().parents:
        for name in ("ruff.toml", ".ruff.toml", "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
            table = data.get("tool", {}).get("ruff") if name == "pyproject.toml" else data
            if isinstance(table, dict):
                width = table.get("line-length")
                return width if isinstance(width, int) and width > 0 else 88
    return 88


def bracketed(
    head: str, items: Sequence[str], close: str, column: int, indent: int, width: int
) -> str:
    """``head`` + the items + ``close`` as ruff format lays them out: on one line if it fits
    (``column``: where the text starts), else the items on one line indented under ``indent``,
    else one per line with a trailing comma, each item laid out the same way when it is a
    call or a list (or a keyword argument holding one)."""
    flat = f"{head}{', '.join(items)}{close}"
    if column + len(flat) <= width and "\n" not in flat:
        return flat
    inner = " " * (indent + 4)
    joined = ", ".join(items)
    if len(inner) + len(joined) <= width and "\n" not in joined:
        return f"{head}\n{inner}{joined}\n{' ' * indent}{close}"
    lines = [f"{inner}{laid_out(item, indent + 4, width - 1)}," for item in items]
    return f"{head}\n" + "\n".join(lines) + f"\n{' ' * indent}{close}"


def laid_out(item: str, indent: int, width: int) -> str:
    """``item`` (an expression or ``keyword=expression``) laid out again when it is a call or a
    list too long for its line starting at ``indent``."""
    if indent + len(item) <= width or "\n" in item:
        return item
    keyword, equal, rest = item.partition("=")
    prefix = ""
    if equal and keyword.isidentifier() and not rest.startswith("="):
        prefix, item = f"{keyword}=", rest
    try:
        node = cst.parse_expression(item)
    except cst.ParserSyntaxError:
        return prefix + item
    column = indent + len(prefix)
    if isinstance(node, cst.Call):
        head = _code(node.func) + "("
        parts = [_code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in node.args]
        return prefix + bracketed(head, parts, ")", column, indent, width)
    if isinstance(node, cst.List):
        parts = [_code(e.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for e in node.elements]
        return prefix + bracketed("[", parts, "]", column, indent, width)
    return prefix + item


def _too_long(text: str, width: int) -> bool:
    return any(len(line) > width for line in text.splitlines())


def _relaid(module: cst.Module, call: cst.Call, width: int) -> cst.Call:
    """``call`` laid out as ruff format would, when one of its lines is too long."""
    start, end, column = _span(module, call)
    lines = module.code.splitlines()
    if not _too_long("\n".join(lines[start - 1 : end]), width):
        return call
    between = [_code(a.comma) for a in call.args if isinstance(a.comma, cst.Comma)]
    if any("#" in c for c in between) or "#" in _code(call.whitespace_before_args):
        raise EditError(f"`{_called(call)}(...)` grows too long and has comments between its args")
    indent = len(lines[start - 1]) - len(lines[start - 1].lstrip(" "))
    # an argument's own lines, written out of its block, get the block's indentation back
    args = [
        _code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        .strip()
        .replace("\n", "\n" + " " * indent)
        for a in call.args
    ]
    text = bracketed(f"{_code(call.func)}(", args, ")", column, indent, width)
    new = cst.parse_expression(_relative(text, indent))
    assert isinstance(new, cst.Call)
    return new


def _relative(text: str, block: int) -> str:
    """``text`` laid out at absolute columns, as libcst writes it inside a block indented by
    ``block`` spaces (it adds the block's indentation to every continuation line)."""
    first, *rest = text.split("\n")
    return "\n".join([first, *(line[block:] if line[:block].isspace() else line for line in rest)])


def _block_indent(module: cst.Module, call: cst.Call) -> int:
    start, _, _ = _span(module, call)
    line = module.code.splitlines()[start - 1]
    return len(line) - len(line.lstrip(" "))


def _span(module: cst.Module, node: cst.CSTNode) -> tuple[int, int, int]:
    """``node``'s first line, last line and first column in ``module``."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    found = wrapper.resolve(PositionProvider).get(node)
    if found is None:
        raise EditError("the edited call cannot be located")
    return found.start.line, found.end.line, found.start.column


def _with_imports(
    module: cst.Module, old: cst.Call, new: cst.Call, needed: list[Name], width: int
) -> str:
    edited = module.visit(Replace(old, new))
    edited = add_imports(edited, needed)
    # find the call again in the edited module (by identity of the new node) and lay it out
    laid = _relaid(edited, new, width)
    if laid is not new:
        edited = edited.visit(Replace(new, laid))
    return edited.code


def add_keyword(
    source: str,
    called: frozenset[str],
    at: int,
    keyword: str,
    value: str,
    needed: Sequence[Name] = (),
    width: int = 88,
) -> str:
    """The ``at``-th call of one of ``called`` (:func:`call_index`) gets ``keyword=value``.

    Left as it is when it passes that value already; an :class:`EditError` when it passes
    another (the reader's choice is not overwritten). A call whose lines grow too long
    (``width``) is laid out one argument per line, as ruff format does.
    """
    module = parse(source)
    call = _find_call(module, called, at)
    present = _keyword(call, keyword)
    if present is not None:
        if _same(_code(present.value), value):
            return source
        raise EditError(f"`{_called(call)}` already passes `{keyword}={_code(present.value)}`")
    indent = _item_indent(call.whitespace_before_args)
    if indent is not None:  # one argument per line: the new one laid out at that indent
        block = _block_indent(module, call)
        laid = laid_out(f"{keyword}={value}", block + indent, width - 1).split("=", 1)[1]
        value = _relative(laid, block)
    arg = cst.Arg(
        cst.parse_expression(value),
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    new = call.with_changes(args=_append(list(call.args), arg, call.whitespace_before_args))
    return _with_imports(module, call, new, list(needed), width)


def add_to_list_keyword(
    source: str,
    called: frozenset[str],
    at: int,
    keyword: str,
    item: str,
    needed: Sequence[Name] = (),
    width: int = 88,
) -> str:
    """``item`` appended to the list the call passes as ``keyword`` (``keyword=[item]`` when it
    passes none). Left as it is when the list holds ``item`` already; an :class:`EditError` when
    ``keyword`` is not a list written in the call (a variable, a call)."""
    module = parse(source)
    call = _find_call(module, called, at)
    present = _keyword(call, keyword)
    if present is None:
        return add_keyword(source, called, at, keyword, f"[{item}]", needed, width)
    if not isinstance(present.value, cst.List):
        raise EditError(
            f"`{_called(call)}`'s `{keyword}=` is not a list written in the call "
            f"(`{_code(present.value)}`)"
        )
    elements = list(present.value.elements)
    if any(_same(_code(e.value), item) for e in elements):
        return source
    codes = [  # `*base` kept starred: `middleware=[*base, TurnCacheMiddleware(...)]`
        ("*" if isinstance(e, cst.StarredElement) else "") + _code(e.value).strip()
        for e in elements
    ]
    if any("\n" in c or "#" in c for c in codes):  # elements laid out by hand: one more line
        column = _item_indent(present.value.lbracket.whitespace_after)
        if column is not None:
            block = _block_indent(module, call)
            item = _relative(laid_out(item, block + column, width - 1), block)
        element = cst.Element(cst.parse_expression(item))
        value: cst.BaseExpression = present.value.with_changes(
            elements=_append(elements, element, present.value.lbracket.whitespace_after)
        )
    else:
        flat = f"[{', '.join([*codes, item])}]"
        indent = _item_indent(call.whitespace_before_args)
        if indent is not None:
            block = _block_indent(module, call)
            laid = laid_out(f"{keyword}={flat}", block + indent, width - 1).split("=", 1)[1]
            flat = _relative(laid, block)
        value = cst.parse_expression(flat)
    args = [a.with_changes(value=value) if a is present else a for a in call.args]
    return _with_imports(module, call, call.with_changes(args=args), list(needed), width)


def _same(code: str, text: str) -> bool:
    """True when two pieces of code differ only in layout (spaces, line breaks)."""
    return "".join(code.split()) == "".join(text.split())

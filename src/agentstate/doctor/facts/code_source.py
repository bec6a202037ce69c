"""A function's own source, read with ``ast``: the code behind a tool, a lambda, a method.

What every fact about code starts from (``facts.tool_facts``, ``facts.routes``,
``facts.replies``): which functions a tool runs, the ``def`` (or lambda) behind a
function object, the names it can see, and whether its code is a library's (not
followed) or the reader's. Taught in notebooks 01-04.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import sys
import textwrap
import tokenize
import types
from collections.abc import Callable, Iterator

from langchain_core.tools import BaseTool

LIBRARIES = frozenset(
    {
        "langchain",
        "langchain_core",
        "langgraph",
        "deepagents",
        "langchain_mcp_adapters",
        "langchain_openai",
        "langchain_anthropic",
        "pydantic",
        "typing_extensions",
    }
)
"""Top-level packages whose code the doctor does not follow from a user's tool."""


def closed_over(obj: object) -> Iterator[object]:
    """What a bound method, a partial or a function closes over (its own object, arguments, cells).

    The first step of every walk from a node to what it can reach (``facts.graph_facts``
    finds middleware and tools this way, ``facts.react`` a chat model).
    """
    if isinstance(obj, types.MethodType):
        yield obj.__self__
        yield obj.__func__
    elif isinstance(obj, functools.partial):
        yield obj.func
        yield from obj.args
        yield from obj.keywords.values()
    elif isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                yield cell.cell_contents
            except ValueError:  # a cell not filled yet
                continue


def top_package(obj: object) -> str:
    """The top-level package an object's code lives in (``""`` if unknown)."""
    module = getattr(obj, "__module__", None) or ""
    return module.split(".", 1)[0]


def is_library(obj: object) -> bool:
    """True for code of LangChain, LangGraph, deepagents and friends (not the user's)."""
    return top_package(obj) in LIBRARIES


def is_stdlib(obj: object) -> bool:
    """True for the standard library's code (never followed: it writes no state key)."""
    top = top_package(obj)
    return top in sys.stdlib_module_names or top == "builtins"


def tool_functions(tool: BaseTool) -> list[Callable[..., object]]:
    """The Python functions behind a tool: ``func``/``coroutine``, or ``_run``/``_arun``."""
    found: list[Callable[..., object]] = []
    for name in ("func", "coroutine"):
        fn = getattr(tool, name, None)
        if callable(fn):
            found.append(fn)
    if not found:
        for name in ("_run", "_arun"):
            method = getattr(type(tool), name, None)
            if inspect.isfunction(method) and not is_library(method):
                found.append(types.MethodType(method, tool))
    return found


_SOURCE_CACHE: dict[types.CodeType, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    return (a.co_code, a.co_consts, a.co_names) == (b.co_code, b.co_consts, b.co_names)


def _which_lambda(fn: types.FunctionType, lambdas: list[ast.Lambda]) -> ast.Lambda | None:
    """The lambda of ``lambdas`` that compiles to ``fn``'s code (several on one line)."""
    if len(lambdas) == 1:
        return lambdas[0]
    found: list[ast.Lambda] = []
    for candidate in lambdas:
        tree = ast.fix_missing_locations(ast.Expression(body=candidate))
        try:
            outer = compile(tree, fn.__code__.co_filename, "eval")
        except (SyntaxError, ValueError, TypeError):
            continue
        codes = [c for c in outer.co_consts if isinstance(c, types.CodeType)]
        if codes and _same_code(codes[0], fn.__code__):
            found.append(candidate)
    return found[0] if found else None  # lambdas that compile alike behave alike


def _lambda_body(fn: types.FunctionType) -> ast.expr | None:
    """A lambda's body read from the columns its code records (a lambda inside a dict
    literal or a call spanning lines has no parsable source of its own)."""
    code = fn.__code__
    spans: list[tuple[int, int, int, int]] = [
        (line, col, end_line, end_col)
        for line, end_line, col, end_col in code.co_positions()
        if line is not None and end_line is not None and col is not None and end_col is not None
        if (line, col) != (end_line, end_col)
    ]
    lines = linecache.getlines(code.co_filename)
    if not spans or not lines:
        return None
    first, first_col = min((s[0], s[1]) for s in spans)
    last, last_col = max((s[2], s[3]) for s in spans)
    if first < 1 or last > len(lines):
        return None
    chunk = [line.encode() for line in lines[first - 1 : last]]
    chunk[-1] = chunk[-1][:last_col]
    chunk[0] = chunk[0][first_col:]
    try:
        return ast.parse(b"".join(chunk).decode().strip(), mode="eval").body
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _as_def(body: ast.expr, args: ast.arguments) -> ast.FunctionDef:
    return ast.FunctionDef(
        name="<lambda>",
        args=args,
        body=[ast.Return(value=body)],
        decorator_list=[],
        returns=None,
    )


def function_ast(fn: types.FunctionType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The ``def`` of ``fn`` parsed from its source (a lambda as a one-return ``def``), or None."""
    code = fn.__code__
    if code in _SOURCE_CACHE:
        return _SOURCE_CACHE[code]
    tree: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    name = code.co_name  # the ``def``'s own name: a factory may rename ``__name__``
    if name == "<lambda>":
        body = _lambda_body(fn)
        if body is not None:
            names = [*code.co_varnames[: code.co_argcount]]
            tree = _as_def(body, ast.arguments(
                posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[],
                kw_defaults=[], defaults=[],
            ))  # fmt: skip
            _SOURCE_CACHE[code] = tree
            return tree
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        module = ast.parse(source)
    except (OSError, TypeError, SyntaxError, ValueError, tokenize.TokenError):
        module = None  # no source (a REPL, a frozen module) or not this function's
    if module is not None and name == "<lambda>":
        lam = _which_lambda(fn, [n for n in ast.walk(module) if isinstance(n, ast.Lambda)])
        if lam is not None:
            tree = _as_def(lam.body, lam.args)
        module = None
    if module is not None:
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                tree = node
                break
    _SOURCE_CACHE[code] = tree
    return tree


def unreadable(fn: types.FunctionType) -> str:
    """```name``` and why its source cannot be read, as a finding says it."""
    file = fn.__code__.co_filename
    if file == "<string>":
        why = "compiled from a string: `exec`, `compile` or `python -c`"
    elif file == "<stdin>":
        why = "typed at a prompt or piped to `python -`"
    elif file.startswith("<"):
        why = f"defined in {file}, which keeps no source"
    elif not linecache.getlines(file):
        why = f"its file {file} is not there (a package shipped without its sources)"
    else:
        why = f"its source in {file} could not be parsed"
    return f"`{fn.__qualname__}` ({why})"


def call_method(obj: object) -> types.FunctionType | None:
    """The ``__call__`` a callable object's own class defines (None for functions, classes
    and the libraries' objects): a node may be an instance of a class of the user's."""
    if isinstance(obj, type | types.FunctionType | types.MethodType | functools.partial):
        return None
    method = inspect.getattr_static(type(obj), "__call__", None)
    if isinstance(method, types.FunctionType) and not is_library(method):
        return method
    return None


def unwrap(fn: object) -> tuple[types.FunctionType | None, object]:
    """The plain function behind ``fn`` and the ``self`` it is bound to (if any); a callable
    object's ``__call__``, bound to the object."""
    bound: object = None
    while isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, types.MethodType):
        bound, fn = fn.__self__, fn.__func__
    method = call_method(fn)
    if method is not None:
        bound, fn = fn, method
    fn = inspect.unwrap(fn) if callable(fn) else fn
    return (fn if isinstance(fn, types.FunctionType) else None), bound


def namespace(fn: types.FunctionType) -> dict[str, object]:
    """The names ``fn`` sees: builtins, its module's globals and its closure."""
    names: dict[str, object] = dict(vars(builtins))
    names.update(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
        try:
            names[name] = cell.cell_contents
        except ValueError:  # an empty cell: defined later
            continue
    return names


def own_returns(tree: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The ``return`` statements of the function itself, not of functions defined in it."""
    found: list[ast.Return] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def expr_text(node: ast.AST) -> str:
    """How a key or path built at run time is named in a finding: ``<expr ...>``."""
    return f"<expr {ast.unparse(node)}>"

"""Where a tool or node is defined: the absolute file and first line of its function.

A finding that names its file and line lands on that line as a pull-request
annotation: on its ``def`` line, not on the decorator above it (``@tool`` is where
the function's code object starts). The function is found behind the wrappers a reader's agent puts
around it: a ``@tool`` (``StructuredTool.func``/``coroutine``), a graph node
(``RunnableCallable.func``), ``functools.partial``, a bound method and
``functools.wraps`` decorators. Used by every check (notebooks 01-06).
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import textwrap
import tokenize
import types

Place = tuple[str | None, int | None]
NOWHERE: Place = (None, None)


def function_of(obj: object, depth: int = 0) -> types.FunctionType | None:
    """The plain Python function behind a tool, a node, a partial or a method (None if none)."""
    if depth > 6 or obj is None:
        return None
    if isinstance(obj, types.MethodType):
        return function_of(obj.__func__, depth + 1)
    if isinstance(obj, functools.partial):
        return function_of(obj.func, depth + 1)
    if isinstance(obj, types.FunctionType):
        plain = inspect.unwrap(obj)
        return plain if isinstance(plain, types.FunctionType) else obj
    if not isinstance(obj, type) and callable(obj):
        method = inspect.getattr_static(type(obj), "__call__", None)
        if isinstance(method, types.FunctionType) and not method.__module__.startswith(
            ("langchain", "langgraph")
        ):
            return method  # a callable object of the user's: its class's ``__call__``
    for name in ("func", "coroutine", "afunc"):
        inner = getattr(obj, name, None)
        if inner is not None and inner is not obj:
            found = function_of(inner, depth + 1)
            if found is not None:
                return found
    for name in ("_run", "_arun"):  # a BaseTool subclass: its own method
        method = getattr(type(obj), name, None)
        if isinstance(method, types.FunctionType) and not method.__module__.startswith(
            ("langchain", "langgraph")
        ):
            return method
    return None


def locate(obj: object) -> Place:
    """``(absolute file, first line)`` of the function behind ``obj``; ``(None, None)`` if unknown.

    A function compiled from a string (``<stdin>``, a docs block) has no file.
    """
    fn = function_of(obj)
    if fn is None:
        return NOWHERE
    filename = fn.__code__.co_filename
    if not filename or filename.startswith("<"):
        return NOWHERE
    return os.path.abspath(filename), def_line(fn.__code__)


@functools.lru_cache(maxsize=1024)
def def_line(code: types.CodeType) -> int:
    """The line of a function's ``def``: ``co_firstlineno`` is its first decorator's line.

    The decorated block is read as ``inspect`` reads it (``linecache``, so a
    notebook cell's source counts) and parsed; where it cannot be, the first line stays.
    """
    first = code.co_firstlineno
    lines = linecache.getlines(code.co_filename)
    if not lines or first > len(lines) or not lines[first - 1].lstrip().startswith("@"):
        return first
    try:
        block = inspect.getblock(lines[first - 1 :])
        tree = ast.parse(textwrap.dedent("".join(block)))
    except (SyntaxError, tokenize.TokenError):
        return first
    node = tree.body[0] if tree.body else None
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return first + node.lineno - 1
    return first

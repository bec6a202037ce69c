"""Where a tool or node is defined: the absolute file and first line of its function.

A finding that names its file and line lands on that line as a pull-request
annotation. The function is found behind the wrappers a reader's agent puts
around it: a ``@tool`` (``StructuredTool.func``/``coroutine``), a graph node
(``RunnableCallable.func``), ``functools.partial``, a bound method and
``functools.wraps`` decorators. Used by every check (notebooks 01-06).
"""

from __future__ import annotations

import functools
import inspect
import os
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
    return os.path.abspath(filename), fn.__code__.co_firstlineno

"""The names a function's compiled code uses: a cheap look at what it calls (notebooks 02-06).

``co_names`` lists every global and attribute name a code object uses, so
``"bind_tools" in code_names(fn)`` tells that a node binds tools to a model, and
``"Command" not in code_names(fn)`` that it never builds one, without parsing
its source.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Iterator


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


@functools.lru_cache(maxsize=4096)
def _names(code: types.CodeType) -> frozenset[str]:
    return frozenset(name for inner in _codes(code) for name in inner.co_names)


def code_names(fn: types.FunctionType) -> frozenset[str]:
    """Every global and attribute name the function's code (and its inner code) uses."""
    return _names(fn.__code__)


@functools.lru_cache(maxsize=4096)
def _strings(code: types.CodeType) -> frozenset[str]:
    return frozenset(
        const for inner in _codes(code) for const in inner.co_consts if isinstance(const, str)
    )


def code_strings(fn: types.FunctionType) -> frozenset[str]:
    """The string constants of the function's code: ``getattr(msg, "tool_calls", [])`` names
    an attribute as a string, not as a name."""
    return _strings(fn.__code__)

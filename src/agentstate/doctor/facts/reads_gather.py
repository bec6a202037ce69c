"""Parallel awaits: ``asyncio.gather`` and the helpers it runs.

A node that returns what gathered helpers build writes each helper's keys; they
run in one step, as the parallel writers of notebook 02 do.
"""

from __future__ import annotations

import ast
import asyncio

from agentstate.doctor.facts.scan_base import ScanBase


class ReadsGather(ScanBase):
    """What an ``asyncio.gather`` call runs, and names it is awaited into."""

    def _is_gather(self, call: ast.Call) -> bool:
        """``asyncio.gather(...)`` (or ``gather`` imported from asyncio)."""
        func = call.func
        if isinstance(func, ast.Attribute):
            return (
                func.attr == "gather"
                and isinstance(func.value, ast.Name)
                and (self._resolve_name(func.value.id) is asyncio)
            )
        return isinstance(func, ast.Name) and self._resolve_name(func.id) is asyncio.gather

    def _awaits_gather(self, node: ast.expr) -> bool:
        inner = node.value if isinstance(node, ast.Await) else node
        return isinstance(inner, ast.Call) and self._is_gather(inner)

    @staticmethod
    def _gathered(call: ast.Call) -> list[ast.expr]:
        """The awaitables a ``gather`` call runs: its arguments, a starred list's items or a
        comprehension's element."""
        parts: list[ast.expr] = []
        for arg in call.args:
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            if isinstance(inner, ast.List | ast.Tuple):
                parts.extend(inner.elts)
            elif isinstance(inner, ast.ListComp | ast.GeneratorExp):
                parts.append(inner.elt)
            elif not isinstance(arg, ast.Starred):
                parts.append(inner)
        return parts

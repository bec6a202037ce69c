"""LangGraph's long-term store: what names it, so its writes are seen.

A node in a ReAct loop that writes the store with what the model chose writes
it again on every turn (``memory-in-react-loop``, notebook 03; used for 06).
"""

from __future__ import annotations

import ast

from agentstate.doctor.facts.scan_base import ScanBase


class ReadsStore(ScanBase):
    """``store``, ``runtime.store``, ``get_store()`` or a store parameter."""

    def _is_store(self, node: ast.expr) -> bool:
        """LangGraph's store: ``store``, ``runtime.store``, ``get_store()``, a store param."""
        if isinstance(node, ast.Name):
            return node.id in self.store_names
        if isinstance(node, ast.Attribute):
            return node.attr == "store"
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            return name == "get_store"
        return False

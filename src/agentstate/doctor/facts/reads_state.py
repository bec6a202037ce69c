"""The state keys a function reads: ``state[k]``, ``state.get(k)``, ``runtime.state[k]``.

A key read that no writer delivers, or read in the step its writer runs, is the
hazard of notebooks 01 and 03 (``unseen-key-read``, ``same-batch-read``); a worker
handing its ``Send`` item back under the same key is notebook 02's doubled list.
"""

from __future__ import annotations

import ast

from agentstate.doctor.facts.scan_base import ScanBase


class ReadsState(ScanBase):
    """What names the state, and the key an expression reads from it."""

    def _is_state(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.state_names
        return isinstance(node, ast.Attribute) and node.attr == "state"

    def _state_key(self, node: ast.expr) -> ast.expr | None:
        """The key expression of ``state[k]`` / ``state.get(k)``, else None."""
        if isinstance(node, ast.Subscript) and self._is_state(node.value):
            return node.slice
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and self._is_state(node.func.value)
            and node.args
        ):
            return node.args[0]
        return None

    def _gives_back(self, value: ast.expr, key: str) -> bool:
        """True when ``value`` holds what the state gave under ``key`` (``[state["q"]]``)."""
        for node in ast.walk(value):
            if isinstance(node, ast.expr):
                read = self._state_key(node)
                if read is not None and self._const(read) == key:
                    return True
        return False

"""The state keys an update writes: a ``Command(update=...)`` or a node's returned dict.

Followed through names, helpers (called or awaited) and ``asyncio.gather`` to the
dict that builds it: two writers of one key in a step without a reducer is
notebook 02's hazard; a key no schema declares is notebook 01's (and 04's).
"""

from __future__ import annotations

import ast

from agentstate.doctor.facts.code_source import expr_text
from agentstate.doctor.facts.reads_files import ReadsFiles
from agentstate.doctor.facts.reads_gather import ReadsGather


class ReadsUpdates(ReadsFiles, ReadsGather):
    """What a Command's update or a node's return writes."""

    def _update(self, node: ast.expr, *, returned: bool = False, hops: int = 0) -> None:
        """Record the keys that ``node`` (a Command update or a node's return) writes."""
        if hops > 4:
            return
        if isinstance(node, ast.Await):  # ``await helper(state)``: what the helper returns
            self._update(node.value, returned=returned, hops=hops)
            return
        if isinstance(node, ast.Call) and self._is_gather(node):
            for part in self._gathered(node):
                self._update(part, returned=returned, hops=hops + 1)
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:  # {**other}
                    self._update(value, returned=returned, hops=hops + 1)
                    continue
                name = self._const(key)
                if name is None:
                    self.facts.dynamic.append(
                        f"writes a state key built at run time: {expr_text(key)}"
                    )
                    continue
                self.facts.writes.add(name)
                if name == "files":
                    self._file_writes(value)
                if returned and self.node_mode and self._gives_back(value, name):
                    self.facts.echoes.add(name)
        elif isinstance(node, ast.Name):
            values = self.assigns.get(node.id) or [
                v for v in self.loop_values.get(node.id, []) if self._awaits_gather(v)
            ]  # ``a, b = await asyncio.gather(...)``: each name is one of the helpers' returns
            if not values:
                if not returned:
                    self.facts.dynamic.append(f"writes an update built elsewhere: {node.id}")
                return
            for value in values:
                self._update(value, returned=returned, hops=hops + 1)
            for key in self.item_keys.get(node.id, []):
                name = self._const(key)
                if name is not None:
                    self.facts.writes.add(name)
        elif isinstance(node, ast.Call):
            fn, bound = self._callee(node.func)
            if fn is None:
                if not returned and not self._is_dict_call(node):
                    self.facts.dynamic.append(f"writes what {ast.unparse(node.func)}() returns")
                elif self._is_dict_call(node):
                    for kw in node.keywords:
                        if kw.arg is not None:
                            self.facts.writes.add(kw.arg)
                return
            returned_facts = self._sub(fn, bound, node_mode=True)
            if returned_facts is not None:
                self.facts.writes |= returned_facts.writes
                self.facts.file_writes |= returned_facts.file_writes
        elif isinstance(node, ast.IfExp):
            self._update(node.body, returned=returned, hops=hops + 1)
            self._update(node.orelse, returned=returned, hops=hops + 1)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            values = self.assigns.get(node.value.id, [])
            if values and all(self._awaits_gather(v) for v in values):  # results[0]
                self._update(node.value, returned=returned, hops=hops + 1)

    @staticmethod
    def _is_dict_call(node: ast.Call) -> bool:
        return isinstance(node.func, ast.Name) and node.func.id == "dict"

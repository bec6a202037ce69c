"""Files on disk a function reads and writes whole (``open``, ``Path.read_text``, ...).

A tool that reads a file, changes it and writes it back loses a parallel call's
write, as deepagents' backends do (notebook 04): the accesses are kept in the
order they run (backend ones too) so the check tells that from a write read back.
"""

from __future__ import annotations

import ast
import types

from agentstate.doctor.facts.code_source import expr_text
from agentstate.doctor.facts.scan_base import ScanBase


class ReadsDisk(ScanBase):
    """Disk reads and whole writes, and every ordered access (disk or backend)."""

    def _disk_path(self, node: ast.expr) -> str:
        """A disk path as its code, a local name followed to the one value it is given."""
        node = self._followed(node)
        const = self._const(node)
        return const if const is not None else expr_text(self._rendered(node))

    def _access(self, call: ast.Call, where: str, path: str, *, written: bool) -> None:
        """Record a read or a whole write of ``path`` where ``call`` runs (its end)."""
        line = call.end_lineno if call.end_lineno is not None else call.lineno
        column = call.end_col_offset if call.end_col_offset is not None else call.col_offset
        self.facts.accesses.append(((line, column), where, path, written))
        facts = self.facts
        if where == "disk":
            (facts.disk_writes if written else facts.disk_reads).add(path)
        else:
            (facts.backend_writes if written else facts.backend_reads).add(path)

    def _disk_open(self, call: ast.Call, path: ast.expr, mode_at: int) -> None:
        """``open(path, mode)`` / ``path.open(mode)``: a read, or a whole-file write."""
        mode: ast.expr | None = call.args[mode_at] if len(call.args) > mode_at else None
        for kw in call.keywords:
            if kw.arg == "mode":
                mode = kw.value
        text = "r" if mode is None else self._const(mode)
        if text is None:
            return  # a mode chosen at run time: not told
        if "w" in text or "+" in text:
            self._access(call, "disk", self._disk_path(path), written=True)
        elif "r" in text or text in ("", "b", "t"):
            self._access(call, "disk", self._disk_path(path), written=False)

    def _disk(self, call: ast.Call, func: ast.Attribute) -> None:
        """``pathlib``'s ``read_text``/``write_text``/``open`` on a path of the user's."""
        owner = func.value
        if isinstance(owner, ast.Name):
            resolved = self._resolve_name(owner.id)
            if isinstance(resolved, types.ModuleType | type) or owner.id in ("self", "cls"):
                return  # Image.open(...), os.open(...): not a path
        if func.attr in ("read_text", "read_bytes"):
            self._access(call, "disk", self._disk_path(owner), written=False)
        elif func.attr in ("write_text", "write_bytes"):
            self._access(call, "disk", self._disk_path(owner), written=True)
        elif func.attr == "open":
            self._disk_open(call, owner, 0)

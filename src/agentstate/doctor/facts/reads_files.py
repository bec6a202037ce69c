"""deepagents' ``files`` channel and its backends: the paths a function reads and writes.

Two parallel writers of ``files``, or a read and a write of one path through a
backend with a step between, lose a file (notebook 04, ``file-read-modify-write``).
Needs the ``deepagents`` extra only to tell a backend object (``backend_protocol``).
"""

from __future__ import annotations

import ast
import functools
import sys

from agentstate._extras import missing
from agentstate.doctor.facts.code_source import expr_text
from agentstate.doctor.facts.reads_state import ReadsState

BACKEND_READS = frozenset({"read", "aread", "download_files", "adownload_files"})
BACKEND_WRITES = frozenset({"write", "awrite", "edit", "aedit", "upload_files", "aupload_files"})


@functools.cache
def backend_protocol() -> type | None:
    """deepagents' ``BackendProtocol``; ``None`` without the ``deepagents`` extra (no backends)."""
    if missing("deepagents"):
        return None
    from deepagents.backends.protocol import BackendProtocol

    return BackendProtocol


class ReadsFiles(ReadsState):
    """What names deepagents' ``files`` or a backend, and the paths an update writes."""

    def _is_files(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name) and node.id in self.file_names:
            return True
        if isinstance(node, ast.BoolOp):  # state.get("files") or {}
            return any(self._is_files(v) for v in node.values)
        key = self._state_key(node)
        return key is not None and self._const(key) == "files"

    def _is_backend(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            if node.id in self.backend_names or "backend" in node.id.lower():
                return True
            return _is_backend_object(self._resolve_name(node.id))
        return isinstance(node, ast.Attribute) and "backend" in node.attr.lower()

    def _file_writes(self, value: ast.expr) -> None:
        if isinstance(value, ast.Dict):
            for key in value.keys:
                if key is not None:
                    self.facts.file_writes.add(self._path(key))
                else:
                    self.facts.file_writes.add("<expr **...>")
        else:
            self.facts.file_writes.add(expr_text(value))


def _is_backend_object(value: object) -> bool:
    """A deepagents backend (none can exist when deepagents was never imported)."""
    if value is None or "deepagents" not in sys.modules:
        return False
    protocol = backend_protocol()
    return protocol is not None and isinstance(value, protocol)

"""Locate the files in ``data/`` whether the package is installed or checked out.

A wheel carries ``data/`` inside the package (``agentstate/data``); an editable
install reads it from the repository root. No network, ever. Shared by
notebooks 01-04 (the RDS spec), 05 (the manual) and 06 (the conversations).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGED = Path(__file__).resolve().parent / "data"
_CHECKOUT = Path(__file__).resolve().parents[2] / "data"


def data_path(name: str) -> Path:
    """Return the path of ``data/<name>``; raise FileNotFoundError naming both places."""
    for root in (_PACKAGED, _CHECKOUT):
        candidate = root / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"data file {name!r} not found in {_PACKAGED} or {_CHECKOUT}; "
        "reinstall agentstate (pip install -e .) from a full checkout"
    )

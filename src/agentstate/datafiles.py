"""Locate the files in ``data/`` whether the package is installed or checked out.

A wheel carries ``data/`` inside the package (``agentstate/data``); an editable
install reads it from the repository root. No network, ever. Shared by
notebooks 01-04 (the RDS spec), 05 (the manual) and 06 (the conversations).
The recorded benchmarks (``data/results/``, shown by notebook 05 and docs/)
are not in the wheel: :func:`results_path` reads them from a checkout only.
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


def results_path(name: str) -> Path:
    """Return the path of ``data/results/<name>`` in a checkout; the wheel does not carry them.

    Raise FileNotFoundError saying where they are (the repository, with the lessons).
    """
    candidate = _CHECKOUT / "results" / name
    if candidate.is_file():
        return candidate
    raise FileNotFoundError(
        f"recorded benchmark {name!r} not found in {_CHECKOUT / 'results'}: the recorded "
        "benchmarks are not in the wheel; they come with the project's source (the sdist or a "
        "clone), installed with pip install -e . from it"
    )

"""Reducers for state keys that several writers update in one super-step.

LangGraph applies every write of a super-step through the key's reducer, and
may call a reducer more than once per write on throwaway copies, so each of
these is pure: it returns a new value and never mutates its inputs.

- :func:`merge_fields`: a dict merged key by key (notebook 02: five parallel
  ``store_requirement`` calls keep five fields).
- :func:`append_unique`: a list that a returning subagent cannot double
  (notebook 04: ``operator.add`` gives ``['pre', 'pre', 'new']``).
- :func:`merge_or_reset`: a per-run dict that fan-out writers merge into and
  ``None`` empties for the next turn (notebook 05's experts).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T", bound=Hashable)


def merge_fields(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> dict[str, Any]:
    """Field-level merge: keys of ``right`` win, nothing else is lost."""
    return {**(left or {}), **(right or {})}


def append_unique(left: Sequence[T] | None, right: Sequence[T] | None) -> list[T]:
    """Append the items of ``right`` not already present, keeping first-seen order.

    Safe when a subagent returns the whole list it was given. It also drops
    legitimate repeats: merge by id instead when items may repeat.
    """
    out = list(left or [])
    seen = set(out)
    for item in right or []:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def merge_or_reset(
    left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Merge ``right`` into ``left`` key by key; a ``None`` write starts a fresh dict."""
    if right is None:
        return {}
    return {**(left or {}), **right}

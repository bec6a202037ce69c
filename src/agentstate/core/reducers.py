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

import sys
from collections.abc import Hashable, Mapping, Sequence
from types import FrameType
from typing import Any, TypeVar

from langgraph.channels.base import BaseChannel

T = TypeVar("T", bound=Hashable)


def _state_key() -> str | None:
    """The state key LangGraph is reducing, read from the channel that called the reducer.

    Called from :func:`_require_dicts`, itself called by the reducer: frame 2.
    """
    frame: FrameType | None = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, BaseChannel) and isinstance(getattr(owner, "key", None), str):
            return owner.key
        frame = frame.f_back
    return None


def _require_dicts(reducer: str, *values: Any) -> None:
    """Raise ``TypeError`` naming the state key if a value is neither ``None`` nor a dict."""
    for value in values:
        if value is None or isinstance(value, Mapping):
            continue
        key = _state_key()
        where = f"state key {key!r}" if key else "this key"
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(
            f"{reducer}: a write to {where} must be a dict of fields, got a "
            f"{type(value).__name__} ({shown})"
        )


def merge_fields(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> dict[str, Any]:
    """Field-level merge: keys of ``right`` win, nothing else is lost.

    A write that is not a dict raises ``TypeError`` naming the state key and the
    value's type (``TurnCacheMiddleware`` turns it into an error for the model).
    """
    _require_dicts("merge_fields", right, left)
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
    _require_dicts("merge_or_reset", right, left)
    return {**(left or {}), **right}

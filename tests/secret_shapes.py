"""Test helper for issue 40's secrets: what a caller can read of an exception, and where a value is.

:func:`shown` is everything an exception lets a caller read (its printed
traceback, and the ``repr`` of every exception, argument, C-level field and
object attribute below it); :func:`leaks` names the artefacts of a run that
still hold a plain value.
"""

from __future__ import annotations

import json
import traceback
from types import GetSetDescriptorType, MemberDescriptorType
from typing import Any

from agentstate.persistence import file_contains


def c_fields(exc: BaseException) -> dict[str, Any]:
    """C-level fields (``OSError.filename``...) of every class of ``exc`` but BaseException."""
    out = {}
    for cls in type(exc).__mro__[:-2]:  # not BaseException, object
        for name, slot in vars(cls).items():
            if isinstance(slot, GetSetDescriptorType | MemberDescriptorType):
                out[name] = getattr(exc, name, None)
    return out


def shown(exc: BaseException | None, depth: int = 4) -> str:
    """All a caller can read of ``exc``: traceback text, reprs of every exception, arg, field.

    Follows the chain, group members, ``vars()``, C-level fields and the
    attributes of objects below them (``depth`` levels).
    """
    if exc is None:
        return ""
    seen = ["".join(traceback.format_exception(exc))]
    todo: list[tuple[Any, int]] = [(exc, 0)]
    done: set[int] = set()
    while todo:
        item, level = todo.pop()
        if id(item) in done or level > depth:
            continue
        done.add(id(item))
        try:
            seen.append(repr(item))
        except Exception:  # noqa: BLE001
            pass
        children: list[Any] = []
        if isinstance(item, BaseException):
            children += [item.__cause__, item.__context__, *item.args]
            children += list(getattr(item, "exceptions", ()))
            children += list(c_fields(item).values())
        if isinstance(item, dict):
            children += list(item.values())
        elif isinstance(item, list | tuple | set):
            children += list(item)
        elif not isinstance(item, str | bytes | int | float | type(None)):
            try:
                children += list(vars(item).values())
            except TypeError:
                pass
        seen += [repr(c) for c in children if isinstance(c, str | bytes)]
        todo += [(c, level + 1) for c in children if c is not None]
    return "\n".join(seen)


def leaks(
    plain: str, *, state: dict, chunks: list, error: BaseException | None, db, server: Any = None
) -> list[str]:
    """Where ``plain`` is found: exception, state, stream, checkpoint, the client's next requests.

    As text or as UTF-8 bytes; the user's own first message aside (it holds what they typed).
    """
    found = []
    places = {
        "exception": shown(error),
        "state": repr({k: v for k, v in state.items() if k != "messages"})
        + repr(state.get("messages", [])[1:]),
        "stream": repr(chunks),
        "requests": json.dumps(server.requests[1:]) if server is not None else "",
    }
    for where, text in places.items():
        if plain in text or repr(plain.encode())[2:-1] in text:
            found.append(where)
    if file_contains(db, plain.encode()):
        found.append("checkpoint")
    return found

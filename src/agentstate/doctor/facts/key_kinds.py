"""The reducer a finding suggests, fitted to the key's declared type (notebooks 02 and 04).

A dict merges by field (``merge_fields``), a list appends (``operator.add``, or
``append_unique`` where a returning subagent could double it), messages merge
by id (``add_messages``), and a string or a number has no merge that keeps
both values: one writer per step, or a list of them. The type is read from the
graph's state schemas (``TypedDict``, dataclass or pydantic annotations).
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import os
import types
import typing
from typing import Any, Literal

Kind = Literal["dict", "list", "messages", "str", "number", "root", "unknown"]
"""``root``: the whole state of ``StateGraph(dict)``, one value in ``__root__``."""

_WRAPPERS = {"NotRequired", "Required", "ReadOnly", "Optional"}


def _strip(annotation: object) -> object:
    """The annotation without ``Annotated``, ``NotRequired``, ``Optional`` and ``| None``."""
    for _ in range(8):
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            annotation = args[0]
        elif getattr(origin, "_name", None) in _WRAPPERS or str(origin).rsplit(".", 1)[-1] in (
            _WRAPPERS
        ):
            annotation = args[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation
    return annotation


def _is_message(item: object) -> bool:
    name = getattr(item, "__name__", "") or str(item)
    return "Message" in name


def kind_of(annotation: object) -> Kind:
    """What a declared type is, as far as a reducer is concerned."""
    plain = _strip(annotation)
    origin = typing.get_origin(plain) or plain
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return "dict"
    if isinstance(plain, type) and typing.is_typeddict(plain):
        return "dict"
    if origin in (list, tuple, set, collections.abc.Sequence, collections.abc.MutableSequence):
        args = typing.get_args(plain)
        return "messages" if args and _is_message(_strip(args[0])) else "list"
    if plain is str:
        return "str"
    if plain in (int, float):
        return "number"
    return "unknown"


def schema_hints(schema: object) -> dict[str, Any]:
    """The keys a state schema declares, with their annotations (TypedDict, dataclass, pydantic)."""
    return _hints(schema)


def _hints(schema: object) -> dict[str, Any]:
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, dict):  # pydantic
        return {name: field.annotation for name, field in fields.items()}
    try:
        return typing.get_type_hints(schema, include_extras=True)
    except Exception:  # noqa: BLE001 - a forward reference the doctor cannot resolve
        return dict(getattr(schema, "__annotations__", {}) or {})


def key_kind(graph: object, key: str) -> Kind:
    """The kind of ``key`` as the graph's state schemas declare it (``unknown`` if none says)."""
    if key == "__root__":
        return "root"
    builder = getattr(graph, "builder", None)
    schemas = getattr(builder, "schemas", None) or {}
    for schema in schemas:
        hints = _hints(schema)
        if key in hints:
            return kind_of(hints[key])
    return "unknown"


@functools.lru_cache(maxsize=256)
def _class_place(schema: type) -> tuple[str | None, int | None]:
    """Where a class is defined (``inspect`` parses its whole file: done once per class)."""
    try:
        file = inspect.getsourcefile(schema)
        line = inspect.getsourcelines(schema)[1]
    except (OSError, TypeError):
        return None, None
    return (os.path.abspath(file), line) if file else (None, None)


def declared_at(graph: object, key: str) -> tuple[str | None, int | None]:
    """``(file, line)`` of the state schema that declares ``key`` (where its reducer goes)."""
    builder = getattr(graph, "builder", None)
    for schema in getattr(builder, "schemas", None) or {}:
        if key in _hints(schema):
            return _class_place(schema) if isinstance(schema, type) else (None, None)
    return None, None


LAST_WINS = (
    "a last-wins reducer, `Annotated[{type}, lambda _, new: new]` (the step's last write is "
    "kept and the others are dropped without an error)."
)
"""The reducer a scalar written by parallel writers can take when losing all but one is fine
(notebook 02's replace reducer: it keeps the reply's last call)."""


def reducer_fix(kind: Kind) -> str:
    """One sentence: the reducer (or the design) that lets several writers of this kind coexist."""
    if kind == "dict":
        return "Declare it with a reducer, e.g. `Annotated[NotRequired[dict], merge_fields]`."
    if kind == "list":
        return (
            "Declare it with a reducer, e.g. `Annotated[list, operator.add]` "
            "(or `append_unique` to keep each item once)."
        )
    if kind == "messages":
        return "Declare it with `Annotated[list, add_messages]`."
    if kind == "root":
        return (
            "`StateGraph(dict)` keeps the whole state in one value, `__root__`, with no reducer: "
            "declare a `TypedDict` state with a reducer on each key parallel nodes write."
        )
    if kind == "str":
        return (
            "A string has no merge that keeps both values: keep one writer per step, "
            "make it `Annotated[list[str], operator.add]`, or, when any one value will do, "
            f"{LAST_WINS.format(type='str')}"
        )
    if kind == "number":
        return (
            "Keep one writer per step, declare a reducer that combines the values "
            "(e.g. `Annotated[int, operator.add]` for counts), or, when any one value will do, "
            f"{LAST_WINS.format(type='int')}"
        )
    return (
        "Declare it with a reducer that combines the values (`merge_fields` for a dict, "
        "`operator.add` for a list), or keep one writer per step."
    )


def doubling_fix(kind: Kind) -> str:
    """One sentence: how to stop a returned whole value from being appended again."""
    if kind in ("list", "unknown"):
        return "Use `append_unique` or merge by id."
    if kind == "messages":
        return "Use `add_messages` (it merges by id)."
    return (
        "Give the subgraph an output schema without the key, or drop the reducer and keep "
        "one writer."
    )

"""The value pass: every value the store holds for a thread, replaced wherever it sits.

The key rules of :class:`agentstate.core.SecretRedactionMiddleware` find a
secret by where it sits (an argument's name, a ``password: x`` pair); a
provider that puts a value somewhere nobody listed would carry it past them.
So after those rules, one pass over every string of the reply (content
blocks of every type, ``additional_kwargs``, ``response_metadata``, tool
calls, invalid tool calls and their errors, a structured response) replaces
every value already known for the thread by its reference, also when it is
written JSON-escaped, URL-encoded, HTML-escaped or base64-encoded. It never
rewrites a reference, a dict key, an id, a block's ``type`` or a tool's
name, nor a field name of a field/value pair (a secret equal to ``password``
would otherwise break the call that stores it), nor a reference its store
made (a string only shaped like one, ``$secret:<value>-<24 hex>``, is text:
the value in it is replaced). In tool arguments, a structured response and
JSON text, a number whose JSON text is a known value (``{"pin": 12345678}``)
is replaced too; JSON text with a key twice is searched as text. Values
shorter than :data:`MIN_ECHO` characters are not searched for. The thread's
values come ready from its :class:`~agentstate.core.redaction_index.ValueIndex`.
Taught in notebook 02; ``docs/secrets.md`` has the table.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from agentstate.core.redaction_index import MIN_ECHO, ValueIndex, encodings
from agentstate.core.redaction_json import loads
from agentstate.core.secrets import ID_CHARS, MAX_NAME

__all__ = ["MIN_ECHO", "KnownValues", "encodings", "is_made_ref"]

# A reference a SecretStore made (label, then the random id): never rewritten inside.
MADE_REF = (
    rf"\$secret:[A-Za-z0-9][A-Za-z0-9._/-]{{0,{MAX_NAME - 1}}}-[0-9a-f]{{{ID_CHARS}}}(?![0-9a-f])"
)
_MADE_REF = re.compile(MADE_REF)
# Keys whose string values are structure, not content: never rewritten outside tool arguments.
STRUCTURE_KEYS = frozenset(
    {"type", "id", "call_id", "tool_call_id", "index", "name", "role", "status"}
)
# Keys whose values are a tool's arguments or a structured response: every value is content.
PAYLOAD_KEYS = frozenset({"args", "input", "arguments", "partial_json", "parsed"})


def is_made_ref(value: object) -> bool:
    """True for a whole reference of the shape a store makes (``$secret:<label>-<24 hex>``)."""
    return isinstance(value, str) and _MADE_REF.fullmatch(value) is not None


def _json_container(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        parsed = loads(stripped)
    except ValueError:  # not JSON, a key twice, or nested too deep: searched as text
        return None
    return parsed if isinstance(parsed, dict | list) else None


class KnownValues:
    """Replace every known plain value (any of its :func:`encodings`) by its reference.

    ``index`` holds the thread's values (None: no value yet). ``keep(key,
    value)`` says which other strings stay as they are (a field/value pair's
    field name); ``is_ref(text)`` says which reference-shaped strings are real
    references, kept whole.
    """

    def __init__(
        self,
        index: ValueIndex | None,
        keep: Callable[[str, str], bool] = lambda key, value: False,
        is_ref: Callable[[str], bool] = lambda text: False,
    ) -> None:
        self.index = index if index is not None and index.matcher else None
        self.keep = keep
        self.is_ref = is_ref

    def __bool__(self) -> bool:
        return self.index is not None

    def text(self, text: str) -> str:
        """``text`` with every known value replaced (JSON text: its values only, never its keys)."""
        if self.index is None or not text:
            return text
        parsed = _json_container(text)
        if parsed is not None:
            clean = self.walk(parsed, payload=True)
            return text if clean == parsed else json.dumps(clean, ensure_ascii=False)
        return self._replace(text)

    def _replace(self, text: str) -> str:
        """Every known form in ``text`` replaced; the store's own references kept whole."""
        assert self.index is not None
        index = self.index
        kept = [m.span() for m in _MADE_REF.finditer(text) if self.is_ref(m[0])]
        out: list[str] = []
        done = 0
        for start, end in [*kept, (len(text), len(text))]:
            segment = text[done:start]
            last = 0
            for a, b, matches in index.matcher.regions(segment):
                # overlapping values: the whole union goes, each value's reference in its place
                refs = [index.ref_of(segment[x:y]) for x, y in matches]
                shown = [r for i, r in enumerate(refs) if r is not None and r not in refs[:i]]
                if shown:
                    out += [segment[last:a], *shown]
                    last = b
            out += [segment[last:], text[start:end]]
            done = end
        clean = "".join(out)
        return text if clean == text else clean

    def replace(self, text: str) -> str:
        """``text`` with every known form replaced, read as plain text (never as JSON)."""
        return text if self.index is None or not text else self._replace(text)

    def data(self, value: bytes | bytearray) -> bytes | bytearray:
        """Bytes (a driver's raw output, ``CalledProcessError.stderr``) with known values replaced.

        Read as UTF-8 (undecodable bytes kept as they are, ``surrogateescape``)
        and then as Latin-1, so a value is found in either encoding; every
        other byte is kept.
        """
        text = bytes(value).decode("utf-8", "surrogateescape")
        clean = self.text(text).encode("utf-8", "surrogateescape")
        if not clean.isascii():
            clean = self.replace(clean.decode("latin-1")).encode("latin-1")
        if clean == value:
            return value
        return bytearray(clean) if isinstance(value, bytearray) else clean

    def number(self, value: float) -> Any:
        """A number whose JSON text is a known value: its reference; else the number."""
        assert self.index is not None
        ref = self.index.refs.get(json.dumps(value))
        return value if ref is None or len(json.dumps(value)) < MIN_ECHO else ref

    def walk(self, value: Any, *, payload: bool = False, key: str = "") -> Any:
        """``value`` with every string in it rewritten by :meth:`text`; dict keys are kept.

        Outside ``payload`` (a tool's arguments, a structured response), the
        strings under :data:`STRUCTURE_KEYS` are kept: ids, block types, names,
        and numbers are left (token counts, indexes); inside it, a number whose
        JSON text is a known value is replaced.
        """
        if self.index is None:
            return value
        if isinstance(value, str):
            return value if self.keep(key, value) else self.text(value)
        if isinstance(value, bool):
            return value
        if isinstance(value, bytes | bytearray):
            return self.data(value)
        if isinstance(value, int | float):
            return self.number(value) if payload else value
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                inner = payload or k in PAYLOAD_KEYS
                if not inner and k in STRUCTURE_KEYS and isinstance(v, str):
                    out[k] = v
                else:
                    out[k] = self.walk(v, payload=inner, key=str(k))
            return out if out != value else value
        if isinstance(value, list | tuple):
            items = [self.walk(v, payload=payload, key=key) for v in value]
            return type(value)(items) if items != list(value) else value
        if isinstance(value, BaseModel):
            data = {name: getattr(value, name) for name in type(value).model_fields}
            clean = self.walk(data, payload=True)
            changed = {k: v for k, v in clean.items() if v != data[k]}
            return value.model_copy(update=changed) if changed else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            clean = self.walk(fields, payload=True)
            changed = {k: v for k, v in clean.items() if v != fields[k]}
            return dataclasses.replace(value, **changed) if changed else value
        return value

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
would otherwise break the call that stores it). Values shorter than
:data:`MIN_ECHO` characters are not searched for. Taught in notebook 02;
``docs/secrets.md`` has the table.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from pydantic import BaseModel

from agentstate.core.secrets import ID_CHARS, MAX_NAME

MIN_ECHO = 4  # shorter hidden values are not searched for in text
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


@functools.lru_cache(maxsize=4096)
def encodings(plain: str) -> frozenset[str]:
    """``plain`` as models and tools commonly rewrite it: the ways the value pass finds it."""
    escaped = json.dumps(plain)[1:-1]
    b64 = base64.b64encode(plain.encode()).decode()
    forms = {
        plain,
        escaped,  # inside a JSON string (ASCII escapes)
        json.dumps(plain, ensure_ascii=False)[1:-1],
        json.dumps(escaped)[1:-1],  # inside JSON inside a JSON string
        quote(plain, safe=""),  # URL-encoded
        quote(plain),
        quote_plus(plain),
        html.escape(plain),  # HTML/XML text and attributes
        html.escape(plain, quote=False),
        b64,  # base64 (a Kubernetes Secret's data, a Basic header of the value alone)
        b64.rstrip("="),
    }
    return frozenset(f for f in forms if len(f) >= MIN_ECHO)


def _json_container(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _trie(forms: frozenset[str]) -> str:
    """One regex matching any of ``forms``, longest first, shaped as a trie.

    A plain alternation of thousands of values makes ``re`` try each at every
    position; a trie follows one branch per character, so the pass stays fast
    however many values a thread holds.
    """
    root: dict[str, Any] = {}
    for form in forms:
        node = root
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}

    def regex(node: dict[str, Any]) -> str:
        run = ""
        while len(node) == 1 and "" not in node:  # a chain without branches: no group
            ((char, node),) = node.items()
            run += re.escape(char)
        branches = [re.escape(c) + regex(child) for c, child in sorted(node.items()) if c]
        if not branches:
            return run
        group = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        if "" in node:  # a form ends here, a longer one goes on: try the longer first
            group = f"(?:{group})?"
        return run + group

    return regex(root)


@functools.lru_cache(maxsize=256)
def _pattern(forms: frozenset[str]) -> re.Pattern[str]:
    """References first (kept whole), then any known form (compiled once per set of values)."""
    return re.compile(f"(?P<ref>{MADE_REF})|(?P<plain>{_trie(forms)})")


class KnownValues:
    """Replace every known plain value (any of its :func:`encodings`) by its reference.

    ``values`` maps plain values to references. ``keep(key, value)`` says
    which other strings stay as they are (a field/value pair's field name).
    """

    def __init__(
        self,
        values: Mapping[str, str],
        keep: Callable[[str, str], bool] = lambda key, value: False,
    ) -> None:
        self.refs: dict[str, str] = {}
        for plain, ref in values.items():
            if len(plain) >= MIN_ECHO:
                for form in encodings(plain):
                    self.refs.setdefault(form, ref)
        self.keep = keep
        self._pattern = _pattern(frozenset(self.refs)) if self.refs else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every known value replaced (JSON text: its values only, never its keys)."""
        if self._pattern is None or not text:
            return text
        parsed = _json_container(text)
        if parsed is not None:
            clean = self.walk(parsed, payload=True)
            return text if clean == parsed else json.dumps(clean, ensure_ascii=False)
        return self._pattern.sub(lambda m: m[0] if m["ref"] else self.refs[m["plain"]], text)

    def walk(self, value: Any, *, payload: bool = False, key: str = "") -> Any:
        """``value`` with every string in it rewritten by :meth:`text`; dict keys are kept.

        Outside ``payload`` (a tool's arguments, a structured response), the
        strings under :data:`STRUCTURE_KEYS` are kept: ids, block types, names.
        """
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return value if self.keep(key, value) else self.text(value)
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

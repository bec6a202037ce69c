"""JSON text that may be cut off, read in one linear pass, or not read at all (notebook 02).

A model's tool arguments can stop inside a value (``finish_reason="length"``):
``{"host": "db1", "password": "Vex-5512-Hol``. The redaction still has to read
them as what they say. langchain-core's ``parse_partial_json`` does, but it
retries ``json.loads`` once per character it drops from the end (quadratic: a
40 KB text took 12-15 s), and it returns the head of any text that merely
*starts* with JSON (``"[1] Create the db, password: x"`` became ``[1]``), so the
free-text rules never saw the rest. :func:`read_partial` reads only a text that
is JSON or a prefix of JSON, in one pass of a tokenizer plus one ``json.loads``;
anything else is free text (``None``), whatever it starts with.
"""

from __future__ import annotations

import json
import re
from typing import Any

# One token at a time, each a regex match (C speed): a whole string, a string cut off at
# the end of the text, a number, a literal (or its cut-off start), or punctuation.
_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<cut_string>"(?:[^"\\]|\\.)*\\?\Z)
    | (?P<number>-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][+-]?[0-9]++)?+(?![0-9.eE+-]))
    | (?P<cut_number>-?[0-9]*+\.?+[0-9]*+(?:[eE][+-]?[0-9]*+)?+\Z)
    | (?P<literal>true|false|null)
    | (?P<cut_literal>(?:t(?:r(?:u)?)?|f(?:a(?:l(?:s)?)?)?|n(?:u(?:l)?)?)\Z)
    | (?P<punct>[{}\[\],:])
    )""",
    re.VERBOSE | re.DOTALL,
)
_SPACE = re.compile(r"[ \t\r\n]*")
# A string (whole or cut off at the end) or a bracket: what the depth scan counts.
_NESTING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
MAX_DEPTH = 100  # JSON nested deeper than this is read as free text, never parsed
_WHOLE_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_CLOSE = {"{": "}", "[": "]"}
# The end of a string cut inside an escape: a lone backslash or part of ``\\uXXXX``.
_CUT_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")


class DuplicateKeyError(ValueError):
    """A JSON object with a key twice: a dict would keep only the last value."""


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refused when a key comes twice (the first would be lost)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise DuplicateKeyError
    return out


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when ``text``'s brackets (outside strings) nest deeper than ``limit``.

    One linear scan, no recursion: ``json.loads`` and every walker after it
    recurse once per level, so a deeper text (``[[[[...``, 100,000 levels) is
    handed to the free-text rules instead of ending the run in ``RecursionError``.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _NESTING.finditer(text):
        char = match[0]
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def loads(text: str) -> Any:
    """``json.loads`` of a text at most :data:`MAX_DEPTH` deep, no key twice; else ValueError."""
    if too_deep(text):
        raise ValueError("JSON nested too deep to read")
    return json.loads(text, strict=False, object_pairs_hook=no_duplicates)


def read_partial(text: str) -> Any:
    """``text`` parsed when it is JSON or JSON cut off at its end; else ``None``.

    A cut-off text is completed the way ``parse_partial_json`` completes it: a
    string value cut off is closed (its head kept), an unfinished key, literal,
    number, ``,`` or ``:`` is dropped, and every open object and array is
    closed. Text after a complete top-level value, or any token JSON does not
    allow where it stands, makes the whole text free text (``None``), and so
    does a key written twice (the dict would hide the first value) or nesting
    deeper than :data:`MAX_DEPTH`. Linear in ``len(text)``.
    """
    if too_deep(text):
        return None
    try:
        return json.loads(text, strict=False, object_pairs_hook=no_duplicates)
    except DuplicateKeyError:
        return None
    except ValueError:
        pass
    completed = _complete(text)
    if completed is None:
        return None
    try:
        return json.loads(completed, strict=False, object_pairs_hook=no_duplicates)
    except ValueError:
        return None


def _complete(text: str) -> str | None:
    """``text`` cut back to its last complete point and closed; None if not a JSON prefix."""
    stack: list[str] = []  # open containers, innermost last
    expect = "value"  # value | key | colon | next (a ',' or the container's close)
    prev = ""  # the last punctuation read ('{', '[', ',', ':') or '' after a value
    safe = 0  # text[:safe] plus the closers of safe_stack is valid JSON
    safe_stack: list[str] = []
    pos, end = 0, len(text)
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= end:
            break
        if safe and not safe_stack:
            return None  # text after a complete top-level value: not JSON
        match = _TOKEN.match(text, pos)
        if match is None:
            return None
        kind, token_end = match.lastgroup, match.end()
        token = text[pos:token_end].lstrip(" \t\r\n")
        if kind == "punct":
            if token in "{[":
                if expect != "value":
                    return None
                stack.append(token)
                expect = "key" if token == "{" else "value"
            elif token in "}]":
                opened = stack[-1] if stack else ""
                if _CLOSE.get(opened) != token or not (expect == "next" or prev == opened):
                    return None  # a mismatched close, or one after ',' or ':'
                stack.pop()
                expect = "next"
            elif token == ",":
                if expect != "next" or not stack:
                    return None
                expect = "key" if stack[-1] == "{" else "value"
            elif expect == "colon":  # ':'
                expect = "value"
            else:
                return None
            prev = token
            if token in "{[}]":
                safe, safe_stack = token_end, list(stack)
            pos = token_end
            continue
        if kind == "string" and expect == "key":
            expect, prev, pos = "colon", "", token_end
            continue
        if kind in ("string", "number", "literal"):
            if expect != "value":
                return None
            expect, prev, pos = "next", "", token_end
            safe, safe_stack = token_end, list(stack)
            continue
        if kind == "cut_string" and expect == "value":  # a value cut off: its head, closed
            head = _CUT_ESCAPE.sub("", token)
            start = token_end - len(token)
            return text[:start] + head + '"' + "".join(_CLOSE[c] for c in reversed(stack))
        if kind == "cut_string" and expect == "key":
            break  # a key cut off: dropped
        if kind == "cut_number" and expect == "value" and token:
            whole = _WHOLE_NUMBER.match(token)  # ``54.`` keeps 54, as parse_partial_json does
            if whole is None:
                break  # ``-``: dropped
            start = token_end - len(token)
            return text[:start] + whole[0] + "".join(_CLOSE[c] for c in reversed(stack))
        if kind == "cut_literal" and expect == "value" and token:
            break  # dropped
        return None
    if safe == 0:
        return None
    return text[:safe] + "".join(_CLOSE[c] for c in reversed(safe_stack))

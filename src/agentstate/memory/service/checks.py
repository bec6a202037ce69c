"""What the memory service accepts: input checks, limits and the one-line refusal (notebook 06).

Both stores (SQLite, :mod:`.store`; Postgres, :mod:`.store_postgres`) and the
server's tools (:mod:`.server`) check their inputs here, so a bad id, text, key,
cursor or ``msg_idx`` is refused with the same :class:`MemoryInputError`
whichever database is behind the service, before anything is written.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

MAX_KEY_CHARS = 200  # a write's or a message's key
MAX_POSITION = 2**53 - 1  # the largest integer every JSON reader keeps exact
# The largest msg_idx a writer may choose itself. Positions (``assign_position``) go on past it
# to MAX_POSITION, so one huge msg_idx can never use up a memory's positions: a writer that
# numbers its own messages moves the next assigned position to at most MAX_MSG_IDX + 1.
MAX_MSG_IDX = 2**31 - 1
LAST_SEQ = 2**63 - 1  # past every seq either store assigns

# Whole-string patterns, used with ``fullmatch``: ``$`` alone would accept a trailing newline.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
# Longest text each field accepts (characters): a message, a summary line, a title, a query.
MAX_CHARS = {
    "raw_entry": 100_000,
    "content": 100_000,
    "summary": 1_000,
    "title": 200,
    "query": 1_000,
}
MAX_TAGS_CHARS = 4_000


class MemoryInputError(ValueError):
    """Bad input or an unknown memory: the message says which and why; nothing was written."""


def check_after(memory_id: str, after: int, last: int) -> None:
    """Refuse an ``assign_position`` ``after`` that would move the memory's positions too far."""
    if after > MAX_MSG_IDX and after > last:
        raise MemoryInputError(
            f"after {after} is past {MAX_MSG_IDX} and past the last position of memory "
            f"{memory_id!r} ({last}); nothing was assigned"
        )


def parse_time(value: Any, name: str) -> str:
    """Validate an RFC3339 cursor and return it normalised to UTC ``...Z``.

    Python's ``fromisoformat`` also takes dates, basic ISO forms and missing
    seconds; a cursor must be a full RFC3339 timestamp, so the shape is checked first.
    """
    if not isinstance(value, str):
        raise MemoryInputError(f"{name} must be an RFC3339 timestamp string, got {value!r}")
    if not RFC3339.fullmatch(value):
        raise MemoryInputError(
            f"{name} must be an RFC3339 timestamp such as 2026-01-01T00:00:00Z, got {value!r}"
        )
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MemoryInputError(f"{name} must be an RFC3339 timestamp, got {value!r}") from None
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def check_id(value: Any, name: str) -> str:
    """An id: 1-128 of letters, digits, ``.``, ``_``, ``:``, ``-``, starting alphanumeric."""
    if not isinstance(value, str) or not value:
        raise MemoryInputError(f"{name} is required")
    if not ID_PATTERN.fullmatch(value):
        raise MemoryInputError(
            f"{name} {value!r} must be 1-128 letters, digits, '.', '_', ':' or '-'"
        )
    return value


def check_text(value: Any, name: str, *, blank_ok: bool = False) -> str:
    """A text field: a string without NUL, within ``MAX_CHARS``, not blank unless allowed.

    ``raw_entry`` may be empty or only spaces (a message is stored verbatim,
    whatever it is); a summary, a context or a query that is only whitespace says nothing.
    """
    if not isinstance(value, str):
        raise MemoryInputError(f"{name} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise MemoryInputError(f"{name} must not contain a NUL character")
    if len(value) > MAX_CHARS[name]:
        raise MemoryInputError(f"{name} is {len(value)} characters; the limit is {MAX_CHARS[name]}")
    if not blank_ok and not value.strip():
        raise MemoryInputError(f"{name} must not be empty or only whitespace")
    return check_encodable(value, name)


def check_encodable(value: str, name: str) -> str:
    """Refuse a lone surrogate (such as ``"\\ud800"``): valid in a Python str, not in UTF-8.

    JSON can carry one (``"\\ud800"``), SQLite and every UTF-8 reader cannot; without
    this check the write fails deep in a codec with a message that names no field.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryInputError(
            f"{name} contains a lone surrogate {value[exc.start]!r} at character {exc.start}: "
            "not valid Unicode text (encode the text properly, or replace that character)"
        ) from None
    return value


def written_msg_idx(tags: dict[str, Any]) -> int | None:
    """The integer ``msg_idx`` of an entry's tags (None if it has none, or another type)."""
    idx = tags.get("msg_idx")
    return idx if isinstance(idx, int) and not isinstance(idx, bool) else None


def msg_idx_refusal(memory_id: str, idx: int) -> MemoryInputError:
    """The one-line refusal of a ``msg_idx`` past :data:`MAX_MSG_IDX` the memory never assigned."""
    return MemoryInputError(
        f"msg_idx {idx} is past {MAX_MSG_IDX}, the largest a writer may give, and is not a "
        f"position memory {memory_id!r} assigned (ask assign_position for one); nothing was stored"
    )


def check_key(value: Any, name: str = "idempotency_key") -> str | None:
    """A key (a write's, a message's): None, or 1-200 characters without control characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise MemoryInputError(f"{name} must be a non-empty string, got {value!r}")
    if len(value) > MAX_KEY_CHARS or any(ord(c) < 32 for c in value):
        raise MemoryInputError(
            f"{name} must be at most {MAX_KEY_CHARS} characters, without control characters"
        )
    return check_encodable(value, name)

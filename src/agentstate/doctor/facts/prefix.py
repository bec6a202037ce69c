"""Where two prompts stop sharing bytes, and whether a large shared part follows (notebook 05).

A prefix cache reuses only the leading bytes two prompts share. When a
timestamp or a counter sits before the manual, two calls differ after a few
characters and then agree again for tens of thousands: the cache reuses
nothing. :func:`divergence` finds that point and the shared run after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

WINDOW = 64
"""Characters matched to find where two prompts agree again after they diverge."""
SEARCH = 4096
"""How far past the divergence the two prompts are searched for a shared window."""


def prompt_text(messages: Sequence[BaseMessage]) -> tuple[str, list[tuple[int, str]]]:
    """The prompt as one text (``role: content`` per message) and where each message starts."""
    parts: list[str] = []
    starts: list[tuple[int, str]] = []
    offset = 0
    for message in messages:
        content = message.content if isinstance(message.content, str) else message.text
        part = f"{message.type}: {content}\n"
        starts.append((offset, message.type))
        parts.append(part)
        offset += len(part)
    return "".join(parts), starts


BLOCK = 4096


def common_prefix(a: str, b: str, start_a: int = 0, start_b: int = 0) -> int:
    """How many characters ``a[start_a:]`` and ``b[start_b:]`` share at their start.

    Whole blocks are compared first (each character copied once), then the
    first differing block is bisected: linear in the shared length, at C speed.
    """
    n = min(len(a) - start_a, len(b) - start_b)
    i = 0
    while (
        i + BLOCK <= n
        and a[start_a + i : start_a + i + BLOCK] == b[start_b + i : start_b + i + BLOCK]
    ):
        i += BLOCK
    low, high = i, min(i + BLOCK, n)
    while low < high:
        mid = (low + high + 1) // 2
        if a[start_a + i : start_a + mid] == b[start_b + i : start_b + mid]:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True)
class Divergence:
    """Two prompts share ``prefix`` characters, then differ, then share ``shared`` again."""

    prefix: int
    resume_a: int
    resume_b: int
    shared: int
    text_a: str
    """``a`` from the line of the divergence to where it realigns."""
    text_b: str


def divergence(a: str, b: str) -> Divergence | None:
    """Where ``a`` and ``b`` diverge and the shared run that follows, if they realign."""
    prefix = common_prefix(a, b)
    if prefix >= min(len(a), len(b)):
        return None
    step = WINDOW // 2  # any window wholly inside a shared run is found at this stride
    for q in range(prefix, min(len(a) - WINDOW, prefix + SEARCH) + 1, step):
        found = b.find(a[q : q + WINDOW], prefix, prefix + SEARCH + WINDOW)
        if found < 0:
            continue
        while q > prefix and found > prefix and a[q - 1] == b[found - 1]:
            q, found = q - 1, found - 1  # back to where they realign
        shared = common_prefix(a, b, q, found)
        return Divergence(
            prefix=prefix,
            resume_a=q,
            resume_b=found,
            shared=shared,
            text_a=context(a, prefix, q),
            text_b=context(b, prefix, found),
        )
    return None


def where(offset: int, starts: list[tuple[int, str]]) -> str:
    """``message 2 (system), character 15`` for an offset into :func:`prompt_text`."""
    index = 0
    for i, (start, _) in enumerate(starts):
        if start <= offset:
            index = i
    start, kind = starts[index] if starts else (0, "?")
    label = len(kind) + 2  # the "system: " prompt_text puts before the content
    return f"message {index + 1} ({kind}), character {max(0, offset - start - label)}"


def context(text: str, offset: int, end: int, before: int = 60) -> str:
    """``text[..end]`` from the start of the line holding ``offset`` (at most ``before`` back)."""
    start = max(text.rfind("\n", 0, offset) + 1, offset - before)
    return text[start:end]

"""One model call, timed: time to first content token and total latency.

TTFT is taken at the first streamed chunk that carries text (a role-only
first chunk does not count); latency at the end of the stream. A reply with
no text at all has TTFT = latency; a stream with neither text nor a finish
reason (no choices at all) is no reply and an error. A client-side failure of the endpoint
(HTTP error, timeout, a reply that is not a chat stream) is raised as one
:class:`~agentstate.experts.llm.ModelEndpointError`. Also the offline stub answer, which cites
the manual chapter that best matches the query. Taught in notebook 05.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from agentstate.experts.llm import NO_REPLY, ModelEndpointError, endpoint_error
from agentstate.experts.manual import Manual
from agentstate.experts.personas import EXPERTS


@dataclass(frozen=True)
class TimedReply:
    text: str
    ttft_ms: float
    latency_ms: float


def _chunk_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", "")) if isinstance(b, dict) else ""
            for b in content
        )
    return ""


def timed_stream(
    model: BaseChatModel, messages: Sequence[BaseMessage], **kwargs: Any
) -> TimedReply:
    """Stream one reply and time it (``kwargs`` go to the model, e.g. ``extra_body``)."""
    start = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    finished = False
    try:
        for chunk in model.stream(list(messages), **kwargs):
            text = _chunk_text(chunk.content)
            if text and first is None:
                first = time.perf_counter()
            parts.append(text)
            finished = finished or bool(chunk.response_metadata.get("finish_reason"))
    except Exception as err:
        failure = endpoint_error(err, getattr(model, "request_timeout", None))
        if failure is None:
            raise
        raise failure from err
    if first is None and not finished:
        raise ModelEndpointError(NO_REPLY)
    end = time.perf_counter()
    return TimedReply(
        text="".join(parts).strip(),
        ttft_ms=round(((first or end) - start) * 1000, 1),
        latency_ms=round((end - start) * 1000, 1),
    )


_WORD = re.compile(r"[a-z]{4,}")


def _chapters(manual: Manual) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for block in manual.text.split("\n## ")[1:]:
        heading, _, body = block.partition("\n")
        number = heading.split(".", 1)[0]
        if number.isdigit():
            out[int(number)] = (heading.strip(), body)
    return out


def stub_answer(expert: str, query: str, manual: Manual) -> str:
    """A deterministic, offline answer: the expert's best-matching chapter and its first rule."""
    persona = EXPERTS[expert]
    chapters = _chapters(manual)
    words = set(_WORD.findall(query.lower()))
    known = [c for c in persona.chapters if c in chapters] or sorted(chapters)[:1]
    if not known:
        return f"{persona.title}: the loaded part of the manual has no numbered chapter."

    def score(chapter: int) -> tuple[int, int]:
        heading, body = chapters[chapter]
        in_heading = words & set(_WORD.findall(heading.lower()))
        in_body = words & set(_WORD.findall(body.lower()))
        return 3 * len(in_heading) + len(in_body), -known.index(chapter)

    best = max(known, key=score)
    heading, body = chapters[best]
    first_rule = next((line for line in body.splitlines() if line[:1].isdigit()), "")
    rule = first_rule.split(" ", 1)[0]
    number, _, title = heading.partition(". ")
    return f"see chapter {number} ({title}), starting at rule {rule}."

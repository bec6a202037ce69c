"""A loopback Anthropic Messages API that replays a lesson's replies over real HTTP.

The Anthropic twin of :mod:`agentstate.models.openai_replay`, used by the
secrets tests of notebook 02 (``tests/test_secrets_*.py``): deepagents'
default provider is Anthropic, and ``ChatAnthropic`` puts tool arguments in
two places (``tool_calls`` and the ``tool_use`` blocks of
``AIMessage.content``), so redaction has to be proven against the real
client. :class:`AnthropicReplayServer` is a real HTTP server on 127.0.0.1 (a
free port) that answers ``POST /v1/messages`` with whatever a chat model (a
:class:`ScriptedChatModel`, a :class:`PolicyChatModel`) replies to the
messages it received, in Anthropic's wire format: a ``text`` block and one
``tool_use`` block per call, and server-sent events when the request says
``"stream": true`` (text in several ``text_delta`` events, each call's input
as two ``input_json_delta`` halves, so the client really reassembles them).
A reply's ``invalid_tool_calls`` go out with their raw, unparsable input
text, as a misbehaving model would stream it. It records every request body,
so a test can check what the client sent back on the next request.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentstate.models.replay_http import (
    HOST,
    LoopbackReplayServer,
    ReplayHandler,
    WireFormatError,
)

MESSAGES_PATH = "/v1/messages"
TEXT_CHUNK = 8  # characters per streamed text delta


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def to_messages(body: dict[str, Any]) -> list[BaseMessage]:
    """Anthropic ``system`` + ``messages`` -> LangChain messages, tool names restored."""
    wire = body.get("messages")
    if not isinstance(wire, list) or not wire:
        raise WireFormatError("'messages' must be a non-empty list")
    out: list[BaseMessage] = []
    if body.get("system"):
        out.append(SystemMessage(_block_text(body["system"])))
    names: dict[str, str] = {}
    for i, m in enumerate(wire):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role not in ("user", "assistant") or not isinstance(blocks, list):
            raise WireFormatError(f"message {i}: needs role user|assistant and content")
        if role == "assistant":
            calls = []
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    use_id, name = b.get("id"), b.get("name")
                    if not isinstance(use_id, str) or not isinstance(name, str):
                        raise WireFormatError(f"message {i}: tool_use needs a string id and name")
                    if not isinstance(b.get("input"), dict):
                        raise WireFormatError(f"message {i}: tool_use {use_id!r} input")
                    names[use_id] = name
                    calls.append({"name": name, "args": b["input"], "id": use_id})
            out.append(AIMessage(content=_block_text(blocks), tool_calls=calls))
            continue
        text = []
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                call_id = b.get("tool_use_id")
                if not isinstance(call_id, str) or call_id not in names:
                    raise WireFormatError(f"message {i}: tool result for unknown call {call_id!r}")
                status = "error" if b.get("is_error") else "success"
                out.append(
                    ToolMessage(
                        _block_text(b.get("content")),
                        tool_call_id=call_id,
                        name=names[call_id],
                        status=status,
                    )
                )
            elif isinstance(b, dict) and b.get("type") == "text":
                text.append(b.get("text", ""))
        if text:
            out.append(HumanMessage("".join(text)))
    return out


def _text(message: AIMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def _calls(message: AIMessage) -> list[tuple[str, str, str]]:
    """(id, name, raw JSON input) per call, the unparsable ones with their raw text."""
    calls = [
        (c["id"] or f"toolu_{uuid.uuid4().hex[:20]}", c["name"], json.dumps(c["args"]))
        for c in message.tool_calls
    ]
    calls += [
        (c.get("id") or f"toolu_{uuid.uuid4().hex[:20]}", c.get("name") or "", c.get("args") or "")
        for c in message.invalid_tool_calls
    ]
    return calls


def message_body(message: AIMessage, model: str) -> dict[str, Any]:
    """A Messages API response body for one reply (non-streaming)."""
    content: list[dict[str, Any]] = []
    if _text(message):
        content.append({"type": "text", "text": _text(message)})
    calls = _calls(message)
    for call_id, name, raw in calls:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:  # a non-streamed reply can only carry an object
            parsed = {"raw": raw}
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": parsed})
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def message_events(message: AIMessage, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The same reply as (event name, data) server-sent events, split as Anthropic splits."""
    head = message_body(AIMessage(content=""), model)
    head.update(content=[], stop_reason=None)
    yield "message_start", {"type": "message_start", "message": head}
    index = 0
    text = _text(message)
    if text:
        start = {"type": "content_block_start", "index": index}
        yield "content_block_start", {**start, "content_block": {"type": "text", "text": ""}}
        for at in range(0, len(text), TEXT_CHUNK):
            delta = {"type": "text_delta", "text": text[at : at + TEXT_CHUNK]}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    calls = _calls(message)
    for call_id, name, raw in calls:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
        half = len(raw) // 2
        for part in (raw[:half], raw[half:]):
            delta = {"type": "input_json_delta", "partial_json": part}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 0}}
    yield "message_stop", {"type": "message_stop"}


class _Handler(ReplayHandler):
    route = MESSAGES_PATH
    invalid = "invalid messages request"
    not_found = "not_found_error"
    server_error = "api_error"

    def _error(self, status: int, message: str, kind: str) -> None:
        self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def to_messages(self, body: dict[str, Any]) -> list[BaseMessage]:
        return to_messages(body)

    def reply_body(self, reply: AIMessage, name: str) -> dict[str, Any]:
        return message_body(reply, name)

    def reply_events(self, reply: AIMessage, name: str) -> Iterator[str]:
        for event, data in message_events(reply, name):
            yield f"event: {event}\ndata: {json.dumps(data)}\n\n"


class AnthropicReplayServer(LoopbackReplayServer):
    """``POST /v1/messages`` on 127.0.0.1, answered by ``model``; records requests.

    Use as a context manager and give
    ``ChatAnthropic(model="replay", base_url=server.base_url, api_key="not-needed")``
    to any agent.
    """

    thread_name = "anthropic-replay"
    handler_class = _Handler

    @property
    def base_url(self) -> str:
        """What ``ChatAnthropic(base_url=...)`` needs (the client appends ``/v1/messages``)."""
        return f"http://{HOST}:{self.port}"

"""A loopback OpenAI-compatible endpoint that replays a lesson's replies over real HTTP.

Used by every notebook's "with a real client" path and by the tests of notebooks 01-06.

The lessons run on a scripted model; a reader runs them on a real endpoint
through ``langchain_openai.ChatOpenAI``. :class:`ReplayServer` is the bridge
that lets a test prove the agents work unchanged over the wire: a real HTTP
server on 127.0.0.1 (a free port) that speaks ``POST /v1/chat/completions``
and the Responses API, ``POST /v1/responses``
(:mod:`agentstate.models.openai_responses`, for
``ChatOpenAI(use_responses_api=True)``), and answers with whatever a chat
model (a :class:`ScriptedChatModel`, a :class:`PolicyChatModel`) replies to
the messages it received, in the OpenAI wire format: parallel
``tool_calls`` with JSON-encoded ``arguments``, and server-sent-event chunks
when the request says ``"stream": true`` (content split into several
deltas, each call's arguments in two halves, so the client really
reassembles them). It records every request body it receives, so a test can
check what the client sent back on the next request (for lesson 02: the
secret reference, never the plain password).

Incoming messages are converted back with their tool names restored from the
assistant message that made the call (the wire format carries only the id).
Bad requests get a 400 with an OpenAI-style error body; a model that fails
(a script run out) gets a 500 that names the failure. A reply whose
``response_metadata`` holds a ``finish_reason`` (``length``: cut off) goes
out with it. Used by ``tests/test_openai_wire.py``; the README's "Using a
real model" section shows how to point an agent at any endpoint.
"""

from __future__ import annotations

import json
import time
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

from agentstate.models import openai_responses
from agentstate.models.openai_responses import RESPONSES_PATH
from agentstate.models.replay_http import (
    HOST,
    LoopbackReplayServer,
    ReplayHandler,
    WireFormatError,
)

CHAT_PATH = "/v1/chat/completions"
TEXT_CHUNK = 8  # characters per streamed content delta


def to_messages(wire: Any) -> list[BaseMessage]:
    """OpenAI ``messages`` -> LangChain messages, tool names restored from their calls."""
    if not isinstance(wire, list) or not wire:
        raise WireFormatError("'messages' must be a non-empty list")
    names: dict[str, str] = {}
    out: list[BaseMessage] = []
    for i, m in enumerate(wire):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        if role in ("system", "developer"):
            out.append(SystemMessage(content or ""))
        elif role == "user":
            out.append(HumanMessage(content or ""))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                call_id = c.get("id") if isinstance(c, dict) else None
                function = c.get("function") if isinstance(c, dict) else None
                if not isinstance(function, dict):
                    function = {}
                name = function.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str) or not name:
                    raise WireFormatError(
                        f"message {i}: a tool call needs a string 'id' and 'function.name'"
                    )
                try:
                    args = json.loads(function.get("arguments") or "{}")
                except json.JSONDecodeError:
                    raise WireFormatError(
                        f"message {i}: tool call {call_id!r} has arguments that are not JSON"
                    ) from None
                if not isinstance(args, dict):
                    raise WireFormatError(
                        f"message {i}: tool call {call_id!r} has arguments that are not an object"
                    )
                names[call_id] = name
                calls.append({"name": name, "args": args, "id": call_id})
            out.append(AIMessage(content=content or "", tool_calls=calls))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in names:
                raise WireFormatError(f"message {i}: tool result for unknown call {call_id!r}")
            out.append(ToolMessage(content or "", tool_call_id=call_id, name=names[call_id]))
        else:
            raise WireFormatError(f"message {i}: unknown role {role!r}")
    return out


def wire_tool_calls(message: AIMessage) -> list[dict[str, Any]]:
    """An AIMessage's tool calls in the OpenAI format (arguments as a JSON string).

    Its ``invalid_tool_calls`` go out with their raw argument text, as a model
    that wrote broken JSON sends them.
    """
    calls = [
        {
            "id": c["id"] or f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
        }
        for c in message.tool_calls
    ]
    return calls + [
        {
            "id": c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": c.get("name") or "", "arguments": c.get("args") or ""},
        }
        for c in message.invalid_tool_calls
    ]


def _text(message: AIMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def _finish(message: AIMessage, calls: list[dict[str, Any]]) -> str:
    """Why the reply ended: its own ``finish_reason`` (``length``: cut off), or the usual."""
    given = message.response_metadata.get("finish_reason")
    return given if isinstance(given, str) else ("tool_calls" if calls else "stop")


def completion(message: AIMessage, model: str) -> dict[str, Any]:
    """A ``chat.completion`` response body for one reply."""
    calls = wire_tool_calls(message)
    body: dict[str, Any] = {"role": "assistant", "content": _text(message) or None}
    if calls:
        body["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": body, "finish_reason": _finish(message, calls)}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def completion_chunks(message: AIMessage, model: str) -> Iterator[dict[str, Any]]:
    """The same reply as ``chat.completion.chunk`` events, split the way real servers split."""
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    text = _text(message)
    for start in range(0, len(text), TEXT_CHUNK):
        yield chunk({"content": text[start : start + TEXT_CHUNK]})
    calls = wire_tool_calls(message)
    for index, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        first = {"name": call["function"]["name"], "arguments": arguments[:half]}
        head_delta = {"index": index, "id": call["id"], "type": "function", "function": first}
        yield chunk({"tool_calls": [head_delta]})
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
    yield chunk({}, _finish(message, calls))


class _Handler(ReplayHandler):
    route = CHAT_PATH
    more_routes = (RESPONSES_PATH,)
    invalid = "invalid chat completion request"

    def _error(self, status: int, message: str, kind: str) -> None:
        self._json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        """``GET /v1/models`` lists the one replayed model, as clients probe it."""
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "replay", "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}; POST {CHAT_PATH}", self.not_found)

    @property
    def _responses(self) -> bool:
        return self.request_path == RESPONSES_PATH

    def to_messages(self, body: dict[str, Any]) -> list[BaseMessage]:
        if self._responses:
            return openai_responses.to_messages(body)
        return to_messages(body.get("messages"))

    def reply_body(self, reply: AIMessage, name: str) -> dict[str, Any]:
        if self._responses:
            return openai_responses.response(reply, self.request_body)
        return completion(reply, name)

    def reply_events(self, reply: AIMessage, name: str) -> Iterator[str]:
        if self._responses:  # named events, no [DONE] line
            for event in openai_responses.response_events(reply, self.request_body):
                yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            return
        for event in completion_chunks(reply, name):
            yield f"data: {json.dumps(event)}\n\n"
        yield "data: [DONE]\n\n"


class ReplayServer(LoopbackReplayServer):
    """``POST /v1/chat/completions`` on 127.0.0.1, answered by ``model``; records requests.

    Use as a context manager (``with ReplayServer(model) as server:``) and give
    ``ChatOpenAI(base_url=server.base_url, api_key="not-needed")`` to any agent.
    """

    thread_name = "openai-replay"
    handler_class = _Handler

    @property
    def base_url(self) -> str:
        """What ``ChatOpenAI(base_url=...)`` needs."""
        return f"http://{HOST}:{self.port}/v1"

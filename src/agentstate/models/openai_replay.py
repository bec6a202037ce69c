"""A loopback OpenAI-compatible endpoint that replays a lesson's replies over real HTTP.

Used by every notebook's "with a real client" path and by the tests of notebooks 01-06.

The lessons run on a scripted model; a reader runs them on a real endpoint
through ``langchain_openai.ChatOpenAI``. :class:`ReplayServer` is the bridge
that lets a test prove the agents work unchanged over the wire: a real HTTP
server on 127.0.0.1 (a free port) that speaks ``POST /v1/chat/completions``
and answers with whatever a chat model (a :class:`ScriptedChatModel`, a
:class:`PolicyChatModel`) replies to the messages it received, in the OpenAI
wire format: parallel ``tool_calls`` with JSON-encoded ``arguments``, and
server-sent-event chunks when the request says ``"stream": true`` (content
split into several deltas, each call's arguments in two halves, so the
client really reassembles them). It records every request body it receives,
so a test can check what the client sent back on the next request (for
stage 02: the secret reference, never the plain password).

Incoming messages are converted back with their tool names restored from the
assistant message that made the call (the wire format carries only the id).
Bad requests get a 400 with an OpenAI-style error body; a model that fails
(a script run out) gets a 500 that names the failure. Used by
``tests/test_openai_wire.py``; the README's "Using a real model" section
shows how to point an agent at any endpoint.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

HOST = "127.0.0.1"
CHAT_PATH = "/v1/chat/completions"
TEXT_CHUNK = 8  # characters per streamed content delta


class WireFormatError(ValueError):
    """A request body that is not a valid chat completion request."""


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
        "choices": [
            {"index": 0, "message": body, "finish_reason": "tool_calls" if calls else "stop"}
        ],
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
    yield chunk({}, "tool_calls" if calls else "stop")


class ReplayServer:
    """``POST /v1/chat/completions`` on 127.0.0.1, answered by ``model``; records requests.

    Use as a context manager (``with ReplayServer(model) as server:``) and give
    ``ChatOpenAI(base_url=server.base_url, api_key="not-needed")`` to any agent.
    """

    def __init__(self, model: BaseChatModel, *, port: int = 0) -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = port

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the replay server is not running; call start() first")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """What ``ChatOpenAI(base_url=...)`` needs."""
        return f"http://{HOST}:{self.port}/v1"

    def record(self, body: dict[str, Any]) -> None:
        """Keep one request body (handler threads call this concurrently)."""
        with self._lock:
            self.requests.append(body)

    def start(self) -> ReplayServer:
        """Bind 127.0.0.1 (a free port unless one was given) and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._httpd = ThreadingHTTPServer((HOST, self._port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="openai-replay", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port; calling it again does nothing."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = self._thread = None

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _handler_for(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._json(status, {"error": {"message": message, "type": kind, "code": status}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": "replay", "object": "model"}]})
            else:
                self._error(404, f"no route {self.path}; POST {CHAT_PATH}", "not_found")

        def do_POST(self) -> None:
            if self.path.rstrip("/") != CHAT_PATH:
                self._error(404, f"no route {self.path}; POST {CHAT_PATH}", "not_found")
                return
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise WireFormatError("the request body must be a JSON object")
                server.record(body)
                messages = to_messages(body.get("messages"))
            except (json.JSONDecodeError, WireFormatError) as exc:
                self._error(400, f"invalid chat completion request: {exc}", "invalid_request_error")
                return
            try:
                reply = server.model.invoke(messages)
            except Exception as exc:  # the replayed model failed: say so, as a server would
                self._error(500, f"{type(exc).__name__}: {exc}", "server_error")
                return
            name = str(body.get("model") or "replay")
            if not body.get("stream"):
                self._json(200, completion(reply, name))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in completion_chunks(reply, name):
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler

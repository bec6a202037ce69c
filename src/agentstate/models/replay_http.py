"""What both loopback replay servers share: a real HTTP server on 127.0.0.1 in a thread.

:mod:`agentstate.models.openai_replay` and :mod:`agentstate.models.anthropic_replay`
differ only in the wire format they speak; the life cycle (bind a free port,
serve in a daemon thread, record every request body, stop and free the port)
and the JSON answer live here once. Used by the tests of notebooks 01-06.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage

HOST = "127.0.0.1"


class WireFormatError(ValueError):
    """A request body that is not a valid request of the server's wire format."""


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON and keeps test output quiet."""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing: test output stays clean."""
        return

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events(self, lines: Iterable[str]) -> None:
        """Answer 200 with server-sent events, one ``lines`` item (already framed) at a time."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for line in lines:
            self.wfile.write(line.encode())
            self.wfile.flush()


class LoopbackReplayServer:
    """A chat ``model`` behind a real HTTP endpoint on 127.0.0.1; records the request bodies.

    Subclasses give the wire format: :meth:`handler` (the request handler class) and
    :attr:`base_url` (what their provider's client needs). Use as a context manager.
    """

    thread_name = "replay"

    def __init__(self, model: BaseChatModel, *, port: int = 0) -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = port

    handler_class: type[ReplayHandler]  # a subclass's wire format

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class bound to this server."""
        return type("Handler", (self.handler_class,), {"replay": self})

    @property
    def port(self) -> int:
        """The bound port (a free one unless given)."""
        if self._httpd is None:
            raise RuntimeError("the replay server is not running; call start() first")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """What the provider's client takes as its base URL."""
        raise NotImplementedError

    def record(self, body: dict[str, Any]) -> None:
        """Keep one request body (handler threads call this concurrently)."""
        with self._lock:
            self.requests.append(body)

    def start(self) -> Self:
        """Bind 127.0.0.1 (a free port unless one was given) and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._httpd = ThreadingHTTPServer((HOST, self._port), self.handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=self.thread_name, daemon=True
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def one_call_only(body: dict[str, Any]) -> bool:
    """True when the request asks for one tool call per reply, as OpenAI's
    ``parallel_tool_calls: false`` and Anthropic's ``disable_parallel_tool_use`` do: the
    provider then answers with the first call only, and so does the replay."""
    choice = body.get("tool_choice")
    return body.get("parallel_tool_calls") is False or (
        isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True
    )


class ReplayHandler(JsonHandler):
    """``POST`` of one chat request, answered by the server's model, in a subclass's wire format.

    A subclass names its ``route`` and says how a request body becomes messages, how an
    error, a reply and a streamed reply look on its wire; the steps are the same for both.
    """

    replay: LoopbackReplayServer
    route = ""
    more_routes: tuple[str, ...] = ()  # other paths of the same provider (OpenAI's Responses API)
    request_path = ""  # the route of the request being answered
    request_body: dict[str, Any] = {}  # noqa: RUF012 (set per request, never mutated)
    invalid = "invalid request"  # how the provider's 400 message starts
    not_found = "not_found"
    server_error = "server_error"

    def _error(self, status: int, message: str, kind: str) -> None:
        raise NotImplementedError

    def to_messages(self, body: dict[str, Any]) -> list[BaseMessage]:
        """The request body as LangChain messages; :class:`WireFormatError` if it is not valid."""
        raise NotImplementedError

    def reply_body(self, reply: AIMessage, name: str) -> dict[str, Any]:
        """The model's reply as one JSON answer."""
        raise NotImplementedError

    def reply_events(self, reply: AIMessage, name: str) -> Iterator[str]:
        """The model's reply as server-sent events, each already framed."""
        raise NotImplementedError

    def do_POST(self) -> None:
        """Check the route and body, record it, ask the model, answer (400/404/500 on failure)."""
        self.request_path = self.path.split("?")[0].rstrip("/")
        if self.request_path not in (self.route, *self.more_routes):
            routes = " or ".join((self.route, *self.more_routes))
            self._error(404, f"no route {self.path}; POST {routes}", self.not_found)
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise WireFormatError("the request body must be a JSON object")
            self.replay.record(body)
            self.request_body = body
            messages = self.to_messages(body)
        except (json.JSONDecodeError, WireFormatError) as exc:
            self._error(400, f"{self.invalid}: {exc}", "invalid_request_error")
            return
        try:
            reply = self.replay.model.invoke(messages)
        except Exception as exc:  # the replayed model failed: say so, as a server would
            self._error(500, f"{type(exc).__name__}: {exc}", self.server_error)
            return
        name = str(body.get("model") or "replay")
        if isinstance(reply, AIMessage) and len(reply.tool_calls) > 1 and one_call_only(body):
            reply = reply.model_copy(update={"tool_calls": reply.tool_calls[:1]})
        if not isinstance(reply, AIMessage):
            self._error(500, f"the model replied {type(reply).__name__}", self.server_error)
        elif body.get("stream"):
            self._events(self.reply_events(reply, name))
        else:
            self._json(200, self.reply_body(reply, name))

"""Stage 05: `agentstate experts run --mode llm` against endpoints that misbehave.

Each endpoint is a real HTTP server on 127.0.0.1 (stdlib ``http.server`` on
a free port) that answers the way a broken or foreign server does: HTTP 500,
a body that is not JSON, an HTML page, a stream with no choices, an event that
is not JSON, a stream cut off mid-event, or nothing at all. The CLI must print
one line and exit 2, never a traceback, and a hanging endpoint must not hold
it for long.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentstate.cli import main
from agentstate.engine import free_port

CHUNK = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "local"}


def sse(*events: str) -> bytes:
    return b"".join(f"data: {e}\n\n".encode() for e in events)


REPLIES = {
    "status500": (500, "application/json", b'{"error": {"message": "boom"}}'),
    "nonjson": (200, "application/json", b"this is not json"),
    "html": (200, "text/html", b"<html><body><h1>Welcome to nginx!</h1></body></html>"),
    "nochoices": (200, "text/event-stream", sse(json.dumps({**CHUNK, "choices": []}), "[DONE]")),
    "brokensse": (200, "text/event-stream", sse('{"id": "c1", "choices": [{"delta": {"con')),
    "cutoff": (200, "text/event-stream", b'data: {"id": "c1", "choices": [{"delta": {"con'),
}


class Endpoint(BaseHTTPRequestHandler):
    """Answers every POST the way its first path segment says (``/<behaviour>/v1/...``)."""

    def do_POST(self):
        self.server.requests.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        behaviour = self.path.strip("/").split("/")[0]
        if behaviour == "hang":
            self.server.release.wait(30)
            return
        status, kind, body = REPLIES[behaviour]
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Endpoint)
    server.daemon_threads = True
    server.requests = []
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def run_llm(capsys, url, *extra):
    code = main(["experts", "run", "--mode", "llm", "--sections", "1", "--base-url", url,
                 "--input", "Which sanctions lists do we screen?", *extra])  # fmt: skip
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("status500", "answered HTTP 500"),
        ("nonjson", "not an OpenAI-compatible chat stream"),
        ("html", "not an OpenAI-compatible chat stream"),
        ("nochoices", "no reply"),
        ("brokensse", "not an OpenAI-compatible chat stream"),
        ("cutoff", "no reply"),
    ],
)
def test_a_broken_endpoint_gets_one_line_and_exit_2(capsys, endpoint, behaviour, message):
    port = endpoint.server_address[1]
    code, out, err = run_llm(capsys, f"http://127.0.0.1:{port}/{behaviour}/v1")
    assert code == 2, out
    assert out.startswith("error: ") and message in out
    assert out.count("\n") == 1 and "Traceback" not in out + err
    assert any(p.startswith(f"/{behaviour}/") for p in endpoint.requests)


def test_a_hanging_endpoint_times_out_with_one_line(capsys, endpoint):
    port = endpoint.server_address[1]
    code, out, _ = run_llm(capsys, f"http://127.0.0.1:{port}/hang/v1", "--timeout", "1")
    assert code == 2 and "did not answer within 1 s" in out and out.count("\n") == 1


def test_the_default_client_timeout_is_minutes_not_a_quarter_hour():
    from agentstate.experts.llm import DEFAULT_TIMEOUT, chat_model
    from agentstate.models import ModelSettings

    model = chat_model(ModelSettings(base_url="http://127.0.0.1:9/v1"))
    assert 30 <= DEFAULT_TIMEOUT <= 300 and model.request_timeout == DEFAULT_TIMEOUT


def test_a_prompt_longer_than_the_engine_context_is_refused_before_sending(capsys, endpoint):
    pytest.importorskip("llama_cpp")
    port = endpoint.server_address[1]
    before = len(endpoint.requests)
    code = main(["experts", "run", "--mode", "llm", "--base-url",
                 f"http://127.0.0.1:{port}/status500/v1", "--context-tokens", "8192",
                 "--input", "Which sanctions lists do we screen?"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 2 and out.count("\n") == 1
    assert "does not fit the engine's context of 8192 tokens" in out and "--sections" in out
    assert len(endpoint.requests) == before  # nothing was sent

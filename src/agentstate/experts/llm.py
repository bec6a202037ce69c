"""OpenAI-compatible chat models for the experts, and a recorder of the bytes sent.

``max_tokens`` travels in ``extra_body``: langchain-openai renames its own
``max_tokens`` to ``max_completion_tokens``, which llama.cpp's server ignores
(it would generate until the context is full). The :class:`RequestRecorder`
hooks the HTTP client and keeps every request body exactly as sent, so a test
can prove the prefix bytes are identical across experts. A failing or foreign
endpoint becomes one :class:`ModelEndpointError` whose message says what the
endpoint did (``agentstate experts run`` prints it as one line). Taught in
notebook 05.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from agentstate.models import ModelSettings, model_settings

DEFAULT_TIMEOUT = 300.0
"""Seconds the client waits to connect, for a response, or for the next streamed chunk.
A cold 8k-token prefill takes about 30 s on an idle 2-core machine and a few minutes on
a heavily loaded one; a dead or hanging endpoint no longer holds the CLI for 15 minutes
(``agentstate experts run --timeout`` changes it)."""


def start_engine() -> str:
    """How to start the local engine, and how to install it where this package runs."""
    from agentstate.engine.model import install_hint  # noqa: PLC0415 (only on an error)

    return f"start the local engine with `agentstate engine start` ({install_hint()})"


NO_REPLY = (
    "the model endpoint returned no reply (an empty or cut-off stream, or one without "
    "choices); llama.cpp does this when the prompt is longer than its context"
)


class ModelEndpointError(RuntimeError):
    """The model endpoint failed, timed out or answered with something that is not a chat stream."""


class NotAChatStream(ModelEndpointError):
    """A streamed chat request came back 200 with something other than an event stream."""


def _wants_stream(request: httpx.Request) -> bool:
    try:
        return json.loads(request.content).get("stream") is True
    except (ValueError, AttributeError, httpx.RequestNotRead):
        return False


def expect_event_stream(response: httpx.Response) -> None:
    """httpx response hook: a streamed request must get ``text/event-stream`` back."""
    kind = response.headers.get("content-type", "")
    if response.is_success and _wants_stream(response.request) and "event-stream" not in kind:
        raise NotAChatStream(
            f"the model endpoint's reply is not an OpenAI-compatible chat stream "
            f"(HTTP {response.status_code} with content-type {kind or 'none'!r})"
        )


def http_client(timeout: float = DEFAULT_TIMEOUT, **hooks: list) -> httpx.Client:
    """The HTTP client of :func:`chat_model`: its timeout and the event-stream check."""
    return httpx.Client(timeout=timeout, event_hooks={**hooks, "response": [expect_event_stream]})


def endpoint_error(err: BaseException, timeout: float | None = None) -> ModelEndpointError | None:
    """One-line :class:`ModelEndpointError` for a client-side failure, None if it is not one."""
    cause = err.__cause__ or err.__context__
    if isinstance(cause, ModelEndpointError):  # raised by our hook, wrapped by the SDK
        return cause
    if isinstance(err, openai.APITimeoutError | httpx.TimeoutException):
        limit = f" within {timeout:.0f} s" if timeout else ""
        return ModelEndpointError(f"the model endpoint did not answer{limit}")
    if isinstance(err, openai.APIConnectionError | httpx.ConnectError):
        return ModelEndpointError(f"cannot reach the model endpoint ({err}); {start_engine()}")
    if isinstance(err, openai.APIStatusError):
        body = " ".join(err.response.text.split())[:160]
        return ModelEndpointError(f"the model endpoint answered HTTP {err.status_code}: {body}")
    if isinstance(err, ValueError) and "No generation chunks" in str(err):
        return ModelEndpointError(NO_REPLY)
    if isinstance(err, openai.APIError | httpx.HTTPError | ValueError | AttributeError):
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:160]
        return ModelEndpointError(
            f"the model endpoint's reply is not an OpenAI-compatible chat stream ({detail})"
        )
    return None


@dataclass
class RequestRecorder:
    """Request bodies (bytes) of every call made through :meth:`client`."""

    bodies: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _hook(self, request: httpx.Request) -> None:
        with self._lock:
            self.bodies.append(bytes(request.content))

    def client(self, timeout: float = DEFAULT_TIMEOUT) -> httpx.Client:
        """An HTTP client that records every request body it sends."""
        return http_client(timeout, request=[self._hook])

    def first_system_messages(self) -> list[str]:
        """System message 1 of each recorded chat request, decoded from the JSON body."""
        out = []
        for body in self.bodies:
            messages = json.loads(body).get("messages", [])
            if messages and messages[0].get("role") == "system":
                out.append(messages[0]["content"])
        return out


def engine_model(server: Any, max_tokens: int = 64) -> ChatOpenAI:
    """:func:`chat_model` for a running ``agentstate.engine.EngineServer`` (lesson 05's live
    cell): its address and model alias. Here, not on the server: the engine imports nothing
    from the experts."""
    return chat_model(ModelSettings(server.base_url, model=server.alias), max_tokens=max_tokens)


def chat_model(
    settings: ModelSettings | None = None,
    *,
    max_tokens: int = 64,
    recorder: RequestRecorder | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    **kwargs: Any,
) -> ChatOpenAI:
    """A deterministic (temperature 0) ChatOpenAI for the configured endpoint, no retries."""
    settings = settings or model_settings()
    if not settings.is_real:
        raise ValueError(
            f"llm mode needs an OpenAI-compatible endpoint: {start_engine()} and export "
            "AGENTSTATE_LLM_BASE_URL, or pass --base-url"
        )
    client = recorder.client(timeout) if recorder is not None else http_client(timeout)
    return ChatOpenAI(
        base_url=settings.base_url,
        api_key=SecretStr(settings.api_key),
        model=settings.model,
        temperature=0,
        seed=0,
        max_retries=0,
        timeout=timeout,
        extra_body={"max_tokens": max_tokens},
        http_client=client,
        **kwargs,
    )

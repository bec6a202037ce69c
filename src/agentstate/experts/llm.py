"""OpenAI-compatible chat models for the experts, and a recorder of the bytes sent.

``max_tokens`` travels in ``extra_body``: langchain-openai renames its own
``max_tokens`` to ``max_completion_tokens``, which llama.cpp's server ignores
(it would generate until the context is full). The :class:`RequestRecorder`
hooks the HTTP client and keeps every request body exactly as sent, so a test
can prove the prefix bytes are identical across experts. Taught in notebook 05.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from langchain_openai import ChatOpenAI

from agentstate.models import ModelSettings, model_settings


@dataclass
class RequestRecorder:
    """Request bodies (bytes) of every call made through :meth:`client`."""

    bodies: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _hook(self, request: httpx.Request) -> None:
        with self._lock:
            self.bodies.append(bytes(request.content))

    def client(self, timeout: float = 900.0) -> httpx.Client:
        return httpx.Client(timeout=timeout, event_hooks={"request": [self._hook]})

    def first_system_messages(self) -> list[str]:
        """System message 1 of each recorded chat request, decoded from the JSON body."""
        out = []
        for body in self.bodies:
            messages = json.loads(body).get("messages", [])
            if messages and messages[0].get("role") == "system":
                out.append(messages[0]["content"])
        return out


def chat_model(
    settings: ModelSettings | None = None,
    *,
    max_tokens: int = 64,
    recorder: RequestRecorder | None = None,
    **kwargs: Any,
) -> ChatOpenAI:
    """A deterministic (temperature 0) ChatOpenAI for the configured endpoint."""
    settings = settings or model_settings()
    if not settings.is_real:
        raise ValueError(
            "llm mode needs an OpenAI-compatible endpoint: start the local one with "
            "`agentstate engine start` (install it with `make engine`) and export "
            "AGENTSTATE_LLM_BASE_URL, or pass --base-url"
        )
    extra: dict[str, Any] = {}
    if recorder is not None:
        extra["http_client"] = recorder.client()
    return ChatOpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key,
        model=settings.model,
        temperature=0,
        seed=0,
        max_retries=0,
        timeout=900,
        extra_body={"max_tokens": max_tokens},
        **extra,
        **kwargs,
    )

"""Choose the chat model: scripted by default, a real endpoint only when asked.

Opt in to an OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp's server,
Ollama...) with environment variables; nothing is ever prompted for and the
key is never printed (``ModelSettings.__repr__`` hides it):

- ``AGENTSTATE_LLM_BASE_URL``  e.g. ``http://127.0.0.1:8080/v1`` (required to opt in)
- ``AGENTSTATE_LLM_MODEL``     model name sent to the endpoint (default ``local``)
- ``AGENTSTATE_LLM_API_KEY``   key, if the endpoint needs one (default ``not-needed``)

Used by every notebook's "try it with a real model" cell and by the CLIs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from agentstate._extras import needs
from agentstate.models.scripted import ScriptedChatModel

BASE_URL_VAR = "AGENTSTATE_LLM_BASE_URL"
MODEL_VAR = "AGENTSTATE_LLM_MODEL"
API_KEY_VAR = "AGENTSTATE_LLM_API_KEY"


@dataclass(frozen=True)
class ModelSettings:
    """Where a real model lives; ``None`` base_url means "stay scripted"."""

    base_url: str | None
    model: str = "local"
    api_key: str = field(default="not-needed", repr=False)

    @property
    def is_real(self) -> bool:
        return bool(self.base_url)

    def describe(self) -> str:
        """A one-line, secret-free description for notebook output."""
        if not self.is_real:
            return "scripted model (offline)"
        return f"OpenAI-compatible endpoint {self.base_url} model={self.model}"


def model_settings(environ: Mapping[str, str] | None = None) -> ModelSettings:
    """Read the opt-in variables (from ``os.environ`` unless given)."""
    env = os.environ if environ is None else environ
    base_url = (env.get(BASE_URL_VAR) or "").strip() or None
    return ModelSettings(
        base_url=base_url,
        model=(env.get(MODEL_VAR) or "local").strip(),
        api_key=(env.get(API_KEY_VAR) or "not-needed").strip(),
    )


def get_chat_model(
    script: Sequence[Any] | None = None,
    *,
    name: str = "scripted",
    settings: ModelSettings | None = None,
    **openai_kwargs: Any,
) -> BaseChatModel:
    """Return a real model if the environment opts in, else a :class:`ScriptedChatModel`.

    ``script`` is required in scripted mode: an agent with no script would fail
    at its first step, so we fail here with a message that says what to do.
    """
    settings = settings or model_settings()
    if settings.is_real:
        from pydantic import SecretStr

        with needs("openai", "a real model (agentstate.models.get_chat_model)"):
            from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            base_url=settings.base_url,
            api_key=SecretStr(settings.api_key),
            model=settings.model,
            **openai_kwargs,
        )
    if script is None:
        raise ValueError(
            f"no script given for the offline scripted model {name!r}; pass script=[...] "
            f"or set {BASE_URL_VAR} to use a real OpenAI-compatible endpoint"
        )
    return ScriptedChatModel(script=list(script), model_name=name)

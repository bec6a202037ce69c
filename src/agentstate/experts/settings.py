"""Build an :class:`ExpertsConfig` from flags or environment variables.

Shared by the CLI (``agentstate experts run``) and the ``langgraph dev``
server module, so both mean the same thing by "llm mode": an
OpenAI-compatible endpoint from ``--base-url`` or ``AGENTSTATE_LLM_BASE_URL``.
Server variables: ``AGENTSTATE_EXPERTS_MODE`` (stub|llm, default llm when an
endpoint is set), ``AGENTSTATE_EXPERTS_ROUTER``, ``AGENTSTATE_EXPERTS_EXECUTION``,
``AGENTSTATE_EXPERTS_SECTIONS``, ``AGENTSTATE_EXPERTS_MAX_TOKENS``. Notebook 05.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentstate.experts.graph import ExpertsConfig
from agentstate.experts.llm import DEFAULT_TIMEOUT, chat_model
from agentstate.experts.manual import load_manual
from agentstate.models import ModelSettings, model_settings


def make_config(
    *,
    mode: str = "stub",
    router: str = "rules",
    execution: str = "sequential",
    sections: int | None = None,
    max_tokens: int = 64,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> ExpertsConfig:
    """A validated config; llm parts get a real ChatOpenAI for the chosen endpoint."""
    settings = model_settings(environ)
    if base_url:
        settings = ModelSettings(base_url=base_url, model=settings.model, api_key=settings.api_key)
    needs_model = mode == "llm" or router == "llm"
    model = chat_model(settings, max_tokens=max_tokens, timeout=timeout) if needs_model else None
    router_model = chat_model(settings, max_tokens=48, timeout=timeout) if router == "llm" else None
    return ExpertsConfig(
        manual=load_manual(sections=sections),
        mode=mode,  # type: ignore[arg-type]
        router=router,  # type: ignore[arg-type]
        execution=execution,  # type: ignore[arg-type]
        expert_model=model if mode == "llm" else None,
        router_model=router_model,
    )


def config_from_env(environ: Mapping[str, str] | None = None) -> ExpertsConfig:
    """The ``langgraph dev`` server's config, from the variables listed above."""
    env = os.environ if environ is None else environ
    has_endpoint = model_settings(env).is_real
    sections = env.get("AGENTSTATE_EXPERTS_SECTIONS")
    return make_config(
        mode=env.get("AGENTSTATE_EXPERTS_MODE") or ("llm" if has_endpoint else "stub"),
        router=env.get("AGENTSTATE_EXPERTS_ROUTER") or "rules",
        execution=env.get("AGENTSTATE_EXPERTS_EXECUTION") or "sequential",
        sections=int(sections) if sections else None,
        max_tokens=int(env.get("AGENTSTATE_EXPERTS_MAX_TOKENS") or 64),
        environ=env,
    )

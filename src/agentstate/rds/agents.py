"""Agent builders for each stage of the RDS manifest generator.

Every builder returns a compiled deepagents graph with the six RDS tools over
a different storage, so a notebook changes one thing at a time:

- :func:`build_file_storage_agent`  notebook 01, broken read-modify-write file
- :func:`build_plain_dict_agent`    notebook 02, plain ``requirements`` key (fails)
- :func:`build_reducer_agent`       notebook 02, the reducer fix + file sync
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from deepagents import create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel

from agentstate.rds.original_cache import NaiveSharedCacheStorage, OriginalCacheMiddleware
from agentstate.rds.secrets import SecretRedactionMiddleware, SecretStore
from agentstate.rds.state import PlainRequirementsState, RdsAgentState
from agentstate.rds.storage import FileStorage, StateStorage
from agentstate.rds.sync import RequirementsSyncMiddleware
from agentstate.rds.tools import make_rds_tools

RDS_SYSTEM_PROMPT = (
    "You generate a Project Planton AwsRdsInstance manifest. Collect requirements with "
    "store_requirement (one call per field; call it in parallel for several fields), check "
    "them with validate_manifest, then write /manifest.yaml with generate_rds_manifest. "
    "Never repeat a password: store it as a secret reference."
)


def _rds_agent(
    model: BaseChatModel,
    storage: Any,
    middleware: Sequence[AgentMiddleware],
    checkpointer: Any,
    state_schema: type | None = None,
):
    """The one place a stage's agent is assembled: same prompt and tools, another storage."""
    return create_deep_agent(
        model,
        tools=make_rds_tools(storage),
        system_prompt=RDS_SYSTEM_PROMPT,
        middleware=list(middleware),
        state_schema=state_schema,
        checkpointer=checkpointer,
    )


def build_file_storage_agent(
    model: BaseChatModel,
    *,
    delay: Callable[[str], float] | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
):
    """Stage 01: tools keep requirements in ``/requirements.json`` (loses parallel writes)."""
    return _rds_agent(model, FileStorage(delay=delay), middleware, checkpointer)


def build_plain_dict_agent(
    model: BaseChatModel,
    *,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
):
    """Stage 02, broken: a ``requirements`` key without a reducer."""
    return _rds_agent(model, StateStorage(), middleware, checkpointer, PlainRequirementsState)


def build_original_cache_agent(model: BaseChatModel, *, checkpointer: Any = None):
    """Stage 03, broken: the original before_agent cache in ``runtime.config`` (raises)."""
    return assemble_fixed_agent(
        model, StateStorage(), middleware=[OriginalCacheMiddleware()], checkpointer=checkpointer
    )


def build_naive_cache_agent(
    model: BaseChatModel,
    *,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
):
    """Stage 03, broken: a truly shared but unsynchronised cache (invoke with a dict in config)."""
    return assemble_fixed_agent(
        model, NaiveSharedCacheStorage(), middleware=middleware, checkpointer=checkpointer
    )


def assemble_fixed_agent(
    model: BaseChatModel,
    storage: Any,
    *,
    secrets: SecretStore | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
    subagents: Sequence[Any] | None = None,
    state_schema: type = RdsAgentState,
):
    """The stage 02 fix over any storage: reducer schema, secret redaction, file sync.

    Later stages reuse it with their own storage (03: the turn cache) or
    subagents (04).
    """
    fixes = [
        SecretRedactionMiddleware(secrets if secrets is not None else SecretStore()),
        RequirementsSyncMiddleware(),
    ]
    return create_deep_agent(
        model,
        tools=make_rds_tools(storage),
        system_prompt=RDS_SYSTEM_PROMPT,
        middleware=[*fixes, *middleware],
        subagents=subagents,
        state_schema=state_schema,
        checkpointer=checkpointer,
    )


def build_reducer_agent(
    model: BaseChatModel,
    *,
    secrets: SecretStore | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
):
    """Stage 02, fixed: field-merge reducer, file synced after the turn, passwords redacted."""
    return assemble_fixed_agent(
        model, StateStorage(), secrets=secrets, middleware=middleware, checkpointer=checkpointer
    )

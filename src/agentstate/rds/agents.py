"""Every RDS agent of notebooks 01-04, broken and fixed, from one assembler.

Each builder returns a compiled deepagents graph with the six RDS tools over
a storage (``rds.storage``), so a lesson changes one thing at a time. The
fixed agents of lessons 02-04 share :func:`fixed_middleware` (secret redaction
and the file sync) and use the generic pieces of :mod:`agentstate.core`.
The table of builders is in the ``agentstate.rds`` package docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from deepagents import create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel

from agentstate.core.redaction import SecretRedactionMiddleware
from agentstate.core.secrets import SecretStore
from agentstate.core.subagents import SharedStateMiddleware
from agentstate.core.turn_cache import TurnCacheMiddleware
from agentstate.rds.baselines import CacheFixMiddleware, OriginalCacheMiddleware
from agentstate.rds.spec import load_spec
from agentstate.rds.state import PlainRequirementsState, RdsAgentState
from agentstate.rds.storage import (
    CacheFixStorage,
    FileStorage,
    NaiveSharedCacheStorage,
    RequirementsStorage,
    StateStorage,
    TurnCaches,
)
from agentstate.rds.sync import RequirementsSyncMiddleware
from agentstate.rds.tools import READER_TOOLS, WRITER_TOOLS, make_rds_tools

RDS_SYSTEM_PROMPT = (
    "You generate a Project Planton AwsRdsInstance manifest. Collect requirements with "
    "store_requirement (one call per field; call it in parallel for several fields), check "
    "them with validate_manifest, then write /manifest.yaml with generate_rds_manifest. "
    "Never repeat a password: store it as a secret reference."
)
COLLECTOR = "requirements-collector"
COLLECTOR_PROMPT = (
    "You collect RDS requirements. Store every field named in the task with "
    "store_requirement, in parallel, then say which fields you stored."
)

Middleware = Sequence[AgentMiddleware]


def rds_redaction(store: SecretStore | None = None) -> SecretRedactionMiddleware:
    """Secret redaction configured for ``store_requirement`` and the spec's secret fields."""
    return SecretRedactionMiddleware(
        store if store is not None else SecretStore(),
        tool_name=WRITER_TOOLS[0],
        secret_fields=[n for n, f in load_spec().fields.items() if f.secret],
        text_args={"task": ["description"]},  # what a parent hands its subagent (lesson 04)
        name_for=lambda field: f"rds-master-{field}",
    )


def fixed_middleware(secrets: SecretStore | None = None) -> list[AgentMiddleware]:
    """The lesson 02 fixes every later lesson keeps: secret redaction, then the file sync."""
    return [rds_redaction(secrets), RequirementsSyncMiddleware()]


def assemble_rds_agent(
    model: BaseChatModel,
    storage: RequirementsStorage,
    *,
    middleware: Middleware = (),
    state_schema: type | None = None,
    subagents: Sequence[Any] | None = None,
    checkpointer: Any = None,
):
    """The one place an RDS agent is put together: same prompt and tools, another storage."""
    return create_deep_agent(
        model,
        tools=make_rds_tools(storage),
        system_prompt=RDS_SYSTEM_PROMPT,
        middleware=list(middleware),
        subagents=subagents,
        state_schema=state_schema,
        checkpointer=checkpointer,
    )


def collector_spec(
    model: BaseChatModel, storage: RequirementsStorage, middleware: Middleware = ()
) -> dict[str, Any]:
    """The declarative ``requirements-collector`` subagent of lesson 04."""
    spec: dict[str, Any] = {
        "name": COLLECTOR,
        "description": "Collects RDS requirements and stores them with store_requirement.",
        "system_prompt": COLLECTOR_PROMPT,
        "tools": make_rds_tools(storage),
        "model": model,
    }
    if middleware:
        spec["middleware"] = list(middleware)
    return spec


# --- lesson 01 ---


def build_file_storage_agent(
    model: BaseChatModel,
    *,
    between: Callable[[str], object] | None = None,
    middleware: Middleware = (),
    checkpointer: Any = None,
):
    """Lesson 01, broken: tools keep requirements in ``/requirements.json`` (loses writes).

    ``between(field)`` runs in each store between its read and its write (see
    :class:`~agentstate.rds.storage.FileStorage`).
    """
    return assemble_rds_agent(
        model, FileStorage(between=between), middleware=middleware, checkpointer=checkpointer
    )


# --- lesson 02 ---


def build_plain_dict_agent(
    model: BaseChatModel, *, middleware: Middleware = (), checkpointer: Any = None
):
    """Lesson 02, broken: a ``requirements`` key without a reducer."""
    return assemble_rds_agent(
        model,
        StateStorage(),
        middleware=middleware,
        state_schema=PlainRequirementsState,
        checkpointer=checkpointer,
    )


def build_reducer_agent(
    model: BaseChatModel,
    *,
    secrets: SecretStore | None = None,
    middleware: Middleware = (),
    checkpointer: Any = None,
):
    """Lesson 02, fixed: field-merge reducer, file synced after the turn, passwords redacted."""
    return assemble_rds_agent(
        model,
        StateStorage(),
        middleware=[*fixed_middleware(secrets), *middleware],
        state_schema=RdsAgentState,
        checkpointer=checkpointer,
    )


# --- lesson 03 ---


def build_original_cache_agent(model: BaseChatModel, *, checkpointer: Any = None):
    """Lesson 03, broken: the original ``before_agent`` cache in ``runtime.config`` (raises)."""
    return assemble_rds_agent(
        model,
        StateStorage(),
        middleware=[*fixed_middleware(), OriginalCacheMiddleware()],
        state_schema=RdsAgentState,
        checkpointer=checkpointer,
    )


def build_naive_cache_agent(
    model: BaseChatModel, *, middleware: Middleware = (), checkpointer: Any = None
):
    """Lesson 03, broken: a truly shared but unsynchronised cache (invoke with a dict in config)."""
    return assemble_rds_agent(
        model,
        NaiveSharedCacheStorage(),
        middleware=[*fixed_middleware(), *middleware],
        state_schema=RdsAgentState,
        checkpointer=checkpointer,
    )


def rds_turn_cache(timeout: float = 10.0) -> TurnCacheMiddleware:
    """The generic turn cache configured for the RDS tools and the ``requirements`` key."""
    return TurnCacheMiddleware(
        writers=WRITER_TOOLS, readers=READER_TOOLS, key="requirements", timeout=timeout
    )


def build_turn_cache_agent(
    model: BaseChatModel,
    *,
    timeout: float = 10.0,
    secrets: SecretStore | None = None,
    middleware: Middleware = (),
    checkpointer: Any = None,
):
    """Lesson 03, fixed: the lesson 02 agent plus the turn cache (readers see their batch)."""
    return assemble_rds_agent(
        model,
        StateStorage(),
        middleware=[*fixed_middleware(secrets), rds_turn_cache(timeout), *middleware],
        state_schema=RdsAgentState,
        checkpointer=checkpointer,
    )


# --- lesson 04 ---


def build_split_schema_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    *,
    middleware: Middleware = (),
    checkpointer: Any = None,
):
    """Lesson 04, broken (the original failure): only the parent declares ``requirements``."""
    return assemble_rds_agent(
        model,
        StateStorage(),
        middleware=[
            rds_redaction(),
            SharedStateMiddleware(RdsAgentState),
            RequirementsSyncMiddleware(),
            *middleware,
        ],
        subagents=[collector_spec(collector, StateStorage(), [rds_redaction()])],
        checkpointer=checkpointer,
    )


def build_cache_fix_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    *,
    middleware: Middleware = (),
    checkpointer: Any = None,
):
    """Lesson 04, the commonly proposed cache fix: split schema plus a per-turn cache.

    The collector's tools write into the thread's turn cache, which the
    parent reads during the same turn; ``/requirements.json`` mirrors state
    merged with the cache, as that fix proposes. Needs a ``thread_id``.
    ``middleware`` is added to the parent and to the collector.
    """
    caches = TurnCaches()
    storage = CacheFixStorage(caches)
    secrets = SecretStore()
    return assemble_rds_agent(
        model,
        storage,
        middleware=[
            rds_redaction(secrets),
            SharedStateMiddleware(RdsAgentState),
            CacheFixMiddleware(caches),
            RequirementsSyncMiddleware(read=storage.read),
            *middleware,
        ],
        subagents=[collector_spec(collector, storage, [rds_redaction(secrets), *middleware])],
        checkpointer=checkpointer,
    )


def build_shared_schema_agent(
    model: BaseChatModel,
    collector: BaseChatModel,
    *,
    secrets: SecretStore | None = None,
    middleware: Middleware = (),
    checkpointer: Any = None,
    state_schema: type = RdsAgentState,
):
    """Lesson 04, fixed: one state schema (and reducer) for parent and subagent.

    ``state_schema`` is forwarded by deepagents to the declarative collector.
    ``state_schema=PlainRequirementsState`` shares the key without a reducer,
    which parallel subagents turn into ``InvalidUpdateError``. The collector
    redacts secrets into the same store as the parent.
    """
    secrets = secrets if secrets is not None else SecretStore()
    return assemble_rds_agent(
        model,
        StateStorage(),
        middleware=[*fixed_middleware(secrets), *middleware],
        state_schema=state_schema,
        subagents=[collector_spec(collector, StateStorage(), [rds_redaction(secrets)])],
        checkpointer=checkpointer,
    )

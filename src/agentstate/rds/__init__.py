"""The RDS manifest generator of notebooks 01-04: domain, tools, and every lesson's agent.

- lesson 01: broken :func:`build_file_storage_agent`; its fix, one file per
  field, is :class:`agentstate.lessons.fixtures.PerFieldFileStorage`.
- lesson 02: broken :func:`build_plain_dict_agent`; fixed :func:`build_reducer_agent`.
- lesson 03: broken :func:`build_original_cache_agent` and
  :func:`build_naive_cache_agent`; fixed :func:`build_turn_cache_agent`.
- lesson 04: broken :func:`build_split_schema_agent`, the commonly proposed
  :func:`build_cache_fix_agent` (same turn only); fixed
  :func:`build_shared_schema_agent`.

Modules: ``spec``/``validator``/``manifest`` (the AwsRdsInstance domain),
``tools`` (the six tools over a storage), ``storage`` (every storage, broken
and fixed), ``state`` (the schemas), ``sync`` (the file mirror),
``baselines`` (the commonly proposed caches) and ``agents`` (the one assembler and
the builders above). The mechanisms themselves are generic and live in
:mod:`agentstate.core`.
"""

from agentstate._extras import needs

with needs("rds", "agentstate.rds"):
    from agentstate.rds.agents import (
        COLLECTOR,
        RDS_SYSTEM_PROMPT,
        assemble_rds_agent,
        build_cache_fix_agent,
        build_file_storage_agent,
        build_naive_cache_agent,
        build_original_cache_agent,
        build_plain_dict_agent,
        build_reducer_agent,
        build_shared_schema_agent,
        build_split_schema_agent,
        build_turn_cache_agent,
        collector_spec,
        fixed_middleware,
        rds_redaction,
        rds_turn_cache,
    )
    from agentstate.rds.manifest import ManifestError, build_manifest, render_manifest
    from agentstate.rds.spec import FieldSpec, RdsSpec, load_spec
    from agentstate.rds.state import PlainRequirementsState, RdsAgentState
    from agentstate.rds.storage import (
        MANIFEST_PATH,
        NAIVE_KEY,
        REQUIREMENTS_PATH,
        CacheFixStorage,
        FileStorage,
        NaiveSharedCacheStorage,
        StateStorage,
        json_file,
        read_json_file,
    )
    from agentstate.rds.sync import RequirementsSyncMiddleware
    from agentstate.rds.tools import READER_TOOLS, TOOL_NAMES, WRITER_TOOLS, make_rds_tools
    from agentstate.rds.validator import ValidationIssue, check_value, validate_requirements

__all__ = [
    "COLLECTOR",
    "MANIFEST_PATH",
    "NAIVE_KEY",
    "RDS_SYSTEM_PROMPT",
    "READER_TOOLS",
    "REQUIREMENTS_PATH",
    "TOOL_NAMES",
    "WRITER_TOOLS",
    "CacheFixStorage",
    "FieldSpec",
    "FileStorage",
    "ManifestError",
    "NaiveSharedCacheStorage",
    "PlainRequirementsState",
    "RdsAgentState",
    "RdsSpec",
    "RequirementsSyncMiddleware",
    "StateStorage",
    "ValidationIssue",
    "assemble_rds_agent",
    "build_cache_fix_agent",
    "build_file_storage_agent",
    "build_manifest",
    "build_naive_cache_agent",
    "build_original_cache_agent",
    "build_plain_dict_agent",
    "build_reducer_agent",
    "build_shared_schema_agent",
    "build_split_schema_agent",
    "build_turn_cache_agent",
    "check_value",
    "collector_spec",
    "fixed_middleware",
    "json_file",
    "load_spec",
    "make_rds_tools",
    "rds_redaction",
    "rds_turn_cache",
    "read_json_file",
    "render_manifest",
    "validate_requirements",
]

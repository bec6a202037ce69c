"""The RDS manifest generator (notebooks 01-04): spec, validator, renderer, tools, agents."""

from agentstate.rds.agents import (
    RDS_SYSTEM_PROMPT,
    assemble_fixed_agent,
    build_file_storage_agent,
    build_naive_cache_agent,
    build_original_cache_agent,
    build_plain_dict_agent,
    build_reducer_agent,
)
from agentstate.rds.manifest import ManifestError, build_manifest, render_manifest
from agentstate.rds.secrets import (
    SecretRedactionMiddleware,
    SecretStore,
    is_secret_ref,
    redact,
    secret_ref,
)
from agentstate.rds.spec import FieldSpec, RdsSpec, load_spec
from agentstate.rds.state import PlainRequirementsState, RdsAgentState, merge_requirements
from agentstate.rds.storage import (
    MANIFEST_PATH,
    REQUIREMENTS_PATH,
    FileStorage,
    StateStorage,
    read_json_file,
)
from agentstate.rds.subagents import (
    append_unique,
    build_cache_fix_agent,
    build_shared_schema_agent,
    build_split_schema_agent,
)
from agentstate.rds.sync import RequirementsSyncMiddleware
from agentstate.rds.tools import TOOL_NAMES, make_rds_tools
from agentstate.rds.turn_cache import (
    BatchBarrierMiddleware,
    CachedStateStorage,
    TurnCache,
    TurnCachedAgent,
    build_turn_cache_agent,
)
from agentstate.rds.validator import ValidationIssue, check_value, validate_requirements

__all__ = [
    "BatchBarrierMiddleware",
    "CachedStateStorage",
    "TurnCache",
    "TurnCachedAgent",
    "append_unique",
    "assemble_fixed_agent",
    "build_cache_fix_agent",
    "build_naive_cache_agent",
    "build_original_cache_agent",
    "build_shared_schema_agent",
    "build_split_schema_agent",
    "build_turn_cache_agent",
    "MANIFEST_PATH",
    "REQUIREMENTS_PATH",
    "RDS_SYSTEM_PROMPT",
    "TOOL_NAMES",
    "FieldSpec",
    "FileStorage",
    "ManifestError",
    "PlainRequirementsState",
    "RdsAgentState",
    "RdsSpec",
    "RequirementsSyncMiddleware",
    "SecretRedactionMiddleware",
    "SecretStore",
    "StateStorage",
    "ValidationIssue",
    "build_file_storage_agent",
    "build_manifest",
    "build_plain_dict_agent",
    "build_reducer_agent",
    "check_value",
    "is_secret_ref",
    "load_spec",
    "make_rds_tools",
    "merge_requirements",
    "read_json_file",
    "redact",
    "render_manifest",
    "secret_ref",
    "validate_requirements",
]

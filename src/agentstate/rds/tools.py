"""The six RDS manifest tools, written once over a requirements storage.

``store_requirement``, ``get_collected_requirements``, ``validate_manifest``,
``generate_rds_manifest`` (writes ``/manifest.yaml``), ``list_required_fields``
and ``get_rds_field_info``. Bad input (unknown field, wrong type, rule
violation, a plain-text password) comes back to the model as an error
ToolMessage and leaves state untouched. Taught in notebooks 01-04.
"""

from __future__ import annotations

import json
from typing import Any

from deepagents.backends.utils import create_file_data
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from agentstate.rds.manifest import render_manifest
from agentstate.rds.spec import load_spec
from agentstate.rds.storage import MANIFEST_PATH, RequirementsStorage
from agentstate.rds.validator import check_value, validate_requirements

TOOL_NAMES = (
    "store_requirement",
    "get_collected_requirements",
    "validate_manifest",
    "generate_rds_manifest",
    "list_required_fields",
    "get_rds_field_info",
)
# What lesson 03's turn cache coordinates: the tool that writes ``requirements``,
# and the tools that read it.
WRITER_TOOLS = ("store_requirement",)
READER_TOOLS = ("get_collected_requirements", "validate_manifest", "generate_rds_manifest")


def _message(runtime: ToolRuntime, content: str, *, error: bool = False) -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=runtime.tool_call_id,
        status="error" if error else "success",
    )


def _error(runtime: ToolRuntime, content: str) -> Command:
    """An error reply that updates nothing but the conversation."""
    return Command(update={"messages": [_message(runtime, f"Error: {content}", error=True)]})


def make_rds_tools(storage: RequirementsStorage) -> list[BaseTool]:
    """Build the six tools over ``storage`` (see :mod:`agentstate.rds.storage`)."""
    spec = load_spec()

    @tool
    def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
        """Store one collected requirement for the RDS manifest.

        Args:
            field_name: snake_case field, e.g. engine, instance_class, allocated_storage_gb.
            value: the value; lists for subnet_ids and security_group_ids; the password
                only as a secret reference like $secret:rds-master-password-<id>.
        """
        issues = check_value(field_name, value, spec)
        if issues:
            return _error(runtime, "; ".join(str(i) for i in issues))
        update = storage.write(runtime.state, runtime, field_name, value)
        update["messages"] = [_message(runtime, f"Stored {field_name}.")]
        return Command(update=update)

    @tool
    def get_collected_requirements(runtime: ToolRuntime) -> str:
        """Return every requirement collected so far, as JSON."""
        return json.dumps(storage.read(runtime.state, runtime), indent=2, sort_keys=True)

    @tool
    def validate_manifest(runtime: ToolRuntime) -> str:
        """Check the collected requirements against every AwsRdsInstance rule."""
        issues = validate_requirements(storage.read(runtime.state, runtime), spec)
        if not issues:
            return "valid: all rules pass"
        return "invalid:\n" + "\n".join(f"- {i}" for i in issues)

    @tool
    def generate_rds_manifest(runtime: ToolRuntime) -> Command:
        """Render the AwsRdsInstance manifest to /manifest.yaml (fails if anything is invalid)."""
        requirements = storage.read(runtime.state, runtime)
        issues = validate_requirements(requirements, spec)
        if issues:
            return _error(
                runtime, "cannot generate the manifest:\n" + "\n".join(f"- {i}" for i in issues)
            )
        text = render_manifest(requirements, spec)
        return Command(
            update={
                "files": {MANIFEST_PATH: create_file_data(text)},
                "messages": [_message(runtime, f"Wrote {MANIFEST_PATH}.")],
            }
        )

    @tool
    def list_required_fields() -> str:
        """List the fields a valid manifest needs, and the subnet rule."""
        lines = [f"- {name}" for name in spec.required_fields]
        lines += [f"- rule: {r.message}" for r in spec.message_rules]
        return "\n".join(lines)

    @tool
    def get_rds_field_info(field: str) -> str:
        """Describe one field: type, rules, description and an example value."""
        if field not in spec.fields:
            return f"Error: unknown field {field!r}; known fields: {', '.join(spec.fields)}"
        f = spec.fields[field]
        return json.dumps(
            {
                "field": f.name,
                "manifest_key": f"{f.section}.{f.key}",
                "rules": f.rules(),
                "description": f.description,
                "example": f.example,
            },
            indent=2,
        )

    return [
        store_requirement,
        get_collected_requirements,
        validate_manifest,
        generate_rds_manifest,
        list_required_fields,
        get_rds_field_info,
    ]

"""Render requirements as a Project Planton AwsRdsInstance YAML manifest.

Deterministic: keys follow the spec's order, so the same requirements always
give the same bytes. The password appears only as its secret reference.
Taught in notebook 02.
"""

from __future__ import annotations

from typing import Any

import yaml

from agentstate.rds.spec import RdsSpec, load_spec
from agentstate.rds.validator import validate_requirements


class ManifestError(ValueError):
    """Requirements that do not validate cannot be rendered."""


def build_manifest(requirements: dict[str, Any], spec: RdsSpec | None = None) -> dict[str, Any]:
    """The manifest as a dict; raises :class:`ManifestError` listing every issue."""
    spec = spec or load_spec()
    issues = validate_requirements(requirements, spec)
    if issues:
        raise ManifestError("; ".join(str(i) for i in issues))
    metadata: dict[str, Any] = {}
    body: dict[str, Any] = {}
    for name, f in spec.fields.items():
        target = metadata if f.section == "metadata" else body
        if f.type == "string_map":
            prefix = f"{name}."
            entries = {k[len(prefix) :]: v for k, v in requirements.items() if k.startswith(prefix)}
            if entries:
                target[f.key] = dict(sorted(entries.items()))
        elif name in requirements:
            target[f.key] = requirements[name]
    return {"apiVersion": spec.api_version, "kind": spec.kind, "metadata": metadata, "spec": body}


def render_manifest(requirements: dict[str, Any], spec: RdsSpec | None = None) -> str:
    """YAML text of :func:`build_manifest`, keys in spec order."""
    return yaml.safe_dump(
        build_manifest(requirements, spec), sort_keys=False, default_flow_style=False
    )

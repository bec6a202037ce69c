"""The AwsRdsInstance field catalogue, loaded from ``data/aws_rds_instance_spec.yaml``.

One description of the spec feeds the validator, the renderer and the
field-info tool, so they cannot disagree. Taught from notebook 01 on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

from agentstate.datafiles import data_path

SPEC_FILE = "aws_rds_instance_spec.yaml"
FIELD_TYPES = {"string", "int32", "bool", "string_list", "string_map"}


@dataclass(frozen=True)
class FieldSpec:
    """One field: its type, rules and the camelCase key it has in the manifest."""

    name: str
    type: str
    key: str
    section: str  # "metadata" or "spec"
    description: str = ""
    required: bool = False
    secret: bool = False
    min_len: int | None = None
    pattern: str | None = None
    gt: int | None = None
    gte: int | None = None
    lte: int | None = None
    key_pattern: str | None = None  # string_map only: entries are stored as "<name>.<key>"
    example: Any = None

    def rules(self) -> list[str]:
        """Human-readable rules, in the words the validator's errors use."""
        out = [f"type {self.type}"]
        if self.required:
            out.append("required")
        if self.min_len is not None:
            out.append(f"min_len {self.min_len}")
        if self.pattern is not None:
            out.append(f"pattern {self.pattern}")
        if self.gt is not None:
            out.append(f"> {self.gt}")
        if self.gte is not None:
            out.append(f">= {self.gte}")
        if self.lte is not None:
            out.append(f"<= {self.lte}")
        if self.secret:
            out.append("secret reference only")
        return out


@dataclass(frozen=True)
class MessageRule:
    """A cross-field rule such as ``subnet_ids.size() >= 2 || has(db_subnet_group_name)``."""

    id: str
    expression: str
    message: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class RdsSpec:
    api_version: str
    kind: str
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    message_rules: tuple[MessageRule, ...] = ()

    @property
    def required_fields(self) -> list[str]:
        return [name for name, f in self.fields.items() if f.required]

    def resolve(self, name: str) -> tuple[FieldSpec, str | None] | None:
        """The spec of a stored name and its map key: ``labels.team`` -> (labels, "team")."""
        if name in self.fields and self.fields[name].type != "string_map":
            return self.fields[name], None
        head, dot, key = name.partition(".")
        if dot and head in self.fields and self.fields[head].type == "string_map":
            return self.fields[head], key
        return None


def _field(name: str, raw: dict[str, Any], section: str) -> FieldSpec:
    if raw.get("type") not in FIELD_TYPES:
        raise ValueError(f"spec field {name!r}: type must be one of {sorted(FIELD_TYPES)}")
    return FieldSpec(name=name, section=section, **raw)


@lru_cache(maxsize=1)
def load_spec() -> RdsSpec:
    """Parse the spec file once; a malformed file fails loudly here, not mid-lesson."""
    raw = yaml.safe_load(data_path(SPEC_FILE).read_text(encoding="utf-8"))
    fields = {n: _field(n, f, "metadata") for n, f in raw["metadata_fields"].items()}
    fields.update({n: _field(n, f, "spec") for n, f in raw["fields"].items()})
    rules = tuple(
        MessageRule(
            id=r["id"], expression=r["expression"], message=r["message"], fields=tuple(r["fields"])
        )
        for r in raw.get("message_rules", [])
    )
    return RdsSpec(
        api_version=raw["api_version"], kind=raw["kind"], fields=fields, message_rules=rules
    )

"""Check requirements against every AwsRdsInstance rule, naming field and rule.

Unlike the anchor's validator, this one checks the numeric bounds, accepts
``db.t3.micro`` against ``^db\\.`` and enforces the subnet rule. ``check_value``
validates one field at store time; ``validate_requirements`` checks a whole
set before a manifest is generated. Taught in notebook 02.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentstate.core.secrets import is_secret_ref
from agentstate.rds.spec import FieldSpec, RdsSpec, load_spec

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class ValidationIssue:
    field: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.rule}]"


def _type_issue(spec: FieldSpec, value: Any) -> ValidationIssue | None:
    ok = {
        "string": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int32": isinstance(value, int)
        and not isinstance(value, bool)
        and INT32_MIN <= value <= INT32_MAX,
        "string_list": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[spec.type]
    if ok:
        return None
    expected = {
        "string": "a string",
        "bool": "true or false",
        "int32": "a whole number (int32)",
        "string_list": "a list of strings",
    }[spec.type]
    return ValidationIssue(spec.name, "type", f"expected {expected}, got {type(value).__name__}")


def check_value(name: str, value: Any, spec: RdsSpec | None = None) -> list[ValidationIssue]:
    """Issues with storing ``value`` in field ``name`` (unknown field, type, per-field rules)."""
    spec = spec or load_spec()
    resolved = spec.resolve(name)
    if resolved is None:
        return [ValidationIssue(name, "known_field", "unknown field; see list_required_fields")]
    f, map_key = resolved
    if f.type == "string_map":
        if not (map_key and re.search(f.key_pattern or ".", map_key)):
            return [ValidationIssue(name, "key_pattern", f"key must match {f.key_pattern}")]
        if not isinstance(value, str):
            return [ValidationIssue(name, "type", f"expected a string, got {type(value).__name__}")]
        return []
    type_issue = _type_issue(f, value)
    if type_issue:
        return [type_issue]
    issues: list[ValidationIssue] = []
    if f.secret and not is_secret_ref(value):
        issues.append(
            ValidationIssue(name, "secret_ref", "must be a secret reference like $secret:<name>")
        )
    if f.min_len is not None and len(value) < f.min_len:
        issues.append(ValidationIssue(name, "min_len", f"must have at least {f.min_len} item(s)"))
    if f.type == "string_list" and any(not v.strip() for v in value):
        issues.append(ValidationIssue(name, "min_len", "items must not be empty"))
    if f.pattern is not None and value and not re.search(f.pattern, value):
        issues.append(ValidationIssue(name, "pattern", f"must match {f.pattern}"))
    if f.gt is not None and not value > f.gt:
        issues.append(ValidationIssue(name, "gt", f"must be greater than {f.gt}"))
    if f.gte is not None and not value >= f.gte:
        issues.append(ValidationIssue(name, "gte", f"must be at least {f.gte}"))
    if f.lte is not None and not value <= f.lte:
        issues.append(ValidationIssue(name, "lte", f"must be at most {f.lte}"))
    return issues


def validate_requirements(
    requirements: dict[str, Any], spec: RdsSpec | None = None
) -> list[ValidationIssue]:
    """Every issue of a requirement set: missing fields, field rules, message rules."""
    spec = spec or load_spec()
    issues = [
        ValidationIssue(name, "required", "missing required field")
        for name in spec.required_fields
        if name not in requirements
    ]
    for name, value in requirements.items():
        issues.extend(check_value(name, value, spec))
    subnets = requirements.get("subnet_ids")
    has_group = bool(requirements.get("db_subnet_group_name"))
    enough_subnets = isinstance(subnets, list) and len(subnets) >= 2
    for rule in spec.message_rules:
        if rule.id == "subnets_or_group" and not (enough_subnets or has_group):
            issues.append(ValidationIssue("subnet_ids", rule.id, rule.message))
    return issues
